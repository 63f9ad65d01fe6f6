"""Why a test flakes: the decision procedure, one factor at a time (pure).

A :class:`Classifier` takes one test's attempts from a hunt, asks a
:class:`Prober` to run probes (sequences of attempts in a fresh process,
with explicit seed, start time and hash seed) and claims a kind only when a
probe showed it. Steps, in order (``docs/isolation.md`` has the long form):

1. *Alone*, with the failing attempt's seed, start time and hash seed,
   repeated (until the hunt's rate of the other outcome would have shown).
   Fails every time -> controlled by the sandbox: vary only the
   seed (``random``), only the start time (``time``), only
   ``PYTHONHASHSEED`` (``hash-order``); none of them -> ``brittle`` when the
   sequence before a passing attempt makes it pass (state-setters). Fails
   sometimes -> ``concurrency`` (identical inputs, different outcomes).
2. Passes alone -> run it twice in one process (``self-polluting``), then
   the sequence that preceded the failure on its worker: fails -> ``victim``,
   polluters by delta debugging (:mod:`hermetic_hunt.isolate.search`), then
   cleaners among the other tests.
3. Neither -> many identical reruns (seeded and record mode), other hash
   seeds, else ``unexplained`` with what was tried.

Order-dependent claims need their reproducer to show three times in a row,
so that a test failing at random now and then is not taken for a victim.

Blocked network calls seen by a probe make ``network``. The work is split in
two phases (:meth:`Classifier.environment`, :meth:`Classifier.order`): the
driver runs phase 1 for every flake before phase 2 starts, so the repeated
alone runs of one flake never overlap with sequences (of other flakes) that
contain that test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hermetic_hunt.isolate.search import Budget, BudgetExceeded
from hermetic_hunt.models import KINDS, Reproducer, ReproStep, Violation
from hermetic_hunt.seeds import probe_hash_seed

FAILING = ("failed", "crashed", "xpassed")
#: Most attempt ids listed in a flake's evidence, per outcome.
EVIDENCE_IDS = 20


@dataclass(frozen=True)
class Attempt:
    """One stored attempt, as isolation needs it."""

    attempt_id: int
    run_id: int
    worker: str
    position: int
    execution: int
    nodeid: str
    outcome: str
    seed: int | None
    now: float | None
    mode: str
    hash_seed: int | None
    exc_type: str = ""
    location: str = ""
    message: str = ""
    violations: tuple[Violation, ...] = ()
    has_journal: bool = False

    @property
    def failed(self) -> bool:
        return self.outcome in FAILING


@dataclass(frozen=True)
class ProbeStep:
    """One attempt of a probe. ``attempt_id``: the hunt attempt it re-runs
    (its journal is replayed when ``mode`` is ``record`` and one is stored)."""

    nodeid: str
    seed: int | None
    now: float | None
    mode: str = "seeded"
    attempt_id: int | None = None

    @classmethod
    def of(cls, attempt: Attempt, **changes: Any) -> ProbeStep:
        values: dict[str, Any] = {
            "nodeid": attempt.nodeid, "seed": attempt.seed, "now": attempt.now,
            "mode": attempt.mode, "attempt_id": attempt.attempt_id,
        }  # fmt: skip
        values.update(changes)
        return cls(**values)


@dataclass(frozen=True)
class Probe:
    purpose: str
    steps: tuple[ProbeStep, ...]
    hash_seed: int


@dataclass(frozen=True)
class StepResult:
    nodeid: str
    outcome: str
    exc_type: str = ""
    location: str = ""
    message: str = ""
    violations: tuple[Violation, ...] = ()
    journal: bytes | None = None


@dataclass(frozen=True)
class ProbeResult:
    """``status``: ``completed`` (every step ran), ``timeout`` or ``error``."""

    status: str
    steps: tuple[StepResult, ...] = ()
    duration: float = 0.0
    detail: str = ""

    @property
    def last(self) -> StepResult | None:
        return self.steps[-1] if self.status == "completed" and self.steps else None

    @property
    def outcome(self) -> str:
        """Of the probe's last step: passed | failed | timeout | error."""
        last = self.last
        if last is None:
            return self.status if self.status != "completed" else "error"
        return "failed" if last.outcome in FAILING else last.outcome


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
    budget: int = 200
    base_seed: int = 0
    alone_runs: int = 3
    variations: int = 3
    reruns: int = 6
    record_reruns: int = 3
    confidence: float = 0.99
    max_raw_sequence: int = 20_000


