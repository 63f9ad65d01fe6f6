"""Running each attempt inside its own sandbox (in the process that runs tests).

Registered wherever tests run for hermetic-hunt: the forked child of a
hunt's round, of an isolation probe, and a replay session. The runner
(:mod:`hermetic_hunt.engine.runner`) sets the :class:`Slot` of the step it
runs around pytest's protocol (:attr:`AttemptExecutor.slot`). Each
execution of the protocol -- the scheduled one and any
pytest-rerunfailures rerun -- gets its own seed and runs setup, call and
teardown in one sandbox. The virtual clock is the round's
:class:`Timeline`: an attempt starts where the previous one ended.

Timing conditions (``docs/sandbox.md``): a seeded attempt's clock profile
(the step's, else its round's), and in a ``switch`` round a tiny
``sys.setswitchinterval`` drawn from the attempt's seed -- set when the
attempt opens and put back when it closes (before the runner's leak checks,
unless the test changed it itself: that is the test's own leak).

Each execution's phase reports are folded as
:mod:`hermetic_hunt.engine.recorder` says, until the runner takes them
(:meth:`AttemptExecutor.take`). An exception that escapes the protocol
(``pytest.exit()``, ``KeyboardInterrupt`` or a ``RecursionError`` the test
provoked) ends the execution as a failed attempt of that test
(:meth:`AttemptExecutor.abandon`).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from hermetic_hunt import journal as journal_format
from hermetic_hunt.engine.recorder import Fold
from hermetic_hunt.errors import BadOption, HuntError
from hermetic_hunt.failures import EXCERPT_LIMIT, normalise, own_location
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import Failure, Settings, Step
from hermetic_hunt.sandbox import (
    AttemptFacts,
    Sandbox,
    SandboxSpec,
    follow_bound_clocks,
    spec_from_marker,
)
from hermetic_hunt.sandbox.clock import REAL_TIME
from hermetic_hunt.seeds import attempt_seed, second_edge, switch_interval_for
from hermetic_hunt.timing import Condition, as_profile

_PERF = time.perf_counter  # real, captured before any sandbox patches time


@dataclass
class Timeline:
    """A round's virtual clock: where the next attempt starts.

    ``wall`` is the virtual wall time (UTC epoch seconds), ``elapsed`` the
    virtual seconds the monotonic clocks have run. One per process that runs
    tests; a step with an explicit ``now`` moves ``wall`` there.
    """

    wall: float
    elapsed: float = 0.0


@dataclass(frozen=True)
class Slot:
    """Which attempt a protocol call is.

    ``step`` says the test and, when given, its seed and start time (replays
    and probes); a hunt's steps leave them to be derived from the base seed,
    the test, the round and the timeline. ``position`` is the step's index
    in this process's sequence, ``repeat`` 1/2 for the runs of a ``twice``
    round. ``journal`` replays a record-mode journal. ``condition`` and
    ``stress``: the job's timing conditions (see
    :class:`~hermetic_hunt.engine.runner.Job`).
    """

    step: Step
    round_no: int
    position: int
    timeline: Timeline
    repeat: int = 0
    journal: Journal | None = None
    condition: Condition = "exact"
    stress: int = 0


def process_hash_seed() -> int | None:
    """This interpreter's PYTHONHASHSEED, when it is known."""
    value = os.environ.get("PYTHONHASHSEED", "")
    return int(value) if value.isdigit() else None


