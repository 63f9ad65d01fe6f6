"""The hunt's controller: the run row, results in, rounds out, the end summary.

One :class:`HuntController` is registered on the process that owns the
session: the only process of a ``-n 0`` hunt (:mod:`.local` forks the
rounds from it) or xdist's controller (:mod:`.xdist` schedules the rounds
onto workers). Either way it is the single writer of the database: the
lines of finished steps come in (:meth:`HuntController.ingest`), attempts
go out in batches.

Order of phases: configure (options, database opened) -> session start (run
row) -> collection -> rounds (each ends at a barrier: files checked, progress
printed) -> session finish (flush, isolation, status) -> terminal summary.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from hermetic_hunt import _compat, environment, pasteable
from hermetic_hunt.engine import wire
from hermetic_hunt.engine.engine import collection_failed
from hermetic_hunt.engine.files import FileWatch, attribute
from hermetic_hunt.engine.fork import interrupts_deferred
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.engine.stress import CpuStress
from hermetic_hunt.errors import HuntError
from hermetic_hunt.findings import IsolationReport
from hermetic_hunt.hunt.progress import Progress, line
from hermetic_hunt.hunt.schedule import RoundPlan, plan_round
from hermetic_hunt.hunt.signals import Interrupts
from hermetic_hunt.hunt.tally import Tallies
from hermetic_hunt.models import (
    Attempt,
    Leak,
    RunInfo,
    Settings,
    Step,
    attempts_text,
    format_seconds,
)
from hermetic_hunt.seeds import round_now
from hermetic_hunt.store import Store, runs
from hermetic_hunt.untrusted import is_whole

_PERF = time.perf_counter
FLUSH_EVERY = 500
FLUSH_SECONDS = 2.0


class HuntController:
    """pytest plugin on the session-owning process of a hunt."""

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
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
        self.tests: list[str] = []
        self.test_ids: dict[str, int] = {}
        self.tallies = Tallies()
        self.rounds_completed = 0
        self.isolation: IsolationReport | None = None
        self.files: FileWatch | None = None
        self.error: str | None = None
        self.stored = 0  # attempts written to the database
        self.session: pytest.Session | None = None
        self._plans: dict[int, RoundPlan] = {}
        self._stress: CpuStress | None = None
        self._slices_left: dict[int, int] = {}
        #: Per round: step lines planned, step lines that came, slices not ``completed``.
        self._planned: dict[int, int] = {}
        self._received: dict[int, int] = {}
        self._cut_short: set[int] = set()
        #: Rounds whose step lines did not add up: (round, planned, received).
        self.incomplete: list[tuple[int, int, int]] = []
        #: Lines on round channels that the round's own child did not write.
        self.rejected = 0
        self._round_attempts: dict[int, list[Attempt]] = {}
        self._leaks: list[tuple[int, Attempt | None, Leak, bool]] = []
        self._buffer: list[Attempt] = []
        self._last_flush = _PERF()
        self._started = _PERF()
        self._interrupted = False
        #: SIGTERM/SIGHUP take the Ctrl-C path; a second signal waits for the final write.
        self.interrupts = Interrupts(controller=True)
        self._finished = False
        self._passed_reports = 0
        #: ids of the failing reports shown for attempts (see _condense_duplicate_failures).
        self._shown: set[int] = set()
        #: How long the rounds took (set when they end; isolation not included).
        self.rounds_seconds = 0.0
        #: Nodeids of the files (or classes) that could not be collected.
        self.uncollected: list[str] = []
        #: Collection failed: no round ran (see :meth:`collection_stops`).
        self.stopped_at_collection = False

    # -- set-up -------------------------------------------------------------

    @property
    def distributed(self) -> bool:
        return self.worker_spec != ["main"]

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
        self._started = _PERF()
        terminal = config.pluginmanager.getplugin("terminalreporter")
        if terminal is not None:
            # A file name per attempt and a percentage that passes 100% in the
            # first round say nothing in a hunt: the progress lines replace them.
            terminal.showfspath = False
            _compat.quiet_progress(terminal)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        where = pasteable.display_path(self.store.path, str(config.invocation_params.dir))
        shard = f" · shard {s.shard}" if s.shard.count > 1 else ""
        return [
            f"hermetic-hunt: run {self.run_id} · {s.describe_length} · mode {s.mode} · "
            f"order {s.order} · time {s.time.spec()}{shard} · base seed {s.base_seed} "
            f"(--hermetic-seed={s.base_seed}) "
            f"· database {where}"
        ]

    def set_tests(self, nodeids: Sequence[str]) -> None:
        """The canonical test list (collection order) the schedule is built on."""
        self.tests = list(nodeids)
        with self.writing():
            self.test_ids = self.store.test_ids(self.tests)
            runs.set_run_tests(self.store, self.run_id, len(self.tests))

    def begin(self) -> None:
        """Right before the first round: what the checkout looks like."""
        if not self.distributed or all(spec.startswith("popen") for spec in self.worker_spec):
            self.files = FileWatch(str(self.config.rootpath), own=self.store.own_files())
        if self.config.get_verbosity() == -1:
            # -q hides pytest's header: keep ours, as pytest-randomly keeps its seed.
            for text in self.pytest_report_header(self.config):
                self._line(text)
        self._started = _PERF()

    def _line(self, text: str) -> None:
        """``text`` on a line of its own (after the F of a failed attempt, if any)."""
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is None:
            return
        writer = self.config.get_terminal_writer()
        if writer.width_of_current_line:
            writer.line()
        terminal.write_line(text)

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

    def rounds(self) -> Iterator[int]:
        """Global round numbers to run, honouring the round count or time budget."""
        s = self.settings
        local = 0
        deadline = self._started + (s.budget_seconds or 0.0)
        while self.error is None:
            if s.rounds is not None and local >= s.rounds:
                return
            if s.budget_seconds is not None and local > 0 and _PERF() >= deadline:
                return
            yield s.shard.global_round(local)
            local += 1

    @property
    def local_workers(self) -> bool:
        """Every worker runs on this machine (-n 0, or xdist's popen workers)."""
        return not self.distributed or all(spec.startswith("popen") for spec in self.worker_spec)

    def plan(self, round_no: int, workers: int) -> RoundPlan:
        """Plan ``round_no`` and set up its conditions (a stress round starts its stress).

        Called right before the round runs; :meth:`round_done` ends them.
        """
        s = self.settings
        plan = plan_round(s.base_seed, round_no, self.tests, workers, s.order, s.time, s.mode)
        self._plans[round_no] = plan
        self._slices_left[round_no] = sum(1 for part in plan.slices if part)
        self._planned[round_no] = sum(map(len, plan.slices)) * (2 if plan.twice else 1)
        self._received[round_no] = 0
        self._round_attempts[round_no] = []
        self._end_stress()
        if plan.condition == "stress" and self.local_workers:
            # As many busy processes as the hunt has workers: the round's
            # tests get about half the CPU they would get on an idle machine.
            self._stress = CpuStress(self.workers)
            self._stress.start()
        return plan

    @property
    def stress(self) -> int:
        """Busy processes running now (0: none)."""
        return self._stress.running if self._stress is not None else 0

    def _end_stress(self) -> None:
        if self._stress is not None:
            self._stress.stop()
            self._stress = None

    def job(self, plan: RoundPlan, slot: int, tests: Sequence[str] | None = None) -> Job:
        """Worker ``slot``'s share of a planned round (``tests``: that worker's collection)."""
        names = tests if tests is not None else self.tests
        indices = plan.slices[slot]
        job = make_job(self.settings, plan.round_no, slot, [names[i] for i in indices],
                       plan.twice)  # fmt: skip
        return replace(job, condition=plan.condition, stress=self.stress)

    # -- results --------------------------------------------------------------

    def ingest(self, lines: Sequence[bytes], worker: str, round_no: int) -> None:
        """Lines of finished steps from the process that ran ``round_no`` on ``worker``."""
        with interrupts_deferred():  # Ctrl-C waits until the batch is in
            self._ingest(lines, worker, round_no)

    def _ingest(self, lines: Sequence[bytes], worker: str, round_no: int) -> None:
        run_id, verbose = self.run_id, self._verbose
        buffer, add = self._buffer, self.tallies.add
        attempts_of_round = self._round_attempts.setdefault(round_no, [])
        received = 0
        for message in wire.decode_batch(lines):
            if message is None:
                self.rejected += 1
                continue
            if message.get("op") == wire.END:
                self._count(round_no, received)
                received = 0
                self._slice_ended(worker, round_no, message)
                continue
            received += 1
            for data in message.get("attempts") or ():
                try:
                    attempt = Attempt.from_json(data)
                except ValueError:
                    self.rejected += 1
                    continue
                attempt.run_id, attempt.worker = run_id, worker
                if verbose and not attempt.failed:
                    # Passing attempts come without a report: -v still lists them.
                    self._say(f"{attempt.nodeid} {attempt.outcome.upper()}")
                add(attempt)
                buffer.append(attempt)
                attempts_of_round.append(attempt)
                for leak in attempt.leaks:
                    self._leaks.append((round_no, attempt, leak, False))
            for data in message.get("reports") or ():
                self._show(data)
        self._count(round_no, received)
        if len(self._buffer) >= FLUSH_EVERY or _PERF() - self._last_flush >= FLUSH_SECONDS:
            with self.writing():
                self.flush()

    def _count(self, round_no: int, steps: int) -> None:
        if steps and round_no in self._received:
            self._received[round_no] += steps

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """A write to the database that may fail (a full disk): the hunt stops, nothing raises.

        The error becomes :attr:`error` (one line, printed in the summary); the
        run loops stop at it; the attempts not yet written stay in the buffer
        and are tried once more when the session finishes.
        """
        try:
            yield
        except HuntError as exc:
            self.error = self.error or str(exc)

    @functools.cached_property
    def _verbose(self) -> bool:
        return self.config.get_verbosity() > 0

    def _say(self, text: str) -> None:
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(text)

    def _show(self, data: Any) -> None:
        """A failing phase report, for pytest's terminal (its F and FAILURES section)."""
        if not isinstance(data, dict):
            return
        try:
            report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        except Exception:  # a report pytest cannot rebuild: the attempt is stored anyway
            return
        if report is not None:
            self._shown.add(id(report))
            self.config.hook.pytest_runtest_logreport(report=report)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        """No letter per failed attempt: the round's progress line counts them (-v keeps words)."""
        status = yield
        if status is None or self._verbose or not self._from_a_round(report):
            return status
        category, _, word = status
        return category, "", word

    def _from_a_round(self, report: Any) -> bool:
        """A report of one of the hunt's attempts (shown by :meth:`_show`)."""
        return id(report) in self._shown

    def _slice_ended(self, worker: str, round_no: int, message: dict[str, Any]) -> None:
        status = message.get("status")
        if status == "error":
            self.error = str(message.get("detail") or "a job stopped")
        if status != "completed":
            self._cut_short.add(round_no)
        rejected = message.get("rejected")
        if is_whole(rejected) and rejected > 0:
            self.rejected += rejected
        kept = wire.round_leaks(message)
        if kept:
            ran = {
                a.position: a
                for a in self._round_attempts.get(round_no, [])
                if a.worker == worker and a.execution == 1
            }
            for position, leaks in kept.items():
                attempt = ran.get(position)
                keys = {(x.resource, x.name) for x in leaks}
                self._leaks = [
                    (r, a, x, True if a is attempt and (x.resource, x.name) in keys else p)
                    for r, a, x, p in self._leaks
                ]
        left = self._slices_left.get(round_no, 0) - 1
        self._slices_left[round_no] = left
        if left == 0:
            with self.writing():
                self.round_done(round_no)

    def crashed(self, worker: str, round_no: int, attempt: Attempt) -> None:
        """xdist lost the worker process itself while it ran ``attempt`` (one step)."""
        self.ingest([wire.step_line(0, [attempt], [])], worker, round_no)

    def flush(self) -> None:
        self._reclaim()
        if self._buffer:
            batch = self._buffer
            ids = self.store.add_attempts(batch, self.test_ids)  # nothing lost on an error
            self._buffer = []
            self.stored += len(batch)
            for record, attempt_id in zip(batch, ids, strict=True):
                record.attempt_id = attempt_id
        self._last_flush = _PERF()

    def _reclaim(self) -> None:
        """The database is the hunt's: a test that removed or replaced it loses nothing."""
        old = self.store.path
        moved = self.store.reclaim()
        if moved is None:
            return
        how, new = moved
        if self.files is not None:  # the new file is the hunt's, not a test's leak
            self.files.own.update(os.path.realpath(p) for p in self.store.own_files())
        cwd = str(self.config.invocation_params.dir)
        self._line(
            f"hermetic-hunt: {pasteable.display_path(old, cwd)} was {how} during the hunt "
            f"(by a test?); what was recorded is in {pasteable.display_path(new, cwd)}, "
            "and the hunt goes on writing there"
        )

    def _flush_leaks(self, round_no: int) -> None:
        mine = [row for row in self._leaks if row[0] == round_no]
        if not mine:
            return
        self._leaks = [row for row in self._leaks if row[0] != round_no]
        self.flush()
        self.store.add_leaks(
            self.run_id,
            [(r, a.attempt_id if a is not None else None, x, p) for r, a, x, p in mine],
        )

    def round_done(self, round_no: int) -> None:
        """Every worker finished ``round_no``: stress off, files, leaks, progress."""
        self._end_stress()
        self.flush()  # a round counts as done once all its attempts are stored
        self._count_check(round_no)
        self.rounds_completed += 1
        self._check_files(round_no)
        self._flush_leaks(round_no)
        self._round_attempts.pop(round_no, None)
        runs.set_rounds_done(self.store, self.run_id, self.rounds_completed)
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is None or self.config.get_verbosity() < -1:
            return  # -q keeps one line per round; -qq none
        t = self.tallies
        plan = self._plans.pop(round_no, None)
        strategy = plan.strategy if plan is not None else ""
        if plan is not None and plan.condition != "exact":
            strategy = f"{strategy} · {plan.condition}"
        progress = Progress(
            round_done=self.rounds_completed,
            rounds=self.settings.rounds,
            strategy=strategy,
            attempts=t.attempts,
            repeated=t.repeated,
            failed=t.failed_attempts,
            flaky=len(t.flaky()),
            violations=t.violation_attempts,
            elapsed=_PERF() - self._started,
            budget=self.settings.budget_seconds,
            tests=len(self.tests),
        )
        self._line(line(progress))

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
        runs.set_incomplete(self.store, self.run_id, self._run_notes())

    def incomplete_text(self) -> str:
        """One line: the rounds that did not add up ('' when all did)."""
        return "; ".join(
            f"round {round_no} ran {received:,} of {planned:,} planned steps"
            for round_no, planned, received in self.incomplete
        )

    def rejected_text(self) -> str:
        """One line: the lines on round channels that the rounds' own processes did not write."""
        if not self.rejected:
            return ""
        return (
            f"{self.rejected:,} line(s) written to a round's channel by another process "
            "(a test, or a process it started) were ignored"
        )

    def _run_notes(self) -> str:
        return "; ".join(t for t in (self.incomplete_text(), self.rejected_text()) if t)

    def _check_files(self, round_no: int) -> None:
        if self.files is None:
            return
        attempts = self._round_attempts.get(round_no, [])
        for change in self.files.check():
            attempt, fits = attribute(change, attempts)
            if change.temp and attempt is None:
                continue  # another process's, not the round's (engine/files.py)
            leak = self.files.leak(change)
            if fits > 1:
                # Not one attempt's: the report says so rather than guess.
                leak = Leak(leak.resource, leak.name, leak.change,
                            f"written while {fits} tests ran at once")  # fmt: skip
                attempt = None
            self._leaks.append((round_no, attempt, leak, True))

    # -- terminal -----------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self._interrupted = True

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.finish(session, int(exitstatus))

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._finished:
            return
        self._finished = True
        self.rounds_seconds = _PERF() - self._started
        self._end_stress()
        try:
            self.flush()
            for round_no in sorted({row[0] for row in self._leaks}):
                self._flush_leaks(round_no)
        except HuntError as exc:
            self.error = self.error or str(exc)
        t = self.tallies
        interrupted = (
            self._interrupted
            or exitstatus == pytest.ExitCode.INTERRUPTED
            or bool(session.shouldfail)
            or bool(session.shouldstop)
            or self.error is not None
        )
        found = t.failed_attempts or t.violation_attempts
        if found and not interrupted and session.exitstatus == pytest.ExitCode.OK:
            # Reruns that passed and swallowed network calls leave pytest at 0.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.error is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self._count_passes()
        self._hide_tracebacks()
        self._condense_duplicate_failures()
        if self.rejected:
            with self.writing():
                runs.set_incomplete(self.store, self.run_id, self._run_notes())
        try:
            runs.finish_run(
                self.store,
                self.run_id,
                status="interrupted"
                if interrupted
                else "incomplete"
                if self.incomplete
                else "complete",
                rounds_done=self.rounds_completed,
                exit_status=int(session.exitstatus),
            )
        except HuntError as exc:
            self.error = self.error or str(exc)
        self.interrupts.stored()
        wanted = found or t.not_idempotent()
        if wanted and self.settings.isolate and not interrupted:
            with self.writing():  # a full disk during isolation: said in the summary
                self._isolate()
            self._past_dates_only(session)

    def _past_dates_only(self, session: pytest.Session) -> None:
        """Every failing test failed only at dates before today (and no network
        call was blocked): CI will never see it, so the hunt exits 0."""
        isolation = self.isolation
        if (
            isolation is None
            or self.error is not None
            or self.tallies.violation_attempts
            or session.exitstatus != pytest.ExitCode.TESTS_FAILED
        ):
            return
        past = {v.nodeid for _, v in isolation.flakes if v.evidence.get("exposure") == "past"}
        failed = {nodeid for nodeid, tally in self.tallies.tests.items() if tally.failed}
        if not failed or not failed <= past:
            return
        session.exitstatus = pytest.ExitCode.OK
        try:
            runs.finish_run(
                self.store, self.run_id, status="complete", rounds_done=self.rounds_completed,
                exit_status=int(session.exitstatus),
            )  # fmt: skip
        except HuntError as exc:
            self.error = self.error or str(exc)

    def _count_passes(self) -> None:
        """Passing attempts were never sent as reports: count them for pytest's last line."""
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is None:
            return
        passed = sum(t.passed for t in self.tallies.tests.values())
        if passed:
            report = pytest.TestReport("hermetic-hunt", ("", None, ""), {}, "passed", None, "call")
            _compat.add_stats(terminal, "passed", [report] * passed)

    def _isolate(self) -> None:
        """Why each flake flakes, in fresh processes (see isolate.run)."""
        from hermetic_hunt.isolate.run import Invocation, isolate_after_hunt
        from hermetic_hunt.isolate.wire import probe_args

        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        quiet = terminal is None or self.config.get_verbosity() < -1
        params = self.config.invocation_params
        invocation = Invocation(str(params.dir), tuple(probe_args([str(a) for a in params.args])))
        self.isolation = isolate_after_hunt(
            self.store, self.run_id, self.settings, self.workers, invocation,
            say=None if quiet else self._line, rounds_seconds=self.rounds_seconds,
        )  # fmt: skip

    def _hide_tracebacks(self) -> None:
        """A hunt's failures are expected: no traceback per attempt unless ``--tb`` asks.

        pytest's default (``--tb=auto``) becomes ``--tb=no`` for the end of the
        session: the short summary keeps one line per failing test, and the
        hunt's summary and the report say what each failure is. Set after the
        rounds, so every stored failure has its full text.
        """
        if self.config.option.tbstyle == "auto":
            self.config.option.tbstyle = "no"

    def _condense_duplicate_failures(self) -> None:
        """Show one failure per test (per test and location with ``--tb``); count the repeats.

        Repeats move from pytest's ``failed`` list to ``repeated failures``:
        the summary line still counts them, FAILURES and the short summary
        show each distinct failure once. Every attempt is in the database.
        """
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        if terminal is None:
            return
        tracebacks = self.config.option.tbstyle != "no"
        seen: set[tuple[str, str]] = set()
        kept, repeats = [], []
        for report in terminal.stats.get("failed", []):
            crash = getattr(report.longrepr, "reprcrash", None)
            where = f"{getattr(crash, 'path', '')}:{getattr(crash, 'lineno', '')}"
            key = (report.nodeid, where if tracebacks else "")
            if key in seen and self._from_a_round(report):
                repeats.append(report)
            else:
                seen.add(key)
                kept.append(report)
        if repeats:
            terminal.stats["failed"] = kept
            _compat.add_stats(terminal, "repeated failures", repeats)

    def summary_header(self) -> str:
        """The first line of the end summary: what the rounds did (the rest --
        counts, findings, leaks -- is :func:`hermetic_hunt.report.summary.end_of_hunt`)."""
        t = self.tallies
        cwd = str(self.config.invocation_params.dir)
        db = pasteable.display_path(self.store.path, cwd)
        seconds = self.rounds_seconds if self._finished else _PERF() - self._started
        return (
            f"hermetic-hunt: run {self.run_id} · {self.rounds_completed} round(s) · "
            f"{attempts_text(t.attempts, t.repeated)} in {format_seconds(round(seconds, 1))} · "
            f"{t.failed_attempts:,} failed · {db}"
        )


def make_job(settings: Settings, round_no: int, slot: int, nodeids: Sequence[str],
             twice: bool) -> Job:  # fmt: skip
    """The job of worker ``slot`` in ``round_no``: its tests, in order (each twice in a row)."""
    mode = settings.mode
    if twice:
        steps = tuple(Step(n, mode=mode) for n in nodeids for _ in (1, 2))
        repeats: tuple[int, ...] = tuple(r for _ in nodeids for r in (1, 2))
    else:
        steps, repeats = tuple(Step(n, mode=mode) for n in nodeids), ()
    return Job(steps, round_no, start=round_now(settings.base_seed, round_no, slot, settings.dates),
               repeats=repeats)  # fmt: skip
