"""Running a job -- steps in order, in this process -- for rounds, probes and replays.

A :class:`Job` is what one process runs: a hunt round's slice on one worker,
an isolation probe, a replay's reproducer. :class:`StepRunner` runs its
steps in order inside an ordinary pytest session, through the same
:class:`~hermetic_hunt.engine.executor.AttemptExecutor` and sandbox
whatever the job, folds the reports into attempts and checks, after every
step, what it left behind (:mod:`hermetic_hunt.engine.leaks`). Rounds and
probes run it in a forked child (:mod:`hermetic_hunt.engine.fork`), a
replay in its own session.

Nodeids only ever *select among collected items*: a step naming a test that
is not collected raises :class:`~hermetic_hunt.errors.NotCollected`.
"""

from __future__ import annotations

import base64
import itertools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from hermetic_hunt import journal as journal_format
from hermetic_hunt.engine import wire
from hermetic_hunt.engine.executor import AttemptExecutor, Slot, Timeline
from hermetic_hunt.engine.leaks import RoundLeaks, Snapshot, Writes, fixture_label, stream_leak
from hermetic_hunt.engine.recorder import Fold
from hermetic_hunt.errors import NotCollected
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import Attempt, Failure, Leak, Step
from hermetic_hunt.seeds import attempt_now, attempt_seed
from hermetic_hunt.timing import CONDITIONS, Condition, profile_of
from hermetic_hunt.untrusted import items, number, whole

#: ``on_step(index, attempts, failing reports)`` after every finished step.
OnStep = Callable[[int, list[Attempt], list[dict[str, Any]]], None]


@dataclass(frozen=True)
class Job:
    """Steps for one process to run in order.

    ``start`` is where the virtual clock starts (a hunt round: drawn from
    the round's seed); None starts at the first step's own ``now``.
    ``repeats`` marks the runs of a ``twice`` round (1, 2 per step; empty:
    none). ``first_position`` numbers the steps (a slice continued after a
    crash keeps its numbering). ``journals`` are replayed by record-mode
    steps, by attempt id.

    ``condition`` is the round's timing condition
    (:data:`~hermetic_hunt.models.CONDITIONS`): the clock profile of steps
    that do not name their own, or ``switch`` (each attempt draws a tiny
    switch interval from its seed). ``stress`` is how many busy processes
    compete for the CPU while the job runs (started by whoever runs it).
    """

    steps: tuple[Step, ...]
    round_no: int = 0
    start: float | None = None
    repeats: tuple[int, ...] = ()
    first_position: int = 0
    journals: Mapping[int, Journal] = field(default_factory=dict)
    condition: Condition = "exact"
    stress: int = 0

    def rest(self, after: int, start: float | None) -> Job:
        """The steps after index ``after``, numbered as they were (a crash's continuation)."""
        return replace(
            self,
            steps=self.steps[after + 1 :],
            start=start,
            repeats=self.repeats[after + 1 :],
            first_position=self.first_position + after + 1,
        )

    def to_json(self) -> dict[str, Any]:
        """The job as it crosses a process boundary (:meth:`from_json` reads it back)."""
        out: dict[str, Any] = {
            "steps": [step.to_json() for step in self.steps],
            "round": self.round_no,
            "start": self.start,
            "first_position": self.first_position,
            "condition": self.condition,
        }
        if self.repeats:
            out["repeats"] = list(self.repeats)
        if self.stress:
            out["stress"] = self.stress
        if self.journals:
            out["journals"] = {
                str(key): base64.b64encode(journal_format.encode(value)).decode("ascii")
                for key, value in self.journals.items()
            }
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Job:
        """A job from :meth:`to_json`'s form (untrusted): ValueError when malformed."""
        if not isinstance(raw, dict):
            raise ValueError("a job must be an object")
        steps = tuple(Step.from_json(step) for step in items(raw.get("steps"), "a job's steps"))
        repeats = tuple(whole(r, "a repeat", least=0) for r in items(raw.get("repeats"), "repeats"))
        if repeats and len(repeats) != len(steps):
            raise ValueError("a job's repeats must number its steps")
        condition = raw.get("condition", "exact")
        found = next((c for c in CONDITIONS if c == condition), None)
        if found is None:
            raise ValueError(f"unknown timing condition {str(condition)[:40]!r}")
        journals: dict[int, Journal] = {}
        stored = raw.get("journals") or {}
        if not isinstance(stored, dict):
            raise ValueError("a job's journals must be an object")
        for key, value in stored.items():
            if not (isinstance(key, str) and key.isdigit() and isinstance(value, str)):
                raise ValueError("a job's journals must be base64 text by attempt id")
            try:
                data = base64.b64decode(value, validate=True)
            except ValueError:  # (binascii.Error among them)
                raise ValueError("a job's journals must be base64 text") from None
            journals[int(key)] = journal_format.decode(data, where=f"journal of attempt {key}")
        return cls(
            steps=steps,
            round_no=whole(raw.get("round", 0), "a job's round", least=0),
            start=number(raw.get("start"), "a job's start", optional=True),
            repeats=repeats,
            first_position=whole(raw.get("first_position", 0), "a first position", least=0),
            journals=journals,
            condition=found,
            stress=whole(raw.get("stress", 0), "a job's stress", least=0),
        )

    def lost(self, index: int, base_seed: int, worker: str, failure: Failure,
             **facts: Any) -> Attempt:  # fmt: skip
        """The attempt of step ``index``, lost with the process that ran it: ``crashed``."""
        step = self.steps[index]
        seed = step.seed
        if seed is None and step.mode != "off":
            seed = attempt_seed(base_seed, step.nodeid, self.round_no, 1)
        return Attempt(
            nodeid=step.nodeid, outcome="crashed", round_no=self.round_no, worker=worker,
            position=self.first_position + index, phase="call", seed=seed, now=step.now,
            mode=step.mode, repeat=self.repeats[index] if index < len(self.repeats) else 0,
            profile=step.profile or profile_of(self.condition, step.mode),
            switch_interval=step.switch_interval, stress=max(self.stress, step.stress),
            failure=failure, **facts,
        )  # fmt: skip

    def timeline(self) -> Timeline:
        if self.start is not None:
            return Timeline(self.start)
        first = self.steps[0] if self.steps else None
        if first is not None and first.now is not None:
            return Timeline(first.now)
        return Timeline(attempt_now(first.seed or 0) if first is not None else 0.0)