class RepeatGuard:
    """pytest plugin: lets the same test run twice in a row.

    A ``twice`` round (and a self-polluting reproducer) runs a test right
    after itself. pytest would then keep the test's function-scoped fixtures
    alive in between (``nextitem`` is the item itself), and the second run
    fails with ``KeyError: 'tmp_path'``. Passing the item's parent instead
    tears the function down and keeps module/class fixtures.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if nextitem is item:
            return item.ihook.pytest_runtest_protocol(item=item, nextitem=item.parent)
        return None


class AttemptExecutor:
    """pytest plugin: one sandbox per execution of a scheduled attempt."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        #: The step whose protocol runs now (set by the runner around it; None: not ours).
        self.slot: Slot | None = None
        #: The step's executions that ended, each a fold with the executor's facts.
        self.finished: list[Fold] = []
        self.rootdir = ""
        self._fold: Fold | None = None
        self._limit = sys.getrecursionlimit()
        self.sandbox = Sandbox() if settings.mode != "off" else None
        self.hash_seed = process_hash_seed()
        self.handle: Any = None
        self._execution = 0
        self._switch: tuple[float, float] | None = None  # (saved, set)
        self._failed = False
        self._started = 0.0
        self._facts: AttemptFacts | None = None
        self._marker_cache: dict[str, tuple[bool, Any]] = {}
        #: The suite seeds ``random`` at import: the stream flows (see engine.rng).
        self.stream = False

    # -- hooks ----------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        self._execution = 0
        try:
            return (yield)
        except BaseException as exc:
            if self.slot is not None:
                self.abandon(exc)
            raise
        finally:
            # An interrupt between setup and teardown skips our teardown hook.
            self._close()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        error = self._open(item, self.slot) if self.slot is not None else None
        result = yield
        if error is not None:
            # After pytest's own setup, so its teardown finds what it expects.
            pytest.fail(str(error), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        try:
            return (yield)
        except BaseException:
            self._failed = True
            raise
        finally:
            self._close()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        fold = self._fold
        if self.slot is None or fold is None:
            return report
        exc_type = location = None
        if report.failed:
            self._failed = True
            if call.excinfo is not None:
                exc_type = call.excinfo.typename
                frames = [(str(entry.path), entry.lineno + 1) for entry in call.excinfo.traceback]
                location = own_location(frames, str(item.config.rootpath))
        fold.phase_report(report, str(item.config.rootpath), exc_type, location)
        if report.when == "teardown":
            self._fold = None
            self._finish(fold)
        return report

    def take(self) -> list[Fold]:
        """The executions that ended since the last call (their facts in each fold)."""
        finished, self.finished = self.finished, []
        return finished

    def abandon(self, exc: BaseException) -> None:
        """The running execution (if it had not ended) is finished, ended by ``exc``
        escaping pytest's protocol.

        The recursion limit goes back to what it was when the execution
        began (a test that lowered it would break every frame that follows).
        """
        if sys.getrecursionlimit() < self._limit:
            sys.setrecursionlimit(self._limit)
        fold = self._fold
        self._fold = None
        self._failed = True
        self._close()
        if fold is None:
            return
        if fold.outcome in ("passed", "skipped", "xfailed"):
            frames = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(exc.__traceback__)]
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            fold.outcome = "failed"
            fold.phase = fold.phase or "call"
            fold.failure = Failure(
                exc_type=type(exc).__name__,
                message=normalise(message),
                location=own_location(frames, self.rootdir) or "",
                excerpt=f"{text}\n(raised out of pytest's run of the test: it ended the "
                "test's process; the hunt goes on in a new one)"[-EXCERPT_LIMIT:],
            )
        self._finish(fold)

    # -- attempt lifecycle ----------------------------------------------------

    def _open(self, item: pytest.Item, slot: Slot) -> HuntError | None:
        self._close()
        self._execution += 1
        self._failed = False
        self._facts = None
        self._limit = sys.getrecursionlimit()
        self.rootdir = str(item.config.rootpath)
        fold = Fold(item.nodeid, slot.round_no, slot.position, slot.repeat, self._execution)
        self._fold = fold
        self._started = _PERF()
        began = REAL_TIME()  # wall-clock time no sandbox patches
        step, timeline = slot.step, slot.timeline
        first = self._execution == 1
        if step.seed is not None and first:
            seed = step.seed
        else:
            base = step.seed if step.seed is not None else self.settings.base_seed
            seed = attempt_seed(base, item.nodeid, slot.round_no, self._execution)
        if step.now is not None and first:
            timeline.wall = step.now
        elif slot.condition == "edge" and first and step.mode == "seeded":
            timeline.wall = second_edge(timeline.wall, seed)
        now = timeline.wall
        interval = step.switch_interval
        if interval is None and slot.condition == "switch":
            interval = switch_interval_for(seed)
        if interval is not None:
            saved = sys.getswitchinterval()
            sys.setswitchinterval(interval)
            self._switch = (saved, sys.getswitchinterval())
        # The execution's facts, as Attempt fields (the sandbox's are added as it ends).
        fold.facts = {
            "seed": seed,
            "now": now,
            "mode": step.mode,
            "hash_seed": self.hash_seed,
            "started": began,
            "switch_interval": interval,
            "stress": max(slot.stress, step.stress),
        }
        if step.mode == "off":
            fold.facts.update(seed=None, now=None)
            return None
        if self.sandbox is None:
            self.sandbox = Sandbox()
        profile = step.profile or as_profile(slot.condition) or "exact"
        error = None
        try:
            spec = self.spec_for(item, seed, now, step.mode, profile)
        except HuntError as exc:  # a bad marker: the attempt fails, unsandboxed
            spec, error = None, exc
        if spec is None:
            fold.facts.update(seed=None, now=None, mode="off")
            return error
        spec = replace(spec, elapsed=timeline.elapsed)
        if slot.journal is not None and first:
            spec = replace(spec, mode="replay", replay=slot.journal)
        fold.facts.update(seed=spec.seed, now=spec.now)
        if spec.clock == "virtual":
            # Clock references the project bound before the attempt follow it.
            follow_bound_clocks(str(item.config.rootpath))
        self.handle = self.sandbox.enter(spec)
        return None

    def spec_for(
        self, item: pytest.Item, seed: int, now: float, mode: str, profile: str = "exact"
    ) -> SandboxSpec | None:
        """The sandbox of this execution (None: not sandboxed)."""
        known = self._marker_cache.get(item.nodeid)  # (integration?, hermetic marker)
        if known is None:
            known = self._marker_cache[item.nodeid] = (
                item.get_closest_marker(self.settings.integration_marker) is not None,
                item.get_closest_marker("hermetic"),
            )
        integration, marker = known
        base = SandboxSpec(seed=seed, now=now, mode=mode, test_id=item.nodeid, profile=profile,
                           stream=self.stream)  # fmt: skip
        if integration:
            base = replace(base, network="off")
        if marker is None:
            return base
        if marker.args:
            raise BadOption(
                f"{item.nodeid}: @pytest.mark.hermetic takes keyword arguments only, "
                "e.g. hermetic(seed=7, network='off')"
            )
        try:
            return spec_from_marker(base, marker.kwargs)
        except HuntError as exc:
            raise BadOption(f"{item.nodeid}: {exc}") from None

    def _close(self) -> None:
        if self._switch is not None:
            saved, ours = self._switch
            self._switch = None
            if sys.getswitchinterval() == ours:  # else the test changed it: its own leak
                sys.setswitchinterval(saved)
        if self.sandbox is not None and self.sandbox.active:
            self._facts = self.sandbox.exit(keep_journal=self._failed)
            self.handle = None
            end = self._facts.end
            slot = self.slot
            if end is not None and slot is not None:
                slot.timeline.wall, slot.timeline.elapsed = end

    def _finish(self, fold: Fold) -> None:
        """``fold``'s execution ended: the facts known now (its duration, its sandbox's) added,
        it joins :attr:`finished`."""
        facts = self._facts
        self._facts = None
        data = fold.facts
        data["duration"] = _PERF() - self._started
        if facts is not None:
            data["profile"] = facts.profile
            data["counts"] = facts.counts or None
            data["violations"] = tuple(facts.violations)
            data["warnings"] = tuple(facts.warnings)
            if facts.journal is not None:
                data["journal"] = journal_format.encode(facts.journal)
                data["journal_format"] = f"{facts.journal.mode}/{journal_format.VERSION}"
        self.finished.append(fold)
