"""``pytest --hermetic-replay-db=PATH::ID``: replay a flake or an attempt in an ordinary session.

:func:`configure_replay` (called from :mod:`hermetic_hunt.plugin`'s
``pytest_configure``) opens the database, resolves the target into a
:class:`~hermetic_hunt.replay.plan.Plan`, restarts the process under the hash
seed the plan needs, and installs the engine a hunt runs its rounds with
(:class:`~hermetic_hunt.engine.engine.Engine`, with the hunt's stored
settings): :class:`ReplayRunner` selects exactly the plan's tests among the
collected ones and runs them in order, in this fresh process. Everything
else is plain pytest, so ``--pdb``, ``-x``, ``-vv``, ``--tb=long`` and ``-s``
work. :class:`ReplayReporter` says at the end whether the recorded failure
came back and stores the answer in ``replays``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from hermetic_hunt import environment, pasteable, stats
from hermetic_hunt.engine import wire
from hermetic_hunt.engine.engine import Conflicts, refuse_conflicts, stop_on_collection_errors
from hermetic_hunt.engine.executor import process_hash_seed
from hermetic_hunt.engine.runner import Job, StepRunner
from hermetic_hunt.errors import BadDatabase, HuntError
from hermetic_hunt.models import (
    FAILING,
    MAX_HASH_SEED,
    Attempt,
    Settings,
    Step,
    database_path,
    hash_seed_problem,
)
from hermetic_hunt.replay.plan import REEXEC_ENV, Plan, needs_reexec, parse_target, resolve
from hermetic_hunt.replay.verdict import (
    Observed,
    ReplayVerdict,
    Runs,
    blocked_calls,
    deciding,
    describe,
    faithfulness_warnings,
    judge,
    over_runs,
    plan_runs,
)
from hermetic_hunt.store import Store
from hermetic_hunt.store.replay import ReplaySource, add_replay
from hermetic_hunt.untrusted import clean

#: Options that cannot be honoured in a replay, with the reason shown.
_CONFLICTS: Conflicts = (
    ("hermetic_all", "--hermetic-all: the replay sandboxes each step itself"),
    ("hermetic_record", "--hermetic-record: the replay runs from the hunt's database"),
    ("hermetic_replay", "--hermetic-replay: use one of --hermetic-replay / --hermetic-replay-db"),
    ("count", "--count (pytest-repeat): it renames the tests the reproducer names"),
    ("looponfail", "--looponfail: a replay is a single session"),
)


def configure_replay(config: pytest.Config, value: str, marker: str | None = None) -> None:
    """Set up a replay session (HuntError -> the caller's pytest.UsageError).

    ``marker``: the integration marker given as an option (else the hunt's).
    """
    refuse_conflicts(config, "--hermetic-replay-db", _CONFLICTS)
    try:
        store, plan, recorded_env, settings, display, rate = _load(config, value)
    except HuntError as exc:
        text = str(exc)
        if not text.startswith("--hermetic-replay-db"):
            raise type(exc)(f"--hermetic-replay-db: {text}") from None
        raise
    config.add_cleanup(store.close)
    runs = _runs(config, plan, rate)
    restarted = os.environ.pop(REEXEC_ENV, None) is not None
    ignored = _own_selection(config)
    if ignored:
        plan.notes.append(f"{', '.join(ignored)} ignored: the reproducer decides what runs")
    from hermetic_hunt.engine.engine import Engine

    if getattr(config.option, "hermetic_seed", None) is None and plan.steps[-1].seed is not None:
        # hermetic-sandbox's header then names the seed the replayed test runs with.
        config.option.hermetic_seed = plan.steps[-1].seed
    if marker:
        settings = replace(settings, integration_marker=marker)
    engine = Engine(config, settings)
    job = Job(plan.steps, journals=plan.replayed())
    runner = engine.runner_for(job, watch_leaks=False)
    current_env = environment.collect(str(config.rootpath))
    warnings = faithfulness_warnings(plan, recorded_env, current_env)
    reporter = ReplayReporter(config, plan, store, display, runner, runs, restarted, warnings,
                              current_env)  # fmt: skip
    # The reporter first: among trylast hooks the earlier registered runs
    # first, so a missing test gets the replay's own, more specific message.
    config.pluginmanager.register(reporter, "hermetic-hunt-replay")
    # The path a collision's pair shares (relative paths are the rootdir's).
    resource = Path(config.rootpath, plan.resource) if plan.together and plan.resource else None
    config.pluginmanager.register(
        ReplayRunner(engine, runner, reporter, plan.together, resource),
        "hermetic-hunt-replay-runner",
    )


def _runs(config: pytest.Config, plan: Plan, rate: float | None) -> Runs:
    """How many times to run the reproducer (``--hermetic-replay-runs`` or its rate)."""
    raw = getattr(config.option, "hermetic_replay_runs", None)
    text = str(raw).strip()
    if raw is not None and not (text.isdigit() and 1 <= int(text) <= 10_000):
        raise pytest.UsageError(
            f"--hermetic-replay-runs: expected a number of runs from 1 to 10000, got {text!r}"
        )
    runs = plan_runs(rate, None if raw is None else int(text))
    if runs.planned <= 1:
        return runs
    from hermetic_hunt.engine.fork import fork_available

    alone = [flag for dest, flag in _ONE_RUN if getattr(config.option, dest, False)]
    if (getattr(config.option, "maxfail", 0) or 0) > 0:
        alone.append("-x/--maxfail")
    if not fork_available():
        alone.append("this platform cannot fork")
    if alone:
        plan.notes.append(
            f"one run in this process ({', '.join(alone)}), not {runs.planned} forked runs"
        )
        return replace(runs, planned=1)
    if runs.override:
        why = "--hermetic-replay-runs"
    else:
        why = f"95% sure to show a {stats.percent(runs.rate)} flake" if runs.rate else ""
        why += f", capped from {runs.needed}" if runs.needed > runs.planned else ""
    plan.notes.append(
        f"up to {runs.planned} runs, each in a fresh forked process, until one reproduces ({why})"
    )
    return runs


#: Options that need the replay in this very process: one run, not forked ones.
_ONE_RUN = (("usepdb", "--pdb"), ("trace", "--trace"), ("capture_none", "-s"))


def _load(
    config: pytest.Config, value: str
) -> tuple[Store, Plan, dict[str, Any] | None, Settings, str, float | None]:
    """Open the database and resolve the target (restarting here if the hash seed differs)."""
    target = parse_target(value)
    cwd = str(config.invocation_params.dir)
    db_path = database_path(target.path, cwd)
    display = pasteable.display_path(db_path, cwd)
    store = Store.open(db_path, create=False)
    try:
        source = ReplaySource(store)
        plan = resolve(replace(target, path=display), source)
        recorded_env = source.run_environment(plan.run_id) if plan.run_id is not None else None
        settings = source.run_settings(plan.run_id)
        # An attempt replays exactly as it ran, once; a flake until it reproduces.
        rate = source.fail_rate(plan.test) if plan.flake_row is not None else None
        if hash_seed_problem(plan.hash_seed):  # Python would not start under it
            raise BadDatabase(
                f"{plan.label} has hash seed {plan.hash_seed} stored, outside PYTHONHASHSEED's "
                f"range 0..{MAX_HASH_SEED}: the database is damaged or was edited; run a new hunt"
            )
        if needs_reexec(plan.hash_seed, os.environ):
            store.close()
            _reexec_or_explain(config, plan)
    except BaseException:
        store.close()
        raise
    return store, plan, recorded_env, settings, display, rate


#: Most seconds a collision's own test waits for its partner to hold the shared
#: path (the path exists) before it starts anyway.
PARTNER_WAIT = 2.0


@dataclass(eq=False)
class ReplayRunner:
    """pytest plugin: select exactly the plan's tests, run them in order.

    One run runs in this process. More run each in a child forked from this
    collected, never-run session (:func:`hermetic_hunt.engine.fork.run_job`,
    as a hunt's rounds), one after the other until one reproduces; the
    deciding run's reports are the session's (its failures in pytest's
    terminal and exit status). A collision's partner (``together``) runs beside
    each run in another child forked from the session, released just before the
    plan's own steps start; its attempts go to the reporter's ``partner``.
    """

    engine: Any
    runner: StepRunner
    reporter: ReplayReporter
    together: tuple[Step, ...] = ()
    resource: Path | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        try:
            self.runner.select(items)
        except HuntError as exc:
            raise pytest.UsageError(str(exc)) from None
        # A collision's partner stays collected: its child selects it from the session.
        by_id = {item.nodeid: item for item in items}
        partner = [by_id[s.nodeid] for s in self.together if s.nodeid in by_id]
        wanted = set(self.runner.items) | {item.nodeid for item in partner}
        deselected = [item for item in items if item.nodeid not in wanted]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        own = self.runner.items
        items[:] = [*own.values(), *(item for item in partner if item.nodeid not in own)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if not stop_on_collection_errors(session):
            return True
        if self.reporter.runs.planned > 1:
            self._forked(session)
            return True
        with self._beside(session):
            outcome = self.engine.run(session, self.runner.job, runner=self.runner)
        if outcome.status == "interrupted":
            raise KeyboardInterrupt
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        return True

    def _forked(self, session: pytest.Session) -> None:
        from hermetic_hunt.engine.fork import ChildSetup, run_job

        reporter = self.reporter
        hash_seed = process_hash_seed()
        done: list[tuple[list[dict[str, Any]], list[Attempt]]] = []
        for _ in range(reporter.runs.planned):
            lines: list[bytes] = []
            with self._beside(session):
                run_job(self.engine, session, self.runner.job, ChildSetup(), lines.extend,
                        hash_seed=hash_seed)  # fmt: skip
            messages = wire.decode_batch(lines)  # (None: a line that is no JSON object)
            steps = [m for m in messages if m is not None and isinstance(m.get("step"), int)]
            records = [a for m in steps for a in wire.attempts_in(m)]
            verdict = reporter.verdict_of(records)
            reporter.verdicts.append(verdict)
            done.append((steps, records))
            if verdict.outcome == "reproduced":
                break
        # The run that decides the verdict is the one pytest reports.
        steps, reporter.records = done[deciding(reporter.verdicts)]
        for message in steps:
            self._show(session, message)

    def _show(self, session: pytest.Session, message: dict[str, Any]) -> None:
        """One step of the deciding run as pytest reports (failing ones as the child sent them)."""
        hook = session.config.hook
        failing = [r for r in message.get("reports") or [] if isinstance(r, dict)]
        for data in failing:
            report = None
            with contextlib.suppress(Exception):  # one pytest cannot rebuild: the verdict stands
                report = hook.pytest_report_from_serializable(config=session.config, data=data)
            if report is not None:
                hook.pytest_runtest_logreport(report=report)
        if failing:
            return
        for attempt in wire.attempts_in(message):
            item = self.runner.items.get(attempt.nodeid)
            if item is None or attempt.outcome not in ("passed", "skipped"):
                continue
            location = item.location
            if attempt.outcome == "passed":
                report = pytest.TestReport(attempt.nodeid, location, {}, "passed", None, "call",
                                           duration=attempt.duration)  # fmt: skip
            else:
                where = (str(location[0]), (location[1] or 0) + 1, "skipped in the replayed run")
                report = pytest.TestReport(attempt.nodeid, location, {}, "skipped", where, "setup")
            hook.pytest_runtest_logreport(report=report)

    @contextlib.contextmanager
    def _beside(self, session: pytest.Session) -> Iterator[None]:
        """A collision's partner runs in a forked child while the block runs."""
        if not self.together:
            yield
            return
        from hermetic_hunt.engine.fork import Beside

        beside = Beside(self.engine, session, Job(self.together))
        beside.release()
        # Until the partner holds the shared path (it exists), at most PARTNER_WAIT.
        until, path = time.monotonic() + PARTNER_WAIT, self.resource
        while path is not None and not path.exists() and time.monotonic() < until:
            time.sleep(0.005)
        try:
            yield
        finally:
            self.reporter.partner = beside.finish(self.engine.settings.probe_timeout)


#: Options that choose which tests run or where: a replay's reproducer decides.
_SELECTION = (("lf", "--lf"), ("failedfirst", "--ff"), ("stepwise", "--sw"),
              ("stepwise_skip", "--sw-skip"))  # fmt: skip


def _own_selection(config: pytest.Config) -> list[str]:
    """Turn off what would reselect or spread the reproducer; the options it ignored.

    A reproducer is a sequence in one process: ``-n`` (perhaps from addopts)
    must not spread it over workers, ``--lf``/``--sw`` must not drop its
    polluters. Runs before xdist's, the cache's and stepwise's configure hooks.
    """
    ignored = []
    if getattr(config.option, "dist", "no") != "no" or getattr(config.option, "tx", None):
        config.option.dist = "no"
        config.option.tx = []
        config.option.numprocesses = 0
        ignored.append("-n/--dist")
    for dest, flag in _SELECTION:
        if getattr(config.option, dest, False):
            setattr(config.option, dest, False)
            ignored.append(flag)
    return ignored


# -- PYTHONHASHSEED ------------------------------------------------------------


def _pytest_entry() -> list[str] | None:
    """How this process was started as pytest (None: not from pytest's command line)."""
    argv0 = Path(sys.argv[0] if sys.argv else "")  # ("": not pytest's name either)
    if argv0.name == "__main__.py" and argv0.parent.name == "pytest":
        return ["-m", "pytest"]
    if argv0.name in ("pytest", "py.test") and argv0.is_file():
        return [str(argv0)]
    return None


def _reexec_or_explain(config: pytest.Config, plan: Plan) -> None:
    """Restart this pytest under the plan's PYTHONHASHSEED (checked), or say how to."""
    needed = str(plan.hash_seed)
    current = os.environ.get("PYTHONHASHSEED") or "random"
    args = [str(arg) for arg in config.invocation_params.args]
    command = f"PYTHONHASHSEED={needed} {shlex.join(['pytest', *args])}"
    entry = _pytest_entry()
    why = ""
    if os.environ.get(REEXEC_ENV):
        why = "restarting did not set it"
    elif os.name != "posix":
        why = "this platform cannot restart pytest in place"
    elif entry is None or sys.argv[1:] != args:
        why = "this pytest was not started from its command line"
    if why:
        raise HuntError(
            f"{plan.label} needs PYTHONHASHSEED={needed} (this process has {current}) and "
            f"{why}: run {command}"
        )
    assert entry is not None
    env = {**os.environ, "PYTHONHASHSEED": needed, REEXEC_ENV: needed}
    flags: list[str] = getattr(subprocess, "_args_from_interpreter_flags", list)()
    sys.stdout.write(
        f"hermetic-hunt replay: {plan.label} needs PYTHONHASHSEED={needed} (this process "
        f"has {current}): restarting pytest under it\n"
    )
    sys.stdout.flush()
    sys.stderr.flush()
    # The same interpreter, flags and arguments: no shell, nothing from the database
    # but the hash seed (an int).
    try:
        os.execve(sys.executable, [sys.executable, *flags, *entry, *args], env)  # noqa: S606
    except OSError as exc:
        raise HuntError(
            f"{plan.label} needs PYTHONHASHSEED={needed} and restarting failed ({exc}): "
            f"run {command}"
        ) from None


# -- the session -----------------------------------------------------------------


@dataclass(eq=False)
class ReplayReporter:
    """pytest plugin: header, selection check, verdict, ``replays`` row, summary."""

    config: pytest.Config
    plan: Plan
    store: Store
    display: str
    runner: Any
    runs: Runs = field(default_factory=lambda: Runs(1, 1))
    restarted: bool = False
    warnings: list[str] = field(default_factory=list)
    current_env: dict[str, Any] = field(default_factory=dict)
    deselected: set[str] = field(default_factory=set)
    #: A collision partner's attempts (run beside the plan's steps).
    partner: list[Attempt] = field(default_factory=list)
    verdict: ReplayVerdict | None = None
    #: Forked runs: each run's verdict, and the records of the run that decides.
    verdicts: list[ReplayVerdict] = field(default_factory=list)
    records: list[Attempt] | None = None
    lines: list[str] = field(default_factory=list)
    stopped: str = ""

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = [describe(self.plan, self.display)]
        if self.restarted:
            lines.append(
                f"hermetic-hunt replay: restarted under PYTHONHASHSEED={self.plan.hash_seed}"
            )
        lines.extend(f"hermetic-hunt replay: {note}" for note in self.plan.notes)
        return [clean(line) for line in lines]  # test ids and notes come from the database

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.update(item.nodeid for item in items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        collected = {item.nodeid for item in items}
        for step in (*self.plan.steps, *self.plan.together):
            if step.nodeid in collected:
                continue
            why = (
                "an option deselected (-k, -m, --lf, --deselect?): drop it to replay"
                if step.nodeid in self.deselected
                else f"is not collected under rootdir {self.config.rootpath} (renamed or "
                "deleted? run from the directory the hunt ran in, or hunt again with "
                "--hermetic-hunt)"
            )
            raise pytest.UsageError(
                f"--hermetic-replay-db: {self.plan.label} needs {step.nodeid!r}, which {why}"
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self.stopped = "interrupted"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.runner.items or self.config.option.collectonly:
            return  # collection failed or was all that was asked: nothing ran
        for record in self.runner.records:
            self.warnings.extend(f"{record.nodeid}: {text}" for text in record.warnings)
        if not self.stopped and (session.shouldfail or session.shouldstop):
            self.stopped = f"stopped early: {session.shouldfail or session.shouldstop}"
        records = self.records if self.records is not None else list(self.runner.records)
        if self.verdicts:
            self.verdict = over_runs(self.plan, self.verdicts, self.runs)
        else:
            self.verdict = self.verdict_of(records, self.stopped)
        last = len(self.plan.steps) - 1
        notes = [f"{r.nodeid} (run before it) {r.outcome} too" for r in records
                 if r.position < last and r.execution == 1 and r.outcome in FAILING]  # fmt: skip
        self.lines = [self.verdict.line, *(f"  note: {text}" for text in notes)]
        violated = blocked_calls([(r.nodeid, r.violations) for r in records])
        if violated:
            # As in the hunt: a blocked network call fails the session even
            # when the test swallowed the refusal (the hermetic-tests policy).
            self.lines.append(violated)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._store(self.verdict, notes)
        if self.warnings:
            self.lines.append("this replay may be less than faithful:")
            self.lines.extend(f"  - {text}" for text in dict.fromkeys(self.warnings))

    def verdict_of(self, records: list[Attempt], stopped: str = "") -> ReplayVerdict:
        """The verdict of one run (its ``records``): what the last step's first execution
        did, and a collision's other side -- the first of its attempts that failed (or of
        the plan's own steps but the last, when the sides hold several tests), else its
        last attempt, with the test it is of."""
        last = len(self.plan.steps) - 1
        firsts = [r for r in records if r.execution == 1]
        observed = next((_observed(r) for r in firsts if r.position == last), None)
        mine = [r for r in firsts if r.position < last]
        failing = [a for a in (*self.partner, *mine) if a.failed and a.execution == 1]
        chosen = failing[0] if failing else (self.partner[-1] if self.partner else None)
        if chosen is None:
            return judge(self.plan, observed, stopped)
        return judge(self.plan, observed, stopped, _observed(chosen), chosen.nodeid)

    def _store(self, verdict: ReplayVerdict, notes: list[str]) -> None:
        try:
            add_replay(
                self.store,
                target=self.plan.target.ref,
                flake_row=self.plan.flake_row,
                attempt_id=self.plan.attempt_id,
                outcome=verdict.outcome,
                detail="\n".join([verdict.line, *notes]),
                environment=self.current_env,
            )
        except HuntError as exc:
            self.warnings.append(f"could not store this replay in {self.display}: {exc}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.lines:
            return
        terminalreporter.write_sep("=", "hermetic-hunt replay")
        assert self.verdict is not None
        colour = {"reproduced": {"red": True}, "not-reproduced": {"green": True}}
        for index, text in enumerate(self.lines):
            markup = colour.get(self.verdict.outcome, {"yellow": True}) if index == 0 else {}
            terminalreporter.write_line(clean(text), **markup)


def _observed(record: Attempt) -> Observed:
    failure = record.failure if record.outcome in FAILING else None
    texts = (failure.exc_type, failure.location, failure.message) if failure else ("", "", "")
    return Observed(record.outcome, *texts, tuple(v.describe() for v in record.violations))
