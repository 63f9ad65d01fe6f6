"""Running an explicit sequence of attempts (replays and isolation probes).

A :class:`Step` names a test and what its attempt runs with (seed, start
time, mode, journal). :class:`SequenceRunner` runs steps in order inside an
ordinary pytest session -- the same executor and sandbox as a hunt, so a
replay is faithful to the hunt -- and folds the reports into one
:class:`~hermetic_hunt.models.AttemptRecord` per step.

Nodeids only ever *select among collected items*: a step naming a test that
is not collected raises :class:`~hermetic_hunt.errors.NotCollected`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from hermetic_hunt.engine.executor import Slot
from hermetic_hunt.engine.recorder import Recorder
from hermetic_hunt.errors import NotCollected
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import AttemptRecord


@dataclass(frozen=True)
class Step:
    nodeid: str
    seed: int | None = None
    now: float | None = None
    mode: str = "seeded"  # seeded | record | off
    journal: Journal | None = None


class SequenceRunner:
    """pytest plugin: run ``steps`` in order; results in :attr:`records`."""

    def __init__(self, steps: Sequence[Step], rootdir: str, *, deselect_others: bool = True):
        self.steps = list(steps)
        self.records: list[AttemptRecord] = []
        self.items: dict[str, pytest.Item] = {}
        self._deselect = deselect_others
        self._slot: Slot | None = None
        self._recorder = Recorder(run_id=0, base_seed=0, mode="seeded", rootdir=rootdir)

    # -- selection ------------------------------------------------------------

    def select(self, items: Sequence[pytest.Item]) -> None:
        """Map the steps' nodeids onto collected items (or raise NotCollected)."""
        by_id = {item.nodeid: item for item in items}
        missing = [step.nodeid for step in self.steps if step.nodeid not in by_id]
        if missing:
            raise NotCollected(
                f"{missing[0]!r} is not collected any more (renamed or deleted?); "
                "run a new hunt with --hermetic-hunt to find its flakes again"
            )
        self.items = {step.nodeid: by_id[step.nodeid] for step in self.steps}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        try:
            self.select(items)
        except NotCollected as exc:
            raise pytest.UsageError(str(exc)) from None
        if self._deselect:
            wanted = set(self.items)
            deselected = [item for item in items if item.nodeid not in wanted]
            if deselected:
                config.hook.pytest_deselected(items=deselected)
            items[:] = [self.items[nodeid] for nodeid in dict.fromkeys(self.items)]

    # -- running -------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
        if session.config.option.collectonly:
            return True
        self.run(session)
        return True

    def run(self, session: pytest.Session) -> list[AttemptRecord]:
        """Run every step in order (also used by forked isolation probes)."""
        for index, step in enumerate(self.steps):
            item = self.items[step.nodeid]
            nextitem = (
                self.items[self.steps[index + 1].nodeid] if index + 1 < len(self.steps) else None
            )
            self._slot = Slot(
                key=index,
                round_no=0,
                seed=step.seed,
                now=step.now,
                mode=step.mode,
                journal=step.journal,
            )
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            self._slot = None
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return self.records

    def locate(self, item: pytest.Item) -> Slot | None:
        return self._slot

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = self._recorder.report(report, "main")
        if record is not None:
            self.records.append(record)
