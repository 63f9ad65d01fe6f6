"""Read queries behind ``hermetic-hunt report``, ``list`` and ``show``.

Each function takes an open :class:`~hermetic_hunt.store.core.Store` and
returns plain rows (:mod:`hermetic_hunt.report.model`,
:mod:`hermetic_hunt.report.show`); nothing here interprets them. ``runs``
arguments restrict a query to some runs; ``None`` means every run in the
database. All values are bound as parameters, never spliced into SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hermetic_hunt.errors import UnknownId
from hermetic_hunt.models import FAILING, PASSING, PLAIN_SQL, REPEATED_RUN, sql_set
from hermetic_hunt.store.core import Store
from hermetic_hunt.store.rows import (
    AttemptDetail,
    CheckRow,
    ConditionRow,
    FailureRow,
    LeakRow,
    RawFlake,
    RoundCell,
    RunRow,
    StepRow,
    TestCounts,
    ViolationDetail,
    ViolationRow,
)
from hermetic_hunt.untrusted import is_whole, json_or

_FAILING = sql_set(FAILING)
_PASSING = sql_set(PASSING)


def _runs_clause(runs: Sequence[int] | None, column: str) -> tuple[str, list[Any]]:
    if runs is None:
        return "1", []
    return f"{column} IN ({','.join('?' * len(runs))})", list(runs)


def _plain_clause(runs: Sequence[int] | None) -> tuple[str, list[Any]]:
    """Attempts of ``runs`` that were plain runs (not a ``twice`` round's second)."""
    clause, params = _runs_clause(runs, "a.run_id")
    return f"{clause} AND {PLAIN_SQL}", params


def _repeated(store: Store, run_ids: Sequence[int]) -> dict[int, int]:
    """``{run id: attempts that are no plain run}`` (the twice rounds' repeated runs)."""
    clause, params = _runs_clause(run_ids, "a.run_id")
    rows = store.conn.execute(
        f"SELECT a.run_id, count(*) FROM attempts a WHERE {clause} AND NOT ({PLAIN_SQL}) "  # noqa: S608
        "GROUP BY a.run_id",
        params,
    ).fetchall()
    return {run_id: count for run_id, count in rows}


def _argv(text: str) -> tuple[str, ...]:
    value = json_or(text)
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def run_rows(store: Store, run_id: int | None = None) -> list[RunRow]:
    """The runs of the database (oldest first), or the one run ``run_id``."""
    clause, params = _runs_clause(None if run_id is None else [run_id], "id")
    sql = (
        "SELECT id, uuid, started_at, finished_at, status, argv, base_seed, rounds_planned, "  # noqa: S608
        "budget_seconds, rounds_done, attempts, tests, workers, mode, order_strategy, shard, "
        f"exit_status, git_sha, git_branch, incomplete FROM runs WHERE {clause} ORDER BY id"
    )
    rows = store.conn.execute(sql, params).fetchall()
    if run_id is not None and not rows:
        known = [r[0] for r in store.conn.execute("SELECT id FROM runs ORDER BY id")]
        if not known:
            held = "no runs"
        elif len(known) == 1:
            held = f"only run {known[0]}"
        else:
            held = f"runs {known[0]}-{known[-1]}"
        raise UnknownId(
            f"run {run_id} is not in {store.path.name} (it holds {held}): pass one of "
            "those to --run, or leave --run out to report every run"
        )
    repeated = _repeated(store, [r[0] for r in rows]) if rows else {}
    return [replace(_run(r), repeated=repeated.get(r[0], 0)) for r in rows]


def _run(r: Any) -> RunRow:
    return RunRow(
        id=r[0], uuid=r[1], started_at=r[2], finished_at=r[3], status=r[4], argv=_argv(r[5]),
        base_seed=r[6], rounds_planned=r[7], budget_seconds=r[8], rounds_done=r[9],
        attempts=r[10], tests=r[11], workers=r[12], mode=r[13], order=r[14], shard=r[15],
        exit_status=r[16], git_sha=r[17], git_branch=r[18],
        incomplete=r[19] if isinstance(r[19], str) else "",
    )  # fmt: skip


def test_counts(store: Store, runs: Sequence[int] | None) -> list[TestCounts]:
    """Per-test tallies over ``runs``, with each test's first failure (plain runs only;
    for a test that failed only as a twice round's second run, that run's failure)."""
    clause, params = _plain_clause(runs)
    seconds = _second_runs(store, runs)
    rows = store.conn.execute(
        f"""
        SELECT t.nodeid,
               sum(a.outcome IN {_PASSING}),
               sum(a.outcome IN {_FAILING}),
               sum(a.outcome = 'skipped'),
               sum(a.outcome = 'crashed'),
               sum(a.violations > 0),
               min(CASE WHEN a.outcome IN {_FAILING} THEN a.id END)
        FROM attempts a JOIN tests t ON t.id = a.test_id
        WHERE {clause}
        GROUP BY t.nodeid ORDER BY t.nodeid
        """,  # noqa: S608 - constants and placeholders only
        params,
    ).fetchall()
    firsts = {r[0]: r[6] for r in rows}
    for nodeid, (_, first_id) in seconds.items():
        if firsts.get(nodeid) is None:
            firsts[nodeid] = first_id
    first = failure_rows(store, [v for v in firsts.values() if v is not None])
    return [
        TestCounts(
            r[0], r[1], r[2], r[3], r[4], r[5],
            first.get(firsts[r[0]]) if firsts.get(r[0]) else None,
            seconds.get(r[0], (0, None))[0],
        )
        for r in rows
    ]  # fmt: skip


def _second_runs(store: Store, runs: Sequence[int] | None) -> dict[str, tuple[int, int]]:
    """``{nodeid: (count, first attempt id)}`` of twice-round second runs that
    failed after a first run (same round, same worker) that passed."""
    clause, params = _runs_clause(runs, "a.run_id")
    # Driven by the failing second runs (few), joined to their first runs
    # through the test's index: a correlated EXISTS scans whole rounds.
    rows = store.conn.execute(
        f"""
        SELECT t.nodeid, count(*), min(a.id)
        FROM attempts a JOIN tests t ON t.id = a.test_id
        JOIN attempts b ON b.test_id = a.test_id AND b.run_id = a.run_id
             AND b.worker = a.worker AND b.round = a.round AND b.repeat = 1
             AND b.execution = 1 AND b.outcome IN {_PASSING}
        WHERE {clause} AND a.repeat = {REPEATED_RUN} AND a.execution = 1 AND a.outcome IN {_FAILING}
        GROUP BY t.nodeid
        """,  # noqa: S608 - constants and placeholders only
        params,
    ).fetchall()
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}


