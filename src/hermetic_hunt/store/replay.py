"""The SQL of a replay: what it reads (attempts, flakes, journals, runs) and the row it writes.

Everything read here comes from a database that may have been handed over
by CI, so values are checked for type before they leave this module (the
core validates meaning: :func:`hermetic_hunt.models.Reproducer.from_json`,
:func:`hermetic_hunt.journal.decode`). Journals are measured in SQL before
they are fetched, so an oversized blob is never read into memory.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from hermetic_hunt.errors import BadDatabase, BadJournal
from hermetic_hunt.findings import StoredFlake
from hermetic_hunt.journal import MAX_COMPRESSED
from hermetic_hunt.models import (
    FAILING,
    Attempt,
    Failure,
    Settings,
    Violation,
    parse_ref,
    sql_set,
)
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.fixes import fail_counts
from hermetic_hunt.timing import as_profile, switch_interval
from hermetic_hunt.untrusted import is_number, json_or, whole_or

_ATTEMPT_SQL = """
    SELECT a.id, a.run_id, t.nodeid, a.outcome, a.phase, a.seed, a.now, a.mode, a.hash_seed,
           a.counts, a.violations, f.exc_type, f.message, f.location,
           j.attempt_id IS NOT NULL, a.profile, a.switch_interval, a.stress
    FROM attempts a JOIN tests t ON t.id = a.test_id
    LEFT JOIN failures f ON f.attempt_id = a.id
    LEFT JOIN journals j ON j.attempt_id = a.id
"""
_FLAKE_SQL = """
    SELECT fl.id, fl.flake_id, t.nodeid, fl.kinds, fl.status, fl.reproducer, fl.last_run_id
    FROM flakes fl JOIN tests t ON t.id = fl.test_id
