"""One test under isolation: the state the phases share, and how they probe.

A :class:`Case` per test; a :class:`Prober` runs probes (:mod:`.probes`), a
:class:`History` reads the hunt's record (:mod:`hermetic_hunt.store.isolation`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hermetic_hunt.findings import Finding, Probe, ProbeResult
from hermetic_hunt.isolate.search import Budget, BudgetExceeded
from hermetic_hunt.kinds import KINDS
from hermetic_hunt.models import (
    DEFAULT_ISOLATE_BUDGET,
    FAILING,
    PASSING,
    REPEATED_RUN,
    Attempt,
    Leak,
    Reproducer,
    Step,
    format_seconds,
    is_plain,
)
from hermetic_hunt.seeds import Dates, probe_hash_seed

#: Most attempt ids listed in a flake's evidence, per outcome.
EVIDENCE_IDS = 20


def choose_target(failing: Sequence[Attempt]) -> Attempt:
    """The failing attempt to explain: most common signature, shortest history."""
    counts = Counter(a.signature for a in failing)
    best = max(counts.values())
    return min(
        (a for a in failing if counts[a.signature] == best),
        key=lambda a: (a.position, a.attempt_id or 0),
    )


def hash_seed_or_default(hash_seed: int | None, base_seed: int) -> int:
    """A recorded ``PYTHONHASHSEED``, else the run's first derived one."""
    return hash_seed if hash_seed is not None else probe_hash_seed(base_seed, 0)


def to_explain(attempts: Sequence[Attempt]) -> tuple[list[Attempt], bool]:
    """The failures to explain: the plain runs' failures, else (True: only those) a
    twice round's failing second runs."""
    failing = [a for a in attempts if is_plain(a.repeat) and a.failed]
    if failing:
        return failing, False
    return [a for a in attempts if a.repeat == REPEATED_RUN and a.failed], True


def dedupe(steps: Sequence[Step]) -> list[Step]:
    """Keep each test's last run before the target, in order."""
    last = {step.nodeid: index for index, step in enumerate(steps)}
    return [step for index, step in enumerate(steps) if last[step.nodeid] == index]


class Prober(Protocol):
    """Runs probes in fresh processes (see :mod:`hermetic_hunt.isolate.probes`)."""

    def run(self, probe: Probe) -> ProbeResult: ...

    def run_many(self, probes: Sequence[Probe]) -> list[ProbeResult]: ...

    def collected(self, hash_seed: int | None) -> frozenset[str] | None: ...

    def run_together(self, probes: Sequence[Probe], after: str = "") -> list[ProbeResult]:
        """Run ``probes`` in processes of their own started at the same moment
        (``after``: the first once that path exists)."""
        ...


class History(Protocol):
    """The hunt's record, read by the classifier."""

    def preceding(self, attempt: Attempt) -> list[Attempt]:
        """Attempts before ``attempt`` on its worker process, in order."""
        ...

    def tests(self) -> list[str]:
        """Every test of the run, in collection order."""
        ...

    def representative(self, nodeid: str) -> Attempt | None:
        """An attempt of ``nodeid`` in the run (a passing one if any)."""
        ...

    def leaks(self) -> dict[str, list[Leak]]:
        """What each test of the run left behind at the end of a round, by nodeid."""
        ...

    def round_attempts(self, attempt: Attempt) -> list[Attempt]:
        """Every attempt of ``attempt``'s round, on every worker (its run's)."""
        ...

    def in_default_round(self, nodeid: str) -> Attempt | None:
        """``nodeid``'s attempt in the run's default round (a plain run), if it had one."""
        ...

    def writers(self) -> frozenset[str]:
        """The tests that wrote a path (``Attempt.writes``) in some attempt of the run."""
        ...


class TimeBudgetExceeded(BudgetExceeded):
    """Isolation's overall time budget ran out (no new probe starts)."""


