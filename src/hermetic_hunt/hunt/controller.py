"""The hunt's controller: rounds, storage, progress and the end summary.

One :class:`HuntController` is registered on the process that owns the
session: the only process of a ``-n 0`` hunt (which also runs the rounds,
see :meth:`HuntController.pytest_runtestloop`), or xdist's controller (where
:mod:`hermetic_hunt.hunt.xdist` schedules the rounds onto workers). Either way it
is the single writer of the database: reports come in, attempts go out in
batches.

Order of phases: configure (options, database opened) -> session start
(run row) -> collection -> rounds -> session finish (flush, isolation,
status) -> terminal summary.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Sequence
from typing import Any

import pytest

from hermetic_hunt import commands, environment
from hermetic_hunt.engine.executor import AttemptExecutor, Slot
from hermetic_hunt.engine.recorder import Recorder
from hermetic_hunt.hunt.progress import Progress, line
from hermetic_hunt.hunt.schedule import RoundPlan, plan_round, strategy_for
from hermetic_hunt.models import AttemptRecord, HuntSettings, RunInfo, format_seconds
from hermetic_hunt.store import Store

_PERF = time.perf_counter
FLUSH_EVERY = 500
FLUSH_SECONDS = 2.0


class HuntController:
    """pytest plugin on the session-owning process of a hunt."""

    def __init__(
        self,
        config: pytest.Config,
        settings: HuntSettings,
        store: Store,
        workers: int,
        worker_spec: list[str],
    ) -> None:
        self.config = config
        self.settings = settings
        self.store = store
        self.workers = workers
        self.worker_spec = worker_spec
        self.run_id = 0
        self.recorder: Recorder | None = None
        self.tests: list[str] = []
        self.test_ids: dict[str, int] = {}
        self.executor: AttemptExecutor | None = None
        self.next_slot: Slot | None = None
        self.rounds_started = 0
        self._round_done: dict[int, int] = {}
        self._round_strategy: dict[int, str] = {}
        self.rounds_completed = 0
        self._buffer: list[AttemptRecord] = []
        self._last_flush = _PERF()
        self._started = _PERF()
        self._interrupted = False
        self.isolation_lines: list[str] = []
        self._finished = False

    # -- set-up -------------------------------------------------------------

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.worker_spec != ["main"]

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
        self.run_id = self.store.start_run(info)
        self.recorder = Recorder(self.run_id, self.settings.base_seed, self.settings.mode, rootdir)
        self._started = _PERF()
        terminal = config.pluginmanager.getplugin("terminalreporter")
        if terminal is not None:
            # A file name per attempt and a percentage that passes 100% in the
            # first round say nothing in a hunt: the progress lines replace them.
            terminal.showfspath = False
            if hasattr(terminal, "_show_progress_info"):
                terminal._show_progress_info = False

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        where = commands.display_path(self.store.path, str(config.invocation_params.dir))
        shard = f" · shard {s.shard}" if s.shard.count > 1 else ""
        return [
            f"hermetic-hunt: run {self.run_id} · {s.describe_length} · mode {s.mode} · "
            f"order {s.order}{shard} · base seed {s.base_seed} (--hermetic-seed={s.base_seed}) "
            f"· database {where}"
        ]

    def set_tests(self, nodeids: Sequence[str]) -> None:
        """The canonical test list (collection order) the schedule is built on."""
        self.tests = list(nodeids)
        self.test_ids = self.store.test_ids(self.tests)
        self.store.set_run_tests(self.run_id, len(self.tests))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if not self.distributed:
            self.set_tests([item.nodeid for item in items])

    # -- the rounds (-n 0) --------------------------------------------------

    def rounds(self) -> Generator[int, None, None]:
        """Global round numbers to run, honouring the round count or time budget."""
        s = self.settings
        local = 0
        deadline = self._started + (s.budget_seconds or 0.0)
        while True:
            if s.rounds is not None and local >= s.rounds:
                return
            if s.budget_seconds is not None and local > 0 and _PERF() >= deadline:
                return
            self.rounds_started = local + 1
            yield s.shard.global_round(local)
            local += 1

    def round_strategy(self, round_no: int) -> str:
        return strategy_for(self.settings.order, round_no)

    def round_planned(self, round_no: int, strategy: str) -> None:
        self._round_strategy[round_no] = strategy
        self.rounds_started += 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if self.distributed:
            return None
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(
                f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} "
                "during collection"
            )
        if session.config.option.collectonly:
            return True
        items = session.items
        count = len(items)
        if not count:
            return True
        tests = [item.nodeid for item in items]
        rounds = self.rounds()
        current = next(rounds, None)
        plan = self._plan(current, tests) if current is not None else None
        while current is not None and plan is not None:
            self._round_strategy[current] = plan.strategy
            sequence = plan.slices[0]
            upcoming: int | None = None
            upcoming_plan = None
            for index, test_index in enumerate(sequence):
                item = items[test_index]
                if index + 1 < len(sequence):
                    nextitem: Any = items[sequence[index + 1]]
                else:
                    # Decide on the next round only now: a time budget is
                    # checked when this round is about to end.
                    upcoming = next(rounds, None)
                    upcoming_plan = self._plan(upcoming, tests) if upcoming is not None else None
                    first = upcoming_plan.slices[0] if upcoming_plan is not None else ()
                    nextitem = items[first[0]] if first else None
                self.next_slot = Slot(current * count + test_index, current)
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                self.next_slot = None
                if session.shouldfail:
                    raise session.Failed(session.shouldfail)
                if session.shouldstop:
                    raise session.Interrupted(session.shouldstop)
            current, plan = upcoming, upcoming_plan
        return True

    def _plan(self, round_no: int, tests: list[str]) -> RoundPlan:
        """The one-worker plan of ``round_no`` over the collected tests."""
        return plan_round(self.settings.base_seed, round_no, tests, 1, self.settings.order)

    def locate(self, item: pytest.Item) -> Slot | None:
        """The executor's locator in a ``-n 0`` hunt."""
        return self.next_slot

    # -- results --------------------------------------------------------------

    def worker_name(self, report: Any) -> str:
        node = getattr(report, "node", None)
        gateway = getattr(node, "gateway", None)
        return str(getattr(gateway, "id", None) or "main")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        assert self.recorder is not None
        record = self.recorder.report(report, self.worker_name(report))
        if record is not None:
            self.add(record)

    def add(self, record: AttemptRecord) -> None:
        self._buffer.append(record)
        if record.execution == 1:
            done = self._round_done.get(record.round_no, 0) + 1
            self._round_done[record.round_no] = done
            if done == len(self.tests):
                self._round_finished(record.round_no)
        if len(self._buffer) >= FLUSH_EVERY or _PERF() - self._last_flush >= FLUSH_SECONDS:
            self.flush()

    def crashed(self, worker: str, key: int) -> None:
        """xdist lost a worker while it ran attempt ``key``."""
        assert self.recorder is not None
        count = len(self.tests)
        round_no, index = divmod(key, count)
        self.add(self.recorder.crashed(worker, key, round_no, self.tests[index]))

    def flush(self) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            ids = self.store.add_attempts(batch, self.test_ids)
            for record, attempt_id in zip(batch, ids, strict=True):
                record.attempt_id = attempt_id
        self._last_flush = _PERF()

    def _round_finished(self, round_no: int) -> None:
        self.rounds_completed += 1
        self.store.set_rounds_done(self.run_id, self.rounds_completed)
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is None or self.config.get_verbosity() < 0:
            return
        assert self.recorder is not None
        rec = self.recorder
        progress = Progress(
            round_done=self.rounds_completed,
            rounds=self.settings.rounds,
            strategy=self._round_strategy.get(round_no) or self.round_strategy(round_no),
            attempts=rec.attempts,
            failed=rec.failed_attempts,
            flaky=len(rec.flaky()),
            violations=rec.violation_attempts,
            elapsed=_PERF() - self._started,
            budget=self.settings.budget_seconds,
            tests=len(self.tests),
        )
        writer = self.config.get_terminal_writer()
        if writer.width_of_current_line:
            writer.line()  # after the F of a failed attempt
        terminal.write_line(line(progress))

    # -- terminal -----------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> Generator[None, Any, Any]:
        result = yield
        # A character per passing attempt is noise in a hunt of thousands:
        # the progress line reports per round. Failures keep their F; -v
        # keeps pytest's per-attempt lines.
        if (
            config.get_verbosity() <= 0
            and not report.failed
            and isinstance(result, tuple)
            and len(result) == 3
        ):
            return (result[0], "", "")
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self._interrupted = True

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.finish(session, int(exitstatus))

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._finished:
            return
        self._finished = True
        self.flush()
        rec = self.recorder
        interrupted = (
            self._interrupted
            or exitstatus == pytest.ExitCode.INTERRUPTED
            or bool(session.shouldfail)
            or bool(session.shouldstop)
        )
        found = rec is not None and (rec.failed_attempts or rec.violation_attempts)
        if found and not interrupted and session.exitstatus == pytest.ExitCode.OK:
            # Reruns that passed and swallowed network calls leave pytest at 0.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._condense_duplicate_failures()
        self.store.finish_run(
            self.run_id,
            status="interrupted" if interrupted else "complete",
            rounds_done=self.rounds_completed,
            exit_status=int(session.exitstatus),
        )
        if found and self.settings.isolate and not interrupted:
            self._isolate()

    def _isolate(self) -> None:
        """Why each flake flakes, in fresh processes (see _probe_driver)."""
        from hermetic_hunt.isolate.run import isolate_after_hunt

        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        say = terminal.write_line if terminal is not None else None
        cwd = str(self.config.invocation_params.dir)
        self.isolation_lines = isolate_after_hunt(
            self.store, self.run_id, self.settings, self.workers, cwd, say=say
        )

    def _condense_duplicate_failures(self) -> None:
        """Show one traceback per test and failure location; count the repeats.

        Repeats move from pytest's ``failed`` list to ``repeated failures``:
        the summary line still counts them, FAILURES and the short summary
        show each distinct failure once. Every attempt is in the database.
        """
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is None:
            return
        seen: set[tuple[str, str]] = set()
        kept, repeats = [], []
        for report in terminal.stats.get("failed", []):
            crash = getattr(report.longrepr, "reprcrash", None)
            key = (report.nodeid, f"{getattr(crash, 'path', '')}:{getattr(crash, 'lineno', '')}")
            if key in seen and isinstance(getattr(report, "hermetic_hunt", None), dict):
                repeats.append(report)
            else:
                seen.add(key)
                kept.append(report)
        if repeats:
            terminal.stats["failed"] = kept
            add_stats = getattr(terminal, "_add_stats", None)  # keeps its colour cache right
            if add_stats is not None:
                add_stats("repeated failures", repeats)
            else:
                terminal.stats.setdefault("repeated failures", []).extend(repeats)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for text in self.summary_lines():
            terminalreporter.write_line(text)

    def summary_lines(self) -> list[str]:
        rec = self.recorder
        if rec is None:
            return []
        cwd = str(self.config.invocation_params.dir)
        db = commands.display_path(self.store.path, cwd)
        elapsed = format_seconds(round(_PERF() - self._started, 1))
        flaky = rec.flaky()
        broken = sorted(
            n for n, t in rec.tallies.items() if t.failed and not t.passed and not t.other
        )
        violators = sorted(n for n, t in rec.tallies.items() if t.violations)
        out = [
            "",
            f"hermetic-hunt: run {self.run_id} · {self.rounds_completed} round(s) · "
            f"{rec.attempts:,} attempts in {elapsed} · {rec.failed_attempts:,} failed · "
            f"{len(flaky)} flaky · {len(broken)} broken · {len(violators)} with network "
            f"violations · {db}",
        ]
        if flaky:
            out.append("flaky tests (passed and failed on the same code):")
            for nodeid in flaky:
                tally = rec.tallies[nodeid]
                total = tally.passed + tally.failed
                first = tally.first_failure
                out.append(f"  {nodeid}  failed {tally.failed}/{total}")
                if first is not None and first.failure is not None:
                    out.append(f"      {first.failure.describe()}")
                if first is not None and first.attempt_id is not None:
                    command = commands.replay_command(
                        self.store.path, f"A{first.attempt_id}", cwd, rootdir=self.config.rootpath
                    )
                    out.append(f"      replay its first failing attempt: {command}")
        if broken:
            out.append("broken tests (failed in every attempt):")
            out.extend(f"  {nodeid}" for nodeid in broken)
        if violators:
            out.append("network violations (outbound calls the guard blocked):")
            for nodeid in violators:
                tally = rec.tallies[nodeid]
                out.append(f"  {nodeid}  in {tally.violations} attempt(s)")
        out.extend(self.isolation_lines)
        return out