@dataclass
class Verdict:
    """What isolation concluded about one test (one ``flakes`` row)."""

    nodeid: str
    kinds: list[str] = field(default_factory=list)
    status: str = "isolated"  # isolated | partial | not-collected | error
    reproducer: Reproducer | None = None
    polluters: list[list[str]] = field(default_factory=list)
    cleaners: list[str] = field(default_factory=list)
    state_setters: list[list[str]] = field(default_factory=list)
    confirmed: bool | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    probes: list[tuple[Probe, ProbeResult]] = field(default_factory=list)

    @property
    def probe_seconds(self) -> float:
        return sum(result.duration for _, result in self.probes)


def choose_target(failing: Sequence[Attempt]) -> Attempt:
    """The failing attempt to explain: most common signature, shortest history."""
    counts: dict[tuple[str, str], int] = {}
    for a in failing:
        counts[(a.exc_type, a.location)] = counts.get((a.exc_type, a.location), 0) + 1
    best = max(counts.values())
    return min(
        (a for a in failing if counts[(a.exc_type, a.location)] == best),
        key=lambda a: (a.position, a.attempt_id),
    )


def dedupe(steps: Sequence[ProbeStep]) -> list[ProbeStep]:
    """Keep each test's last run before the target, in order."""
    last = {step.nodeid: index for index, step in enumerate(steps)}
    return [step for index, step in enumerate(steps) if last[step.nodeid] == index]


