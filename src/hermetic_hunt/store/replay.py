"""The SQL of a replay: what it reads (attempts, flakes, journals, runs) and the row it writes.

Everything read here comes from a database that may have been handed over
by CI: attempts, flakes and runs are validated by the modules of their
tables (:mod:`~hermetic_hunt.store.attempts`, :mod:`~hermetic_hunt.store.flakes`,
:mod:`~hermetic_hunt.store.runs`); journals are measured in SQL as they
are fetched, so an oversized blob is never read into memory, and decoded by
:func:`hermetic_hunt.journal.decode`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from hermetic_hunt.errors import BadDatabase, BadJournal
from hermetic_hunt.findings import Flake
from hermetic_hunt.journal import MAX_COMPRESSED
from hermetic_hunt.models import Attempt, Settings
from hermetic_hunt.store import attempts, flakes, runs
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.fixes import fail_counts
from hermetic_hunt.store.rows import FAIL_SQL, insert, scalar


class ReplaySource:
    """Read access for :func:`hermetic_hunt.replay.plan.resolve` (its ``Source``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conn = store.conn

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise BadDatabase(f"{self.store.path} cannot be read ({exc}): is it damaged?") from None

    def _attempt(self, where: str, params: tuple[Any, ...]) -> Attempt | None:
        with self._reading():
            found = attempts.read(self.conn, where, params, violations=True)
        return found[0] if found else None

    def attempt(self, attempt_id: int) -> Attempt | None:
        return self._attempt("WHERE a.id = ?", (attempt_id,))

    def newest_failing_attempt(self, nodeid: str) -> Attempt | None:
        return self._attempt(
            f"WHERE t.nodeid = ? AND a.outcome IN {FAIL_SQL} "
            "ORDER BY a.run_id DESC, a.id DESC LIMIT 1",
            (nodeid,),
        )

    def fail_rate(self, nodeid: str) -> float | None:
        """The rate ``nodeid`` failed at in the database (None: it never failed)."""
        with self._reading():
            failed, counted = fail_counts(self.store, nodeid)
        return failed / counted if counted and failed else None

    def test_known(self, nodeid: str) -> bool:
        with self._reading():
            return scalar(self.conn, "SELECT 1 FROM tests WHERE nodeid = ?", (nodeid,)) is not None

    def _flake(self, where: str, params: tuple[Any, ...]) -> Flake | None:
        with self._reading():
            try:
                found = flakes.read(self.store, where, params)
            except flakes.BadReproducer as exc:
                raise BadDatabase(
                    f"the reproducer of {exc.flake_id} is malformed ({exc.problem}): the "
                    "database is damaged or was edited; run a new hunt"
                ) from None
        return found[0] if found else None

    def flake(self, flake_id: str) -> Flake | None:
        return self._flake("WHERE fl.flake_id = ?", (flake_id,))

    def flake_of(self, nodeid: str) -> Flake | None:
        """The newest flake of ``nodeid`` (flakes are one per test today)."""
        return self._flake(
            "WHERE t.nodeid = ? ORDER BY fl.updated_at DESC, fl.id DESC LIMIT 1", (nodeid,)
        )

    def journal(self, attempt_id: int) -> bytes | None:
        """The stored journal of an attempt (None: none kept), bounded in size."""
        where = f"the journal of A{attempt_id}"
        with self._reading():
            found = self.conn.execute(
                "SELECT length(data), typeof(data), CASE WHEN length(data) <= ? THEN data END "
                "FROM journals WHERE attempt_id = ?",
                (MAX_COMPRESSED, attempt_id),
            ).fetchone()
        if found is None:
            return None
        size, kind, blob = found
        if kind not in ("blob", "text"):
            raise BadJournal(f"{where}: stored as {kind}, not as bytes; run a new hunt")
        if not isinstance(size, int) or size > MAX_COMPRESSED:
            raise BadJournal(
                f"{where}: journal is {size:,} bytes, over the {MAX_COMPRESSED:,} limit; "
                "run a new hunt"
            )
        return blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else bytes(blob)

    def run_environment(self, run_id: int) -> dict[str, Any] | None:
        with self._reading():
            return runs.environment(self.store, run_id)

    def run_settings(self, run_id: int | None) -> Settings:
        """The settings the hunt of ``run_id`` ran with (defaults for an older database)."""
        with self._reading():
            return runs.settings_of(runs.row_of(self.store, run_id))

    def run_location(self, run_id: int) -> tuple[str, str] | None:
        """``(rootdir, invocation_dir)`` of a run, as the hunt recorded them."""
        with self._reading():
            return runs.locations(self.store).get(run_id)


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
    row = {
        "target": target,
        "flake_id": flake_row,
        "attempt_id": attempt_id,
        "started_at": real_now_iso(),
        "outcome": outcome,
        "detail": detail,
        "environment": json.dumps(environment, sort_keys=True),
    }
    with store.transaction() as conn:
        return insert(conn, "replays", row)
