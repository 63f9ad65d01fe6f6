"""Read queries behind ``hermetic-hunt report``, ``list`` and ``show``.

Each function takes an open :class:`~hermetic_hunt.store.core.Store` and
returns plain rows (:mod:`hermetic_hunt.report.model`,
:mod:`hermetic_hunt.report.show`); nothing here interprets them. ``runs``
arguments restrict a query to some runs; ``None`` means every run in the
database. All values are bound as parameters, never spliced into SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermetic_hunt.models import PLAIN_SQL, REPEATED_RUN, Violation
from hermetic_hunt.store.core import Store
from hermetic_hunt.store.rows import (
    FAIL_SQL,
    PASS_SQL,
    AttemptDetail,
    CheckRow,
    ConditionRow,
    FailureRow,
    LeakRow,
    RoundCell,
    StepRow,
    TestCounts,
    ViolationRow,
    chunks,
    named,
    scalar,
)
from hermetic_hunt.untrusted import is_whole, whole_or


def _runs_clause(runs: Sequence[int] | None, column: str) -> tuple[str, list[Any]]:
    if runs is None:
        return "1", []
    return f"{column} IN ({','.join('?' * len(runs))})", list(runs)


def _plain_clause(runs: Sequence[int] | None) -> tuple[str, list[Any]]:
    """Attempts of ``runs`` that were plain runs (not a ``twice`` round's second)."""
    clause, params = _runs_clause(runs, "a.run_id")
    return f"{clause} AND {PLAIN_SQL}", params


def test_counts(store: Store, runs: Sequence[int] | None) -> list[TestCounts]:
    """Per-test tallies over ``runs``, with each test's first failure (plain runs only;
    for a test that failed only as a twice round's second run, that run's failure)."""
    clause, params = _plain_clause(runs)
    seconds = second_runs(store, runs)
    sql = f"""
        SELECT t.nodeid,
               sum(a.outcome IN {PASS_SQL}) AS passed,
               sum(a.outcome IN {FAIL_SQL}) AS failed,
               sum(a.outcome = 'skipped') AS skipped,
               sum(a.outcome = 'crashed') AS crashed,
               sum(a.violations > 0) AS with_violations,
               min(CASE WHEN a.outcome IN {FAIL_SQL} THEN a.id END) AS first_id
        FROM attempts a JOIN tests t ON t.id = a.test_id
        WHERE {clause}
        GROUP BY t.nodeid ORDER BY t.nodeid
        """  # noqa: S608 - constants and placeholders only
    rows = [dict(row) for row in named(store.conn, sql, params)]
    plain = {r["nodeid"]: r.pop("first_id") for r in rows}
    firsts = {n: first for n, (_, first) in seconds.items()} | {
        n: first for n, first in plain.items() if first is not None
    }  # (a plain failure first, else a second run's)
    first = failure_rows(store, list(firsts.values()))
    return [
        TestCounts(
            **r,
            first_failure=first.get(firsts.get(r["nodeid"], 0)),
            second_run_failures=seconds.get(r["nodeid"], (0, None))[0],
        )
        for r in rows
    ]


def second_runs(store: Store, runs: Sequence[int] | None) -> dict[str, tuple[int, int]]:
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
             AND b.execution = 1 AND b.outcome IN {PASS_SQL}
        WHERE {clause} AND a.repeat = {REPEATED_RUN} AND a.execution = 1 AND a.outcome IN {FAIL_SQL}
        GROUP BY t.nodeid
        """,  # noqa: S608 - constants and placeholders only
        params,
    ).fetchall()
    return {str(nodeid): (int(count), int(first)) for nodeid, count, first in rows}


def leak_rows(store: Store, runs: Sequence[int] | None) -> list[LeakRow]:
    """What tests left behind at the end of a round (persisted leaks), per test
    and leak: how many attempts, and the first; unattributed ones with no test
    (counted in rounds)."""
    clause, params = _runs_clause(runs, "l.run_id")
    rows = named(
        store.conn,
        "SELECT t.nodeid, l.resource, l.name, l.change, max(l.detail) AS detail, "  # noqa: S608
        "count(DISTINCT coalesce(l.attempt_id, l.run_id || ':' || l.round)) AS attempts, "
        "min(l.attempt_id) AS first_attempt_id FROM leaks l "
        "LEFT JOIN attempts a ON a.id = l.attempt_id LEFT JOIN tests t ON t.id = a.test_id "
        f"WHERE {clause} AND l.persisted = 1 "
        "GROUP BY t.nodeid, l.resource, l.name, l.change ORDER BY t.nodeid, min(l.id)",
        params,
    )
    return [LeakRow(**row) for row in rows]


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
    return [
        (str(resource), str(name), str(change), str(detail or ""), bool(persisted))
        for resource, name, change, detail, persisted in rows
    ]


def condition_rows(
    store: Store, runs: Sequence[int] | None, nodeids: Sequence[str]
) -> list[ConditionRow]:
    """Outcomes of ``nodeids`` per timing condition (plain runs only)."""
    clause, params = _plain_clause(runs)
    return [
        ConditionRow(nodeid, condition, passed or 0, failed or 0,
                     stretch if is_whole(stretch) and stretch > 1000 else None)
        for chunk, marks in chunks(nodeids)
        for nodeid, condition, passed, failed, stretch in store.conn.execute(
            f"""
            SELECT t.nodeid,
                   CASE WHEN a.stress > 0 THEN 'stress'
                        WHEN a.switch_interval IS NOT NULL THEN 'switch'
                        WHEN a.profile IN ('jitter', 'slow') THEN a.profile
                        ELSE 'exact' END AS condition,
                   sum(a.outcome IN {PASS_SQL}),
                   sum(a.outcome IN {FAIL_SQL}),
                   min(CASE WHEN a.outcome IN {FAIL_SQL} AND json_valid(a.counts)
                            THEN json_extract(a.counts, '$.stretch') END)
            FROM attempts a JOIN tests t ON t.id = a.test_id
            WHERE {clause} AND t.nodeid IN ({marks})
            GROUP BY t.nodeid, condition ORDER BY t.nodeid, condition
            """,  # noqa: S608 - constants and placeholders only
            [*params, *chunk],
        )
    ]  # fmt: skip


def failure_rows(store: Store, attempt_ids: Sequence[int]) -> dict[int, FailureRow]:
    # A failing attempt without a failures row (a crashed worker) keeps an
    # empty failure: it still has a replayable id.
    failures = (
        FailureRow(*row)  # (attempt id, run id, exc_type, message, location)
        for chunk, marks in chunks(attempt_ids)
        for row in store.conn.execute(
            "SELECT a.id, a.run_id, coalesce(f.exc_type, ''), coalesce(f.message, ''), "  # noqa: S608
            "coalesce(f.location, '') FROM attempts a LEFT JOIN failures f "
            f"ON f.attempt_id = a.id WHERE a.id IN ({marks})",
            chunk,
        )
    )
    return {failure.attempt_id: failure for failure in failures}


def check_rows(store: Store, runs: Sequence[int] | None) -> list[CheckRow]:
    """``test_checks`` rows of ``runs``, oldest first."""
    clause, params = _runs_clause(runs, "c.run_id")
    sql = (
        "SELECT c.run_id, t.nodeid, c.check_name, c.outcome, c.detail "  # noqa: S608
        "FROM test_checks c JOIN tests t ON t.id = c.test_id "
        f"WHERE {clause} ORDER BY c.id"
    )
    return [CheckRow(**row) for row in named(store.conn, sql, params)]


def violation_rows(store: Store, runs: Sequence[int] | None) -> list[ViolationRow]:
    """Blocked calls per test and target: how many attempts, and the first one."""
    clause, params = _plain_clause(runs)
    sql = (
        "SELECT t.nodeid, v.op, v.host, v.port, count(DISTINCT v.attempt_id) AS attempts, "  # noqa: S608
        "min(v.attempt_id) AS first_attempt_id FROM violations v "
        f"JOIN attempts a ON a.id = v.attempt_id JOIN tests t ON t.id = a.test_id WHERE {clause} "
        "GROUP BY t.nodeid, v.op, v.host, v.port"
    )
    return [ViolationRow(**row) for row in named(store.conn, sql, params)]


def round_cells(
    store: Store, runs: Sequence[int] | None, nodeids: Sequence[str]
) -> list[RoundCell]:
    """Outcomes by (run, round) of ``nodeids``: the outcome-by-round view (every
    attempt: a twice round's repeated run and reruns make a round's cell "both")."""
    clause, params = _runs_clause(runs, "a.run_id")
    return [
        RoundCell(**row)
        for chunk, marks in chunks(nodeids)
        for row in named(
            store.conn,
            f"SELECT t.nodeid, a.run_id, a.round AS round_no, sum(a.outcome IN {PASS_SQL}) AS "  # noqa: S608
            f"passed, sum(a.outcome IN {FAIL_SQL}) AS failed FROM attempts a "
            "JOIN tests t ON t.id = a.test_id "
            f"WHERE {clause} AND t.nodeid IN ({marks}) "
            "GROUP BY t.nodeid, a.run_id, a.round ORDER BY t.nodeid, a.run_id, a.round",
            [*params, *chunk],
        )
    ]


# -- show ------------------------------------------------------------------------


def attempt_detail(store: Store, attempt_id: int) -> AttemptDetail | None:
    """Attempt ``attempt_id`` as ``show`` prints it: every stored value, as stored."""
    for row in named(
        store.conn,
        "SELECT a.id, a.run_id, a.round AS round_no, a.worker, a.position, t.nodeid, "
        "a.execution, a.outcome, a.phase, a.duration, a.seed, a.now, a.mode, a.hash_seed, "
        "a.counts, f.exc_type, f.message, f.location, f.excerpt, j.format AS journal_format, "
        "j.size AS journal_size FROM attempts a JOIN tests t ON t.id = a.test_id "
        "LEFT JOIN failures f ON f.attempt_id = a.id "
        "LEFT JOIN journals j ON j.attempt_id = a.id WHERE a.id = ?",
        (attempt_id,),
    ):
        violations = named(
            store.conn,
            "SELECT op, host, port, detail FROM violations WHERE attempt_id = ? ORDER BY id",
            (attempt_id,),
        )
        return AttemptDetail(**row, violations=tuple(Violation(**v) for v in violations))
    return None


def journal_data(store: Store, attempt_id: int) -> bytes | None:
    data = scalar(store.conn, "SELECT data FROM journals WHERE attempt_id = ?", (attempt_id,))
    if not isinstance(data, (bytes, str)):
        return None
    return data if isinstance(data, bytes) else data.encode()


def counterpart(store: Store, nodeid: str, near: int, *, failing: bool) -> int | None:
    """The attempt of ``nodeid`` nearest to ``near`` that failed (or passed).

    Prefers an attempt of the same run; the comparison in ``show`` is between
    a failing and a passing attempt of the same test.
    """
    outcomes = FAIL_SQL if failing else PASS_SQL
    found = scalar(
        store.conn,
        f"""
        SELECT a.id FROM attempts a JOIN tests t ON t.id = a.test_id
        WHERE t.nodeid = ? AND a.outcome IN {outcomes} AND a.id != ? AND {PLAIN_SQL}
        ORDER BY a.run_id != (SELECT run_id FROM attempts WHERE id = ?), abs(a.id - ?)
        LIMIT 1
        """,  # noqa: S608 - constants and placeholders only
        (nodeid, near, near, near),
    )
    return whole_or(found)


def first_failing_attempt(store: Store, nodeid: str) -> int | None:
    found = scalar(
        store.conn,
        f"SELECT min(a.id) FROM attempts a JOIN tests t ON t.id = a.test_id "  # noqa: S608
        f"WHERE t.nodeid = ? AND a.outcome IN {FAIL_SQL} AND {PLAIN_SQL}",
        (nodeid,),
    )
    return whole_or(found)


def isolation_steps(store: Store, flake_id: str) -> list[StepRow]:
    rows = named(
        store.conn,
        "SELECT s.step, s.run_id, s.purpose, s.sequence, s.environment, s.outcome, s.detail, "
        "s.duration FROM isolation_steps s JOIN flakes fl ON fl.id = s.flake_id "
        "WHERE fl.flake_id = ? ORDER BY s.step, s.id",
        (flake_id,),
    )
    return [StepRow(**row) for row in rows]


def attempt_range(store: Store) -> tuple[int, int]:
    """The lowest and highest attempt ids (``(0, 0)`` when there are none)."""
    low, high = store.conn.execute("SELECT min(id), max(id) FROM attempts").fetchone()
    return int(low or 0), int(high or 0)
