"""The SQL of isolation: what it reads (runs, attempts, journals) and writes
(``flakes``, ``isolation_steps``, ``test_checks``).

Values read here may come from a database handed over by CI: they are
checked for type before they leave this module, and nodeids only ever
select among collected tests (the probe server refuses others).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hermetic_hunt.errors import BadDatabase, UnknownId
from hermetic_hunt.findings import Finding, Probe, ProbeResult
from hermetic_hunt.journal import MAX_COMPRESSED
from hermetic_hunt.models import (
    FAILING,
    MAX_WRITES,
    PASSING,
    PLAIN_SQL,
    REPEATED_RUN,
    Attempt,
    Failure,
    Leak,
    Settings,
    Violation,
    parse_ref,
    sql_set,
)
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.timing import as_profile, switch_interval
from hermetic_hunt.untrusted import is_number, json_or, whole_or

_FAIL = sql_set(FAILING)
_PASS = sql_set(PASSING)
_ATTEMPT = """
    SELECT a.id, a.run_id, a.worker, a.position, a.execution, t.nodeid, a.outcome, a.seed,
           a.now, a.mode, a.hash_seed, coalesce(f.exc_type, ''), coalesce(f.location, ''),
           coalesce(f.message, ''), a.violations, j.attempt_id IS NOT NULL, a.round, a.repeat,
           a.profile, a.switch_interval, a.stress, a.started, a.duration, a.writes
    FROM attempts a JOIN tests t ON t.id = a.test_id
    LEFT JOIN failures f ON f.attempt_id = a.id
    LEFT JOIN journals j ON j.attempt_id = a.id
