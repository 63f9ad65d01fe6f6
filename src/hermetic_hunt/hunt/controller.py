"""The hunt's controller: the pytest plugin on the process that owns a hunt's session.

One :class:`HuntController` is registered on the process that owns the
session: the only process of a ``-n 0`` hunt (:mod:`.local` forks the
rounds from it) or xdist's controller (:mod:`.xdist` schedules the rounds
onto workers). Either way it is the single writer of the database. It sets
the hunt up (the run row, the header, the test list, collection errors);
its parts (:class:`~.rounds.Rounds`, :class:`~.intake.Intake`,
:mod:`.ending`: docs/architecture.md, the ``hunt/`` row) share its state
(:class:`~.state.HuntState`).

Order of phases: configure (options, database opened) -> session start (run
row) -> collection -> rounds (each ends at its barrier: :mod:`.rounds`) ->
session finish (flush, isolation, status) -> terminal summary.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Sequence
from time import perf_counter
from typing import Any

import pytest

from hermetic_hunt import _compat, environment, pasteable
from hermetic_hunt.engine import wire
from hermetic_hunt.engine.engine import collection_failed
from hermetic_hunt.engine.files import FileWatch
from hermetic_hunt.engine.fork import interrupts_deferred
from hermetic_hunt.errors import HuntError
from hermetic_hunt.hunt import ending
from hermetic_hunt.hunt.rounds import Rounds
from hermetic_hunt.hunt.signals import Interrupts
from hermetic_hunt.hunt.state import HuntState
from hermetic_hunt.models import Attempt, RunInfo
from hermetic_hunt.store import runs


class HuntController(HuntState):
    """pytest plugin on the session-owning process of a hunt: its set-up and hooks."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.rounds = Rounds(self)
        self.session: pytest.Session | None = None
        #: SIGTERM/SIGHUP take the Ctrl-C path; a second signal waits for the final write.
        self.interrupts = Interrupts(controller=True)
        #: Nodeids of the files (or classes) that could not be collected.
        self.uncollected: list[str] = []
        #: Collection failed: no round ran (see :meth:`collection_stops`).
        self.stopped_at_collection = False
        #: pytest saw a KeyboardInterrupt (Ctrl-C, or a signal turned into one).
        self.interrupted = False
        self._finished = False

    # -- set-up -------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = self.config
        rootdir = str(config.rootpath)
        info = RunInfo(
            uuid=uuid.uuid4().hex,
            argv=[str(a) for a in config.invocation_params.args],
            invocation_dir=str(config.invocation_params.dir),
            rootdir=rootdir,
            settings=self.settings,
            workers=self.workers,
            worker_spec=self.worker_spec,
            environment=environment.collect(rootdir),
        )
        try:
            self.run_id = runs.start_run(self.store, info)
        except HuntError as exc:  # a full disk before the first round: nothing to keep
            raise pytest.UsageError(str(exc)) from None
        self.session = session
        self.rounds.started = perf_counter()
        if self.terminal.reporter is not None:
            # A file name per attempt and a percentage that passes 100% in the
            # first round say nothing in a hunt: the progress lines replace them.
            self.terminal.reporter.showfspath = False
            _compat.quiet_progress(self.terminal.reporter)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        where = pasteable.display_path(self.store.path, str(config.invocation_params.dir))
        shard = f" · shard {s.shard}" if s.shard.count > 1 else ""
        return [
            f"hermetic-hunt: run {self.run_id} · {s.describe_length} · mode {s.mode} · "
            f"order {s.order} · time {s.time.spec()}{shard} · base seed {s.base_seed} "
            f"(--hermetic-seed={s.base_seed}) · database {where}"
        ]

    def set_tests(self, nodeids: Sequence[str]) -> None:
        """The canonical test list (collection order) the schedule is built on."""
        self.tests = list(nodeids)
        with self.writing():
            self.intake.test_ids = self.store.test_ids(self.tests)
            runs.set_run(self.store, self.run_id, tests=len(self.tests))
            self.store.defer_indexes()  # (a database without attempts: built at the end)

    def begin(self) -> None:
        """Right before the first round: what the checkout looks like."""
        if self.local_workers:
            self.files = FileWatch(str(self.config.rootpath), own=self.store.own_files())
        if self.config.get_verbosity() == -1:
            # -q hides pytest's header: keep ours, as pytest-randomly keeps its seed.
            for text in self.pytest_report_header(self.config):
                self.terminal.line(text)
        self.rounds.started = perf_counter()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # On xdist's controller too: it replays the workers' failed reports (once each).
        if report.failed and report.nodeid not in self.uncollected:
            self.uncollected.append(report.nodeid)

    def collection_stops(self) -> bool:
        """Collection failed and ``--continue-on-collection-errors`` is not given:
        no round runs, at any ``-n``, as a plain ``pytest -n 0`` stops (the caller
        raises pytest's own ``Interrupted``); :attr:`error` names what failed."""
        session = self.session
        if session is None or not collection_failed(session):
            return False
        self.stopped_at_collection = True
        names = self.uncollected or ["a collector"]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        count = session.testsfailed
        self.error = self.error or (
            f"{shown} could not be collected ({count} error{'s' if count != 1 else ''} during "
            "collection), so no round ran: fix it, leave it out (--ignore=PATH, --deselect=ID), "
            "or hunt the rest with --continue-on-collection-errors"
        )
        return True

    # -- rounds ------------------------------------------------------------------

    def stopping(self) -> bool:
        """``-x``/``--maxfail`` (or a plugin) asked the session to stop."""
        session = self.session
        return bool(session is not None and (session.shouldfail or session.shouldstop))

    def ingest(self, lines: Sequence[bytes], worker: str, round_no: int) -> None:
        """Lines of finished steps from the process that ran ``round_no`` on ``worker``."""
        with interrupts_deferred():  # Ctrl-C waits until the batch is in
            steps, ends = self.intake.take(lines, self.run_id, worker, round_no)
            self.rounds.received(round_no, steps)
            for message in ends:
                self.rounds.slice_ended(round_no, message)
            with self.writing():
                self.intake.flush(due=True)

    def crashed(self, worker: str, round_no: int, attempt: Attempt) -> None:
        """xdist lost the worker process itself while it ran ``attempt`` (one step)."""
        self.ingest([wire.step_line(0, [attempt], [])], worker, round_no)

    # -- the end ------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        """No letter per failed attempt: the round's progress line counts them (-v keeps words)."""
        return self.terminal.status(report, (yield))

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._finished:
            return
        self._finished = True
        self.rounds.seconds = perf_counter() - self.rounds.started
        self.rounds.end_stress()
        ending.finish(self, self.rounds, self.interrupts, session, int(exitstatus),
                      interrupted=self.interrupted)  # fmt: skip

    def summary_header(self) -> str:
        seconds = self.rounds.seconds if self._finished else perf_counter() - self.rounds.started
        return ending.summary_header(self, self.rounds, seconds)
