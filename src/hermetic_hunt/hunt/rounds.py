"""A hunt's rounds: planned one at a time, each ending at a barrier.

The run loop -- :mod:`.local` at ``-n 0``, the xdist scheduler in
:mod:`.xdist` -- asks :meth:`Rounds.numbers` which rounds to run, plans each
(:meth:`Rounds.plan`: :func:`~hermetic_hunt.hunt.schedule.plan_round`, and a
stress round's busy processes) and hands every worker its :meth:`Rounds.job`.
A round ends when the last of its slices sent its end line
(:meth:`Rounds.slice_ended`); then, at its barrier (:meth:`Rounds.done`),
its attempts are stored and their step lines counted against the plan (a
round that does not add up makes the run ``incomplete``), the checkout is
checked for files the round left (:mod:`hermetic_hunt.engine.files`), its
leaks are stored, and the progress line is printed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from time import perf_counter
from typing import Any

from hermetic_hunt.engine.files import attribute
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.engine.stress import CpuStress
from hermetic_hunt.hunt.intake import RoundLeak
from hermetic_hunt.hunt.progress import line
from hermetic_hunt.hunt.schedule import RoundPlan, plan_round
from hermetic_hunt.hunt.state import HuntState
from hermetic_hunt.models import Leak, Settings, Step
from hermetic_hunt.seeds import round_now
from hermetic_hunt.store import attempts, runs


class Rounds:
    """The rounds of one hunt and their barrier (a part of its controller).

    ``completed`` counts the rounds whose barrier passed; ``incomplete`` lists
    the rounds whose step lines did not add up: ``(round, planned, received)``;
    ``seconds``: how long the rounds took (set when they end).
    """

    def __init__(self, hunt: HuntState) -> None:
        self.hunt = hunt
        self.completed = 0
        self.incomplete: list[tuple[int, int, int]] = []
        self.plans: dict[int, RoundPlan] = {}
        self.started = perf_counter()
        self.seconds = 0.0
        self._slices_left: dict[int, int] = {}
        self._planned: dict[int, int] = {}
        self._received: dict[int, int] = {}
        self._cut_short: set[int] = set()
        self._stress: CpuStress | None = None

    def numbers(self) -> Iterator[int]:
        """Global round numbers to run, honouring the round count or time budget."""
        s = self.hunt.settings
        local = 0
        deadline = self.started + (s.budget_seconds or 0.0)
        while self.hunt.error is None:
            if s.rounds is not None and local >= s.rounds:
                return
            if s.budget_seconds is not None and local > 0 and perf_counter() >= deadline:
                return
            yield s.shard.global_round(local)
            local += 1

    def plan(self, round_no: int, workers: int) -> RoundPlan:
        """Plan ``round_no`` and set up its conditions (a stress round starts its stress).

        Called right before the round runs; :meth:`done` ends them.
        """
        s, tests = self.hunt.settings, self.hunt.tests
        plan = plan_round(s.base_seed, round_no, tests, workers, s.order, s.time, s.mode)
        self.plans[round_no] = plan
        self._slices_left[round_no] = sum(1 for part in plan.slices if part)
        self._planned[round_no] = sum(map(len, plan.slices)) * (2 if plan.twice else 1)
        self._received[round_no] = 0
        self.end_stress()
        if plan.condition == "stress" and self.hunt.local_workers:
            # As many busy processes as the hunt has workers: the round's
            # tests get about half the CPU they would get on an idle machine.
            self._stress = CpuStress(self.hunt.workers)
            self._stress.start()
        return plan

    def end_stress(self) -> None:
        if self._stress is not None:
            self._stress.stop()
            self._stress = None

    def job(self, plan: RoundPlan, slot: int) -> Job:
        """Worker ``slot``'s share of a planned round."""
        tests = [self.hunt.tests[i] for i in plan.slices[slot]]
        job = make_job(self.hunt.settings, plan.round_no, slot, tests, plan.twice)
        stress = self._stress.running if self._stress is not None else 0
        return replace(job, condition=plan.condition, stress=stress)

    def received(self, round_no: int, steps: int) -> None:
        if round_no in self._received:
            self._received[round_no] += steps

    def slice_ended(self, round_no: int, message: dict[str, Any]) -> None:
        """A slice's end line: the round's barrier when it was the last one."""
        status = message.get("status")
        if status == "error":
            self.hunt.error = str(message.get("detail") or "a job stopped")
        if status != "completed":
            self._cut_short.add(round_no)
        left = self._slices_left.get(round_no, 0) - 1
        self._slices_left[round_no] = left
        if left == 0:
            with self.hunt.writing():
                self.done(round_no)

    def done(self, round_no: int) -> None:
        """Every worker finished ``round_no``: stress off, attempts stored and counted,
        files, leaks, progress."""
        hunt = self.hunt
        self.end_stress()
        hunt.intake.flush()  # a round counts as done once all its attempts are stored
        self._count_check(round_no)
        self.completed += 1
        self._check_files(round_no)
        hunt.intake.store_leaks(hunt.run_id, round_no)
        runs.set_run(hunt.store, hunt.run_id, rounds_done=self.completed)
        plan = self.plans.pop(round_no, None)
        self._slices_left.pop(round_no, None)
        if hunt.terminal.reporter is None or hunt.config.get_verbosity() < -1:
            return  # -q keeps one line per round; -qq none
        strategy = plan.strategy if plan is not None else ""
        if plan is not None and plan.condition != "exact":
            strategy = f"{strategy} · {plan.condition}"
        elapsed = perf_counter() - self.started
        hunt.terminal.line(
            line(self.completed, hunt.settings, strategy, hunt.intake.tallies, elapsed)
        )

    def _count_check(self, round_no: int) -> None:
        """A round whose step lines do not add up to its plan makes the run incomplete.

        Every slice sends one line per planned step (a crash's line, an
        empty one for a second run left out); fewer means attempts were lost,
        more that something else wrote lines. A round cut short (``-x``,
        Ctrl-C, an error) is not counted: its run says so already.
        """
        planned = self._planned.pop(round_no, None)
        received = self._received.pop(round_no, 0)
        if planned is None or round_no in self._cut_short or received == planned:
            return
        self.incomplete.append((round_no, planned, received))
        runs.set_run(self.hunt.store, self.hunt.run_id, incomplete=self.notes())

    def _check_files(self, round_no: int) -> None:
        """Files the round left in the checkout: each a leak of the attempt that wrote it."""
        hunt = self.hunt
        if hunt.files is None or not (changes := hunt.files.check()):
            return
        ran = attempts.read(hunt.store.conn, "WHERE a.run_id = ? AND a.round = ?",
                            (hunt.run_id, round_no))  # fmt: skip
        for change in changes:
            attempt, fits = attribute(change, ran)
            if change.temp and attempt is None:
                continue  # another process's, not the round's (engine/files.py)
            leak = hunt.files.leak(change)
            if fits > 1:
                # Not one attempt's: the report says so rather than guess.
                leak = Leak(leak.resource, leak.name, leak.change,
                            f"written while {fits} tests ran at once")  # fmt: skip
                attempt = None
            worker, position = (attempt.worker, attempt.position) if attempt else (None, None)
            hunt.intake.leaks.append(RoundLeak(round_no, worker, position, leak, persisted=True))

    def incomplete_text(self) -> str:
        """One line: the rounds that did not add up ('' when all did)."""
        return "; ".join(
            f"round {round_no} ran {received:,} of {planned:,} planned steps"
            for round_no, planned, received in self.incomplete
        )

    def notes(self) -> str:
        """The run row's note: rounds that did not add up, lines rejected."""
        texts = (self.incomplete_text(), self.hunt.intake.rejected_text())
        return "; ".join(t for t in texts if t)


def make_job(settings: Settings, round_no: int, slot: int, nodeids: Sequence[str],
             twice: bool) -> Job:  # fmt: skip
    """The job of worker ``slot`` in ``round_no``: its tests, in order (each twice in a row)."""
    runs = (1, 2) if twice else (1,)
    steps = tuple(Step(n, mode=settings.mode) for n in nodeids for _ in runs)
    repeats = tuple(r for _ in nodeids for r in runs) if twice else ()
    return Job(steps, round_no, start=round_now(settings.base_seed, round_no, slot, settings.dates),
               repeats=repeats)  # fmt: skip
