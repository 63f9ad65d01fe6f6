"""What a test leaves behind: the process state after each attempt, compared.

Modelled on CPython's regrtest ``save_env``: after every attempt the engine
looks at the resources a test can change and not put back, and names what
changed. A leak is a polluter in the making -- the report lists the tests
that leave state behind even when no victim exists yet, and isolation tries
leaking tests first when it looks for polluters.

Checked after every attempt, cheaply (a comparison when nothing changed):
environment variables, the working directory (changed or deleted), the
timezone, the locale, ``sys.path``, modules of the project imported at run
time, warnings filters, the root logger (level and handlers), signal
handlers, threads and child processes still running, open file descriptors,
``socket.getdefaulttimeout()``, ``sys.getrecursionlimit()``,
``sys.getswitchinterval()``, ``tempfile.tempdir``, the asyncio event
loop policy, and the entries of the round's private temporary folder.
Files in the rootdir (and in the system's temporary directory, for paths a
test named outright) are compared at round boundaries (``hunt/files.py``:
a tree walk per attempt would cost more than the attempt).

**A private temporary folder per round.** Each process that runs a round's
tests (a forked child, :func:`private_temp`) gets a fresh, empty folder of
its own as ``TMPDIR``/``TEMP``/``TMP``, ``tempfile.tempdir`` and pytest's
temporary root (``tmp_path`` lives under it), removed with the job. So what
appears there is exactly what the round's tests -- and the processes they
started, which inherit ``TMPDIR`` -- left: pip or another hunt writing into
the system's temporary directory at the same time cannot show up in a
round, and an entry is named as a leak of the attempt after which it
appeared (its ``tempfile`` leak names it as it would be in the system's
temporary directory).

Which attempt wrote a file the round left behind is known exactly for files
written from Python: an audit hook (:class:`Writes`) notes the paths each
attempt opened for writing, renamed, created or removed. (Files written by a
subprocess or a C extension are attributed by their modification time.)

Value changes (an environment variable, the cwd...) count as leaks only when
they are still in place when the round has torn down its fixtures: a
module-scoped fixture that sets and later unsets a variable leaves nothing
behind. Running things (threads, processes, descriptors) count when they
outlive the test that started them.
"""

from __future__ import annotations

import itertools
import locale
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermetic_hunt import _compat
from hermetic_hunt.models import Leak

#: Longest value kept in a leak's detail.
DETAIL = 80
#: Most leaks kept per attempt (a test that sets 500 variables is one finding).
MAX_PER_ATTEMPT = 20
#: Resources that are running things: a leak as soon as the test is over.
RUNNING = frozenset({"thread", "process", "fd"})
#: Variables pytest (or the hunt) changes around every test: never a leak.
_OWNED_ENV = frozenset({"PYTEST_CURRENT_TEST"})
_SECRET = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "PRIVATE")
_SIGNALS = tuple(
    getattr(signal, name)
    for name in (
        "SIGINT",
        "SIGTERM",
        "SIGHUP",
        "SIGALRM",
        "SIGUSR1",
        "SIGUSR2",
        "SIGCHLD",
        "SIGPIPE",
        "SIGQUIT",
    )
    if hasattr(signal, name)
)
_PROC = Path("/proc/self")


def _policy_name(policy: Any) -> str | None:
    """The asyncio policy's class, None while it is asyncio's default.

    asyncio creates its default policy the first time a test asks for a loop:
    that is no test's leak; installing another policy (uvloop's, a custom one)
    is.
    """
    if policy is None:
        return None
    events = sys.modules.get("asyncio")
    default = getattr(events, "DefaultEventLoopPolicy", None)
    return None if default is not None and type(policy) is default else type(policy).__name__


def bounded(text: object, limit: int = DETAIL) -> str:
    value = str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _env_value(name: str, value: str | None) -> str:
    if value is None:
        return ""
    if any(marker in name.upper() for marker in _SECRET):
        return "***"
    return bounded(repr(value))


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _deleted_cwd() -> str | None:
    """The directory the process is still in after it was deleted (Linux names it)."""
    try:
        target = os.readlink(_PROC / "cwd")
    except OSError:
        return None
    return target.removesuffix(" (deleted)")


#: The private temporary folder of this process's round (None: the system's is used).
_private: list[str] = []
#: The system's temporary directory, as it was before :func:`private_temp`.
_system: list[str] = []
#: Entries at the top of a temporary folder that are pytest's, multiprocessing's
#: or the hunt's own (``tmp_path`` & co.): never a test's.
_OWN_TEMP = ("pytest-of-", "hermetic-hunt-", "pymp-")


