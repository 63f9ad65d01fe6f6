"""A fresh process per job: forked from a collected, never-run session.

Every job -- a hunt round's slice on one worker, an isolation probe -- runs
in a child forked from a pytest session that collected the suite and ran
nothing: to its tests a fresh ``pytest`` process, with collection paid once.
What starts fresh, why a crash costs only the step it was running, and how
the child's end of the pipe is kept private (a random high close-on-exec
descriptor closed in forks, every line sealed, the round's end learnt from
the child's exit and never from an end of file) are in docs/how-it-works.md,
'A round is a fresh run'.

:func:`run_job` stores the step a dying child was running as ``crashed``; a
step that ends its process otherwise (``pytest.exit()``,
``KeyboardInterrupt``, the recursion limit) is a failed attempt of that
test. Either way the rest of the job runs in a new child. The one ``end``
line of a job is the parent's. Where ``os.fork`` is missing, a job runs in a
process of its own (:mod:`hermetic_hunt.isolate.server` in one-shot mode).

The child never returns into pytest: it leaves with ``os._exit``, so no
cache, junit or coverage file is written on behalf of a job.
"""

from __future__ import annotations

import contextlib
import faulthandler
import inspect
import math
import os
import random
import re
import resource
import secrets
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
from hermetic_hunt.engine import leaks, rng, wire
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.failures import own_location
from hermetic_hunt.models import Attempt, Failure, Settings
from hermetic_hunt.sandbox import follow_bound_clocks, guard_between_attempts

if TYPE_CHECKING:
    import pytest

    from hermetic_hunt.engine.engine import Engine

_PERF = time.perf_counter
_SLEEP = time.sleep  # real: captured before any sandbox patches time
_READ = 65536
#: Signals :func:`interrupts_deferred` holds back while finished attempts are handed on:
#: Ctrl-C and every signal a hunt's process handles (hermetic_hunt.hunt.signals).
DEFERRED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM")
    if hasattr(signal, name)
)
#: Characters of a dead child's standard error kept in its crashed attempt.
STDERR_TAIL = 2000
#: The file in a child's temporary folder its threads are dumped to when a
#: step outlives the test timeout (just before the parent kills it).
HANG_DUMP = "hang"
#: Seconds past the limit the parent waits for that dump before it kills the child.
HANG_GRACE = 1.0


def hang_frames(dump: str) -> list[tuple[str, int]]:
    """The frames (outermost first) of the thread that ran the test in a
    ``faulthandler`` dump: the thread in pytest's test protocol, else the last."""
    blocks: list[list[tuple[str, int, str]]] = []
    for line in dump.splitlines():
        if line.startswith(("Thread ", "Current thread ")):
            blocks.append([])
            continue
        found = re.match(r'\s+File "(.*)", line (\d+) in (\S+)', line)
        if found and blocks:
            blocks[-1].append((found.group(1), int(found.group(2)), found.group(3)))
    if not blocks:
        return []
    testing = [b for b in blocks if any(name == "pytest_runtest_protocol" for _, _, name in b)]
    chosen = (testing or blocks)[-1]
    return [(path, line) for path, line, _ in reversed(chosen)]


def fork_available() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


@dataclass(frozen=True)
class ChildSetup:
    """What a child does before its job.

    ``close_fds``: inherited descriptors it must not touch (a server's
    pipes, the xdist worker's connection to its controller). ``new_group``:
    its own process group (a probe that outlives its timeout is killed with
    everything it started). ``worker``: the label stored with its attempts.
    ``gate``: the read end of a pipe the child waits on (until end of file)
    before its job, so that children forked one after the other start at the
    same moment when the parent closes the write end (a collision's pair).
    """

    close_fds: tuple[int, ...] = ()
    new_group: bool = False
    worker: str = "main"
    #: Files (the hunt's database) whose inherited descriptors the child
    #: points at ``/dev/null``: a test that writes to every descriptor it can
    #: find must not write into them.
    protect: tuple[str, ...] = ()
    gate: int | None = None


