"""The SQL of isolation: what it reads of a run (its candidates, what ran before and
beside a test, leaks, journals) and its ``test_checks``; the flakes it writes are
:mod:`hermetic_hunt.store.flakes`', the run it reads :mod:`hermetic_hunt.store.runs`'.

Values read here may come from a database handed over by CI: they are
checked for type before they leave this module (attempts by
:mod:`hermetic_hunt.store.attempts`), and nodeids only ever select among
collected tests (the probe server refuses others).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hermetic_hunt.errors import UnknownId
from hermetic_hunt.journal import MAX_COMPRESSED
from hermetic_hunt.models import PLAIN_SQL, Attempt, Leak, parse_ref
from hermetic_hunt.store import attempts
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.queries import second_runs
from hermetic_hunt.store.rows import FAIL_SQL, PASS_SQL, chunks, scalar
from hermetic_hunt.untrusted import text_or

_REPRESENTATIVE = (
    f"WHERE a.run_id = ? AND t.nodeid = ? ORDER BY a.repeat != 0, a.outcome IN {PASS_SQL} DESC, "
    "a.id LIMIT 1"
)
_JOURNAL = (
    "SELECT data FROM journals WHERE attempt_id = ? AND typeof(data) = 'blob' AND length(data) <= ?"
)


@dataclass(frozen=True)
class Candidates:
    """Tests of a run that isolation looks at, each with its attempts."""

    flaky: dict[str, list[Attempt]]  # passed and failed in plain runs, or had blocked calls
    always_failing: dict[str, list[Attempt]]  # failed in every plain attempt
    not_idempotent: dict[str, list[Attempt]]  # failed only when run twice in one process


def candidates(store: Store, run_id: int, only: Iterable[str] | None = None) -> Candidates:
    """Flaky, violating and not-idempotent tests of ``run_id`` (restricted to ``only``)."""
    rows = store.conn.execute(
        f"SELECT t.nodeid, sum({PLAIN_SQL} AND a.outcome IN {PASS_SQL}), "  # noqa: S608
        f"sum({PLAIN_SQL} AND a.outcome IN {FAIL_SQL}), sum(a.violations > 0) "
        "FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.run_id = ? GROUP BY t.nodeid ORDER BY t.nodeid",
        (run_id,),
    ).fetchall()
    seconds = second_runs(store, [run_id])  # {nodeid: (failed second runs, first)}
    wanted = set(only) if only is not None else None
    flaky, broken, twice = [], [], []
    for nodeid, passed, failed, violating in rows:
        if wanted is not None and nodeid not in wanted:
            continue
        if (passed and failed) or violating:
            flaky.append(nodeid)
        elif failed and not passed:
            broken.append(nodeid)
        elif nodeid in seconds:
            twice.append(nodeid)
    return Candidates(
        flaky=attempts_of(store, run_id, flaky),
        always_failing=attempts_of(store, run_id, broken),
        not_idempotent=attempts_of(store, run_id, twice),
    )


def attempts_of(store: Store, run_id: int, nodeids: Sequence[str]) -> dict[str, list[Attempt]]:
    out: dict[str, list[Attempt]] = {n: [] for n in nodeids}
    for chunk, marks in chunks(nodeids):
        where = f"WHERE a.run_id = ? AND t.nodeid IN ({marks}) ORDER BY a.id"
        for attempt in attempts.read(store.conn, where, [run_id, *chunk], violations=True):
            out[attempt.nodeid].append(attempt)
    return out


class RunHistory:
    """:class:`~hermetic_hunt.isolate.case.History` of one run, read from the store.

    Classifiers run in threads: this reads through its own read-only
    connection, one query at a time.
    """

    def __init__(self, store: Store, run_id: int, *, default_round: bool = False) -> None:
        self.path = store.path
        self.run_id = run_id
        #: The run's round 0 was the default round (a plain run: collection order).
        self.default_round = default_round
        self._conn = sqlite3.connect(
            f"{self.path.as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=30.0
        )
        self._lock = threading.Lock()
        self._tests: list[str] | None = None
        self._representatives: dict[str, Attempt | None] = {}
        self._leaks: dict[str, list[Leak]] | None = None
        self._rounds: dict[int, list[Attempt]] = {}
        self._writers: frozenset[str] | None = None

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _attempts(self, where: str, params: Sequence[Any]) -> list[Attempt]:
        with self._lock:
            return attempts.read(self._conn, where, params)

    def preceding(self, attempt: Attempt) -> list[Attempt]:
        """What ran before ``attempt`` in its process: its round on its worker, since
        the last crash (a crashed step's successors ran in a new process)."""
        before = self._attempts(
            "WHERE a.run_id = ? AND a.worker = ? AND a.round = ? AND "
            "(a.position < ? OR (a.position = ? AND a.execution < ?)) "
            "ORDER BY a.position, a.execution",
            (attempt.run_id, attempt.worker, attempt.round_no, attempt.position,
             attempt.position, attempt.execution),
        )  # fmt: skip
        crashes = [i for i, a in enumerate(before) if a.outcome == "crashed"]
        return before[crashes[-1] + 1 :] if crashes else before

    def round_attempts(self, attempt: Attempt) -> list[Attempt]:
        """Every attempt of ``attempt``'s round (of this run), on every worker, in order."""
        key = attempt.round_no
        if key not in self._rounds:
            self._rounds[key] = self._attempts(
                "WHERE a.run_id = ? AND a.round = ? ORDER BY a.worker, a.position, a.execution",
                (self.run_id, key),
            )
        return self._rounds[key]

    def in_default_round(self, nodeid: str) -> Attempt | None:
        """``nodeid``'s attempt in the run's default round -- what a plain ``pytest``
        run did to it (None: the run had no default round, or not this test)."""
        if not self.default_round:
            return None
        found = self._attempts(
            "WHERE a.run_id = ? AND a.round = 0 AND t.nodeid = ? AND "
            "a.repeat = 0 AND a.execution = 1 ORDER BY a.id LIMIT 1",
            (self.run_id, nodeid),
        )
        return found[0] if found else None

    def writes(self) -> dict[str, set[str]]:
        """The paths each test of the run wrote in the hunt, by nodeid."""
        out: dict[str, set[str]] = {}
        for nodeid, value in self._rows(
            "SELECT t.nodeid, a.writes FROM attempts a JOIN tests t ON t.id = a.test_id "
            "WHERE a.run_id = ? AND a.writes IS NOT NULL",
            (self.run_id,),
        ):
            out.setdefault(text_or(nodeid), set()).update(attempts.writes(value))
        self._writers = frozenset(out)
        return out

    def writers(self) -> frozenset[str]:
        """(Read with :meth:`writes`, which isolation calls first for its prober.)"""
        return self._writers if self._writers is not None else frozenset(self.writes())

    def leaks(self) -> dict[str, list[Leak]]:
        """What each test of the run left behind at the end of a round (``persisted``
        leaks: a value a fixture put back later in the round is none), distinct."""
        if self._leaks is not None:
            return self._leaks
        out: dict[str, list[Leak]] = {}
        for nodeid, resource, name, change, detail in self._rows(
            "SELECT t.nodeid, l.resource, l.name, l.change, l.detail FROM leaks l "
            "JOIN attempts a ON a.id = l.attempt_id JOIN tests t ON t.id = a.test_id "
            "WHERE l.run_id = ? AND l.persisted = 1 ORDER BY l.id",
            (self.run_id,),
        ):
            leak = Leak(text_or(resource), text_or(name), text_or(change), text_or(detail))
            found = out.setdefault(text_or(nodeid), [])
            if all((x.resource, x.name) != (leak.resource, leak.name) for x in found):
                found.append(leak)
        self._leaks = out
        return out

    def journal(self, attempt_id: int) -> bytes | None:
        """The stored journal of an attempt (None: none kept, or oversized)."""
        with self._lock:
            data = scalar(self._conn, _JOURNAL, (attempt_id, MAX_COMPRESSED))
        return bytes(data) if data is not None else None

    def tests(self) -> list[str]:
        if self._tests is None:
            rows = self._rows(
                "SELECT nodeid FROM tests WHERE id IN "
                "(SELECT test_id FROM attempts WHERE run_id = ?) ORDER BY id",
                (self.run_id,),
            )
            self._tests = [nodeid for (nodeid,) in rows]
        return list(self._tests)

    def representative(self, nodeid: str) -> Attempt | None:
        if nodeid not in self._representatives:
            found = self._attempts(_REPRESENTATIVE, (self.run_id, nodeid))
            self._representatives[nodeid] = found[0] if found else None
        return self._representatives[nodeid]


def resolve_refs(store: Store, refs: Sequence[str]) -> list[str]:
    """Flake ids (``F3``) or nodeids -> nodeids (UnknownId for anything unknown)."""
    out = []
    for ref in refs:
        parsed = parse_ref(ref)
        flake_id = str(parsed) if parsed is not None and parsed.kind == "flake" else None
        nodeid = scalar(
            store.conn,
            "SELECT t.nodeid FROM flakes fl JOIN tests t ON t.id = fl.test_id WHERE flake_id = ?",
            (flake_id,),
        )
        if nodeid is None:
            nodeid = scalar(store.conn, "SELECT nodeid FROM tests WHERE nodeid = ?", (ref,))
        if nodeid is None:
            raise UnknownId(
                f"{ref!r} is neither a flake id nor a test in {store.path}: "
                "see 'hermetic-hunt list' for the flakes it holds"
            )
        out.append(str(nodeid))
    return out


def add_check(store: Store, run_id: int, nodeid: str, name: str, outcome: str, detail: str) -> None:
    """One ``test_checks`` row (e.g. ``sandbox-off`` of an always-failing test)."""
    with store.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", (nodeid,))
        conn.execute(
            "INSERT INTO test_checks (run_id, test_id, check_name, outcome, detail, created_at) "
            "SELECT ?, id, ?, ?, ?, ? FROM tests WHERE nodeid = ?",
            (run_id, name, outcome, detail[:2000], real_now_iso(), nodeid),
        )