def leak_rows(store: Store, runs: Sequence[int] | None) -> list[LeakRow]:
    """What tests left behind at the end of a round (persisted leaks), per test
    and leak: how many attempts, and the first; unattributed ones with no test
    (counted in rounds)."""
    clause, params = _runs_clause(runs, "l.run_id")
    rows = store.conn.execute(
        "SELECT t.nodeid, l.resource, l.name, l.change, max(l.detail), "  # noqa: S608
        "count(DISTINCT coalesce(l.attempt_id, l.run_id || ':' || l.round)), "
        "min(l.attempt_id) FROM leaks l "
        "LEFT JOIN attempts a ON a.id = l.attempt_id LEFT JOIN tests t ON t.id = a.test_id "
        f"WHERE {clause} AND l.persisted = 1 "
        "GROUP BY t.nodeid, l.resource, l.name, l.change ORDER BY t.nodeid, min(l.id)",
        params,
    ).fetchall()
    return [LeakRow(*row) for row in rows]


def test_leaks(store: Store, nodeids: Sequence[str]) -> dict[str, list[LeakRow]]:
    """:func:`leak_rows` of these tests, over every run."""
    out: dict[str, list[LeakRow]] = {}
    wanted = set(nodeids)
    for row in leak_rows(store, None):
        if row.nodeid in wanted:
            out.setdefault(row.nodeid, []).append(row)
    return out


def attempt_leaks(store: Store, attempt_id: int) -> list[tuple[str, str, str, str, bool]]:
    """``(resource, name, change, detail, persisted)`` of what one attempt changed."""
    rows = store.conn.execute(
        "SELECT resource, name, change, detail, persisted FROM leaks WHERE attempt_id = ? "
        "ORDER BY persisted DESC, id",
        (attempt_id,),
    ).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2]), str(r[3] or ""), bool(r[4])) for r in rows]