def system_temp() -> str:
    """The system's temporary directory (not the round's private one)."""
    return _system[0] if _system else os.path.realpath(tempfile.gettempdir())


def private_temp(job_temp: str) -> str:
    """Give this process (a round's child) a private temporary folder under ``job_temp``.

    Sets ``TMPDIR``, ``TEMP``, ``TMP``, ``tempfile.tempdir`` and pytest's
    temporary root (``PYTEST_DEBUG_TEMPROOT``: ``tmp_path`` goes under it) to a
    new empty folder, before the job's first test; returns its path. It goes
    when the job's folder is removed.
    """
    if not _system:
        _system.append(os.path.realpath(tempfile.gettempdir()))
    path = os.path.join(os.path.realpath(job_temp), "tmp")
    os.makedirs(path, exist_ok=True)
    for var in ("TMPDIR", "TEMP", "TMP", "PYTEST_DEBUG_TEMPROOT"):
        os.environ[var] = path
    tempfile.tempdir = path
    _private[:] = [path]
    return path


def _temp_entries() -> frozenset[str]:
    """Entries at the top of the private temporary folder (empty: none is in use)."""
    if not _private:
        return frozenset()
    try:
        names = os.listdir(_private[0])
    except OSError:
        return frozenset()
    return frozenset(name for name in names if not name.startswith(_OWN_TEMP))


def _locale() -> str | None:
    try:
        return locale.setlocale(locale.LC_ALL)
    except locale.Error:
        return None


def _signals() -> tuple[Any, ...]:
    out = []
    for number in _SIGNALS:
        try:
            out.append(signal.getsignal(number))
        except (ValueError, OSError):
            out.append(None)
    return tuple(out)


def _children() -> frozenset[int]:
    """Pids of the children this process's main thread started (Linux; else empty).

    One read of ``/proc/self/task/<pid>/children`` (children started from
    other threads are listed under those threads' tasks: rare in tests, and
    the round's end would still show them as a leak of the thread).
    """
    try:
        with open(f"/proc/self/task/{os.getpid()}/children", "rb") as handle:
            return frozenset(int(pid) for pid in handle.read().split())
    except OSError:
        return frozenset()


