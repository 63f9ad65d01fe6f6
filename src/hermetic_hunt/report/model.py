"""What a report says, as plain data: rows from the database in, verdicts out.

:mod:`hermetic_hunt.store.queries` reads the rows (:mod:`hermetic_hunt.store.rows`);
:func:`assemble` turns them into a :class:`Report` -- each test's status,
fail rate, interval or bound, flake and replay command -- that the
renderers (:mod:`hermetic_hunt.report`) print. Nothing here touches SQLite,
click or pytest.

A test's *status* (:func:`status_of`, from its counted attempts) is defined
in docs/reports.md, 'Every test has a status'. Findings are shown as
:class:`Group` objects, each with an *exposure*
(:func:`hermetic_hunt.models.exposure`): what a CI run will see of it;
reports list them by exposure, then by how surely they fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from hermetic_hunt import stats
from hermetic_hunt.findings import Flake as Flake  # the report's flakes: stored ones
from hermetic_hunt.models import (
    CI_EXPOSURES,
    EXPOSURES,
    FOUND_BY,
    attempts_text,
    exposure,
    exposure_words,
    function_of,
)
from hermetic_hunt.report.fixes import FixView
from hermetic_hunt.report.history import History
from hermetic_hunt.store.rows import (
    CheckRow,
    ConditionRow,
    FailureRow,
    LeakRow,
    RoundCell,
    RunRow,
    TestCounts,
    ViolationRow,
)

#: ``replay(ref, run_id)``: the replay command of F3 / A1207 (found in that run).
Replay = Callable[[str, int | None], str]
Status = Literal["flaky", "broken", "sandbox-incompatible", "not-idempotent", "stable", "skipped"]
#: A test's status in a report, in report order (whether a flake looks fixed is
#: :data:`hermetic_hunt.report.history.Fixed`).
STATUSES: tuple[Status, ...] = get_args(Status)
#: Statuses that are findings (the rest never failed).
FINDINGS: tuple[Status, ...] = ("flaky", "broken", "sandbox-incompatible", "not-idempotent")
#: ``test_checks.check_name`` of the run without the sandbox.
SANDBOX_OFF = "sandbox-off"


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
    second_run_failures: int = 0
    exposure: str | None = None  # findings only (see models.exposure)
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
        if stretches := [r.stretch for r in rows if r.stretch is not None and r.failed]:
            text += f" failed; fails when sleeps last ≥ {min(stretches) / 1000:.2f}x their duration"
        else:
            text += " failed"
        return text


@dataclass(frozen=True)
class Group:
    """One finding as reports show it: a test, or the parametrizations of one
    test function that fail the same way (same status, kinds and failure
    signature). ``tests[0]`` leads (the one isolation explained)."""

    tests: tuple[TestResult, ...]
    exposure: str

    @property
    def lead(self) -> TestResult:
        return self.tests[0]

    @property
    def others(self) -> tuple[TestResult, ...]:
        return self.tests[1:]

    @property
    def shared(self) -> dict[str, Any] | None:
        """A collision group's facts (``resource``, ``locations``, ``files``...): the
        tests collide over one path several workers use at once (None: not one)."""
        facts = evidence_of(self.lead.flake).get("shared")
        if not (self.others and isinstance(facts, dict) and isinstance(facts.get("resource"), str)):
            return None
        return facts

    @property
    def members(self) -> str:
        """What the grouped tests are: ``tests`` over a shared path, else ``parametrizations``."""
        return "tests" if self.shared is not None else "parametrizations"

    @property
    def nodeid(self) -> str:
        if (shared := self.shared) is not None:
            return f"{len(self.tests)} tests collide over {shared['resource']}"
        return function_of(self.lead.nodeid) if self.others else self.lead.nodeid

    @property
    def attempts(self) -> int:
        return sum(t.attempts for t in self.tests)

    @property
    def failures(self) -> int:
        return sum(t.failures for t in self.tests)

    @property
    def rate(self) -> float | None:
        return self.failures / self.attempts if self.attempts else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return stats.wilson(self.failures, self.attempts) if self.attempts else None

    @property
    def exposure_text(self) -> str:
        """``fails in normal runs``, ``fails on 2026-12-31 (in 28 days)``..."""
        return exposure_words(self.exposure, evidence_of(self.lead.flake).get("dates"))


@dataclass(frozen=True)
class Report:
    database: str
    runs: tuple[RunRow, ...]
    selected_run: int | None
    tests: tuple[TestResult, ...]  # every test, by nodeid
    flakes: tuple[Flake, ...]  # flake rows of the tests in this report
    violations: tuple[ViolationRow, ...]
    rounds: tuple[RoundCell, ...]
    leaks: tuple[LeakRow, ...] = ()
    groups: tuple[Group, ...] = ()  # every finding, ranked (see rank_groups)
    since: str | None = None  # report --since DATE|REV: only the runs since then
    fixes: dict[str, FixView] = field(default_factory=dict)  # flake id -> suggested fix
    histories: dict[str, History] = field(default_factory=dict)  # nodeid -> its history

    def fix_views(self) -> list[FixView]:
        """The suggested fixes of this report's findings, in flake order: one per
        finding, so the parametrizations of a test function that fail the same
        way share one (their lead's, naming the others' ids)."""
        grouped = {t.flake.flake_id: g for g in self.groups for t in g.tests if t.flake is not None}
        out, shown = [], set()
        for flake in self.flakes:
            if flake.flake_id not in self.fixes or flake.flake_id in shown:
                continue
            group = grouped.get(flake.flake_id)
            tests = group.tests if group is not None else ()
            members = [t.flake.flake_id for t in tests if t.flake is not None] or [flake.flake_id]
            lead = next(m for m in members if m in self.fixes)
            shown.update(members)
            view = self.fixes[lead]
            also = tuple(m for m in members if m != lead)
            if also and group is not None:
                view = replace(view, also=also, function=group.nodeid, members=group.members)
            out.append(view)
        return out

    def history_items(self) -> list[tuple[str, History]]:
        """(flake id or '-', history) of the flakes and flaky tests, in flake order."""
        by_test = {f.nodeid: f.flake_id for f in self.flakes}

        def key(nodeid: str) -> tuple[int, str]:
            flake_id = by_test.get(nodeid)
            return flake_order_of(flake_id) if flake_id else (1 << 63, nodeid)

        return [(by_test.get(n, "-"), self.histories[n]) for n in sorted(self.histories, key=key)]

    def with_status(self, status: str) -> list[TestResult]:
        chosen = [t for t in self.tests if t.status == status]
        if status in FINDINGS:
            chosen.sort(key=rank_key)
        return chosen

    def by_exposure(self) -> list[tuple[str, list[Group]]]:
        """``[(exposure, groups)]`` in exposure order, empty ones left out."""
        chosen = [(level, [g for g in self.groups if g.exposure == level]) for level in EXPOSURES]
        return [(level, groups) for level, groups in chosen if groups]

    def leaking(self) -> list[tuple[str | None, list[LeakRow]]]:
        """``[(nodeid, leaks)]``: tests that left state behind, most leaks first;
        leaks not attributed to one test last (nodeid None)."""
        by_test: dict[str | None, list[LeakRow]] = {}
        for leak in self.leaks:
            by_test.setdefault(leak.nodeid, []).append(leak)
        return sorted(
            by_test.items(),
            key=lambda item: (item[0] is None, -len(item[1]), item[0] or ""),
        )

    @property
    def attempts(self) -> int:
        return sum(t.attempts + t.skipped for t in self.tests)

    @property
    def attempts_text(self) -> str:
        """The attempts of this report's runs, repeated runs apart (``attempts_text``)."""
        stored = sum(run.attempts for run in self.runs)
        repeated = sum(run.repeated for run in self.runs)
        if stored < self.attempts:  # runs without their counts (a hand-made database)
            return attempts_text(self.attempts)
        return attempts_text(self.attempts + repeated, repeated)

    @property
    def findings(self) -> bool:
        """Anything the exit status should flag: violations, or a test that is not
        stable and that CI will see (not ``past dates only``)."""
        return bool(self.violations) or any(
            t.status in FINDINGS and t.exposure in CI_EXPOSURES for t in self.tests
        )

    def counts(self) -> dict[str, int]:
        """Tests per status, violators and leaking tests: the one place the
        summaries (``report``, the end of a hunt) count them."""
        out = {status: 0 for status in STATUSES} | Counter(t.status for t in self.tests)
        out["violations"] = len({v.nodeid for v in self.violations})
        out["leaking"] = len({leak.nodeid for leak in self.leaks if leak.nodeid is not None})
        out["findings"] = len(self.groups)
        return out