"""


def _int(value: Any) -> int | None:
    return whole_or(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json(value: Any) -> Any:
    return json_or(value)


def _float(value: Any) -> float | None:
    if is_number(value):
        return float(value)
    return None


def _attempt(row: tuple[Any, ...]) -> Attempt:
    counts = _json(row[9])
    failure = (
        Failure(_text(row[11]), _text(row[12]), _text(row[13]))
        if isinstance(row[11], str)
        else None
    )
    return Attempt(
        attempt_id=int(row[0]),
        run_id=_int(row[1]) or 0,
        nodeid=_text(row[2]),
        outcome=_text(row[3]),
        phase=row[4] if isinstance(row[4], str) else None,
        seed=_int(row[5]),
        now=_float(row[6]),
        mode=_text(row[7]),
        hash_seed=_int(row[8]),
        counts=counts if isinstance(counts, dict) else {},
        violations=[],
        failure=failure,
        has_journal=bool(row[14]),
        profile=as_profile(row[15]),
        switch_interval=switch_interval(row[16]),
        stress=max(0, _int(row[17]) or 0),
    )


def _flake(row: tuple[Any, ...]) -> StoredFlake:
    parsed = parse_ref(row[1]) if isinstance(row[1], str) else None
    if parsed is None or parsed.kind != "flake" or str(parsed) != row[1]:
        raise BadDatabase(
            f"flake id {row[1]!r} is not F followed by a number: the database is damaged or "
            "was edited; run a new hunt"
        )
    kinds = _json(row[3])
    reproducer = _json(row[5])
    if row[5] is not None and reproducer is None:
        raise BadDatabase(
            f"the reproducer of {_text(row[1])} is malformed (not JSON): the database is "
            "damaged or was edited; run a new hunt"
        )
    return StoredFlake(
        row_id=int(row[0]),
        flake_id=_text(row[1]),
        nodeid=_text(row[2]),
        kinds=tuple(k for k in kinds if isinstance(k, str)) if isinstance(kinds, list) else (),
        status=_text(row[4]),
        reproducer=reproducer,
        last_run_id=_int(row[6]),
    )


class ReplaySource:
    """Read access for :func:`hermetic_hunt.replay.plan.resolve` (its ``Source``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conn = store.conn

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        try:
            row = self.conn.execute(sql, params).fetchone()
        except sqlite3.DatabaseError as exc:
            raise BadDatabase(f"{self.store.path} cannot be read ({exc}): is it damaged?") from None
        return tuple(row) if row is not None else None

    def attempt(self, attempt_id: int) -> Attempt | None:
        row = self._fetch(_ATTEMPT_SQL + " WHERE a.id = ?", (attempt_id,))
        return self._with_violations(_attempt(row), row) if row else None

    def _with_violations(self, attempt: Attempt, row: tuple[Any, ...]) -> Attempt:
        if not _int(row[10]):
            return attempt
        try:
            found = self.conn.execute(
                "SELECT op, host, port, detail FROM violations WHERE attempt_id = ? "
                "ORDER BY id LIMIT 100",
                (attempt.attempt_id,),
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise BadDatabase(f"{self.store.path} cannot be read ({exc}): is it damaged?") from None
        attempt.violations = [
            Violation(_text(op), _text(host), _int(port), _text(detail))
            for op, host, port, detail in found
        ]
        return attempt

    def newest_failing_attempt(self, nodeid: str) -> Attempt | None:
        row = self._fetch(
            _ATTEMPT_SQL + f" WHERE t.nodeid = ? AND a.outcome IN {sql_set(FAILING)}"
            " ORDER BY a.run_id DESC, a.id DESC LIMIT 1",
            (nodeid,),
        )
        return self._with_violations(_attempt(row), row) if row else None

    def fail_rate(self, nodeid: str) -> float | None:
        """The rate ``nodeid`` failed at in the database (None: it never failed)."""
        try:
            failed, counted = fail_counts(self.store, nodeid)
        except sqlite3.DatabaseError as exc:
            raise BadDatabase(f"{self.store.path} cannot be read ({exc}): is it damaged?") from None
        return failed / counted if counted and failed else None

    def test_known(self, nodeid: str) -> bool:
        return self._fetch("SELECT 1 FROM tests WHERE nodeid = ?", (nodeid,)) is not None

    def flake(self, flake_id: str) -> StoredFlake | None:
        row = self._fetch(_FLAKE_SQL + " WHERE fl.flake_id = ?", (flake_id,))
        return _flake(row) if row else None

    def flake_of(self, nodeid: str) -> StoredFlake | None:
        """The newest flake of ``nodeid`` (flakes are one per test today)."""
        row = self._fetch(
            _FLAKE_SQL + " WHERE t.nodeid = ? ORDER BY fl.updated_at DESC, fl.id DESC LIMIT 1",
            (nodeid,),
        )
        return _flake(row) if row else None

    def journal(self, attempt_id: int) -> bytes | None:
        """The stored journal of an attempt (None: none kept), bounded in size."""
        where = f"the journal of A{attempt_id}"
        row = self._fetch(
            "SELECT length(data), typeof(data) FROM journals WHERE attempt_id = ?", (attempt_id,)
        )
        if row is None:
            return None
        size, kind = row
        if kind not in ("blob", "text"):
            raise BadJournal(f"{where}: stored as {kind}, not as bytes; run a new hunt")
        if not isinstance(size, int) or size > MAX_COMPRESSED:
            raise BadJournal(
                f"{where}: journal is {size:,} bytes, over the {MAX_COMPRESSED:,} limit; "
                "run a new hunt"
            )
        data = self._fetch("SELECT data FROM journals WHERE attempt_id = ?", (attempt_id,))
        assert data is not None
        blob = data[0]
        return blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else bytes(blob)

    def run_environment(self, run_id: int) -> dict[str, Any] | None:
        row = self._fetch("SELECT environment FROM runs WHERE id = ?", (run_id,))
        value = _json(row[0]) if row else None
        return value if isinstance(value, dict) else None

    def run_settings(self, run_id: int | None) -> Settings:
        """The settings the hunt of ``run_id`` ran with (defaults for an older database)."""
        row = self._fetch("SELECT settings, base_seed FROM runs WHERE id = ?", (run_id,))
        if row is None:
            return Settings.from_json(None)
        return Settings.from_json(_json(row[0]), base_seed=_int(row[1]) or 0)

    def run_location(self, run_id: int) -> tuple[str, str] | None:
        """``(rootdir, invocation_dir)`` of a run, as the hunt recorded them."""
        row = self._fetch("SELECT rootdir, invocation_dir FROM runs WHERE id = ?", (run_id,))
        if row is None or not all(isinstance(v, str) for v in row):
            return None
        return str(row[0]), str(row[1])


def add_replay(
    store: Store,
    *,
    target: str,
    flake_row: int | None,
    attempt_id: int | None,
    outcome: str,
    detail: str,
    environment: dict[str, Any],
) -> int:
    """Store the outcome of one replay in ``replays``; returns its id.

    :class:`BadDatabase` when it cannot be written (a read-only database).
    """
    with store.transaction() as conn:
        cursor = conn.execute(
            "INSERT INTO replays (target, flake_id, attempt_id, started_at, outcome, detail, "
            "environment) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                target,
                flake_row,
                attempt_id,
                real_now_iso(),
                outcome,
                detail,
                json.dumps(environment, sort_keys=True),
            ),
        )
    assert cursor.lastrowid is not None
    return cursor.lastrowid