@dataclass
class Outcome:
    """How a job ended: ``completed``, ``stopped`` (``-x``, an error) or ``aborted``.

    ``aborted``: an exception escaped pytest's run of a step (a test called
    ``pytest.exit()``, raised ``KeyboardInterrupt``, broke the recursion
    limit): that step's attempt failed, and this process is no longer fit to
    run the rest (its fixtures were never torn down) -- its parent runs them
    in a new one.
    """

    status: str = "completed"
    detail: str = ""
    leaks: dict[int, list[Leak]] = field(default_factory=dict)


class StepRunner:
    """pytest plugin: runs a :class:`Job` in this process.

    For each step it sets the executor's :class:`Slot` around pytest's
    protocol, then builds the step's attempts from the executions the
    executor folded, with what the step left behind -- each attempt once.
    ``on_step`` receives each finished step's attempts (and pytest's
    serialised reports of its failing phases, for the terminal of the process
    that prints); ``records`` keeps them all when no callback is given.
    """

    def __init__(
        self,
        job: Job,
        rootdir: str,
        executor: AttemptExecutor,
        *,
        on_step: OnStep | None = None,
        serialize: bool = False,
        watch_leaks: bool = True,
        import_seed: str | None = None,
    ) -> None:
        self.job = job
        #: Where the suite seeded ``random`` at import (see engine.rng): a
        #: test that draws from the stream leaves a ``random`` leak.
        self.import_seed = import_seed
        self.rootdir = rootdir
        self.items: dict[str, pytest.Item] = {}
        self.records: list[Attempt] = []
        self.executor = executor
        self._on_step: OnStep = on_step or (lambda _, attempts, __: self.records.extend(attempts))
        self._serialize = serialize
        self._reports: list[dict[str, Any]] = []
        #: The step's subtests (pytest's ``subtests`` fixture): how many failed,
        #: and the others by pytest's category (``subtests passed``...).
        self._subtests_failed = 0
        self._subtests: dict[str, int] = {}
        self._config: pytest.Config | None = None
        self._watch = watch_leaks
        self._leaks: RoundLeaks | None = None  # the running job's, while it runs
        #: In a job's own process (a round's, a probe's child): what escapes
        #: pytest's run of a step is that step's (see Outcome). Elsewhere (a
        #: replay) Ctrl-C still interrupts the session.
        self.contain = False

    def select(self, items: Sequence[pytest.Item]) -> None:
        """Map the steps' nodeids onto collected items (or raise NotCollected)."""
        by_id = {item.nodeid: item for item in items}
        missing = [step.nodeid for step in self.job.steps if step.nodeid not in by_id]
        if missing:
            raise NotCollected(
                f"{missing[0]!r} is not collected any more (renamed or deleted?); "
                "run a new hunt with --hermetic-hunt to find its flakes again"
            )
        self.items = {step.nodeid: by_id[step.nodeid] for step in self.job.steps}

    def not_rerun(self) -> set[int]:
        """The second runs of a ``twice`` round that are left out: only test
        functions run twice in one process. A doctest item, or another
        plugin's item, is not made to be run again (a doctest's namespace is
        cleared after its run), and no plain pytest run would do it."""
        steps = self.job.steps
        return {
            index
            for index, repeat in enumerate(self.job.repeats)
            if repeat == 2 and not isinstance(self.items.get(steps[index].nodeid), pytest.Function)
        }

    def run(self, session: pytest.Session) -> Outcome:
        """Run every step in order; how the job ended."""
        job = self.job
        self._config = session.config
        timeline = job.timeline()
        leaks = self._leaks = RoundLeaks(self.rootdir) if self._watch else None
        writes = Writes.install() if self._watch else None
        if writes is not None:
            writes.start(self.rootdir)
        steps = job.steps
        skipped = self.not_rerun()
        ran = [i for i in range(len(steps)) if i not in skipped]
        following = dict(itertools.pairwise(ran))
        outcome = Outcome()
        for index, step in enumerate(steps):
            if index in skipped:
                self._on_step(index, [], [])
                continue
            item = self.items[step.nodeid]
            after = following.get(index)
            nextitem = self.items[steps[after].nodeid] if after is not None else None
            position = job.first_position + index
            self.executor.slot = Slot(
                step=step,
                round_no=job.round_no,
                position=position,
                timeline=timeline,
                repeat=job.repeats[index] if index < len(job.repeats) else 0,
                journal=job.journals.get(step.attempt_id)
                if step.attempt_id is not None and step.mode == "record"
                else None,
                condition=job.condition,
                stress=job.stress,
            )
            limit = sys.getrecursionlimit()
            try:
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            except BaseException as exc:  # the test's doing: its attempt failed (abandon)
                if isinstance(exc, KeyboardInterrupt) and not self.contain:
                    raise
                outcome.status = "aborted"
                outcome.detail = f"{step.nodeid} raised {type(exc).__name__} out of pytest"
            finally:
                self.executor.slot = None
            lowered = sys.getrecursionlimit()
            if lowered < limit:  # every frame of the hunt's own would fail after it
                sys.setrecursionlimit(limit)
            reset = [Leak("recursion-limit", "recursion-limit", "changed",
                          f"{lowered} (set back to {limit} for the tests that follow)")
                     ] if lowered < limit else []  # fmt: skip
            folds, reports = self.executor.take(), self._reports
            if self._subtests:
                reports.append(wire.counts_report(self._subtests))
            self._reports, self._subtests, self._subtests_failed = [], {}, 0
            attempts = self._attempts(folds, position, leaks, writes, reset)
            self._on_step(index, attempts, reports)
            if outcome.status != "completed":
                break
            if session.shouldfail or session.shouldstop:
                outcome.status = "stopped"
                outcome.detail = str(session.shouldfail or session.shouldstop)
                break
        if writes is not None:
            writes.stop()
        self._leaks = None
        if leaks is not None and outcome.status == "completed":
            outcome.leaks = leaks.finish()
        return outcome

    def _attempts(self, folds: list[Fold], position: int, leaks: RoundLeaks | None,
                  writes: Writes | None, reset: list[Leak]) -> list[Attempt]:  # fmt: skip
        """The step's attempts; the first carries what the step left behind and wrote
        (``reset``: what the runner itself had to put back)."""
        if not folds:
            return []
        found, wrote = [], []
        if leaks is not None and writes is not None:
            found, wrote = leaks.after_attempt(position), writes.take()
            drawn = (folds[0].facts.get("counts") or {}).get("random-stream")
            if drawn and self.import_seed is not None:
                leak = stream_leak(self.import_seed, drawn)
                found = [*found, leak]  # (a new list: ``note`` keeps the round's own)
                leaks.note(position, leak)
        first = folds[0].attempt(leaks=(*found, *reset), writes=tuple(wrote))
        return [first, *(fold.attempt() for fold in folds[1:])]

    def _status(self, report: pytest.TestReport) -> str:
        """pytest's category of ``report`` (what its terminal would count it as)."""
        if self._config is None:
            return ""
        status = self._config.hook.pytest_report_teststatus(report=report, config=self._config)
        return str(status[0]) if status else ""

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Any:
        """What a fixture wider than a test starts in its setup is the fixture's
        (:meth:`~hermetic_hunt.engine.leaks.RoundLeaks.fixture_set_up`)."""
        leaks, slot = self._leaks, self.executor.slot
        if leaks is None or slot is None or fixturedef.scope == "function":
            return (yield)
        before = Snapshot.running()
        try:
            return (yield)
        finally:
            leaks.fixture_set_up(fixturedef, fixture_label(fixturedef, self.rootdir),
                                 slot.position, before, Snapshot.running())  # fmt: skip

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        if self._leaks is not None:
            self._leaks.fixture_torn_down(fixturedef)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A failing phase's report, serialised for the process that prints."""
        if self.executor.slot is None or not self._serialize or self._config is None:
            return
        if getattr(report, "context", None) is not None and report.when == "call":  # a subtest's
            if report.failed:
                self._subtests_failed += 1
            else:  # counted as pytest's last line counts it
                category = self._status(report)
                if category:
                    self._subtests[category] = self._subtests.get(category, 0) + 1
                return
        elif self._subtests_failed and report.when == "call" and report.passed:
            # The test of a failed subtest: pytest's ``subtests`` makes it failed
            # ("contains 1 failed subtest") when the terminal asks its status.
            self._status(report)
        if report.failed:
            hook = self._config.hook.pytest_report_to_serializable
            self._reports.append(hook(config=self._config, report=report))