def rank_key(item: TestResult | Group) -> tuple[int, float, float, str]:
    """What CI sees first, then most surely, most often failing: the exposure,
    the interval's low end, then the rate (of a test or a group)."""
    low = item.interval[0] if item.interval else 0.0
    level = EXPOSURES.index(item.exposure) if item.exposure in EXPOSURES else len(EXPOSURES)
    return (level, -low, -(item.rate or 0.0), item.nodeid)


def evidence_of(flake: Flake | None) -> dict[str, Any]:
    """A flake's stored evidence as a mapping (``{}``: no flake, or evidence that is not one)."""
    return flake.evidence if flake is not None and isinstance(flake.evidence, dict) else {}


# -- assembling ------------------------------------------------------------


def status_of(counts: TestCounts, check: CheckRow | None) -> str:
    if counts.passed + counts.failed == 0:
        return "skipped"
    if counts.failed == 0:
        return "not-idempotent" if counts.second_run_failures else "stable"
    if counts.passed > 0:
        return "flaky"
    if check is not None and check.outcome == "passed":
        return "sandbox-incompatible"
    return "broken"


def found_by_probe(flake: Flake | None) -> bool:
    """A victim no round failed, found by isolation's polluter probe (``isolate.blast``)."""
    return evidence_of(flake).get("found_by") == FOUND_BY


