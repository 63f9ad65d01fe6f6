"""What a report says, as plain data: rows from the database in, verdicts out.

:mod:`hermetic_hunt.store.queries` reads the rows (the ``*Row`` classes);
:func:`assemble` turns them into a :class:`Report` -- each test's status,
fail rate, interval or bound, flake and replay command -- that the
renderers (:mod:`hermetic_hunt.report`) print. Nothing here touches SQLite,
click or pytest.

A test's *status* (``TestResult.status``), from its counted attempts
(passed + failed; skipped attempts are not counted):

* ``flaky`` -- passed and failed;
* ``broken`` -- failed every time (and did not pass with the sandbox off);
* ``sandbox-incompatible`` -- failed every time under the sandbox but passed
  its ``sandbox-off`` check (a run without the sandbox);
* ``stable`` -- never failed;
* ``skipped`` -- skipped in every attempt (nothing to count).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hermetic_hunt import stats
from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import KINDS, Reproducer
from hermetic_hunt.report.fixes import FixView
from hermetic_hunt.report.history import History

#: ``replay(ref, run_id)``: the replay command of F3 / A1207 (found in that run).
Replay = Callable[[str, int | None], str]
STATUSES = ("flaky", "broken", "sandbox-incompatible", "stable", "skipped")
#: ``test_checks.check_name`` of the run without the sandbox.
SANDBOX_OFF = "sandbox-off"


@dataclass(frozen=True)
class RunRow:
    id: int
    uuid: str
    started_at: str
    finished_at: str | None
    status: str
    argv: tuple[str, ...]
    base_seed: int
    rounds_planned: int | None
    budget_seconds: float | None
    rounds_done: int
    attempts: int
    tests: int
    workers: int
    mode: str
    order: str
    shard: str
    exit_status: int | None


@dataclass(frozen=True)
class FailureRow:
    attempt_id: int
    run_id: int
    exc_type: str
    message: str
    location: str

    def describe(self) -> str:
        text = f"{self.exc_type}: {self.message}" if self.message else self.exc_type
        return f"{text} at {self.location}" if self.location else text


@dataclass(frozen=True)
class TestCounts:
    nodeid: str
    passed: int
    failed: int
    skipped: int
    crashed: int
    with_violations: int
    first_failure: FailureRow | None = None


@dataclass(frozen=True)
class RawFlake:
    """A ``flakes`` row as stored (JSON columns still text, unvalidated)."""

    flake_id: str
    nodeid: str
    kinds: str
    status: str
    evidence: str
    reproducer: str | None
    polluters: str
    cleaners: str
    state_setters: str
    confirmed: int | None
    probes: int
    probe_seconds: float
    note: str
    first_run_id: int | None
    last_run_id: int | None


@dataclass(frozen=True)
class Flake:
    """A validated flake: every list is a real list of nodeids."""

    flake_id: str
    nodeid: str
    kinds: tuple[str, ...]
    status: str
    confirmed: bool | None
    polluters: tuple[tuple[str, ...], ...]
    cleaners: tuple[str, ...]
    state_setters: tuple[tuple[str, ...], ...]
    reproducer: Reproducer | None
    evidence: Any
    probes: int
    probe_seconds: float
    note: str
    first_run_id: int | None
    last_run_id: int | None


@dataclass(frozen=True)
class CheckRow:
    run_id: int
    nodeid: str
    check_name: str
    outcome: str
    detail: str


@dataclass(frozen=True)
class ViolationRow:
    nodeid: str
    op: str
    host: str
    port: int | None
    attempts: int
    first_attempt_id: int

    @property
    def target(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ConditionRow:
    """One test's outcomes under one timing condition (``exact``, ``jitter``, ``slow``,
    ``stress``, ``switch``; record and off modes' plain rounds count as ``exact``).

    ``stretch``: the smallest "largest sleep stretch" among the failing
    attempts under a noisy clock, in thousandths (1200: sleeps lasted 1.2x).
    """

    nodeid: str
    condition: str
    passed: int
    failed: int
    stretch: int | None = None


@dataclass(frozen=True)
class RoundCell:
    """Outcomes of one test in one round (several with reruns)."""

    nodeid: str
    run_id: int
    round_no: int
    passed: int
    failed: int


@dataclass(frozen=True)
class TestResult:
    nodeid: str
    status: str
    attempts: int  # counted: passed + failed
    failures: int
    skipped: int
    crashed: int
    with_violations: int
    rate: float | None
    interval: tuple[float, float] | None
    bound: float | None  # stable tests: the flake rate their clean attempts rule out
    more_for_1pct: int | None  # stable tests: clean attempts still needed for < 1%
    failure: FailureRow | None
    flake: Flake | None
    check: CheckRow | None
    replay: str | None
    conditions: tuple[ConditionRow, ...] = ()  # per timing condition (tests that failed)

    def timing(self) -> str | None:
        """``slow 2/3 · jitter 1/5 · exact 0/19 failed; fails when sleeps last ≥ 1.27x
        their duration`` -- when it failed only under timing conditions, else None."""
        rows = sorted(
            self.conditions,
            key=lambda r: (r.condition == "exact", -r.failed / max(1, r.passed + r.failed),
                           r.condition),
        )  # fmt: skip
        if not rows or any(r.failed for r in rows if r.condition == "exact"):
            return None
        text = " · ".join(f"{r.condition} {r.failed}/{r.passed + r.failed}" for r in rows)
        stretches = [r.stretch for r in rows if r.stretch is not None and r.failed]
        if stretches:
            text += f" failed; fails when sleeps last ≥ {min(stretches) / 1000:.2f}x their duration"
        else:
            text += " failed"
        return text


@dataclass(frozen=True)
class Report:
    database: str
    runs: tuple[RunRow, ...]
    selected_run: int | None
    tests: tuple[TestResult, ...]  # every test, by nodeid
    flakes: tuple[Flake, ...]  # flake rows of the tests in this report
    violations: tuple[ViolationRow, ...]
    rounds: tuple[RoundCell, ...]
    replay_for: dict[str, str] = field(default_factory=dict)  # flake id -> command
    since: str | None = None  # report --since DATE|REV: only the runs since then
    fixes: dict[str, FixView] = field(default_factory=dict)  # flake id -> suggested fix
    histories: dict[str, History] = field(default_factory=dict)  # nodeid -> its history

    def fix_views(self) -> list[FixView]:
        """The suggested fixes of this report's flakes, in flake order."""
        return [self.fixes[f.flake_id] for f in self.flakes if f.flake_id in self.fixes]

    def history_items(self) -> list[tuple[str, History]]:
        """(flake id or '-', history) of the flakes and flaky tests, in flake order."""
        by_test = {f.nodeid: f.flake_id for f in self.flakes}

        def key(nodeid: str) -> tuple[int, str]:
            flake_id = by_test.get(nodeid)
            return flake_order_of(flake_id) if flake_id else (1 << 63, nodeid)

        return [(by_test.get(n, "-"), self.histories[n]) for n in sorted(self.histories, key=key)]

    def with_status(self, status: str) -> list[TestResult]:
        chosen = [t for t in self.tests if t.status == status]
        if status in ("flaky", "broken", "sandbox-incompatible"):
            chosen.sort(key=rank_key)
        return chosen

    @property
    def attempts(self) -> int:
        return sum(t.attempts + t.skipped for t in self.tests)

    @property
    def findings(self) -> bool:
        """Anything the exit status should flag: not stable, or violating."""
        return bool(self.violations) or any(
            t.status in ("flaky", "broken", "sandbox-incompatible") for t in self.tests
        )