"""

_REPRESENTATIVE = (
    _ATTEMPT + " WHERE a.run_id = ? AND t.nodeid = ? "
    f"ORDER BY a.repeat != 0, a.outcome IN {_PASS} DESC, a.id LIMIT 1"
)

_JOURNAL = (
    "SELECT data FROM journals WHERE attempt_id = ? AND typeof(data) = 'blob' AND length(data) <= ?"
)


@dataclass(frozen=True)
class RunFacts:
    """What isolation needs to know about a run to probe its tests."""

    run_id: int
    argv: tuple[str, ...]
    invocation_dir: str
    rootdir: str
    settings: Settings
    workers: int

    @property
    def base_seed(self) -> int:
        return self.settings.base_seed


def _int(value: Any) -> int | None:
    return whole_or(value)


def _float(value: Any) -> float | None:
    return float(value) if is_number(value) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def run_facts(store: Store, run_id: int | None) -> RunFacts:
    """The run ``run_id`` (None: the newest run)."""
    if run_id is None:
        row = store.conn.execute("SELECT max(id) FROM runs").fetchone()
        if row is None or row[0] is None:
            raise UnknownId(f"{store.path} holds no run yet: hunt first (pytest --hermetic-hunt=N)")
        run_id = int(row[0])
    row = store.conn.execute(
        "SELECT argv, invocation_dir, rootdir, base_seed, mode, workers, settings FROM runs "
        "WHERE id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        raise UnknownId(f"run {run_id} is not in {store.path}: see 'hermetic-hunt list'")
    argv = json_or(row[0])
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise BadDatabase(f"{store.path}: run {run_id} has a damaged argv; re-run the hunt")
    base_seed, workers = _int(row[3]), _int(row[5])
    if base_seed is None or not isinstance(row[1], str) or not isinstance(row[2], str):
        raise BadDatabase(f"{store.path}: run {run_id} is damaged; re-run the hunt")
    stored = json_or(row[6])
    settings = Settings.from_json(stored, base_seed=base_seed)
    if stored is None and row[4] in ("seeded", "record", "off"):
        settings = replace(settings, mode=row[4])  # a run from before settings were stored
    return RunFacts(
        run_id=run_id,
        argv=tuple(argv),
        invocation_dir=row[1],
        rootdir=row[2],
        settings=settings,
        workers=max(1, workers or 1),
    )


def _attempt(row: Sequence[Any], violations: Sequence[Violation] = ()) -> Attempt:
    failed = _text(row[6]) in FAILING
    return Attempt(
        attempt_id=int(row[0]),
        run_id=int(row[1]),
        worker=_text(row[2]),
        position=_int(row[3]) or 0,
        execution=_int(row[4]) or 1,
        nodeid=_text(row[5]),
        outcome=_text(row[6]),
        seed=_int(row[7]),
        now=_float(row[8]),
        mode=_text(row[9]) or "seeded",
        hash_seed=_int(row[10]),
        failure=Failure(_text(row[11]), _text(row[13]), _text(row[12])) if failed else None,
        violations=list(violations),
        has_journal=bool(row[15]),
        round_no=_int(row[16]) or 0,
        repeat=_int(row[17]) or 0,
        profile=as_profile(row[18]),
        switch_interval=switch_interval(row[19]),
        stress=max(0, _int(row[20]) or 0),
        started=_float(row[21]),
        duration=max(0.0, _float(row[22]) or 0.0),
        writes=_writes(row[23]),
    )


def _writes(value: Any) -> list[str]:
    """``attempts.writes`` (untrusted JSON): the absolute paths (and ``port:N``), at most
    :data:`MAX_WRITES`."""
    found = json_or(value, [])
    if not isinstance(found, list):
        return []
    return [p for p in found if isinstance(p, str) and _written(p)][:MAX_WRITES]


def _written(entry: str) -> bool:
    if entry.startswith("/"):
        return True
    port = entry.removeprefix("port:")
    return port != entry and port.isdigit() and 0 < int(port) < 65536


def _violations(store: Store, attempt_ids: Sequence[int]) -> dict[int, tuple[Violation, ...]]:
    out: dict[int, list[Violation]] = {}
    for start in range(0, len(attempt_ids), 500):
        chunk = list(attempt_ids[start : start + 500])
        for attempt_id, op, host, port, detail in store.conn.execute(
            "SELECT attempt_id, op, host, port, detail FROM violations WHERE "  # noqa: S608
            f"attempt_id IN ({','.join('?' * len(chunk))}) ORDER BY id",
            chunk,
        ):
            out.setdefault(attempt_id, []).append(
                Violation(_text(op), _text(host), _int(port), _text(detail))
            )
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class Candidates:
    """Tests of a run that isolation looks at, each with its attempts."""

    flaky: dict[str, list[Attempt]]  # passed and failed in plain runs, or had blocked calls
    always_failing: dict[str, list[Attempt]]  # failed in every plain attempt
    not_idempotent: dict[str, list[Attempt]]  # failed only when run twice in one process


def candidates(store: Store, run_id: int, only: Iterable[str] | None = None) -> Candidates:
    """Flaky, violating and not-idempotent tests of ``run_id`` (restricted to ``only``)."""
    rows = store.conn.execute(
        f"SELECT t.nodeid, sum({PLAIN_SQL} AND a.outcome IN {_PASS}), "  # noqa: S608
        f"sum({PLAIN_SQL} AND a.outcome IN {_FAIL}), sum(a.violations > 0) "
        "FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.run_id = ? GROUP BY t.nodeid ORDER BY t.nodeid",
        (run_id,),
    ).fetchall()
    seconds = second_run_failures(store, run_id)
    wanted = set(only) if only is not None else None
    flaky, broken, twice = [], [], []
    for nodeid, passed, failed, violating in rows:
        second_runs = seconds.get(nodeid, 0)
        if wanted is not None and nodeid not in wanted:
            continue
        if (passed and failed) or violating:
            flaky.append(nodeid)
        elif failed and not passed:
            broken.append(nodeid)
        elif second_runs:
            twice.append(nodeid)
    return Candidates(
        flaky=attempts_of(store, run_id, flaky),
        always_failing=attempts_of(store, run_id, broken),
        not_idempotent=attempts_of(store, run_id, twice),
    )


def second_run_failures(store: Store, run_id: int) -> dict[str, int]:
    """``{nodeid: count}`` of a twice round's second runs that failed after a
    first run (same round, same worker) that passed. Driven by the failing
    second runs (few), each joined to its first run through the test's index."""
    rows = store.conn.execute(
        "SELECT t.nodeid, count(*) FROM attempts a JOIN tests t ON t.id = a.test_id "  # noqa: S608
        "JOIN attempts b ON b.test_id = a.test_id AND b.run_id = a.run_id "
        "AND b.worker = a.worker AND b.round = a.round AND b.repeat = 1 AND b.execution = 1 "
        f"AND b.outcome IN {_PASS} WHERE a.run_id = ? AND a.repeat = {REPEATED_RUN} "
        "AND a.execution = 1 "
        f"AND a.outcome IN {_FAIL} GROUP BY t.nodeid",
        (run_id,),
    ).fetchall()
    return {str(nodeid): int(count) for nodeid, count in rows}