def _result(
    counts: TestCounts,
    flake: Flake | None,
    check: CheckRow | None,
    replay: Replay,
    conditions: tuple[ConditionRow, ...] = (),
) -> TestResult:
    status = status_of(counts, check)
    if status == "stable" and found_by_probe(flake):
        status = "flaky"  # it passed every round, but a probe shows it fails after its polluter
    n = counts.passed + counts.failed
    stable = status == "stable"
    command = None
    if flake is not None:
        command = replay(flake.flake_id, flake_run(flake))
    elif counts.first_failure is not None and status != "not-idempotent":
        # (a second run replayed alone would pass: no attempt replay for those)
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
        second_run_failures=counts.second_run_failures,
        exposure=test_exposure(status, flake),
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
    leaks: Iterable[LeakRow] = (),
    conditions: Iterable[ConditionRow] = (),
) -> Report:
    """One report from the rows of the selected runs.

    ``replay(ref, run_id)`` turns ``F3`` / ``A1207`` (of run ``run_id``) into
    the paste-able command.
    ``checks`` are in storage order: the newest check of a test wins.
    """
    by_test = {f.nodeid: f for f in flakes}
    latest = {check.nodeid: check for check in checks if check.check_name == SANDBOX_OFF}
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
    kept = [f for f in by_test.values() if f.nodeid in shown]
    kept.sort(key=lambda f: flake_order_of(f.flake_id))
    return Report(
        database=database,
        runs=tuple(runs),
        selected_run=selected_run,
        tests=tuple(results),
        flakes=tuple(kept),
        violations=tuple(sorted(violations, key=lambda v: (v.nodeid, v.op, v.host, v.port or 0))),
        rounds=tuple(rounds),
        leaks=tuple(leak for leak in leaks if leak.nodeid is None or leak.nodeid in shown),
        groups=rank_groups(results),
    )


