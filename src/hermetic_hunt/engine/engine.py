"""The engine in one pytest process: set up once, then run jobs.

:class:`Engine` is what a hunt's worker (or its ``-n 0`` process), a probe
server and a replay session install at configure time: the attempt
executor, the guard that lets a test run twice in a row, the
``hermetic_sandbox`` fixture, and the hand-over of seeding from
pytest-randomly. Then :meth:`Engine.run` runs a job in this process (a
replay) and :meth:`Engine.fork` runs one in a forked child (a round, a
probe) -- the same steps, executor and sandbox either way.
"""

from __future__ import annotations

import pytest

from hermetic_hunt.engine import fixture
from hermetic_hunt.engine.executor import AttemptExecutor, RepeatGuard
from hermetic_hunt.engine.rng import ImportSeeds
from hermetic_hunt.engine.runner import Job, OnStep, Outcome, StepRunner
from hermetic_hunt.models import Settings
from hermetic_hunt.sandbox.shift import (  # re-exported: a probe process on another date
    shift_process as shift_process,
)

_RUNNER = "hermetic-hunt-runner"


#: (option dest, why it cannot be combined): one table per command that refuses options.
Conflicts = tuple[tuple[str, str], ...]


def refuse_conflicts(config: pytest.Config, command: str, conflicts: Conflicts) -> None:
    """``pytest.UsageError`` naming the first option of ``conflicts`` that is set.

    An option counts as set unless it is None, False or 0 (``--count=1`` of
    pytest-repeat is its default and runs each test once).
    """
    for dest, reason in conflicts:
        value = getattr(config.option, dest, None)
        if value in (None, False, 0) or (dest == "count" and value == 1):
            continue
        raise pytest.UsageError(f"{command} cannot be combined with {reason}")


def collection_failed(session: pytest.Session) -> bool:
    """Collection errors stop a hunt or a replay before anything runs, as in pytest."""
    return bool(session.testsfailed) and not session.config.option.continue_on_collection_errors


def stop_on_collection_errors(session: pytest.Session) -> bool:
    """The preamble of every ``pytest_runtestloop`` of ours: False when there is
    nothing to run (``--collect-only``); raises ``session.Interrupted`` as pytest's own
    loop does when collection failed."""
    if collection_failed(session):
        count = session.testsfailed
        raise session.Interrupted(f"{count} error{'s' if count != 1 else ''} during collection")
    return not session.config.option.collectonly


def hand_seeding_to_the_hunt(config: pytest.Config) -> None:
    """pytest-randomly reseeds ``random`` at every phase and shuffles the
    collection with its own seed: inside a hunt or a replay both belong to
    hermetic-hunt (its shuffling would also reorder a replay's steps)."""
    for name in ("randomly_reset_seed", "randomly_reorganize"):
        if hasattr(config.option, name):
            setattr(config.option, name, False)


def declare_marker(config: pytest.Config, marker: str) -> None:
    """Register the integration marker (workers check markers too)."""
    config.addinivalue_line(
        "markers", f"{marker}: keeps real network during a hermetic-hunt hunt or replay"
    )


class Engine:
    """The executor and friends, registered once per process; jobs run through it."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.executor = AttemptExecutor(settings)
        hand_seeding_to_the_hunt(config)
        declare_marker(config, settings.integration_marker)
        self.import_seeds = ImportSeeds(str(config.rootpath))
        config.pluginmanager.register(self.import_seeds, "hermetic-hunt-import-seeds")
        config.pluginmanager.register(RepeatGuard(), "hermetic-hunt-repeat-guard")
        config.pluginmanager.register(self.executor, "hermetic-hunt-executor")
        fixture.bind(config, self.executor)
        # Registered after hermetic-sandbox's plugin, so this hermetic_sandbox
        # fixture is the one tests get.
        config.pluginmanager.register(fixture, "hermetic-hunt-fixture")

    def runner_for(
        self,
        job: Job,
        *,
        on_step: OnStep | None = None,
        serialize: bool = False,
        watch_leaks: bool = True,
    ) -> StepRunner:
        self.executor.stream = self.import_seeds.where is not None
        return StepRunner(
            job,
            str(self.config.rootpath),
            self.executor,
            on_step=on_step,
            serialize=serialize,
            watch_leaks=watch_leaks,
            import_seed=self.import_seeds.where,
        )

    def run(
        self,
        session: pytest.Session,
        job: Job,
        *,
        on_step: OnStep | None = None,
        serialize: bool = False,
        runner: StepRunner | None = None,
        contain: bool = False,
    ) -> Outcome:
        """Run ``job`` in this process (NotCollected for a test not collected).

        ``contain``: this process exists for the job (a forked child), so a
        ``KeyboardInterrupt`` a test raises is that test's failed attempt.
        """
        runner = runner or self.runner_for(job, on_step=on_step, serialize=serialize)
        runner.contain = contain
        if not runner.items:
            runner.select(session.items)
        self.config.pluginmanager.register(runner, _RUNNER)
        try:
            return runner.run(session)
        finally:
            self.config.pluginmanager.unregister(runner)
