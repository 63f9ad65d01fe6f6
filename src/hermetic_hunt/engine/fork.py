"""A fresh process per job: forked from a collected, never-run session.

Every job -- a hunt round's slice on one worker, an isolation probe -- runs
in a child forked from a pytest session that collected the suite and ran
nothing. To the tests the child is a fresh ``pytest`` process: module
globals, class attributes, caches, fixtures of every scope, the working
directory, the environment and threads all start as a new run would have
them, while collection is paid once. Inside the job state flows from test to
test exactly as in a plain run.

The child writes one line per finished step to a pipe the moment the step is
over (:mod:`hermetic_hunt.engine.wire`), so when it dies (``os._exit``, a
segfault, ``SIGKILL``, the OOM killer) only the step it was running is lost:
:func:`run_job` stores that step as ``crashed`` and goes on with the rest of
the job in a new child. Where ``os.fork`` is missing, a job runs in a
process of its own (:mod:`hermetic_hunt.isolate.server` in one-shot mode).

The child never returns into pytest: it leaves with ``os._exit``, so no
cache, junit or coverage file is written on behalf of a job.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermetic_hunt import _compat
from hermetic_hunt.engine import leaks, wire
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.models import Attempt, Failure, Settings
from hermetic_hunt.sandbox import follow_bound_clocks
from hermetic_hunt.seeds import attempt_seed
from hermetic_hunt.timing import profile_of

if TYPE_CHECKING:
    import pytest

    from hermetic_hunt.engine.engine import Engine

_PERF = time.perf_counter
_SLEEP = time.sleep  # real: captured before any sandbox patches time
_READ = 65536
#: Signals :func:`interrupts_deferred` holds back while finished attempts are handed on.
DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Characters of a dead child's standard error kept in its crashed attempt.
STDERR_TAIL = 2000


def fork_available() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


@dataclass(frozen=True)
class ChildSetup:
    """What a child does before its job.

    ``close_fds``: inherited descriptors it must not touch (a server's
    pipes, the xdist worker's connection to its controller). ``new_group``:
    its own process group (a probe that outlives its timeout is killed with
    everything it started). ``worker``: the label stored with its attempts.
    """

    close_fds: tuple[int, ...] = ()
    new_group: bool = False
    worker: str = "main"


@dataclass
class Child:
    """A forked child running one job, seen from its parent."""

    pid: int
    fd: int
    job: Job
    temp: str
    started: float
    deadline: float | None = None
    steps_done: int = 0
    ended: bool = False
    _buffer: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete lines in ``chunk`` (with what came before); counts the steps."""
        self._buffer += chunk
        if b"\n" not in chunk:
            return []
        data = bytes(self._buffer)
        cut = data.rfind(b"\n") + 1
        self._buffer = bytearray(data[cut:])
        lines = data[:cut].splitlines(keepends=True)
        for line in lines:
            if line.startswith(b'{"op":'):
                self.ended = True
            else:
                self.steps_done += 1
        return lines

    def stderr_tail(self) -> str:
        try:
            with open(os.path.join(self.temp, "stderr"), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - STDERR_TAIL))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text.strip()

    def kill(self) -> None:
        for target in (-self.pid, self.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGKILL)

    def reap(self) -> int:
        """Wait for the child; its exit status as ``os.waitstatus_to_exitcode`` gives it."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return 0
        return os.waitstatus_to_exitcode(status)

    def cleanup(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        shutil.rmtree(self.temp, ignore_errors=True)


def spawn(engine: Engine, session: pytest.Session, job: Job, setup: ChildSetup) -> Child:
    """Fork a child that runs ``job``; the parent gets a :class:`Child` to read."""
    # Clock references the project bound at import follow the virtual clock
    # (hermetic_hunt.sandbox.bound): scanned here, once per process, not in
    # every child.
    follow_bound_clocks(str(engine.config.rootpath))
    temp = tempfile.mkdtemp(prefix="hermetic-hunt-job-")
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    # No SIGTERM between the fork and the child's own handler: an abort must
    # find every child to kill.
    blocked = hasattr(signal, "pthread_sigmask")
    if blocked:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        with warnings.catch_warnings():
            # 3.12+ warns about forking with threads (an xdist worker has
            # execnet's): the child runs only this thread's work.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(engine, session, job, write_fd, setup, temp, parent)
        os.close(write_fd)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    return Child(pid=pid, fd=read_fd, job=job, temp=temp, started=_PERF())


def _child(
    engine: Engine,
    session: pytest.Session,
    job: Job,
    fd: int,
    setup: ChildSetup,
    temp: str,
    parent: int,
) -> None:
    code = 0
    try:
        _compat.die_with_parent()
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(0)
        if setup.new_group:
            os.setpgid(0, 0)
        # The hunt's handlers (hermetic_hunt.hunt.signals) are its parent's:
        # a round's child dies of SIGTERM/SIGHUP and its parent hands on
        # what it had finished.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if hasattr(signal, "pthread_sigmask"):  # blocked by spawn() around the fork
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        for inherited in setup.close_fds:
            with contextlib.suppress(OSError):
                os.close(inherited)
        _quiet(engine, temp)
        # Each job gets its own temporary folder (TMPDIR, tempfile, tmp_path & co.):
        # concurrent jobs and other processes never show up in a round's.
        leaks.private_temp(temp)
        config = engine.config

        def serialize(report: Any) -> dict[str, Any]:
            data: dict[str, Any] = config.hook.pytest_report_to_serializable(
                config=config, report=report
            )
            return data

        def on_step(index: int, attempts: list[Attempt], reports: list[dict[str, Any]]) -> None:
            _write(fd, wire.step_line(index, attempts, reports))

        outcome = engine.run(session, job, on_step=on_step, serialize=serialize)
        _write(fd, wire.end_line(outcome.status, outcome.detail, outcome.leaks))
    except BaseException as exc:  # a child must never return into pytest
        code = 70
        with contextlib.suppress(BaseException):
            traceback.print_exc()  # into the child's stderr file, for the crash report
            where = traceback.extract_tb(exc.__traceback__)[-1:]
            at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
            _write(fd, wire.end_line("error", f"hermetic-hunt's engine failed: {exc!r}{at}"))
    finally:
        os._exit(code)


def _quiet(engine: Engine, temp: str) -> None:
    """The child's output goes nowhere (the parent prints), its stderr to a file."""
    config = engine.config
    interactor = _compat.worker_interactor(config)
    if interactor is not None:
        # xdist's worker plugin would send every report to the controller
        # itself; the parent forwards the child's lines instead.
        config.pluginmanager.unregister(interactor)
    capture = config.pluginmanager.getplugin("capturemanager")
    capturing = capture is not None and capture.is_globally_capturing()
    if capturing:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    errors = os.open(os.path.join(temp, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(errors, 2)
    os.close(devnull)
    os.close(errors)
    with contextlib.suppress(Exception):
        faulthandler.enable(file=sys.stderr)
    _compat.silence_terminal(config)
    if capturing:
        capture.start_global_capturing()
        capture.suspend_global_capture(in_=False)


def _write(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BrokenPipeError:
            os._exit(0)  # the parent is gone: nobody wants the rest


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def crashed(child: Child, settings: Settings, worker: str, hash_seed: int | None) -> Attempt:
    """The attempt a dead child was running (its first step with no line)."""
    job = child.job
    index = child.steps_done
    step = job.steps[index]
    code = child.reap()
    why = describe_exit(code)
    tail = child.stderr_tail()
    seed = step.seed
    if seed is None and step.mode != "off":
        seed = attempt_seed(settings.base_seed, step.nodeid, job.round_no, 1)
    return Attempt(
        nodeid=step.nodeid,
        outcome="crashed",
        round_no=job.round_no,
        worker=worker,
        position=job.first_position + index,
        phase="call",
        duration=_PERF() - child.started,
        seed=seed,
        now=step.now,
        mode=step.mode,
        hash_seed=hash_seed,
        repeat=job.repeats[index] if index < len(job.repeats) else 0,
        profile=step.profile or profile_of(job.condition, step.mode),
        switch_interval=step.switch_interval,
        stress=max(job.stress, step.stress),
        failure=Failure(
            exc_type="Crashed",
            message=f"the process running this test died ({why})",
            location="",
            excerpt=(tail or f"the process running {step.nodeid} died ({why})")[-STDERR_TAIL:],
        ),
    )


def run_job(
    engine: Engine,
    session: pytest.Session,
    job: Job,
    setup: ChildSetup,
    sink: Callable[[Sequence[bytes]], None],
    hash_seed: int | None = None,
    *,
    stop: Callable[[], bool] | None = None,
    tick: Callable[[], None] | None = None,
) -> bool:
    """Run ``job`` in forked children until every step ran; lines go to ``sink``.

    A child that dies costs the step it was running (a ``crashed`` attempt,
    its standard error as the excerpt); the rest of the job continues in a
    new child. ``sink`` gets exactly one ``end`` line, last -- unless
    ``stop()`` turns true after a batch of lines: then the child is killed
    and False returned. ``tick()`` is called whenever the child has been
    quiet for :data:`TICK` seconds. Ctrl-C kills the child, hands over what
    it had finished and re-raises.
    """
    settings = engine.settings
    remaining = job
    while True:
        child = spawn(engine, session, remaining, setup)
        try:
            stopped = _drain(child, sink, stop=stop, tick=tick)
        except BaseException:
            child.kill()
            with contextlib.suppress(OSError):
                _drain(child, sink, blocking=False)
            child.reap()
            child.cleanup()
            raise
        if stopped:
            child.kill()
            child.reap()
            child.cleanup()
            return False
        if child.ended:
            child.reap()
            child.cleanup()
            return True
        if child.steps_done >= len(remaining.steps):  # died after its last step
            code = child.reap()
            child.cleanup()
            sink([wire.end_line("completed", f"the process exited early ({describe_exit(code)})")])
            return True
        attempt = crashed(child, settings, setup.worker, hash_seed)
        index = child.steps_done
        child.cleanup()
        sink([wire.step_line(index, [attempt], [])])
        if index + 1 >= len(remaining.steps):
            sink([wire.end_line("completed", "the last step crashed")])
            return True
        remaining = remaining.rest(index, remaining.start)


#: Seconds of silence from a child after which ``tick`` is called.
TICK = 0.1
#: Seconds the parent waits for more lines before it hands over what it has:
#: a child writes a line per step the moment the step ends, and a line at a
#: time would cost the receiving side a call per test.
COALESCE = 0.005
#: Lines handed over at once at most.
BATCH = 512


def _drain(
    child: Child,
    sink: Callable[[Sequence[bytes]], None],
    blocking: bool = True,
    *,
    stop: Callable[[], bool] | None = None,
    tick: Callable[[], None] | None = None,
) -> bool:
    """Read the child until EOF, in batches; True when ``stop()`` asked to stop first.

    Whatever ends the loop -- EOF, ``stop()``, Ctrl-C -- the lines already
    read reach the sink first: they are finished attempts.
    """
    if not blocking:
        os.set_blocking(child.fd, False)
    pending: list[bytes] = []

    def hand_over() -> None:
        if pending:
            batch = list(pending)
            pending.clear()
            with interrupts_deferred():
                sink(batch)

    try:
        return _read_lines(child, pending, hand_over, blocking, stop, tick)
    except BaseException:
        hand_over()
        raise


def _read_lines(
    child: Child,
    pending: list[bytes],
    hand_over: Callable[[], None],
    blocking: bool,
    stop: Callable[[], bool] | None,
    tick: Callable[[], None] | None,
) -> bool:
    while True:
        if blocking:
            wait = COALESCE if pending else (TICK if tick is not None else None)
            ready, _, _ = select.select([child.fd], [], [], wait)
            if not ready:
                if pending:
                    hand_over()
                    if stop is not None and stop():
                        return True
                elif tick is not None:
                    tick()
                continue
        # Lines read from the pipe are finished attempts: Ctrl-C waits until
        # they are in ``pending`` (and ``hand_over`` gives them to the sink).
        with interrupts_deferred():
            try:
                chunk = os.read(child.fd, _READ)
            except BlockingIOError:
                chunk = b""
            pending.extend(child.feed(chunk))
        if not chunk:
            hand_over()
            return False
        if len(pending) >= BATCH or child.ended:
            hand_over()
            if stop is not None and stop():
                return True
        elif blocking and len(chunk) < _READ // 4:
            _SLEEP(COALESCE)  # let a few more lines arrive: one read for many


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (SIGINT; SIGTERM/SIGHUP in a hunt) during the block takes effect when it is over.

    Around handing finished attempts on: an interrupt in the middle would
    drop the ones already read. In the main thread only (the only one that
    may set a signal handler); nested blocks work.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGINT, and SIGTERM/SIGHUP where a hunt made them take the Ctrl-C path
    # (hermetic_hunt.hunt.signals): a handler set from Python, not SIG_DFL.
    previous = {
        signum: handler for signum in DEFERRED if callable(handler := signal.getsignal(signum))
    }
    pending: list[int] = []
    for deferred in previous:
        signal.signal(deferred, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for deferred, handler in previous.items():
            signal.signal(deferred, handler)
        for received in dict.fromkeys(pending):
            signal.raise_signal(received)