def flake_run(flake: Flake) -> int | None:
    """The run whose rootdir a flake's replay command collects from."""
    if flake.reproducer is not None and flake.reproducer.run_id is not None:
        return flake.reproducer.run_id
    return flake.last_run_id if flake.last_run_id is not None else flake.first_run_id


def flake_order_of(flake_id: str) -> tuple[int, str]:
    """F2 before F10."""
    digits = flake_id[1:]
    return (int(digits) if digits.isdigit() else 1 << 62, flake_id)


# -- findings as groups -------------------------------------------------------


def _signature(test: TestResult) -> tuple[str, str]:
    failure = test.failure
    return (failure.exc_type, failure.location) if failure is not None else ("", "")


def _is_lead(test: TestResult) -> tuple[int, int, str]:
    """The test isolation explained leads its group (then the lowest flake id): the
    representative of parametrizations, the test whose probe showed a shared path."""
    evidence = evidence_of(test.flake)
    shared = evidence.get("shared")
    grouped = isinstance(evidence.get("group"), dict) or (
        isinstance(shared, dict) and shared.get("lead") != test.nodeid
    )
    number = flake_order_of(test.flake.flake_id)[0] if test.flake is not None else 1 << 62
    return (int(grouped), number, test.nodeid)


def _shared_resource(test: TestResult) -> str | None:
    """The path a collision-only finding shares with other workers' tests (None: not one)."""
    if test.flake is None or list(test.flake.kinds) != ["collision"]:
        return None
    facts = evidence_of(test.flake).get("shared")
    resource = facts.get("resource") if isinstance(facts, dict) else None
    return resource if isinstance(resource, str) and resource else None


def rank_groups(tests: Iterable[TestResult]) -> tuple[Group, ...]:
    """Findings as groups (see :class:`Group`), what CI sees first: the
    parametrizations of a test function that fail alike, and the tests that only
    collide over one path several workers use (isolation probed it once)."""
    by_key: dict[tuple[Any, ...], list[TestResult]] = {}
    for t in tests:
        if t.status not in FINDINGS:
            continue
        kinds = t.flake.kinds if t.flake is not None else ()
        if (resource := _shared_resource(t)) is not None:
            key: tuple[Any, ...] = ("shared", resource, t.status, t.exposure)
        else:
            key = (function_of(t.nodeid), t.status, kinds, _signature(t), t.exposure)
        by_key.setdefault(key, []).append(t)
    groups = [
        Group(tuple(sorted(members, key=_is_lead)), members[0].exposure or "order")
        for members in by_key.values()
    ]
    return tuple(sorted(groups, key=rank_key))


def test_exposure(status: str, flake: Flake | None, *, waiting: bool = False) -> str | None:
    """:func:`hermetic_hunt.models.exposure` of a test, from its status and flake
    (``waiting``: as if it did not fail at today's date)."""
    if status not in FINDINGS:
        return None
    evidence = evidence_of(flake)
    dates = evidence.get("dates")
    fails_now = dates.get("fails_now") is True if isinstance(dates, dict) else None
    return exposure(
        flake.kinds if flake is not None else (),
        status=status,
        default_order=evidence.get("default_order") is True,
        fails_now=False if waiting else fails_now,
        past_only=isinstance(dates, dict) and dates.get("past_only") is True,
    )


def calendar_dates(test: TestResult) -> dict[str, Any] | None:
    """The ``dates`` fact of a finding the calendar decides (None: any other test).

    The calendar decides it when its exposure comes from its kinds' ``calendar``
    rule (:func:`hermetic_hunt.models.exposure`: it would wait for its date
    were it not failing today) and isolation replayed it at the coming dates.
    Its share of failing attempts then says how often the hunt's clock, drawn
    with weight on the instants where date code breaks, landed on its dates --
    nothing about how often a real run fails: what says that is its dates.
    """
    dates = evidence_of(test.flake).get("dates")
    if test.flake is None or not isinstance(dates, dict):
        return None
    waits = test_exposure(test.status, test.flake, waiting=True)
    return dates if waits in ("dates", "past") else None