@dataclass
class Child:
    """A forked child running one job, seen from its parent.

    ``seal``: what starts every line the child writes (its job's token and
    its pid); ``end``: the child's own end message, once read (kept here:
    the job's end line is the parent's); ``rejected``: lines on the channel
    that the child did not write. ``pidfd`` is readable once the child
    exited (None where pidfds are missing: ``waitpid`` is polled instead).
    """

    pid: int
    fd: int
    job: Job
    temp: str
    started: float
    #: The session's rootdir (where a stopped step's own code is looked for).
    root: str = ""
    seal: bytes = b""
    pidfd: int | None = None
    #: Seconds a step may run (``Settings.test_timeout``): past it the child
    #: is killed and the step is a ``Timeout`` (None: no limit).
    limit: float | None = None
    #: When the step running now must end (from :attr:`limit`).
    deadline: float | None = None
    timed_out: bool = False
    steps_done: int = 0
    ended: bool = False
    end: dict[str, Any] | None = None
    rejected: int = 0
    status: int | None = None
    _buffer: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> list[bytes]:
        """The child's complete step lines in ``chunk`` (with what came before), unsealed.

        Counts the steps; keeps the child's end message in :attr:`end`;
        lines not sealed by the child, or after its end, are counted in
        :attr:`rejected` and dropped.
        """
        self._buffer += chunk
        if b"\n" not in chunk:
            return []
        data = bytes(self._buffer)
        cut = data.rfind(b"\n") + 1
        self._buffer = bytearray(data[cut:])
        lines = []
        seal, n = self.seal, len(self.seal)
        for line in data[:cut].splitlines(keepends=True):
            if self.ended or not line.startswith(seal):
                self.rejected += 1
                continue
            line = line[n:]
            if line.startswith(wire.END_PREFIX):
                try:
                    self.end = wire.decode(line)
                except ValueError:
                    self.rejected += 1
                    continue
                self.ended = True
            else:
                self.steps_done += 1
                lines.append(line)
        if lines and self.limit is not None:
            self.deadline = _PERF() + self.limit + HANG_GRACE
        return lines

    def watch(self, limit: float) -> None:
        """Stop the step running from now on once it outlives ``limit`` seconds."""
        self.limit = limit
        self.deadline = _PERF() + limit + HANG_GRACE

    def overdue(self) -> bool:
        """The step running now outlived its limit: the child is killed (once), and
        the step is a ``Timeout`` (:func:`crashed`)."""
        if self.deadline is None or self.timed_out or _PERF() < self.deadline:
            return False
        self.timed_out = True
        self.kill()
        return True

    def exited(self, ready: Sequence[int] = ()) -> bool:
        """The child is gone (reaped here; :attr:`status` is its wait status)."""
        if self.status is None and (self.pidfd is None or self.pidfd in ready):
            self._wait(os.WNOHANG)
        return self.status is not None

    def _wait(self, options: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid:
            self.status = status

    def stderr_tail(self) -> str:
        try:
            with open(os.path.join(self.temp, "stderr"), "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - STDERR_TAIL))
                return handle.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def hang_dump(self) -> str:
        """The child's dump of its threads when a step outlived :attr:`limit` ("" if none)."""
        try:
            with open(os.path.join(self.temp, HANG_DUMP), "rb") as handle:
                return handle.read(64 * 1024).decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def kill(self) -> None:
        for target in (-self.pid, self.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGKILL)

    def end_group(self) -> None:
        """What the child left running in its process group (a process pool's
        workers, a forked child that runs on) ends with it, as a CI job's would."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def reap(self) -> int:
        """Wait for the child; its exit status as ``os.waitstatus_to_exitcode`` gives it."""
        if self.status is None:
            self._wait(0)
        return os.waitstatus_to_exitcode(self.status or 0)

    def cleanup(self) -> None:
        for fd in (self.fd, self.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.pidfd = None
        shutil.rmtree(self.temp, ignore_errors=True)


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    with contextlib.suppress(OSError):  # an older kernel, or a sandbox that forbids it
        return opener(pid) if opener is not None else None
    return None


def _hide(fd: int) -> int:
    """``fd`` moved to a free descriptor at random in the upper half of the limit.

    Close-on-exec. A test that writes to the descriptors it guesses (3, 4,
    5...) does not find it; one that tries them all still lacks the seal.
    """
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = min(soft if soft != resource.RLIM_INFINITY else 65536, 65536)
    low = max(top // 2, fd + 1)
    for _ in range(64):
        target = random.SystemRandom().randrange(low, top) if top > low else fd
        if target == fd:
            break
        try:
            os.fstat(target)
        except OSError:  # free
            os.dup2(fd, target, inheritable=False)
            os.close(fd)
            return target
    return fd  # (a pipe's end: close-on-exec already)


class _Channel:
    """The child's end of the private channel (lives in the child only)."""

    def __init__(self, fd: int, token: str) -> None:
        self.fd = _hide(fd)
        self.token = token
        self.pid = os.getpid()
        # A process this child forks (a test's os.fork(), a process pool's
        # workers) must not hold the channel: it would outlive the child.
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        if os.getpid() != self.pid:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def write(self, line: bytes) -> None:
        if self.fd < 0 or os.getpid() != self.pid:
            return
        _write(self.fd, wire.seal(self.token, self.pid, line))


#: A code object of no module's file: looking its module up fills inspect's map.
_NO_MODULE = compile("", "<hermetic-hunt: no module>", "exec")
#: How many modules were imported when the map was last filled.
_MAPPED = [0]


def warm_module_map() -> None:
    """Fill inspect's map of module files here, before the fork.

    pytest's report of a failure looks up the module of each traceback entry's
    code (``inspect.getmodule``): the first lookup in a process maps every
    imported module's file, one ``os.lstat`` per path component (the sandbox's
    file-time ``lstat`` in an attempt). A plain run pays that once; every child
    would pay it again on its first failure -- most of a failing probe's time.
    Mapped in the parent, a child maps only what it imported since. Mapped
    again only when modules were imported since the last call (a look at each
    of them costs about a microsecond, and a parent forks hundreds of times).
    """
    if len(sys.modules) != _MAPPED[0]:
        inspect.getmodule(_NO_MODULE)
        _MAPPED[0] = len(sys.modules)


def prepare(engine: Engine) -> None:
    """What every fork needs of its parent, done once per process (and again only
    for modules imported since): clock references the project bound at import
    follow the virtual clock (:mod:`hermetic_hunt.sandbox.bound`), and
    :func:`warm_module_map`. :func:`spawn` calls it; a process that waits for its
    first job (an xdist worker) calls it first, so that the wait pays it."""
    follow_bound_clocks(str(engine.config.rootpath))
    warm_module_map()


def spawn(engine: Engine, session: pytest.Session, job: Job, setup: ChildSetup) -> Child:
    """Fork a child that runs ``job``; the parent gets a :class:`Child` to read."""
    prepare(engine)  # (not in every child)
    temp = tempfile.mkdtemp(prefix="hermetic-hunt-job-")
    stream = rng.stream_state() if engine.import_seeds.where is not None else None
    read_fd, write_fd = os.pipe()
    token = secrets.token_hex(12)
    parent = os.getpid()
    # No SIGTERM between the fork and the child's own handler: an abort must
    # find every child to kill. (Unix has pthread_sigmask, as it has ``resource``.)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        with warnings.catch_warnings():
            # 3.12+ warns about forking with threads (an xdist worker has
            # execnet's): the child runs only this thread's work.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            rng.resume(stream)
            _child(engine, session, job, write_fd, token, setup, temp, parent)
        os.close(write_fd)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    return Child(pid=pid, fd=read_fd, job=job, temp=temp, started=_PERF(),
                 root=str(engine.config.rootpath), seal=wire.seal_prefix(token, pid),
                 pidfd=_pidfd(pid))  # fmt: skip


class Beside:
    """A job run in a forked child at the same moment as this process's own work.

    A collision's replay: the child is forked from the collected session and
    waits behind a gate; :meth:`release` starts it, :meth:`finish` collects
    its attempts (killing it after ``timeout`` seconds).
    """

    def __init__(self, engine: Engine, session: pytest.Session, job: Job) -> None:
        read_end, self._gate = os.pipe()
        try:
            setup = ChildSetup((self._gate,), new_group=True, gate=read_end)
            self.child = spawn(engine, session, job, setup)
        finally:
            os.close(read_end)

    def release(self) -> None:
        if self._gate >= 0:
            os.close(self._gate)
            self._gate = -1

    def finish(self, timeout: float) -> list[Attempt]:
        """The first execution of each step the child ran."""
        self.release()
        attempts: list[Attempt] = []
        deadline = _PERF() + timeout
        try:
            while True:
                ready, _, _ = select.select([self.child.fd], [], [], max(0.0, deadline - _PERF()))
                chunk = os.read(self.child.fd, _READ) if ready else b""
                if not ready:
                    self.child.kill()
                if not chunk:
                    break
                for line in self.child.feed(chunk):
                    with contextlib.suppress(ValueError):
                        found = wire.attempts_in(wire.decode(line))
                        attempts.extend(a for a in found if a.execution == 1)
        finally:
            self.child.reap()
            self.child.cleanup()
        return attempts


def _child(
    engine: Engine,
    session: pytest.Session,
    job: Job,
    fd: int,
    token: str,
    setup: ChildSetup,
    temp: str,
    parent: int,
) -> None:
    code = 0
    channel: _Channel | None = None
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
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked by spawn()
        for inherited in setup.close_fds:
            with contextlib.suppress(OSError):
                os.close(inherited)
        _protect(setup.protect)
        channel = _Channel(fd, token)
        _quiet(engine, temp)
        if setup.gate is not None:
            while os.read(setup.gate, 1):
                pass
            os.close(setup.gate)
        # Each job gets its own temporary folder (TMPDIR, tempfile, tmp_path & co.):
        # concurrent jobs and other processes never show up in a round's.
        leaks.private_temp(temp)
        if engine.settings.mode != "off" and all(step.mode != "off" for step in job.steps):
            # A thread a test leaves keeps the guard on it after the test's attempt.
            guard_between_attempts()
        hang = _HangDump(temp, engine.settings.test_timeout, _faulthandler_timer(engine.config))

        def on_step(index: int, attempts: list[Attempt], reports: list[dict[str, Any]]) -> None:
            assert channel is not None
            channel.write(wire.step_line(index, attempts, reports))
            hang.arm()

        hang.arm()
        outcome = engine.run(session, job, on_step=on_step, serialize=True, contain=True)
        hang.disarm()
        channel.write(wire.end_line(outcome.status, outcome.detail, outcome.leaks))
    except BaseException as exc:  # a child must never return into pytest
        code = 70
        with contextlib.suppress(BaseException):
            traceback.print_exc()  # into the child's stderr file, for the crash report
            where = traceback.extract_tb(exc.__traceback__)[-1:]
            at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
            if channel is not None:
                detail = f"hermetic-hunt's engine failed: {exc!r}{at}"
                channel.write(wire.end_line("error", detail))
    finally:
        os._exit(code)


class _HangDump:
    """In a child: its threads dumped to :data:`HANG_DUMP` when a step outlives the
    test timeout -- where it hangs, for the ``Timeout`` attempt its parent makes
    before it kills the child. (A test that sets its own ``faulthandler`` timer,
    pytest's ``faulthandler_timeout`` say, replaces this one: the attempt is still
    a ``Timeout``, without where.)

    Arming ``faulthandler``'s timer stops its thread and starts another (~0.1 ms),
    so a step's end re-arms it only once it is :attr:`slack` seconds old: the dump
    then comes at most that much before the parent's deadline (a step's first line
    plus the limit and :data:`HANG_GRACE`), never after it. A dump of a step that
    ended after all (it ran within ``slack`` of the limit) is cleared when the
    timer is re-armed. Under pytest's ``faulthandler_timeout``, whose plugin
    cancels the timer after every test, every step re-arms it."""

    def __init__(self, temp: str, limit: float, every_step: bool) -> None:
        self.limit = limit
        self.slack = 0.0 if every_step else min(0.5, limit / 10)
        self.armed = -math.inf
        self.fd = os.open(os.path.join(temp, HANG_DUMP), os.O_WRONLY | os.O_CREAT, 0o600)

    def arm(self) -> None:
        now = _PERF()
        if now - self.armed < self.slack:
            return
        self.armed = now
        with contextlib.suppress(Exception):
            if os.fstat(self.fd).st_size:
                os.ftruncate(self.fd, 0)
                os.lseek(self.fd, 0, os.SEEK_SET)
            faulthandler.dump_traceback_later(self.limit, file=self.fd)

    def disarm(self) -> None:
        with contextlib.suppress(Exception):
            faulthandler.cancel_dump_traceback_later()


def _faulthandler_timer(config: Any) -> bool:
    """pytest's own ``faulthandler`` plugin arms (and cancels) a timer around each test."""
    try:
        return float(config.getini("faulthandler_timeout") or 0) > 0
    except (ValueError, TypeError):  # its plugin is off (-p no:faulthandler) / a bad value
        return False


def _protect(paths: Sequence[str]) -> None:
    """Inherited descriptors of ``paths`` now lead to ``/dev/null`` (Linux: /proc/self/fd)."""
    wanted = {os.path.realpath(p) for p in paths}
    found = [fd for fd in leaks.open_fds() if leaks.fd_target(fd) in wanted] if paths else []
    if not found:
        return
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in found:
            os.dup2(devnull, fd, inheritable=os.get_inheritable(fd))
    finally:
        os.close(devnull)


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
    """The attempt a dead child was running (its first step with no line): ``Crashed``,
    or ``Timeout`` when the parent stopped it (with where it was, read from the
    child's own dump of its threads)."""
    code = child.reap()
    if child.timed_out:
        dump = child.hang_dump()
        failure = Failure(
            "Timeout",
            f"ran longer than {child.limit:g}s: hermetic-hunt stopped it (--hermetic-hunt-timeout)",
            own_location(hang_frames(dump), child.root) or "",
            dump[:STDERR_TAIL],
        )
    else:
        why = describe_exit(code)
        nodeid = child.job.steps[child.steps_done].nodeid
        tail = child.stderr_tail() or f"the process running {nodeid} died ({why})"
        failure = Failure("Crashed", f"the process running this test died ({why})", "",
                          tail[-STDERR_TAIL:])  # fmt: skip
    return child.job.lost(child.steps_done, settings.base_seed, worker, failure,
                          duration=_PERF() - child.started, hash_seed=hash_seed)  # fmt: skip


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
    """Run ``job`` in forked children until every step ran (a crash costs one step:
    see the module docstring); lines go to ``sink``.

    ``sink`` gets exactly one ``end`` line, last, made here (with the steps that
    came and the lines rejected) -- unless ``stop()`` turns true after a batch
    of lines: then the child is killed and False returned. ``tick()`` is called
    whenever the child has been quiet for :data:`TICK` seconds. Ctrl-C kills the
    child, hands over what it had finished and re-raises.
    """
    settings = engine.settings
    remaining = job
    steps = rejected = 0
    while True:
        child = spawn(engine, session, remaining, setup)
        child.watch(settings.test_timeout)
        try:
            try:
                stopped = _drain(child, sink, stop=stop, tick=tick)
            except BaseException:
                child.kill()
                with contextlib.suppress(OSError):
                    _drain(child, sink, blocking=False)
                raise
            if stopped:
                child.kill()
                return False
            steps += child.steps_done
            rejected += child.rejected
            code = child.reap()
            if setup.new_group:
                child.end_group()
            end = child.end or {}
            status = str(end.get("status") or "")
            index = child.steps_done
            if status and status != "aborted":
                detail = str(end.get("detail") or "")
                sink([wire.end_line(status, detail, wire.round_leaks(end), steps=steps,
                                    rejected=rejected)])  # fmt: skip
                return True
            if index >= len(remaining.steps):  # died (or aborted) after its last step
                detail = "" if status else f"the process exited early ({describe_exit(code)})"
            elif not status:  # it died in the middle of step ``index``
                attempt = crashed(child, settings, setup.worker, hash_seed)
                sink([wire.step_line(index, [attempt], [])])
                steps += 1
                index += 1
                detail = "the last step crashed"
            if index >= len(remaining.steps):
                sink([wire.end_line("completed", detail, steps=steps, rejected=rejected)])
                return True
        finally:
            child.reap()
            child.cleanup()
        remaining = remaining.rest(index - 1, remaining.start)


#: Seconds of silence from a child after which ``tick`` is called (and, where
#: pidfds are missing, how often the parent asks whether the child exited).
TICK = 0.1
#: Seconds the parent waits for more lines before it hands over what it has:
#: a child writes a line per step the moment the step ends, and a line at a
#: time would cost the receiving side a call per test. After a read the parent
#: also waits this long for the child's exit only, not for its next line: a
#: wake-up per line would take a core from the tests of a busy machine (the
#: pipe holds ~64 KB: hundreds of lines).
COALESCE = 0.02
#: Lines handed over at once at most.
BATCH = 512
#: Bytes read from the channel after the child exited, at most (a process that
#: kept it open could write forever).
DRAIN_LIMIT = 64 * 1024 * 1024


def _drain(
    child: Child,
    sink: Callable[[Sequence[bytes]], None],
    blocking: bool = True,
    *,
    stop: Callable[[], bool] | None = None,
    tick: Callable[[], None] | None = None,
) -> bool:
    """Read the child until it exited, in batches; True when ``stop()`` asked to stop first.

    Whatever ends the loop -- the child's exit, ``stop()``, Ctrl-C -- the
    lines already read reach the sink first: they are finished attempts.
    """
    pending: list[bytes] = []
    try:
        if blocking:
            return _read_lines(child, pending, sink, stop, tick)
        _read_rest(child, pending)
        return False
    finally:
        _hand_over(pending, sink)


def _hand_over(pending: list[bytes], sink: Callable[[Sequence[bytes]], None]) -> None:
    if pending:
        # Taken out of ``pending`` only inside the deferral: an interrupt
        # between the two would drop the batch (_drain hands over what is
        # still pending whatever ends its loop).
        with interrupts_deferred():
            batch = list(pending)
            pending.clear()
            sink(batch)


def _read_rest(child: Child, pending: list[bytes]) -> None:
    """What is in the channel now, without blocking (the child has exited)."""
    os.set_blocking(child.fd, False)
    left = DRAIN_LIMIT
    while left > 0:
        try:
            chunk = os.read(child.fd, _READ)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            return
        left -= len(chunk)
        pending.extend(child.feed(chunk))


def _read_lines(
    child: Child,
    pending: list[bytes],
    sink: Callable[[Sequence[bytes]], None],
    stop: Callable[[], bool] | None,
    tick: Callable[[], None] | None,
) -> bool:
    watch = [child.fd] if child.pidfd is None else [child.fd, child.pidfd]
    quiet = 0.0
    while True:
        child.overdue()
        wait = COALESCE if pending else TICK
        ready, _, _ = select.select(watch, [], [], wait)
        if child.fd not in ready:
            if child.exited(ready):
                with interrupts_deferred():
                    _read_rest(child, pending)
                return False  # (what is pending is handed over by _drain)
            if pending:
                _hand_over(pending, sink)
                if stop is not None and stop():
                    return True
            elif tick is not None:
                quiet += wait
                if quiet >= TICK:
                    quiet = 0.0
                    tick()
            continue
        # Lines read from the pipe are finished attempts: Ctrl-C waits until
        # they are in ``pending`` (and ``_hand_over`` gives them to the sink).
        with interrupts_deferred():
            chunk = os.read(child.fd, _READ)
            lines = child.feed(chunk)
            pending.extend(lines)
        if not chunk:  # every writer closed it: the child is exiting
            child.reap()
            return False
        # (a failing attempt is handed on at once: -x stops, a worker forwards it)
        if len(pending) >= BATCH or child.ended or any(map(wire.urgent, lines)):
            _hand_over(pending, sink)
            if stop is not None and stop():
                return True
        elif len(chunk) < _READ // 4:
            _pause(child, COALESCE)  # let a few more lines arrive: one read for many


def _pause(child: Child, seconds: float) -> None:
    """Wait ``seconds``, or less if the child exits (where pidfds are missing, all of it)."""
    if child.pidfd is None:
        _SLEEP(seconds)
    else:
        select.select([child.pidfd], [], [], seconds)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (SIGINT; SIGTERM/SIGHUP in a hunt) during the block takes effect when it is over.

    Around handing finished attempts on: an interrupt in the middle would
    drop the ones already read. In the main thread only (the only one that
    may set a signal handler); a nested block is the outer one's.
    """
    if _DEFERRING[0] or threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGINT, and SIGTERM/SIGHUP where a hunt made them take the Ctrl-C path
    # (hermetic_hunt.hunt.signals): a handler set from Python, not SIG_DFL.
    previous = {signum: handler for signum in DEFERRED if callable(handler := _GETSIGNAL(signum))}
    pending: list[int] = []
    swapped: dict[int, Any] = {}
    _DEFERRING[0] = True
    try:
        # (an interrupt that lands while the handlers are swapped restores what was)
        for deferred, handler in previous.items():
            swapped[deferred] = handler
            _SETSIGNAL(deferred, lambda signum, frame: pending.append(signum))
        yield
    finally:
        _DEFERRING[0] = False
        for deferred, handler in swapped.items():
            _SETSIGNAL(deferred, handler)
        for received in dict.fromkeys(pending):
            signal.raise_signal(received)


#: Whether an :func:`interrupts_deferred` block runs now (in the main thread).
_DEFERRING = [False]
_GETSIGNAL, _SETSIGNAL = _compat.raw_signal()