def rank_key(test: TestResult) -> tuple[float, float, str]:
    """Most surely, most often failing first: the interval's low end, then the rate."""
    low = test.interval[0] if test.interval else 0.0
    return (-low, -(test.rate or 0.0), test.nodeid)


# -- validating stored flakes ----------------------------------------------


def _load(raw: str | None, what: str, where: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BadDatabase(
            f"{where}: {what} is not valid JSON; the database is damaged (re-run the hunt)"
        ) from None


def _malformed(what: str, shape: str, where: str) -> BadDatabase:
    return BadDatabase(
        f"{where}: {what} must be {shape}; the database is damaged or written by "
        "another tool (re-run the hunt)"
    )


def _nodeids(value: Any, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _malformed(what, "a JSON list of test ids", where)
    return tuple(value)


def _sets(value: Any, what: str, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list):
        raise _malformed(what, "a JSON list of sets of test ids", where)
    return tuple(_nodeids(item, what, where) for item in value)


def parse_flake(raw: RawFlake, database: str) -> Flake:
    """Validate a stored flake (untrusted); :class:`BadDatabase` names what is wrong."""
    where = f"{database}: flake {raw.flake_id}"
    kinds = _nodeids(_load(raw.kinds, "kinds", where), "kinds", where)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise BadDatabase(
            f"{where}: unknown flake kind {unknown[0]!r} (known: {', '.join(KINDS)}); "
            "upgrade hermetic-hunt or re-run the hunt"
        )
    reproducer = None
    loaded = _load(raw.reproducer, "reproducer", where)
    if loaded is not None:
        try:
            reproducer = Reproducer.from_json(loaded)
        except ValueError as exc:
            raise BadDatabase(
                f"{where}: reproducer is malformed ({exc}); re-run the hunt"
            ) from None
    return Flake(
        flake_id=raw.flake_id,
        nodeid=raw.nodeid,
        kinds=kinds,
        status=raw.status,
        confirmed=None if raw.confirmed is None else bool(raw.confirmed),
        polluters=_sets(_load(raw.polluters, "polluters", where), "polluters", where),
        cleaners=_nodeids(_load(raw.cleaners, "cleaners", where), "cleaners", where),
        state_setters=_sets(
            _load(raw.state_setters, "state_setters", where), "state_setters", where
        ),
        reproducer=reproducer,
        evidence=_load(raw.evidence, "evidence", where),
        probes=raw.probes,
        probe_seconds=raw.probe_seconds,
        note=raw.note,
        first_run_id=raw.first_run_id,
        last_run_id=raw.last_run_id,
    )


# -- assembling ------------------------------------------------------------


def status_of(counts: TestCounts, check: CheckRow | None) -> str:
    if counts.passed + counts.failed == 0:
        return "skipped"
    if counts.failed == 0:
        return "stable"
    if counts.passed > 0:
        return "flaky"
    if check is not None and check.outcome == "passed":
        return "sandbox-incompatible"
    return "broken"


def _result(
    counts: TestCounts,
    flake: Flake | None,
    check: CheckRow | None,
    replay: Replay,
    conditions: tuple[ConditionRow, ...] = (),
) -> TestResult:
    status = status_of(counts, check)
    n = counts.passed + counts.failed
    stable = status == "stable"
    command = None
    if flake is not None:
        command = replay(flake.flake_id, flake_run(flake))
    elif counts.first_failure is not None:
        first = counts.first_failure
        command = replay(f"A{first.attempt_id}", first.run_id)
    return TestResult(
        nodeid=counts.nodeid,
        status=status,
        attempts=n,
        failures=counts.failed,
        skipped=counts.skipped,
        crashed=counts.crashed,
        with_violations=counts.with_violations,
        rate=counts.failed / n if n else None,
        interval=stats.wilson(counts.failed, n) if n else None,
        bound=stats.clean_bound(n) if stable else None,
        more_for_1pct=stats.more_attempts_for_bound(n) if stable else None,
        failure=counts.first_failure,
        flake=flake,
        check=check,
        replay=command,
        conditions=conditions,
    )


def assemble(
    *,
    database: str,
    runs: Sequence[RunRow],
    selected_run: int | None,
    counts: Iterable[TestCounts],
    flakes: Iterable[Flake],
    checks: Iterable[CheckRow],
    violations: Iterable[ViolationRow],
    rounds: Iterable[RoundCell],
    replay: Replay,
    conditions: Iterable[ConditionRow] = (),
) -> Report:
    """One report from the rows of the selected runs.

    ``replay(ref, run_id)`` turns ``F3`` / ``A1207`` (of run ``run_id``) into
    the paste-able command.
    ``checks`` are in storage order: the newest check of a test wins.
    """
    by_test = {f.nodeid: f for f in flakes}
    latest: dict[str, CheckRow] = {}
    for check in checks:
        if check.check_name == SANDBOX_OFF:
            latest[check.nodeid] = check
    under: dict[str, list[ConditionRow]] = {}
    for row in conditions:
        under.setdefault(row.nodeid, []).append(row)
    results = sorted(
        (
            _result(c, by_test.get(c.nodeid), latest.get(c.nodeid), replay,
                    tuple(under.get(c.nodeid, ())))
            for c in counts
        ),
        key=lambda t: t.nodeid,
    )  # fmt: skip
    shown = {t.nodeid for t in results}
    kept = tuple(sorted((f for f in by_test.values() if f.nodeid in shown), key=flake_order))
    return Report(
        database=database,
        runs=tuple(runs),
        selected_run=selected_run,
        tests=tuple(results),
        flakes=kept,
        violations=tuple(sorted(violations, key=lambda v: (v.nodeid, v.op, v.host, v.port or 0))),
        rounds=tuple(rounds),
        replay_for={f.flake_id: replay(f.flake_id, flake_run(f)) for f in kept},
    )


def flake_run(flake: Flake) -> int | None:
    """The run whose rootdir a flake's replay command collects from."""
    if flake.reproducer is not None and flake.reproducer.run_id is not None:
        return flake.reproducer.run_id
    return flake.last_run_id if flake.last_run_id is not None else flake.first_run_id


def flake_order(flake: Flake) -> tuple[int, str]:
    """F2 before F10."""
    return flake_order_of(flake.flake_id)


def flake_order_of(flake_id: str) -> tuple[int, str]:
    digits = flake_id[1:]
    return (int(digits) if digits.isdigit() else 1 << 62, flake_id)