def _fds() -> frozenset[int]:
    try:
        return frozenset(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        return frozenset()


def _fd_target(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


def _process_name(pid: int) -> str:
    try:
        return f"{(_PROC.parent / str(pid) / 'comm').read_text().strip()} (pid {pid})"
    except OSError:
        return f"pid {pid}"


@dataclass
class Snapshot:
    """The process state at one moment (between two attempts)."""

    env: dict[Any, Any]
    cwd: str | None
    tz: tuple[Any, ...]
    locale: str | None
    path: list[str]
    modules: int
    warnings: tuple[Any, ...]
    logging: tuple[Any, ...]
    signals: tuple[Any, ...]
    threads: frozenset[threading.Thread]
    children: frozenset[int]
    fds: frozenset[int]
    scalars: tuple[Any, ...]
    #: Entries of the round's private temporary folder (:func:`private_temp`).
    temp: frozenset[str] = frozenset()
    #: Where a deleted cwd was (``cwd`` is None then), when the system can tell.
    gone: str | None = None

    @classmethod
    def take(cls) -> Snapshot:
        logging = sys.modules.get("logging")
        root = getattr(logging, "root", None)
        asyncio_policy = _compat.asyncio_policy()
        cwd = _cwd()
        return cls(
            env=_compat.environ_data(),
            cwd=cwd,
            gone=_deleted_cwd() if cwd is None else None,
            tz=(time.tzname, time.timezone, time.altzone, time.daylight),
            locale=_locale(),
            path=list(sys.path),
            modules=len(sys.modules),
            warnings=tuple(warnings.filters),
            logging=(root.level, tuple(root.handlers)) if root is not None else (),
            signals=_signals(),
            threads=frozenset(t for t in threading.enumerate() if t.is_alive()),
            children=_children(),
            fds=_fds(),
            scalars=(
                socket.getdefaulttimeout(),
                sys.getrecursionlimit(),
                sys.getswitchinterval(),
                tempfile.tempdir,
                _policy_name(asyncio_policy),
            ),
            temp=_temp_entries(),
        )


_SCALARS = ("socket-timeout", "recursion-limit", "switch-interval", "tempfile.tempdir",
            "asyncio-policy")  # fmt: skip


def _decode(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def diff(before: Snapshot, after: Snapshot, rootdir: str | None = None) -> list[Leak]:
    """What changed from ``before`` to ``after`` (running things: what was started)."""
    out: list[Leak] = []
    if before.env != after.env:
        for key in sorted(set(before.env) | set(after.env), key=_decode):
            name = _decode(key)
            if name in _OWNED_ENV or before.env.get(key) == after.env.get(key):
                continue
            old, new = before.env.get(key), after.env.get(key)
            change = "added" if old is None else "removed" if new is None else "changed"
            value = None if new is None else _decode(new)
            out.append(Leak("env", name, change, _env_value(name, value)))
    if before.cwd != after.cwd:
        if after.cwd is None:
            out.append(Leak("cwd", "cwd", "deleted", bounded(after.gone or before.cwd or "")))
        else:
            out.append(Leak("cwd", "cwd", "changed", bounded(after.cwd)))
    if before.tz != after.tz:
        out.append(Leak("tz", "timezone", "changed", bounded("/".join(after.tz[0]))))
    if before.locale != after.locale:
        out.append(Leak("locale", "LC_ALL", "changed", bounded(after.locale or "")))
    if before.path != after.path:
        added = [p for p in after.path if p not in before.path]
        removed = [p for p in before.path if p not in after.path]
        for entry in added[:3]:
            out.append(Leak("sys.path", bounded(entry), "added"))
        for entry in removed[:3]:
            out.append(Leak("sys.path", bounded(entry), "removed"))
        if not added and not removed:
            out.append(Leak("sys.path", "order", "changed"))
    if after.modules > before.modules and rootdir is not None:
        out.extend(_project_modules(after.modules - before.modules, rootdir))
    if before.warnings != after.warnings:
        delta = len(after.warnings) - len(before.warnings)
        out.append(Leak("warnings", "filters", "changed", f"{delta:+d} filter(s)"))
    if before.logging != after.logging:
        out.extend(_logging(before.logging, after.logging))
    if before.signals != after.signals:
        for number, old, new in zip(_SIGNALS, before.signals, after.signals, strict=True):
            if old != new:
                out.append(Leak("signal", signal.Signals(number).name, "changed", bounded(new)))
    for thread in sorted(after.threads - before.threads, key=lambda t: t.name):
        if thread.is_alive():
            out.append(Leak("thread", thread.name, "added", "daemon" if thread.daemon else ""))
    for pid in sorted(after.children - before.children):
        out.append(Leak("process", _process_name(pid), "added"))
    opened = sorted(after.fds - before.fds)
    if opened:
        targets = ", ".join(_fd_target(fd) for fd in opened[:3])
        out.append(Leak("fd", f"{len(opened)} descriptor(s)", "added", bounded(targets)))
    for name, old, new in zip(_SCALARS, before.scalars, after.scalars, strict=True):
        if old != new:
            out.append(Leak(name, name, "changed", bounded(new)))
    if before.temp != after.temp:
        # Named where it would be on a machine without the private folder.
        for entry in sorted(after.temp - before.temp):
            out.append(Leak("tempfile", bounded(os.path.join(system_temp(), entry)), "added"))
    return out[:MAX_PER_ATTEMPT]


def _project_modules(count: int, rootdir: str) -> Iterator[Leak]:
    """The newest ``count`` modules, if they are the project's own code.

    ``sys.modules`` keeps insertion order: new modules are at its end, so
    this costs as many steps as modules were added. A test that imports a
    module of the standard library or of a dependency late is not a leak;
    one of the project's own modules can register things at import time.
    """
    root = os.path.join(os.path.realpath(rootdir), "")
    for name in itertools.islice(reversed(list(sys.modules)), min(count, 50)):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if (
            isinstance(path, str)
            and os.path.isabs(path)
            and os.path.realpath(path).startswith(root)
        ):
            yield Leak("module", name, "added")


def _logging(before: tuple[Any, ...], after: tuple[Any, ...]) -> Iterator[Leak]:
    if not before or not after:
        return
    if before[0] != after[0]:
        yield Leak("logging", "root level", "changed", str(after[0]))
    for handler in after[1]:
        if handler not in before[1]:
            yield Leak("logging", type(handler).__name__, "added", "root handler")
    for handler in before[1]:
        if handler not in after[1]:
            yield Leak("logging", type(handler).__name__, "removed", "root handler")


@dataclass
class RoundLeaks:
    """A round's leaks as they happen, and which of them stayed to its end.

    :meth:`after_attempt` is called after each attempt with its position;
    :meth:`finish` after the last one (all fixtures torn down) keeps the
    value changes whose key still differs from the round's start and the
    running things, each attributed to the attempt that made it.
    """

    rootdir: str | None
    start: Snapshot = field(default_factory=Snapshot.take)
    last: Snapshot | None = None
    changes: dict[int, list[Leak]] = field(default_factory=dict)

    def after_attempt(self, position: int) -> list[Leak]:
        before = self.last or self.start
        now = Snapshot.take()
        self.last = now
        found = diff(before, now, self.rootdir)
        if found:
            self.changes[position] = found
        return found

    def finish(self) -> dict[int, list[Leak]]:
        """``{position: leaks}`` that the round left behind (see the class docstring)."""
        end = self.last or self.start
        left = {(leak.resource, leak.name) for leak in diff(self.start, end, self.rootdir)}
        last_change: dict[tuple[str, str], int] = {}
        for position in sorted(self.changes):
            for leak in self.changes[position]:
                last_change[(leak.resource, leak.name)] = position
        out: dict[int, list[Leak]] = {}
        for position, leaks in self.changes.items():
            kept = [
                leak
                for leak in leaks
                if leak.resource in RUNNING
                or (
                    (leak.resource, leak.name) in left
                    and last_change[(leak.resource, leak.name)] == position
                )
            ]
            if kept:
                out[position] = kept
        return out


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = frozenset(
    {"os.remove", "os.rename", "os.mkdir", "os.rmdir", "shutil.rmtree", "shutil.copyfile",
     "os.truncate", "os.symlink", "os.link", "shutil.move"}
)  # fmt: skip


class Writes:
    """The paths each attempt wrote from Python, by an audit hook (one per process).

    Audit hooks cannot be removed: :meth:`install` adds one hook for the
    process's lifetime, which does nothing (one attribute check) unless an
    attempt is being watched. Only paths under ``roots`` are kept, at most
    :data:`MAX_WRITES` per attempt.
    """

    _installed: Writes | None = None

    def __init__(self) -> None:
        self.root = ""
        self.temp = ""
        self.paths: list[str] | None = None

    @classmethod
    def install(cls) -> Writes:
        if cls._installed is None:
            watch = cls()
            sys.addaudithook(watch._hook)
            cls._installed = watch
        return cls._installed

    def start(self, rootdir: str) -> None:
        """Watch writes under ``rootdir`` and at the top of the system's temporary directory.

        (The round's private temporary folder needs no hook: all that is in it
        is the round's, see :func:`private_temp`.)
        """
        self.root = os.path.join(os.path.realpath(rootdir), "")
        self.temp = os.path.join(system_temp(), "")
        self.paths = []

    def take(self) -> list[str]:
        """The paths written since :meth:`start` (or the last take)."""
        paths = self.paths or []
        if self.paths is not None:
            self.paths = []
        return paths

    def stop(self) -> None:
        self.paths = None

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        paths = self.paths
        if paths is None or len(paths) >= MAX_WRITES:
            return
        if event == "open":
            path, mode, flags = args
            if mode is not None:
                if not any(c in mode for c in "wax+"):
                    return
            elif not (isinstance(flags, int) and flags & _WRITE_FLAGS):
                return
            self._note(path)
        elif event in _PATH_EVENTS:
            self._note(args[0])
            if event in ("os.rename", "shutil.copyfile", "os.symlink", "os.link", "shutil.move"):
                self._note(args[1])

    def _note(self, path: Any) -> None:
        if isinstance(path, int):
            return
        try:
            text = os.fsdecode(path)
            if not os.path.isabs(text):
                text = os.path.join(os.getcwd(), text)
        except (OSError, TypeError, ValueError):
            return
        text = os.path.normpath(text)
        if text.startswith(self.root):
            if f"{os.sep}__pycache__{os.sep}" in text:
                return
        elif text.startswith(self.temp):
            # The top-level entry is what a leak names; the hunt's and pytest's own
            # directories (tmp_path & co.) are not the test's.
            top = text[len(self.temp) :].split(os.sep, 1)[0]
            if top.startswith(_OWN_TEMP):
                return
            text = self.temp + top
        else:
            return
        if self.paths is not None and text not in self.paths:
            self.paths.append(text)


#: Most paths :class:`Writes` keeps per attempt.
MAX_WRITES = 50