def condition_rows(
    store: Store, runs: Sequence[int] | None, nodeids: Sequence[str]
) -> list[ConditionRow]:
    """Outcomes of ``nodeids`` per timing condition (plain runs only)."""
    clause, params = _plain_clause(runs)
    out: list[ConditionRow] = []
    for start in range(0, len(nodeids), 500):
        chunk = list(nodeids[start : start + 500])
        rows = store.conn.execute(
            f"""
            SELECT t.nodeid,
                   CASE WHEN a.stress > 0 THEN 'stress'
                        WHEN a.switch_interval IS NOT NULL THEN 'switch'
                        WHEN a.profile IN ('jitter', 'slow') THEN a.profile
                        ELSE 'exact' END AS condition,
                   sum(a.outcome IN {_PASSING}),
                   sum(a.outcome IN {_FAILING}),
                   min(CASE WHEN a.outcome IN {_FAILING} AND json_valid(a.counts)
                            THEN json_extract(a.counts, '$.stretch') END)
            FROM attempts a JOIN tests t ON t.id = a.test_id
            WHERE {clause} AND t.nodeid IN ({",".join("?" * len(chunk))})
            GROUP BY t.nodeid, condition ORDER BY t.nodeid, condition
            """,  # noqa: S608 - constants and placeholders only
            [*params, *chunk],
        ).fetchall()
        for nodeid, condition, passed, failed, stretch in rows:
            ok = is_whole(stretch) and stretch > 1000
            out.append(
                ConditionRow(nodeid, condition, passed or 0, failed or 0, stretch if ok else None)
            )
    return out


