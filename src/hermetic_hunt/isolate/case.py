"""One test under isolation: the state the phases share, and how they probe.

:class:`Case` holds one flaky test's attempts, the probes run for it and
what they showed; the phases (:mod:`.alone`, :mod:`.order`) work on a case
and :class:`~hermetic_hunt.isolate.classifier.Classifier` drives them. A
:class:`Prober` runs probes (:mod:`.probes`), a :class:`History` reads the
hunt's record (:mod:`hermetic_hunt.store.isolation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hermetic_hunt.findings import Finding, Probe, ProbeResult
from hermetic_hunt.isolate.search import Budget, BudgetExceeded
from hermetic_hunt.models import (
    DEFAULT_ISOLATE_BUDGET,
    FAILING,
    KINDS,
    PASSING,
    Attempt,
    Reproducer,
    Step,
)
from hermetic_hunt.seeds import probe_hash_seed

#: Most attempt ids listed in a flake's evidence, per outcome.
EVIDENCE_IDS = 20


def choose_target(failing: Sequence[Attempt]) -> Attempt:
    """The failing attempt to explain: most common signature, shortest history."""
    counts: dict[tuple[str, str], int] = {}
    for a in failing:
        counts[a.signature] = counts.get(a.signature, 0) + 1
    best = max(counts.values())
    return min(
        (a for a in failing if counts[a.signature] == best),
        key=lambda a: (a.position, a.attempt_id or 0),
    )


def dedupe(steps: Sequence[Step]) -> list[Step]:
    """Keep each test's last run before the target, in order."""
    last = {step.nodeid: index for index, step in enumerate(steps)}
    return [step for index, step in enumerate(steps) if last[step.nodeid] == index]


class Prober(Protocol):
    """Runs probes in fresh processes (see :mod:`hermetic_hunt.isolate.probes`)."""

    def run(self, probe: Probe) -> ProbeResult: ...

    def run_many(self, probes: Sequence[Probe]) -> list[ProbeResult]: ...

    def collected(self, hash_seed: int | None) -> frozenset[str] | None: ...


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
        plain = [a for a in attempts if not a.repeat]
        self.failing = [a for a in plain if a.failed]
        self.passing = [a for a in plain if a.outcome in PASSING]
        if not self.failing:
            # Only a twice round's second run failed: explain that run.
            self.failing = [a for a in attempts if a.repeat == 2 and a.failed]
        self.violating = [a for a in plain if a.violations]
        self.finding = Finding(nodeid)
        self.target = choose_target(self.failing) if self.failing else None
        self.needs: set[str] = set()  # work left for phase 2: "order", "brittle"
        self.alone_numbers: list[int] = []  # steps of the target's alone runs
        self.collected: frozenset[str] = frozenset()
        self._why: list[dict[str, Any]] = []
        self._done = False

    # -- probing -------------------------------------------------------------

    @property
    def nodeid(self) -> str:
        return self.finding.nodeid

    def hash_seed_of(self, attempt: Attempt) -> int:
        if attempt.hash_seed is not None:
            return attempt.hash_seed
        return probe_hash_seed(self.settings.base_seed, 0)

    def probe(self, purpose: str, steps: Sequence[Step], hash_seed: int) -> ProbeResult:
        self.budget.spend()
        probe = Probe(purpose, tuple(steps), hash_seed)
        result = self.prober.run(probe)
        self.finding.probes.append((probe, result))
        return result

    def probe_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        allowed = list(probes[: self.budget.left])
        for _ in allowed:
            self.budget.spend()
        results = self.prober.run_many(allowed)
        self.finding.probes.extend(zip(allowed, results, strict=True))
        if len(allowed) < len(probes):
            raise BudgetExceeded(f"probe budget of {self.budget.limit} exhausted")
        return results

    def step_no(self) -> int:
        """Number of the latest probe (``isolation_steps.step``)."""
        return len(self.finding.probes)

    def same(self, result: ProbeResult) -> bool:
        """The probe's last step failed like the target attempt did."""
        last, target = result.last, self.target
        if last is None or target is None or last.outcome not in FAILING:
            return False
        return last.signature == target.signature

    def claim(self, kind: str, why: str, probes: Sequence[int]) -> None:
        assert kind in KINDS, kind
        if kind not in self.finding.kinds:
            self.finding.kinds.append(kind)
        self._why.append({"kind": kind, "why": why, "probes": sorted(set(probes))})

    def record(self, what: str, found: list[str], probes: Sequence[int]) -> None:
        """Evidence that is not a kind (cleaners)."""
        self._why.append({what: found, "probes": list(probes)})

    def reproduce(self, steps: Sequence[Step], hash_seed: int, confirmed: bool) -> None:
        target = self.target
        self.finding.reproducer = Reproducer(
            steps=tuple(steps),
            hash_seed=hash_seed,
            exc_type=target.exc_type if target else "",
            location=target.location if target else "",
            message=target.message if target else "",
            run_id=(target or self._any_attempt()).run_id,
        )
        self.finding.confirmed = confirmed

    def _any_attempt(self) -> Attempt:
        return (self.failing or self.violating or self.passing)[0]