def attempts_of(store: Store, run_id: int, nodeids: Sequence[str]) -> dict[str, list[Attempt]]:
    out: dict[str, list[Attempt]] = {n: [] for n in nodeids}
    rows: list[Any] = []
    for start in range(0, len(nodeids), 500):
        chunk = list(nodeids[start : start + 500])
        rows += store.conn.execute(
            _ATTEMPT + f" WHERE a.run_id = ? AND t.nodeid IN ({','.join('?' * len(chunk))}) "
            "ORDER BY a.id",
            [run_id, *chunk],
        ).fetchall()
    violations = _violations(store, [r[0] for r in rows if r[14]])
    for row in rows:
        out[row[5]].append(_attempt(row, violations.get(row[0], ())))
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

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def preceding(self, attempt: Attempt) -> list[Attempt]:
        """What ran before ``attempt`` in its process: its round on its worker, since
        the last crash (a crashed step's successors ran in a new process)."""
        rows = self._rows(
            _ATTEMPT + " WHERE a.run_id = ? AND a.worker = ? AND a.round = ? AND "
            "(a.position < ? OR (a.position = ? AND a.execution < ?)) "
            "ORDER BY a.position, a.execution",
            (attempt.run_id, attempt.worker, attempt.round_no, attempt.position,
             attempt.position, attempt.execution),
        )  # fmt: skip
        before = [_attempt(row) for row in rows]
        crashes = [i for i, a in enumerate(before) if a.outcome == "crashed"]
        return before[crashes[-1] + 1 :] if crashes else before

    def round_attempts(self, attempt: Attempt) -> list[Attempt]:
        """Every attempt of ``attempt``'s round (of this run), on every worker, in order."""
        key = attempt.round_no
        cached = self._rounds.get(key)
        if cached is None:
            rows = self._rows(
                _ATTEMPT + " WHERE a.run_id = ? AND a.round = ? ORDER BY a.worker, a.position, "
                "a.execution",
                (self.run_id, key),
            )
            cached = self._rounds[key] = [_attempt(row) for row in rows]
        return cached

    def in_default_round(self, nodeid: str) -> Attempt | None:
        """``nodeid``'s attempt in the run's default round -- what a plain ``pytest``
        run did to it (None: the run had no default round, or not this test)."""
        if not self.default_round:
            return None
        rows = self._rows(
            _ATTEMPT + " WHERE a.run_id = ? AND a.round = 0 AND t.nodeid = ? AND "
            "a.repeat = 0 AND a.execution = 1 ORDER BY a.id LIMIT 1",
            (self.run_id, nodeid),
        )
        return _attempt(rows[0]) if rows else None

    def overlapping(self, attempt: Attempt) -> list[Attempt]:
        """Attempts on other workers of ``attempt``'s round that ran at the same real
        time and wrote paths (what a collision's partner is among), earliest first."""
        if attempt.started is None:
            return []
        rows = self._rows(
            _ATTEMPT + " WHERE a.run_id = ? AND a.round = ? AND a.worker != ? AND "
            "a.writes IS NOT NULL AND a.started IS NOT NULL AND a.started < ? AND "
            "a.started + a.duration > ? ORDER BY a.started, a.id",
            (attempt.run_id, attempt.round_no, attempt.worker,
             attempt.started + attempt.duration, attempt.started),
        )  # fmt: skip
        return [_attempt(row) for row in rows]

    def writes(self) -> dict[str, set[str]]:
        """The paths each test of the run wrote in the hunt, by nodeid."""
        out: dict[str, set[str]] = {}
        for nodeid, value in self._rows(
            "SELECT t.nodeid, a.writes FROM attempts a JOIN tests t ON t.id = a.test_id "
            "WHERE a.run_id = ? AND a.writes IS NOT NULL",
            (self.run_id,),
        ):
            out.setdefault(_text(nodeid), set()).update(_writes(value))
        return out

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
            leak = Leak(_text(resource), _text(name), _text(change), _text(detail))
            found = out.setdefault(_text(nodeid), [])
            if all((x.resource, x.name) != (leak.resource, leak.name) for x in found):
                found.append(leak)
        self._leaks = out
        return out

    def journal(self, attempt_id: int) -> bytes | None:
        """The stored journal of an attempt (None: none kept, or oversized)."""
        rows = self._rows(_JOURNAL, (attempt_id, MAX_COMPRESSED))
        return bytes(rows[0][0]) if rows else None

    def tests(self) -> list[str]:
        if self._tests is None:
            self._tests = [
                row[0]
                for row in self._rows(
                    "SELECT nodeid FROM tests WHERE id IN "
                    "(SELECT test_id FROM attempts WHERE run_id = ?) ORDER BY id",
                    (self.run_id,),
                )
            ]
        return list(self._tests)

    def representative(self, nodeid: str) -> Attempt | None:
        if nodeid not in self._representatives:
            rows = self._rows(_REPRESENTATIVE, (self.run_id, nodeid))
            self._representatives[nodeid] = _attempt(rows[0]) if rows else None
        return self._representatives[nodeid]