def failure_rows(store: Store, attempt_ids: Sequence[int]) -> dict[int, FailureRow]:
    out: dict[int, FailureRow] = {}
    ids = list(attempt_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        sql = (
            "SELECT a.id, a.run_id, coalesce(f.exc_type, ''), coalesce(f.message, ''), "  # noqa: S608
            "coalesce(f.location, '') FROM attempts a LEFT JOIN failures f "
            f"ON f.attempt_id = a.id WHERE a.id IN ({','.join('?' * len(chunk))})"
        )
        for attempt_id, run_id, exc_type, message, location in store.conn.execute(sql, chunk):
            # A failing attempt without a failures row (a crashed worker) keeps
            # an empty failure: it still has a replayable id.
            out[attempt_id] = FailureRow(attempt_id, run_id, exc_type, message, location)
    return out


def run_locations(store: Store) -> dict[int, tuple[str, str]]:
    """``{run id: (rootdir, invocation_dir)}``: where each hunt collected its tests."""
    return {
        int(r[0]): (str(r[1]), str(r[2]))
        for r in store.conn.execute("SELECT id, rootdir, invocation_dir FROM runs")
    }


_FLAKE_COLUMNS = (
    "fl.flake_id, t.nodeid, fl.kinds, fl.status, fl.evidence, fl.reproducer, fl.polluters, "
    "fl.cleaners, fl.state_setters, fl.confirmed, fl.probes, fl.probe_seconds, fl.note, "
    "fl.first_run_id, fl.last_run_id"
)


def raw_flakes(store: Store) -> list[RawFlake]:
    """Every flake row, as stored (validated by the report model)."""
    rows = store.conn.execute(
        f"SELECT {_FLAKE_COLUMNS} FROM flakes fl JOIN tests t ON t.id = fl.test_id "  # noqa: S608
        "ORDER BY fl.id"
    ).fetchall()
    return [RawFlake(*row) for row in rows]


def raw_flake(store: Store, flake_id: str) -> RawFlake | None:
    row = store.conn.execute(
        f"SELECT {_FLAKE_COLUMNS} FROM flakes fl JOIN tests t ON t.id = fl.test_id "  # noqa: S608
        "WHERE fl.flake_id = ?",
        (flake_id,),
    ).fetchone()
    return RawFlake(*row) if row else None


def flake_ids(store: Store) -> list[str]:
    return [r[0] for r in store.conn.execute("SELECT flake_id FROM flakes ORDER BY id")]


def check_rows(store: Store, runs: Sequence[int] | None) -> list[CheckRow]:
    """``test_checks`` rows of ``runs``, oldest first."""
    clause, params = _runs_clause(runs, "c.run_id")
    sql = (
        "SELECT c.run_id, t.nodeid, c.check_name, c.outcome, c.detail "  # noqa: S608
        "FROM test_checks c JOIN tests t ON t.id = c.test_id "
        f"WHERE {clause} ORDER BY c.id"
    )
    rows = store.conn.execute(sql, params).fetchall()
    return [CheckRow(*row) for row in rows]


def violation_rows(store: Store, runs: Sequence[int] | None) -> list[ViolationRow]:
    """Blocked calls per test and target: how many attempts, and the first one."""
    clause, params = _plain_clause(runs)
    sql = (
        "SELECT t.nodeid, v.op, v.host, v.port, count(DISTINCT v.attempt_id), "  # noqa: S608
        "min(v.attempt_id) FROM violations v JOIN attempts a ON a.id = v.attempt_id "
        f"JOIN tests t ON t.id = a.test_id WHERE {clause} "
        "GROUP BY t.nodeid, v.op, v.host, v.port"
    )
    rows = store.conn.execute(sql, params).fetchall()
    return [ViolationRow(*row) for row in rows]


def round_cells(
    store: Store, runs: Sequence[int] | None, nodeids: Sequence[str]
) -> list[RoundCell]:
    """Outcomes by (run, round) of ``nodeids``: the outcome-by-round view (every
    attempt: a twice round's repeated run and reruns make a round's cell "both")."""
    if not nodeids:
        return []
    clause, params = _runs_clause(runs, "a.run_id")
    out: list[RoundCell] = []
    wanted = list(nodeids)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        sql = (
            f"SELECT t.nodeid, a.run_id, a.round, sum(a.outcome IN {_PASSING}), "  # noqa: S608
            f"sum(a.outcome IN {_FAILING}) FROM attempts a JOIN tests t ON t.id = a.test_id "
            f"WHERE {clause} AND t.nodeid IN ({','.join('?' * len(chunk))}) "
            "GROUP BY t.nodeid, a.run_id, a.round ORDER BY t.nodeid, a.run_id, a.round"
        )
        rows = store.conn.execute(sql, [*params, *chunk]).fetchall()
        out.extend(RoundCell(*row) for row in rows)
    return out


# -- show ------------------------------------------------------------------------

_ATTEMPT_COLUMNS = (
    "a.id, a.run_id, a.round, a.worker, a.position, t.nodeid, a.execution, a.outcome, "
    "a.phase, a.duration, a.seed, a.now, a.mode, a.hash_seed, a.counts, "
    "f.exc_type, f.message, f.location, f.excerpt, j.format, j.size"
)


def attempt_detail(store: Store, attempt_id: int) -> AttemptDetail | None:
    row = store.conn.execute(
        f"SELECT {_ATTEMPT_COLUMNS} FROM attempts a JOIN tests t ON t.id = a.test_id "  # noqa: S608
        "LEFT JOIN failures f ON f.attempt_id = a.id "
        "LEFT JOIN journals j ON j.attempt_id = a.id WHERE a.id = ?",
        (attempt_id,),
    ).fetchone()
    if row is None:
        return None
    violations = [
        ViolationDetail(*v)
        for v in store.conn.execute(
            "SELECT op, host, port, detail FROM violations WHERE attempt_id = ? ORDER BY id",
            (attempt_id,),
        )
    ]
    return AttemptDetail(*row, violations=tuple(violations))  # type: ignore[misc]


def journal_data(store: Store, attempt_id: int) -> bytes | None:
    row = store.conn.execute(
        "SELECT data FROM journals WHERE attempt_id = ?", (attempt_id,)
    ).fetchone()
    if row is None or not isinstance(row[0], (bytes, str)):
        return None
    return row[0] if isinstance(row[0], bytes) else row[0].encode()


def counterpart(store: Store, nodeid: str, near: int, *, failing: bool) -> int | None:
    """The attempt of ``nodeid`` nearest to ``near`` that failed (or passed).

    Prefers an attempt of the same run; the comparison in ``show`` is between
    a failing and a passing attempt of the same test.
    """
    outcomes = _FAILING if failing else _PASSING
    row = store.conn.execute(
        f"""
        SELECT a.id FROM attempts a JOIN tests t ON t.id = a.test_id
        WHERE t.nodeid = ? AND a.outcome IN {outcomes} AND a.id != ? AND {PLAIN_SQL}
        ORDER BY a.run_id != (SELECT run_id FROM attempts WHERE id = ?), abs(a.id - ?)
        LIMIT 1
        """,  # noqa: S608 - constants and placeholders only
        (nodeid, near, near, near),
    ).fetchone()
    return int(row[0]) if row else None


def first_failing_attempt(store: Store, nodeid: str) -> int | None:
    row = store.conn.execute(
        f"SELECT min(a.id) FROM attempts a JOIN tests t ON t.id = a.test_id "  # noqa: S608
        f"WHERE t.nodeid = ? AND a.outcome IN {_FAILING} AND {PLAIN_SQL}",
        (nodeid,),
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def isolation_steps(store: Store, flake_id: str) -> list[StepRow]:
    rows = store.conn.execute(
        "SELECT s.step, s.run_id, s.purpose, s.sequence, s.environment, s.outcome, s.detail, "
        "s.duration FROM isolation_steps s JOIN flakes fl ON fl.id = s.flake_id "
        "WHERE fl.flake_id = ? ORDER BY s.step, s.id",
        (flake_id,),
    ).fetchall()
    return [StepRow(*row) for row in rows]


def attempt_range(store: Store) -> tuple[int, int]:
    """The lowest and highest attempt ids (``(0, 0)`` when there are none)."""
    low, high = store.conn.execute("SELECT min(id), max(id) FROM attempts").fetchone()
    return int(low or 0), int(high or 0)
