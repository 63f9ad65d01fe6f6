"""Why a test flakes: the decision procedure, one factor at a time (pure).

A :class:`Classifier` takes one test's attempts from a hunt, asks a
:class:`Prober` to run probes (sequences of attempts in a fresh process,
with explicit seed, start time and hash seed) and claims a kind only when a
probe showed it. The steps, in order, are in docs/isolation.md, "The
procedure, one factor at a time"; order-dependent claims need their
reproducer to show three times in a row.

The work is split in three phases (:meth:`Classifier.environment`,
:meth:`Classifier.order`, :meth:`Classifier.extras`): the driver runs phase
1 for every flake before phase 2 starts, so the repeated alone runs of one
flake never overlap with sequences (of other flakes) that contain that
test; phase 3 (cleaners) adds evidence once every flake has its verdict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from hermetic_hunt.findings import Finding
from hermetic_hunt.isolate import alone, collision, dates, order, shared
from hermetic_hunt.isolate.case import EVIDENCE_IDS, Case, TimeBudgetExceeded
from hermetic_hunt.isolate.search import BudgetExceeded
from hermetic_hunt.kinds import KINDS
from hermetic_hunt.models import Step, exposure, is_plain


class Classifier(Case):
    """Classifies one test: phase 1, then phase 2, then :meth:`result`."""

    # -- phases ----------------------------------------------------------------

    def environment(self) -> None:
        """Phase 1: alone runs, sandbox factors, concurrency, network."""
        self._guarded(self._environment)

    def order(self) -> None:
        """Phase 2: sequences (victim, self-polluting, brittle, last resorts)."""
        if not self._done:
            self._guarded(self._order)

    def extras(self) -> None:
        """Phase 3: evidence beyond the verdict (cleaners); the verdict stays."""
        if not self.wants_extras:
            return
        self.needs.discard("cleaners")
        with contextlib.suppress(BudgetExceeded):  # find_cleaners keeps what it found
            order.cleaners(self)

    @property
    def wants_extras(self) -> bool:
        return "cleaners" in self.needs and self.finding.status != "error"

    def fail(self, error: BaseException) -> None:
        """A bug or an unexpected error stopped this test's isolation."""
        if self.finding.status != "error":
            self.finding.status = "error"
            self.finding.notes.append(f"isolation failed: {error!r}")
        self._done = True

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BudgetExceeded as exc:
            self._done = True
            if isinstance(exc, TimeBudgetExceeded) and not self.finding.probes:
                self.finding.status = "pending"
                self.finding.notes.append(
                    f"not isolated: the {exc} before it started "
                    "(--hermetic-hunt-isolate-budget); finish with: hermetic-hunt isolate"
                )
                return
            self.finding.status = "partial"
            if not any("budget" in note for note in self.finding.notes):
                self.finding.notes.append(f"{exc} (--hermetic-hunt-isolate-budget): partial result")

    def _environment(self) -> None:
        self._done = True  # until the test is known to reach phase 2
        anchor = self.target or (self.violating[0] if self.violating else None)
        if anchor is None:
            if self.explained:
                # Another worker explains every failure; it may have hidden that the
                # test is not idempotent (a twice round's first run broken too).
                order.twice_hidden(self)
            return
        collected = self.prober.collected(self.hash_seed_of(anchor))
        if collected is None:
            self.finding.status = "error"
            self.finding.notes.append("the probe process could not start (see the steps' detail)")
            return
        if self.nodeid not in collected:
            self.finding.status = "not-collected"
            self.finding.notes.append(
                f"{self.nodeid} is not collected any more (renamed or deleted?): not isolated"
            )
            return
        self.collected = collected
        if self.target is None:
            self._network_only()
            return
        self._done = False
        alone.alone(self)
        if self._start_time_decides():
            dates.check(self)
        if not self.needs:
            self._network()

    def _start_time_decides(self) -> bool:
        """``time`` shown by varying the start time (not a clock profile or stress):
        the calendar decides it, so the coming dates say when CI will see it."""
        shown = {n for claim in self._why if claim.get("kind") == "time" for n in claim["probes"]}
        return any(
            probe.purpose.startswith("vary start time")
            for n, (probe, _) in enumerate(self.finding.probes, start=1)
            if n in shown
        )

    def _order(self) -> None:
        # (a collision over a path several workers share is claimed already, or the
        # target crossed one: .shared; no pair of single tests needed)
        pair = "order" in self.needs and "collision" not in self.finding.kinds
        pair = pair and not any(any(a is self.target for a in c.left) for c in self.crossings)
        pair = pair and not self.fresh  # (a probe pair forks from the collected session)
        if pair and collision.check(self):
            self.needs.discard("order")  # another worker's test, not this process's order
        if "brittle" in self.needs:
            order.brittle(self)
        if "order" in self.needs:
            order.order_dependent(self)
        order.not_idempotent(self)
        self._network()
        if self.finding.kinds and {"victim", "brittle"} & set(self.finding.kinds):
            order.default_order(self)

    # -- network ---------------------------------------------------------------

    def _network(self) -> None:
        if "network" in self.finding.kinds:
            return
        shown = [
            i
            for i, (_, result) in enumerate(self.finding.probes, start=1)
            if result.last and result.last.violations
        ]
        if shown:
            self._claim_network(shown)
            return
        if not self.violating:
            return
        source = self.violating[0]
        result = self.probe("network", [Step.of(source)], self.hash_seed_of(source))
        if result.last and result.last.violations:
            self._claim_network([self.step_no()])

    def _claim_network(self, probes: list[int]) -> None:
        index = probes[0]
        last = self.finding.probes[index - 1][1].last
        assert last is not None
        calls = sorted({v.describe() for v in last.violations})
        self.claim("network", f"the network guard blocked {', '.join(calls)}", probes)

    def _network_only(self) -> None:
        """A test that never failed but whose calls were blocked."""
        source = self.violating[0]
        step = Step.of(source)
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

    def result(self) -> Finding:
        v = self.finding
        if not v.kinds and v.status == "isolated" and self.crossings:
            shared.crossed_only(self)
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
        failing = [*self.failing, *self.explained]
        # (a plain run that failed because of another worker still failed in a plain run)
        repeated_only = self.repeated_only and not any(is_plain(a.repeat) for a in self.explained)
        runs = sorted({a.run_id for a in (*failing, *self.passing, *self.violating)})
        calls = sorted({v.describe() for a in self.violating for v in a.violations})
        return {
            "runs": runs,
            "target_attempt": target.attempt_id if target else None,
            "signature": f"{target.exc_type} at {target.location}" if target else None,
            "failed": len(failing),
            "passed": len(self.passing),
            "failing_attempts": [a.attempt_id for a in failing[:EVIDENCE_IDS]],
            "passing_attempts": [a.attempt_id for a in self.passing[:EVIDENCE_IDS]],
            "hash_seed_known": bool(target and target.hash_seed is not None),
            "blocked_calls": calls,
            "journals": [a.attempt_id for a in self.failing if a.has_journal][:EVIDENCE_IDS],
            "verdicts": self._why,
            "repeated_only": repeated_only,
            "default_order": None,
            # A test that never failed (its network calls were blocked, it
            # passed) shows CI no failure to rank.
            "exposure": exposure(
                self.finding.kinds,
                status="not-idempotent" if repeated_only else "flaky",
                default_order=self.facts.get("default_order"),
                fails_now=(self.facts.get("dates") or {}).get("fails_now"),
                past_only=(self.facts.get("dates") or {}).get("past_only") is True,
            )
            if failing
            else None,
            **self.facts,
        }
