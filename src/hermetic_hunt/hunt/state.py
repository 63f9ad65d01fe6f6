"""What the parts of a hunt's controller share: settings, database, tests, error.

The controller (:class:`~.controller.HuntController`) is a :class:`HuntState`
with pytest's hooks; its parts -- :class:`~.rounds.Rounds`, :mod:`.ending`
-- and the run loops (:mod:`.local`, :mod:`.xdist`) read and write this
state, and none of them imports the controller.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hermetic_hunt import pasteable
from hermetic_hunt.engine.files import FileWatch
from hermetic_hunt.errors import HuntError
from hermetic_hunt.findings import IsolationReport
from hermetic_hunt.hunt.intake import Intake
from hermetic_hunt.hunt.terminal import Terminal
from hermetic_hunt.models import Settings
from hermetic_hunt.store import Store


@dataclass(eq=False, repr=False)  # (the controller, a plugin, keeps identity and repr)
class HuntState:
    """A hunt's state on the process that owns its session.

    ``tests``: the canonical test list (collection order) the schedule is built
    on; ``files``: the checkout's watch (None with remote workers); ``error``:
    what stopped the hunt, one line (the run loops stop at it);
    ``isolation``: its report, once isolation ran.
    """

    config: pytest.Config
    settings: Settings
    store: Store
    workers: int
    worker_spec: list[str]

    def __post_init__(self) -> None:
        self.terminal = Terminal(self.config)
        self.intake = Intake(self.store, self.terminal.show, self._moved,
                             self.terminal.listing if self.terminal.verbose else None)  # fmt: skip
        self.run_id = 0
        self.tests: list[str] = []
        self.files: FileWatch | None = None
        self.error: str | None = None
        self.isolation: IsolationReport | None = None

    @property
    def local_workers(self) -> bool:
        """Every worker runs on this machine (-n 0, or xdist's popen workers)."""
        return all(spec == "main" or spec.startswith("popen") for spec in self.worker_spec)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """A write to the database that may fail (a full disk): the hunt stops, nothing raises.

        The error becomes :attr:`error` (one line, printed in the summary); the
        run loops stop at it; the attempts not yet written stay pending and
        are tried once more when the session finishes.
        """
        try:
            yield
        except HuntError as exc:
            self.error = self.error or str(exc)

    def _moved(self, old: str, how: str, new: str) -> None:
        """A test removed or replaced the database: the hunt goes on writing a copy."""
        if self.files is not None:  # the new file is the hunt's, not a test's leak
            self.files.own.update(os.path.realpath(p) for p in self.store.own_files())
        cwd = str(self.config.invocation_params.dir)
        self.terminal.line(
            f"hermetic-hunt: {pasteable.display_path(old, cwd)} was {how} during the hunt "
            f"(by a test?); what was recorded is in {pasteable.display_path(new, cwd)}, "
            "and the hunt goes on writing there"
        )