class Classifier:
    """Classifies one test; one thread drives it (the prober may be shared)."""

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
        self.failing = [a for a in attempts if a.failed]
        self.passing = [a for a in attempts if a.outcome in ("passed", "xfailed")]
        self.violating = [a for a in attempts if a.violations]
        self.verdict = Verdict(nodeid)
        self.target = choose_target(self.failing) if self.failing else None
        self.needs: set[str] = set()  # work left for phase 2: "order", "brittle"
        self.alone_numbers: list[int] = []  # steps of the target's alone runs
        self.collected: frozenset[str] = frozenset()
        self._why: list[dict[str, Any]] = []
        self._done = False

    # -- probing -------------------------------------------------------------

    @property
    def nodeid(self) -> str:
        return self.verdict.nodeid

    def hash_seed_of(self, attempt: Attempt) -> int:
        if attempt.hash_seed is not None:
            return attempt.hash_seed
        return probe_hash_seed(self.settings.base_seed, 0)

    def probe(self, purpose: str, steps: Sequence[ProbeStep], hash_seed: int) -> ProbeResult:
        self.budget.spend()
        probe = Probe(purpose, tuple(steps), hash_seed)
        result = self.prober.run(probe)
        self.verdict.probes.append((probe, result))
        return result

    def probe_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        allowed = list(probes[: self.budget.left])
        for _ in allowed:
            self.budget.spend()
        results = self.prober.run_many(allowed)
        self.verdict.probes.extend(zip(allowed, results, strict=True))
        if len(allowed) < len(probes):
            raise BudgetExceeded(f"probe budget of {self.budget.limit} exhausted")
        return results

    def step_no(self) -> int:
        """Number of the latest probe (``isolation_steps.step``)."""
        return len(self.verdict.probes)

    def same(self, result: ProbeResult) -> bool:
        """The probe's last step failed like the target attempt did."""
        last, target = result.last, self.target
        if last is None or target is None or last.outcome not in FAILING:
            return False
        return (last.exc_type, last.location) == (target.exc_type, target.location)

    def claim(self, kind: str, why: str, probes: Sequence[int]) -> None:
        assert kind in KINDS, kind
        if kind not in self.verdict.kinds:
            self.verdict.kinds.append(kind)
        self._why.append({"kind": kind, "why": why, "probes": sorted(set(probes))})

    def record(self, what: str, found: list[str], probes: Sequence[int]) -> None:
        """Evidence that is not a kind (cleaners)."""
        self._why.append({what: found, "probes": list(probes)})

    def reproduce(self, steps: Sequence[ProbeStep], hash_seed: int, confirmed: bool) -> None:
        target = self.target
        self.verdict.reproducer = Reproducer(
            steps=tuple(ReproStep(s.nodeid, s.seed, s.now, s.mode, s.attempt_id) for s in steps),
            hash_seed=hash_seed,
            exc_type=target.exc_type if target else "",
            location=target.location if target else "",
            message=target.message if target else "",
            run_id=(target or self._any_attempt()).run_id,
        )
        self.verdict.confirmed = confirmed

    def _any_attempt(self) -> Attempt:
        return (self.failing or self.violating or self.passing)[0]

    # -- phases ----------------------------------------------------------------

    def environment(self) -> None:
        """Phase 1: alone runs, sandbox factors, concurrency, network."""
        self._guarded(self._environment)

    def order(self) -> None:
        """Phase 2: sequences (victim, self-polluting, brittle, last resorts)."""
        if not self._done:
            self._guarded(self._order)

    def fail(self, error: BaseException) -> None:
        """A bug or an unexpected error stopped this test's isolation."""
        if self.verdict.status != "error":
            self.verdict.status = "error"
            self.verdict.notes.append(f"isolation failed: {error!r}")
        self._done = True

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BudgetExceeded as exc:
            self.verdict.status = "partial"
            if not any("budget" in note for note in self.verdict.notes):
                self.verdict.notes.append(f"{exc} (--hermetic-hunt-isolate-budget): partial result")
            self._done = True

    def _environment(self) -> None:
        anchor = self.target or (self.violating[0] if self.violating else None)
        if anchor is None:
            self._done = True
            return
        collected = self.prober.collected(self.hash_seed_of(anchor))
        if collected is None:
            self.verdict.status = "error"
            self.verdict.notes.append("the probe process could not start (see the steps' detail)")
            self._done = True
            return
        if self.nodeid not in collected:
            self.verdict.status = "not-collected"
            self.verdict.notes.append(
                f"{self.nodeid} is not collected any more (renamed or deleted?): not isolated"
            )
            self._done = True
            return
        self.collected = collected
        if self.target is None:
            self._network_only()
            self._done = True
            return
        from hermetic_hunt.isolate import alone as steps

        steps.alone(self)
        if not self.needs:
            self._network()

    def _order(self) -> None:
        from hermetic_hunt.isolate import order as steps

        if "brittle" in self.needs:
            steps.brittle(self)
        if "order" in self.needs:
            steps.order_dependent(self)
        self._network()

    # -- network ---------------------------------------------------------------

    def _network(self) -> None:
        if "network" in self.verdict.kinds:
            return
        shown = [
            i
            for i, (_, result) in enumerate(self.verdict.probes, start=1)
            if result.last and result.last.violations
        ]
        if shown:
            self._claim_network(shown)
            return
        if not self.violating:
            return
        source = self.violating[0]
        result = self.probe("network", [ProbeStep.of(source)], self.hash_seed_of(source))
        if result.last and result.last.violations:
            self._claim_network([self.step_no()])

    def _claim_network(self, probes: list[int]) -> None:
        index = probes[0]
        last = self.verdict.probes[index - 1][1].last
        assert last is not None
        calls = sorted({v.describe() for v in last.violations})
        self.claim("network", f"the network guard blocked {', '.join(calls)}", probes)

    def _network_only(self) -> None:
        """A test that never failed but whose calls were blocked."""
        source = self.violating[0]
        step = ProbeStep.of(source)
        hash_seed = self.hash_seed_of(source)
        runs = [self.probe("network", [step], hash_seed) for _ in range(2)]
        first = self.step_no() - 1
        shown = [i for i, r in enumerate(runs, start=first) if r.last and r.last.violations]
        if shown:
            self._claim_network(shown)
            self.reproduce([step], hash_seed, confirmed=len(shown) == 2)
        else:
            self.claim("unexplained", "blocked calls in the hunt, none when run alone", [])

    # -- result ------------------------------------------------------------------

    def result(self) -> Verdict:
        v = self.verdict
        if not v.kinds and v.status in ("isolated", "partial") and self.target is not None:
            tried = sorted({p.purpose for p, _ in v.probes})
            why = f"no probe reproduced a cause (tried: {', '.join(tried)})"
            if v.status == "isolated":
                self.claim("unexplained", why, [])
            else:
                v.notes.append(why)
        v.kinds = [k for k in KINDS if k in v.kinds]
        v.evidence = self._evidence()
        return v

    def _evidence(self) -> dict[str, Any]:
        target = self.target
        runs = sorted({a.run_id for a in (*self.failing, *self.passing, *self.violating)})
        calls = sorted({v.describe() for a in self.violating for v in a.violations})
        return {
            "runs": runs,
            "target_attempt": target.attempt_id if target else None,
            "signature": f"{target.exc_type} at {target.location}" if target else None,
            "failed": len(self.failing),
            "passed": len(self.passing),
            "failing_attempts": [a.attempt_id for a in self.failing[:EVIDENCE_IDS]],
            "passing_attempts": [a.attempt_id for a in self.passing[:EVIDENCE_IDS]],
            "hash_seed_known": bool(target and target.hash_seed is not None),
            "blocked_calls": calls,
            "journals": [a.attempt_id for a in self.failing if a.has_journal][:EVIDENCE_IDS],
            "verdicts": self._why,
        }