@dataclass(frozen=True)
class Deadline:
    """Isolation's overall time budget, shared by every case (``at``: a perf_counter time)."""

    at: float
    seconds: float

    @property
    def passed(self) -> bool:
        return time.perf_counter() >= self.at


@dataclass(frozen=True)
class ClassifySettings:
    budget: int = DEFAULT_ISOLATE_BUDGET
    base_seed: int = 0
    alone_runs: int = 3
    variations: int = 3
    reruns: int = 6
    record_reruns: int = 3
    confidence: float = 0.99
    max_raw_sequence: int = 20_000
    deadline: Deadline | None = None
    #: Most runs of a probe whose failure only a leaked thread makes likely.
    thread_repeats: int = 30
    #: The run's rootdir: paths in findings are shown relative to it.
    rootdir: str = ""
    #: Where varied start times are drawn (the hunt's :attr:`Settings.dates`)
    #: and the run's today over the horizon (:attr:`Settings.today_window`):
    #: the coming dates a ``time`` flake is replayed at.
    dates: Dates = field(default_factory=Dates.from_now)
    today_window: Dates = field(default_factory=Dates.from_now)


class Case:
    """One test under isolation: its attempts, its probes so far, what they showed.

    The phases (:mod:`.alone`, :mod:`.order`) take a case, run probes through it
    (counted against the budget, kept as evidence) and claim kinds on it;
    :class:`~hermetic_hunt.isolate.classifier.Classifier` drives them.
    One thread drives a case (the prober may be shared).
    """

    def __init__(
        self,
        nodeid: str,
        attempts: Sequence[Attempt],
        history: History,
        prober: Prober,
        settings: ClassifySettings,
    ) -> None:
        self.history = history
        self.prober = prober
        self.settings = settings
        self.budget = Budget(settings.budget)
        self.attempts = list(attempts)
        #: Failures explained before this case is isolated: what other workers did
        #: to it (:mod:`.shared`); the case isolates the rest.
        self.explained: list[Attempt] = []
        #: The shared resources its failures crossed (:class:`.shared.Crossed`).
        self.crossings: list[Any] = []
        #: Its probes run in a process that imports the suite again, not in a fork of
        #: the collected session (:func:`.alone.stale`).
        self.fresh = False
        self._sort()
        self.finding = Finding(nodeid)
        self.needs: set[str] = set()  # work left for phase 2: "order", "brittle"
        self.alone_numbers: list[int] = []  # steps of the target's alone runs
        self.collected: frozenset[str] = frozenset()
        self._why: list[dict[str, Any]] = []
        #: Why the last probe was refused (a budget), for the notes.
        self.stop_reason = ""
        #: Evidence that is neither a kind nor a probe: leaks, dates, groups.
        self.facts: dict[str, Any] = {}
        #: Polluter sets and search repeats, for the cleaner search (phase 3).
        self.cleaner_work: tuple[list[list[Step]], Step, int, int] | None = None
        self._done = False

    def _sort(self) -> None:
        """Failing, passing and violating attempts; the target (what is left to explain)."""
        gone = {id(a) for a in self.explained}
        attempts = [a for a in self.attempts if id(a) not in gone]
        plain = [a for a in attempts if is_plain(a.repeat)]
        self.passing = [a for a in plain if a.outcome in PASSING]
        self.failing, repeated = to_explain(attempts)
        #: It never failed in a plain run: only as a twice round's second run.
        self.repeated_only = repeated and bool(self.failing)
        self.violating = [a for a in plain if a.violations]
        self.target = choose_target(self.failing) if self.failing else None

    def set_aside(self, explained: Sequence[Attempt]) -> None:
        """These failures are explained already (:mod:`.shared`): the case isolates
        the others (none left: nothing more to do)."""
        self.explained.extend(explained)
        self._sort()

    # -- probing -------------------------------------------------------------

    @property
    def nodeid(self) -> str:
        return self.finding.nodeid

    def hash_seed_of(self, attempt: Attempt) -> int:
        return hash_seed_or_default(attempt.hash_seed, self.settings.base_seed)

    def _spend(self, count: int = 1) -> None:
        """Count probes against the budgets; BudgetExceeded (reason kept) when over."""
        deadline = self.settings.deadline
        try:
            if deadline is not None and deadline.passed:
                seconds = format_seconds(round(deadline.seconds, 1))
                raise TimeBudgetExceeded(f"isolation time budget of {seconds} reached")
            for _ in range(count):
                self.budget.spend()
        except BudgetExceeded as exc:
            self.stop_reason = str(exc)
            raise

    def probe(
        self,
        purpose: str,
        steps: Sequence[Step],
        hash_seed: int,
        collect_at: float | None = None,
        *,
        unforked: bool = False,
    ) -> ProbeResult:
        self._spend()
        probe = Probe(purpose, tuple(steps), hash_seed, collect_at, unforked or self.fresh)
        result = self.prober.run(probe)
        self.finding.probes.append((probe, result))
        return result

    def probe_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        allowed = list(probes[: self.budget.left])
        if self.fresh:
            allowed = [replace(p, unforked=True) for p in allowed]
        self._spend(len(allowed))
        results = self.prober.run_many(allowed)
        self.finding.probes.extend(zip(allowed, results, strict=True))
        if len(allowed) < len(probes):
            self.stop_reason = f"probe budget of {self.budget.limit} exhausted"
            raise BudgetExceeded(self.stop_reason)
        return results

    def probe_together(
        self, purpose: str, sides: Sequence[Sequence[Step]], hash_seed: int, after: str = ""
    ) -> list[ProbeResult]:
        """One probe per side, each in its own process, all started at the same moment
        (``after``: the first side once that path exists)."""
        self._spend(len(sides))
        probes = [Probe(purpose, tuple(steps), hash_seed) for steps in sides]
        results = self.prober.run_together(probes, after)
        self.finding.probes.extend(zip(probes, results, strict=True))
        return results

    def leaks_of(self, nodeid: str) -> list[Leak]:
        """What ``nodeid`` left behind at the end of a round in the hunt."""
        return self.history.leaks().get(nodeid, [])

    def step_no(self) -> int:
        """Number of the latest probe (``isolation_steps.step``)."""
        return len(self.finding.probes)

    def same(self, result: ProbeResult) -> bool:
        """The probe's last step failed like the target attempt did."""
        return self.same_attempt(result.last)

    def same_attempt(self, attempt: Attempt | None) -> bool:
        """``attempt`` failed like the target attempt did."""
        target = self.target
        if attempt is None or target is None or attempt.outcome not in FAILING:
            return False
        return attempt.signature == target.signature

    @property
    def fail_rate(self) -> float:
        """The hunt's rate of the target's failure among this test's plain attempts."""
        total = len(self.failing) + len(self.passing)
        return len(self.failing) / total if total else 0.0

    def claim(self, kind: str, why: str, probes: Sequence[int]) -> None:
        assert kind in KINDS, kind
        if kind not in self.finding.kinds:
            self.finding.kinds.append(kind)
        self._why.append({"kind": kind, "why": why, "probes": sorted(set(probes))})

    def record(self, what: str, found: list[str], probes: Sequence[int]) -> None:
        """Evidence that is not a kind (cleaners)."""
        self._why.append({what: found, "probes": list(probes)})

    def reproduce(
        self,
        steps: Sequence[Step],
        hash_seed: int,
        confirmed: bool | None,
        *,
        together: Sequence[Step] = (),
        resource: str = "",
    ) -> None:
        target = self.target
        self.finding.reproducer = Reproducer(
            steps=tuple(steps),
            together=tuple(together),
            resource=resource,
            hash_seed=hash_seed,
            exc_type=target.exc_type if target else "",
            location=target.location if target else "",
            message=target.message if target else "",
            run_id=(target or self._any_attempt()).run_id,
        )
        self.finding.confirmed = confirmed

    def _any_attempt(self) -> Attempt:
        return (self.failing or self.explained or self.violating or self.passing)[0]