def resolve_refs(store: Store, refs: Sequence[str]) -> list[str]:
    """Flake ids (``F3``) or nodeids -> nodeids (UnknownId for anything unknown)."""
    out = []
    for ref in refs:
        parsed = parse_ref(ref)
        row = (
            store.conn.execute(
                "SELECT t.nodeid FROM flakes fl JOIN tests t ON t.id = fl.test_id "
                "WHERE fl.flake_id = ?",
                (str(parsed),),
            ).fetchone()
            if parsed is not None and parsed.kind == "flake"
            else None
        )
        if row is None:
            row = store.conn.execute("SELECT nodeid FROM tests WHERE nodeid = ?", (ref,)).fetchone()
        if row is None:
            raise UnknownId(
                f"{ref!r} is neither a flake id nor a test in {store.path}: "
                "see 'hermetic-hunt list' for the flakes it holds"
            )
        out.append(str(row[0]))
    return out


def ensure_flakes(store: Store, nodeids: Sequence[str], run_id: int) -> dict[str, tuple[int, str]]:
    """A flake row for each test (new ones get the next ``F`` id); ``{nodeid: (row, id)}``."""
    now = real_now_iso()
    out: dict[str, tuple[int, str]] = {}
    with store.transaction() as conn:
        for nodeid in nodeids:
            conn.execute("INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", (nodeid,))
            (test_id,) = conn.execute("SELECT id FROM tests WHERE nodeid = ?", (nodeid,)).fetchone()
            row = conn.execute(
                "SELECT id, flake_id FROM flakes WHERE test_id = ?", (test_id,)
            ).fetchone()
            if row is None:
                (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM flakes").fetchone()
                row = (last + 1, f"F{last + 1}")
                conn.execute(
                    "INSERT INTO flakes (id, flake_id, test_id, first_run_id, last_run_id, "
                    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (row[0], row[1], test_id, run_id, run_id, now, now),
                )
            else:
                conn.execute(
                    "UPDATE flakes SET first_run_id = min(coalesce(first_run_id, ?), ?), "
                    "last_run_id = max(coalesce(last_run_id, ?), ?) WHERE id = ?",
                    (run_id, run_id, run_id, run_id, row[0]),
                )
            out[nodeid] = (int(row[0]), str(row[1]))
    return out


def _environment(probe: Probe) -> str:
    steps = [
        {"seed": s.seed, "now": s.now, "mode": s.mode, "attempt_id": s.attempt_id,
         **s.conditions}
        for s in probe.steps
    ]  # fmt: skip
    return json.dumps({"hash_seed": probe.hash_seed, "steps": steps}, separators=(",", ":"))


def _step_row(
    flake_row: int, run_id: int, number: int, probe: Probe, result: ProbeResult, now: str
) -> tuple[Any, ...]:
    last = result.last
    detail = result.detail
    if last is not None and last.exc_type:
        detail = f"{last.exc_type} at {last.location}: {last.message}".strip(": ")
    if last is not None and last.violations:
        blocked = ", ".join(sorted({v.describe() for v in last.violations}))
        detail = f"{detail}; blocked: {blocked}" if detail else f"blocked: {blocked}"
    return (
        flake_row, run_id, number, probe.purpose,
        json.dumps([s.nodeid for s in probe.steps]), _environment(probe), result.outcome,
        detail[:2000], round(result.duration, 6), last.journal if last is not None else None, now,
    )  # fmt: skip


def rounds_seconds(store: Store, run_id: int) -> float | None:
    """How long the run's hunt took (start to finish), from its real timestamps."""
    row = store.conn.execute(
        "SELECT (julianday(finished_at) - julianday(started_at)) * 86400.0 FROM runs WHERE id = ?",
        (run_id,),
    ).fetchone()
    value = _float(row[0]) if row else None
    return value if value is not None and value >= 0 else None


def known_verdicts(store: Store, nodeids: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """``{nodeid: (status, kinds)}`` of the flake rows these tests already have."""
    out: dict[str, tuple[str, list[str]]] = {}
    for start in range(0, len(nodeids), 500):
        chunk = list(nodeids[start : start + 500])
        for nodeid, status, kinds in store.conn.execute(
            "SELECT t.nodeid, fl.status, fl.kinds FROM flakes fl JOIN tests t "  # noqa: S608
            f"ON t.id = fl.test_id WHERE t.nodeid IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            try:
                parsed = json.loads(kinds) if isinstance(kinds, str) else []
            except (ValueError, RecursionError):
                parsed = []
            names = [k for k in parsed if isinstance(k, str)] if isinstance(parsed, list) else []
            out[_text(nodeid)] = (_text(status), names)
    return out


def save_finding(
    store: Store, flake_row: int, run_id: int, verdict: Finding, *, steps_from: int = 1
) -> None:
    """Write one test's isolation: its flake row and its probes from step ``steps_from``
    (1: every probe, replacing what an earlier isolation of this run stored)."""
    now = real_now_iso()
    reproducer = verdict.reproducer
    values = {
        "kinds": json.dumps(verdict.kinds),
        "status": verdict.status,
        "evidence": json.dumps(verdict.evidence, sort_keys=True),
        "reproducer": json.dumps(reproducer.to_json()) if reproducer is not None else None,
        "polluters": json.dumps(verdict.polluters),
        "cleaners": json.dumps(verdict.cleaners),
        "state_setters": json.dumps(verdict.state_setters),
        "confirmed": None if verdict.confirmed is None else int(verdict.confirmed),
        "probes": len(verdict.probes),
        "probe_seconds": round(verdict.probe_seconds, 3),
        "note": "; ".join(verdict.notes),
        "updated_at": now,
    }
    with store.transaction() as conn:
        conn.execute(
            f"UPDATE flakes SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",  # noqa: S608
            [*values.values(), flake_row],
        )
        if steps_from <= 1:
            conn.execute(
                "DELETE FROM isolation_steps WHERE flake_id = ? AND run_id = ?",
                (flake_row, run_id),
            )
        conn.executemany(
            "INSERT INTO isolation_steps (flake_id, run_id, step, purpose, sequence, "
            "environment, outcome, detail, duration, journal, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                _step_row(flake_row, run_id, n, probe, result, now)
                for n, (probe, result) in enumerate(verdict.probes, start=1)
                if n >= steps_from
            ],
        )


def add_check(store: Store, run_id: int, nodeid: str, name: str, outcome: str, detail: str) -> None:
    """One ``test_checks`` row (e.g. ``sandbox-off`` of an always-failing test)."""
    with store.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", (nodeid,))
        conn.execute(
            "INSERT INTO test_checks (run_id, test_id, check_name, outcome, detail, created_at) "
            "SELECT ?, id, ?, ?, ?, ? FROM tests WHERE nodeid = ?",
            (run_id, name, outcome, detail[:2000], real_now_iso(), nodeid),
        )
