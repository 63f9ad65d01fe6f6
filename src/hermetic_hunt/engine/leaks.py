"""What a test leaves behind: the process state after each attempt, compared.

Modelled on CPython's regrtest ``save_env``. What is compared, when a change
counts (a value once the round has torn down its fixtures; a running thing
once it outlives its test, or the wider fixture that started it, and then as
that fixture's) and why a leak matters are in docs/how-it-works.md, 'What a
test leaves behind'.

Each row of :data:`RESOURCES` is checked after every attempt, cheaply (a
comparison when nothing changed). Files are compared at round boundaries
(``engine/files.py``): a tree walk per attempt would cost more than the
attempt. :func:`private_temp` gives each process running a round a fresh
temporary folder, so what appears there is the round's own and nobody
else's (docs/limitations.md, 'Temporary files'). :class:`Writes`, an audit
hook, names the attempt that wrote a file from Python; a file written by a
subprocess or a C extension is attributed by its modification time.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hermetic_hunt import _compat
from hermetic_hunt.environment import current_locale
from hermetic_hunt.models import MAX_WRITES, Leak
from hermetic_hunt.sandbox.clock import children

#: Longest value kept in a leak's detail.
DETAIL = 80
#: Most leaks kept per attempt (a test that sets 500 variables is one finding).
MAX_PER_ATTEMPT = 20
#: Variables pytest (or the hunt) changes around every test: never a leak.
_OWNED_ENV = frozenset({"PYTEST_CURRENT_TEST"})
_SECRET = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "PRIVATE")
_SIGNALS = tuple(
    getattr(signal, f"SIG{name}")
    for name in ("INT", "TERM", "HUP", "ALRM", "USR1", "USR2", "CHLD", "PIPE", "QUIT")
    if hasattr(signal, f"SIG{name}")
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
    default = getattr(sys.modules.get("asyncio"), "DefaultEventLoopPolicy", None)
    return None if default is not None and type(policy) is default else type(policy).__name__


def bounded(text: object, limit: int = DETAIL) -> str:
    value = str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


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
    """Give this process (a round's child) a private temporary folder under ``job_temp``,
    before the job's first test (see the module docstring); returns its path."""
    if not _system:
        _system.append(os.path.realpath(tempfile.gettempdir()))
    path = os.path.join(os.path.realpath(job_temp), "tmp")
    os.makedirs(path, exist_ok=True)
    for var in ("TMPDIR", "TEMP", "TMP", "PYTEST_DEBUG_TEMPROOT"):
        os.environ[var] = path
    tempfile.tempdir = path
    _private[:] = [path]
    return path


def shown(path: str) -> str:
    """``path`` as it would be without the private temporary folder (for leak details)."""
    if _private and (path == _private[0] or path.startswith(_private[0] + os.sep)):
        return system_temp() + path[len(_private[0]) :]
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


def open_fds() -> frozenset[int]:
    """The descriptors open in this process (Linux; else empty)."""
    try:
        return frozenset(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        return frozenset()


def fd_target(fd: int) -> str:
    """What ``fd`` leads to (Linux; else ``fd N``)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


def _process_name(pid: int) -> str:
    try:
        return f"{(_PROC.parent / str(pid) / 'comm').read_text().strip()} (pid {pid})"
    except OSError:
        return f"pid {pid}"


def _modules(before: Any, after: Any, rootdir: str | None) -> Iterator[Leak]:
    """The modules imported since (the newest ``after - before``), if they are the
    project's own code.

    ``sys.modules`` keeps insertion order: new modules are at its end, so
    this costs as many steps as modules were added. A test that imports a
    module of the standard library or of a dependency late is not a leak;
    one of the project's own modules can register things at import time.
    """
    if after <= before or rootdir is None:
        return
    root = os.path.join(os.path.realpath(rootdir), "")
    for name in itertools.islice(reversed(list(sys.modules)), min(after - before, 50)):
        path = getattr(sys.modules.get(name), "__file__", None)
        if (
            isinstance(path, str)
            and os.path.isabs(path)
            and os.path.realpath(path).startswith(root)
        ):
            yield Leak("module", name, "added")


def _logging(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    if not before or not after:
        return
    if before[0] != after[0]:
        yield Leak("logging", "root level", "changed", str(after[0]))
    for change, ours, other in (("added", after[1], before[1]), ("removed", before[1], after[1])):
        for handler in ours:
            if handler not in other:
                yield Leak("logging", type(handler).__name__, change, "root handler")


#: What a resource's comparison gets: the value before, the value after, the rootdir.
Compare = Callable[[Any, Any, "str | None"], Iterable[Leak]]


@dataclass(frozen=True)
class Resource:
    """One thing a test can change and not put back (regrtest ``save_env``'s
    ``get_X`` and its comparison): a new resource is one row of :data:`RESOURCES`.

    ``get`` takes the value (cheap: it runs after every attempt); ``compare`` names
    what changed when two values differ; ``changes`` are the changes it reports
    (each has its words in :func:`hermetic_hunt.models.describe_leak`); ``running``:
    a running thing, a leak as soon as the test that started it is over.
    """

    name: str
    get: Callable[[], Any]
    compare: Compare
    changes: tuple[str, ...] = ("changed",)
    running: bool = False


def _decode(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def _env(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    for key in sorted(set(before) | set(after), key=_decode):
        name = _decode(key)
        if name in _OWNED_ENV or before.get(key) == after.get(key):
            continue
        old, new = before.get(key), after.get(key)
        change = "added" if old is None else "removed" if new is None else "changed"
        secret = any(marker in name.upper() for marker in _SECRET)
        detail = "" if new is None else "***" if secret else bounded(repr(_decode(new)))
        yield Leak("env", name, change, detail)


def _get_cwd() -> tuple[str | None, str | None]:
    """The working directory, and where a deleted one was (Linux names it)."""
    try:
        return os.getcwd(), None
    except OSError:
        pass
    try:
        return None, os.readlink(_PROC / "cwd").removesuffix(" (deleted)")
    except OSError:
        return None, None


def _cwd_change(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    (old, _), (new, gone) = before, after
    change, where = ("deleted", gone or old or "") if new is None else ("changed", new)
    yield Leak("cwd", "cwd", change, bounded(shown(where)))


def _sys_path(before: Any, after: Any, root: str | None) -> Iterator[Leak]:
    added = [p for p in after if p not in before]
    removed = [p for p in before if p not in after]
    for change, entries in (("added", added), ("removed", removed)):
        for entry in entries[:3]:
            yield Leak("sys.path", bounded(entry), change)
    if not added and not removed and _effective(before, root) != _effective(after, root):
        yield Leak("sys.path", "order", "changed")


def _effective(path: list[str], root: str | None) -> list[str]:
    """The order imports search ``path`` in (first occurrences), without the project's
    own folders: pytest's ``prepend`` import mode moves the rootdir and its ``src`` to
    the front as it imports test modules and doctests, whichever test is running."""
    inside = (root.rstrip(os.sep) + os.sep) if root else None
    return list(
        dict.fromkeys(e for e in path if inside is None or not (e + os.sep).startswith(inside))
    )


def _get_logging() -> tuple[Any, ...]:
    root = getattr(sys.modules.get("logging"), "root", None)
    return (root.level, tuple(root.handlers)) if root is not None else ()


def _signal_change(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    for number, old, new in zip(_SIGNALS, before, after, strict=True):
        if old != new:
            yield Leak("signal", signal.Signals(number).name, "changed", bounded(new))


def _threads(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    for thread in sorted(after - before, key=lambda t: t.name):
        if thread.is_alive():
            yield Leak("thread", thread.name, "added", "daemon" if thread.daemon else "")


def _processes(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    for pid in sorted(after - before):
        yield Leak("process", _process_name(pid), "added")


def _descriptors(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    opened = sorted(after - before)
    if opened:
        targets = ", ".join(fd_target(fd) for fd in opened[:3])
        yield Leak("fd", f"{len(opened)} descriptor(s)", "added", bounded(targets))


def _temp_change(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    # Named where it would be on a machine without the round's private folder.
    for entry in sorted(after - before):
        yield Leak("tempfile", bounded(os.path.join(system_temp(), entry)), "added")


def _value(
    name: str, label: str | None = None, shown: Callable[[Any], object] = lambda v: v
) -> Compare:
    """The comparison of a value that changes as a whole: one leak, its new value shown."""

    def compare(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
        yield Leak(name, label or name, "changed", bounded(shown(after)))

    return compare


def _warnings_change(before: Any, after: Any, _root: str | None) -> Iterator[Leak]:
    yield Leak("warnings", "filters", "changed", f"{len(after) - len(before):+d} filter(s)")


def _alive_threads() -> frozenset[threading.Thread]:
    return frozenset(t for t in threading.enumerate() if t.is_alive())


#: Every resource checked after every attempt, in the order leaks are listed.
RESOURCES: tuple[Resource, ...] = (
    Resource("env", _compat.environ_data, _env, ("added", "changed", "removed")),
    Resource("cwd", _get_cwd, _cwd_change, ("changed", "deleted")),
    Resource(
        "tz",
        lambda: (time.tzname, time.timezone, time.altzone, time.daylight),
        _value("tz", "timezone", lambda tz: "/".join(tz[0])),
    ),
    Resource("locale", current_locale, _value("locale", "LC_ALL", lambda v: v or "")),
    Resource("sys.path", lambda: list(sys.path), _sys_path, ("added", "removed", "changed")),
    Resource("module", lambda: len(sys.modules), _modules, ("added",)),
    Resource("warnings", lambda: tuple(warnings.filters), _warnings_change),
    Resource("logging", _get_logging, _logging, ("changed", "added", "removed")),
    Resource("signal", lambda: tuple(map(signal.getsignal, _SIGNALS)), _signal_change),
    Resource("thread", _alive_threads, _threads, ("added",), running=True),
    Resource("process", children, _processes, ("added",), running=True),
    Resource("fd", open_fds, _descriptors, ("added",), running=True),
    Resource("socket-timeout", socket.getdefaulttimeout, _value("socket-timeout")),
    Resource("recursion-limit", sys.getrecursionlimit, _value("recursion-limit")),
    Resource("switch-interval", sys.getswitchinterval, _value("switch-interval")),
    Resource("tempfile.tempdir", lambda: tempfile.tempdir, _value("tempfile.tempdir")),
    Resource(
        "asyncio-policy",
        lambda: _policy_name(_compat.asyncio_policy()),
        _value("asyncio-policy"),
    ),
    Resource("tempfile", _temp_entries, _temp_change, ("added",)),
)
#: Resources that are running things: a leak as soon as the test is over.
_RUNNING = tuple(resource for resource in RESOURCES if resource.running)
#: Kept for every attempt that made them, not only the last (running things; and
#: each draw from a stream seeded at import shifts what every later test draws).
EVERY = frozenset({*(resource.name for resource in _RUNNING), "random"})


@dataclass(frozen=True)
class Snapshot:
    """The process state at one moment (between two attempts): a value per resource."""

    values: dict[str, Any]

    @classmethod
    def take(cls) -> Snapshot:
        return cls({resource.name: resource.get() for resource in RESOURCES})

    @classmethod
    def running(cls) -> Snapshot:
        """The running things only (threads, processes, descriptors): sets each."""
        return cls({resource.name: resource.get() for resource in _RUNNING})

    def with_held(self, held: Iterable[Snapshot]) -> Snapshot:
        """This snapshot as if what ``held`` holds had been running already."""
        values = dict(self.values)
        for holder in held:
            for name, things in holder.values.items():
                values[name] = values[name] | things
        return Snapshot(values)


def diff(before: Snapshot, after: Snapshot, rootdir: str | None = None) -> list[Leak]:
    """What changed from ``before`` to ``after`` (running things: what was started)."""
    out: list[Leak] = []
    for resource in RESOURCES:
        old, new = before.values[resource.name], after.values[resource.name]
        if old != new:
            out.extend(resource.compare(old, new, rootdir))
    return out[:MAX_PER_ATTEMPT]


def fixture_label(fixturedef: Any, rootdir: str | None) -> str:
    """``session fixture 'server' at tests/conftest.py:12``: a fixture as a leak names it."""
    code = getattr(getattr(fixturedef, "func", None), "__code__", None)
    where = ""
    if code is not None:
        path = code.co_filename
        if rootdir is not None:
            with contextlib.suppress(ValueError):
                relative = os.path.relpath(path, rootdir)
                path = path if relative.startswith("..") else relative
        where = f" at {path}:{code.co_firstlineno}"
    return f"{fixturedef.scope} fixture {fixturedef.argname!r}{where}"


def stream_leak(import_seed: str, words: int) -> Leak:
    """An attempt drew ``words`` 32-bit words (-1: many) from the stream seeded at import."""
    drawn = f"{words} word(s)" if words > 0 else "many words"
    detail = bounded(f"drew {drawn}; seeded at import at {import_seed}")
    return Leak("random", "random", "changed", detail)


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
    #: Running things a fixture wider than a test started in its setup, by
    #: fixture (see :meth:`fixture_set_up`): ``(label, position, started)``.
    held: dict[object, tuple[str, int, Snapshot]] = field(default_factory=dict)

    def after_attempt(self, position: int) -> list[Leak]:
        before = self.last or self.start
        now = self.last = Snapshot.take()
        held = [started for _, _, started in self.held.values()]
        found = diff(before.with_held(held) if held else before, now, self.rootdir)
        if found:
            self.changes[position] = found
        return found

    def fixture_set_up(self, fixture: object, label: str, position: int,
                       before: Snapshot, after: Snapshot) -> None:  # fmt: skip
        """A fixture wider than a test (``label``: ``session fixture 'server'
        at conftest.py:4``) was set up during the attempt at ``position``: the
        threads, processes and descriptors it started are the fixture's, held
        for its scope, not the test's. They are a leak only if they outlive
        the fixture's teardown (:meth:`fixture_torn_down`), and then its."""
        started = Snapshot(
            {name: things - before.values[name] for name, things in after.values.items()}
        )
        if any(started.values.values()):
            self.held[fixture] = (label, position, started)

    def fixture_torn_down(self, fixture: object) -> None:
        """``fixture`` was torn down: what it started and left running is a
        leak, named as the fixture's, of the attempt that set it up."""
        entry = self.held.pop(fixture, None)
        if entry is None:
            return
        label, position, started = entry
        now = Snapshot.running()
        for resource in _RUNNING:
            still = started.values[resource.name] & now.values[resource.name]
            for leak in resource.compare(frozenset(), still, self.rootdir) if still else ():
                owner = f"started by {label}, still running after its teardown"
                detail = f"{leak.detail}; {owner}" if leak.detail not in ("", "daemon") else owner
                self.note(position, Leak(leak.resource, leak.name, leak.change,
                                         bounded(detail, 2 * DETAIL)))  # fmt: skip

    def note(self, position: int, leak: Leak) -> None:
        """A leak the snapshots cannot see (the engine knows it)."""
        self.changes.setdefault(position, []).append(leak)

    def finish(self) -> dict[int, list[Leak]]:
        """``{position: leaks}`` that the round left behind (see the class docstring)."""
        end = self.last or self.start
        left = {(leak.resource, leak.name) for leak in diff(self.start, end, self.rootdir)}
        # A value change that stayed is the leak of the last attempt that made it.
        stayed = {
            key: position
            for position in sorted(self.changes)
            for leak in self.changes[position]
            if (key := (leak.resource, leak.name)) in left
        }
        kept = {
            position: [
                leak
                for leak in leaks
                if leak.resource in EVERY or stayed.get((leak.resource, leak.name)) == position
            ]
            for position, leaks in self.changes.items()
        }
        return {position: leaks for position, leaks in kept.items() if leaks}


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = frozenset(
    {"os.remove", "os.rename", "os.mkdir", "os.rmdir", "shutil.rmtree", "shutil.copyfile",
     "os.truncate", "os.symlink", "os.link", "shutil.move"}
)  # fmt: skip


def _sqlite_path(database: Any) -> Any:
    """The file of ``sqlite3.connect(database)``: a path, or a ``file:`` URI's path
    (None for an in-memory database)."""
    if isinstance(database, (bytes, os.PathLike)):
        database = os.fsdecode(database)
    if not isinstance(database, str) or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):
        path = database[5:].split("?", 1)[0]
        if path.startswith("//"):  # file://host/path
            path = "/" + path[2:].split("/", 1)[-1]
        return urllib.parse.unquote(path) or None
    return database


#: Where an event's ``dir_fd`` arguments are: (first path's, second path's, both's).
#: A relative path with a ``dir_fd`` is relative to that folder, not to the
#: working directory (``shutil.rmtree`` removes what is inside its folder so).
_DIR_FDS: dict[str, tuple[int | None, int | None, int | None]] = {
    "os.remove": (1, None, None),
    "os.rmdir": (1, None, None),
    "os.mkdir": (2, None, None),
    "os.rename": (2, 3, None),
    "os.link": (2, 3, None),
    "os.symlink": (None, None, 2),
    "shutil.rmtree": (1, None, None),
}


def _arg(args: tuple[Any, ...], index: int | None) -> Any:
    return args[index] if index is not None and index < len(args) else None


def _folder_of(dir_fd: Any) -> str:
    """The folder a relative path is taken from: ``dir_fd``'s (Linux), else the working
    directory (OSError: a ``dir_fd`` whose folder cannot be known)."""
    if not isinstance(dir_fd, int) or dir_fd < 0:  # None, or AT_FDCWD
        return os.getcwd()
    return os.readlink(f"/proc/self/fd/{dir_fd}")


#: How a fixed port a test bound is named among the paths it wrote (``port:8000``).
PORT_PREFIX = "port:"


@dataclass(eq=False)
class Writes:
    """The paths each attempt wrote from Python, by an audit hook (one per process);
    an SQLite database counts as written when a test connects to it, and a
    fixed port it binds as ``port:N`` (:data:`PORT_PREFIX`).

    Audit hooks cannot be removed: :meth:`install` adds one hook for the
    process's lifetime, which does nothing (one attribute check) unless an
    attempt is being watched. Only paths under the rootdir, at the top of the
    system's temporary directory and in the user's home (not where Python and
    its packages are installed) are kept, at most :data:`MAX_WRITES` per attempt.
    """

    _installed: ClassVar[Writes | None] = None
    root: str = ""
    temp: str = ""
    home: str = ""
    #: Where Python and the installed packages live (never a test's state).
    installs: tuple[str, ...] = ()
    paths: list[str] | None = None

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
        # The user's home: state a test keeps there (~/.app/data.csv) is shared
        # by every worker of the machine, as the checkout is.
        home = os.path.realpath(os.path.expanduser("~"))
        self.home = os.path.join(home, "") if home != os.sep else ""
        self.installs = tuple(
            os.path.join(os.path.realpath(p), "")
            for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}
        )
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
            first, second, folder = _DIR_FDS.get(event, (None, None, None))
            self._note(args[0], _arg(args, first))
            if event in ("os.rename", "shutil.copyfile", "os.symlink", "os.link", "shutil.move"):
                self._note(args[1], _arg(args, second if second is not None else folder))
        elif event == "sqlite3.connect":
            # SQLite opens and writes its file from C (no "open" event): the
            # database a test connects to is a path it may write.
            self._note(_sqlite_path(args[0]))
        elif event == "socket.bind":
            address = args[1] if len(args) > 1 else None
            if isinstance(address, str):  # an AF_UNIX socket: a file
                self._note(address)
            elif isinstance(address, tuple) and len(address) >= 2 and address[1]:
                # A fixed port is a resource like a path: two workers cannot both hold it.
                port = f"{PORT_PREFIX}{address[1]}"
                if port not in paths:
                    paths.append(port)

    def _in_home(self, path: str) -> bool:
        return bool(self.home) and path.startswith(self.home) and not path.startswith(self.installs)

    def _note(self, path: Any, dir_fd: Any = None) -> None:
        if path is None or isinstance(path, int):
            return
        try:
            text = os.fsdecode(path)
            if not os.path.isabs(text):
                text = os.path.join(_folder_of(dir_fd), text)
        except (OSError, TypeError, ValueError):
            return
        text = os.path.normpath(text)
        if text.startswith(self.temp) and not text.startswith(self.root):
            # The top-level entry is what a leak names; the hunt's and pytest's own
            # directories (tmp_path & co.) are not the test's.
            top = text[len(self.temp) :].split(os.sep, 1)[0]
            if top.startswith(_OWN_TEMP):
                return
            text = self.temp + top
        elif f"{os.sep}__pycache__{os.sep}" in text or not (
            text.startswith(self.root) or self._in_home(text)
        ):
            return
        if self.paths is not None and text not in self.paths:
            self.paths.append(text)
