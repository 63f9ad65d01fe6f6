"""The network guard: every way out is stopped before a packet or lookup leaves.

What is stopped, what "loopback" means, why names are judged before the C
call and what the guard does not cover are in docs/sandbox.md, 'The network
guard'. How, here: Python-level wrappers (installed per attempt) stop each
entry point before the real function is called and record each blocked call
as a violation, even when the test then swallows the error. asyncio's
``loop.getaddrinfo`` / ``loop.getnameinfo`` are checked in the coroutine, so
the violation names the test's line, not the thread pool the loop resolves
in; ``_socket.socket`` is swapped for a guarded subclass (the C type is
immutable). Before any check a host is made exact (:func:`exact`) and
``localhost`` becomes its family's loopback literal (:func:`loopback_literal`).
Underneath, one audit hook (installed once, inert outside attempts) catches
whatever slips past the wrappers.
"""

from __future__ import annotations

import _socket
import asyncio.base_events
import errno
import functools
import ipaddress
import socket as _socket_module
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterable
from typing import Any

from hermetic_hunt.models import Violation
from hermetic_hunt.sandbox.patches import Patches

REAL: dict[str, Any] = {
    "connect": _socket_module.socket.connect,
    "connect_ex": _socket_module.socket.connect_ex,
    "sendto": _socket_module.socket.sendto,
    "sendmsg": getattr(_socket_module.socket, "sendmsg", None),
    "getaddrinfo": _socket_module.getaddrinfo,
    "gethostbyname": _socket_module.gethostbyname,
    "gethostbyname_ex": _socket_module.gethostbyname_ex,
    "gethostbyaddr": _socket_module.gethostbyaddr,
    "getnameinfo": _socket_module.getnameinfo,
    "create_connection": _socket_module.create_connection,
    "raw_getaddrinfo": _socket.getaddrinfo,
    "raw_socket": _socket.socket,
    "loop_getaddrinfo": asyncio.base_events.BaseEventLoop.getaddrinfo,
    "loop_getnameinfo": asyncio.base_events.BaseEventLoop.getnameinfo,
}
"""The functions the guard protects, as they were at import: the wrappers call
them through this dict (so a test can put a spy in place and prove that a
blocked call never reached the real function)."""
_LOOPBACK_NAME = "localhost"
"""The one name treated as loopback (and handed to C as a literal address).
``*.localhost``, ``localhost.localdomain``, ``ip6-localhost`` and
``localhost.`` (trailing dot) are not: a resolver may send them to DNS, and
CPython resolves a name inside ``connect()``/``sendto()`` before any audit
event fires, so such a name must be refused here, at the Python level,
before the C call."""
#: Frames of these modules are skipped when naming the call site.
_PLUMBING = ("socket", "_socket", "ssl", "hermetic_hunt", "urllib", "http", "asyncio")


def exact(host: Any) -> Any:
    """``host`` as the C layer reads it: a ``str`` or ``bytes`` subclass becomes a plain
    copy of its characters, so that no overridden method (``strip``, ``lower``,
    ``__eq__``...) can make the guard judge one host while C resolves another."""
    if isinstance(host, str) and type(host) is not str:
        return str.__getitem__(host, slice(None))
    if isinstance(host, (bytes, bytearray)) and type(host) is not bytes:
        return bytes.__getitem__(bytes(memoryview(host)), slice(None))
    return host


def loopback_literal(host: Any, family: object = None) -> Any:
    """``localhost`` (exactly) as the literal loopback address of ``family`` (``::1``
    for ``AF_INET6``, else ``127.0.0.1``); any other host unchanged.

    The name is never handed to the C layer: on a machine whose ``/etc/hosts``
    has no ``::1 localhost`` line, an ``AF_INET6`` lookup of it goes to DNS.
    """
    if type(host) is str and host == _LOOPBACK_NAME:
        return "::1" if family == _socket.AF_INET6 else "127.0.0.1"
    if type(host) is bytes and host == _LOOPBACK_NAME.encode():
        return b"::1" if family == _socket.AF_INET6 else b"127.0.0.1"
    return host


def _address(address: Any, family: object) -> Any:
    """An address tuple with its host made exact and ``localhost`` made literal."""
    if isinstance(address, tuple) and address:
        host = loopback_literal(exact(address[0]), family)
        if host is not address[0]:
            return (host, *address[1:])
    return address


def _host_text(host: object) -> str:
    host = exact(host)
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return str(host).lower().strip("[]").rstrip(".")


def is_loopback(host: object) -> bool:
    """Whether ``host`` is a literal loopback address (127.0.0.0/8, ``::1``)
    or exactly ``localhost``: the only hosts that cannot cause a DNS query."""
    if type(host) is bytes:
        host = host.decode("ascii", "replace")
    if type(host) is not str:
        return False  # a subclass is judged by its characters (exact), never by its methods
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == _LOOPBACK_NAME:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


_LIBRARY_DIRS = tuple(
    {path for key in ("stdlib", "platstdlib", "purelib", "platlib")
     if (path := sysconfig.get_paths().get(key))}
)  # fmt: skip


@functools.cache
def _library_file(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS) or filename.startswith("<")


def _plumbing(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in _PLUMBING)


def call_site() -> str:
    """``file:line`` of the code that made the blocked call.

    The innermost frame outside the standard library and installed packages
    (the user's code that called ``requests``/``urllib``...); failing that,
    the innermost frame outside the socket plumbing.
    """
    frame: Any = sys._getframe(1)
    fallback = ""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not _plumbing(module):
            filename = frame.f_code.co_filename
            if not _library_file(filename):
                return f"{filename}:{frame.f_lineno}"
            fallback = fallback or f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return fallback


class Policy:
    """Who may be reached during one attempt; collects violations.

    ``allow(entry)`` is the hook ``sb.allow_network("host:port")`` calls.
    """

    def __init__(
        self,
        allowlist: Iterable[str],
        allow_loopback: bool,
        allow_unix: bool,
        blocked_error: Callable[[object, str], Exception],
    ) -> None:
        self.allow_loopback = allow_loopback
        self.allow_unix = allow_unix
        self._entries: set[tuple[str, int | None]] = set()
        self._resolved: set[tuple[str, int | None]] = set()
        self._blocked_error = blocked_error
        self._lock = threading.Lock()
        self.violations: list[Violation] = []
        #: Processes the attempt started (``PROCESS_EVENTS``): unguarded, only counted.
        self.processes = 0
        for entry in allowlist:
            self.allow(entry)

    def allow(self, entry: str) -> None:
        text = str(entry).strip().lower()
        port: int | None = None
        host = text
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            if rest.startswith(":"):
                port = int(rest[1:])
        elif text.count(":") == 1:
            host, _, port_text = text.partition(":")
            port = int(port_text)
        with self._lock:
            self._entries.add((_host_text(host), port))

    def allows(self, host: object, port: int | None) -> bool:
        if self.allow_loopback and is_loopback(host):
            return True
        text = _host_text(host)
        with self._lock:
            return any(
                (text, p) in self._entries or (text, p) in self._resolved for p in (None, port)
            )

    def remember(self, port: int | None, infos: list[Any]) -> None:
        with self._lock:
            for info in infos:
                address = info[4]
                if isinstance(address, tuple) and address:
                    self._resolved.add((_host_text(address[0]), port))

    def block(self, op: str, host: object, port: int | None, reason: str) -> Exception:
        site = call_site()
        owner = _left_by.get(threading.get_ident())
        if owner is not None:
            site = f"a thread left by {owner}: {site}"
        elif self is _between:
            site = f"between attempts: {site}"
        violation = Violation(op=op, host=_host_text(host), port=port, detail=site)
        with self._lock:
            self.violations.append(violation)
        return self._blocked_error((violation.host, port), f"{op}: {reason}")

    def check_address(self, op: str, address: object) -> None:
        if isinstance(address, tuple) and len(address) >= 2:
            host, port = exact(address[0]), address[1]
            number = port if isinstance(port, int) else None
            if not self.allows(host, number):
                raise self.block(op, host, number, "outbound network is blocked during a hunt")
        elif isinstance(address, (str, bytes)) and not self.allow_unix:
            raise self.block(op, address, None, "unix sockets are blocked")
        # Other families (AF_PACKET, AF_NETLINK...): nothing to judge by.

    def check_lookup(self, op: str, host: object, port: object = None) -> None:
        host = exact(host)
        if host is None or (type(host) in (str, bytes) and not host):
            return
        port_num = port if isinstance(port, int) else None
        if isinstance(port, (str, bytes)) and str(port).isdigit():
            port_num = int(port)
        if not self.allows(host, port_num):
            raise self.block(op, host, port_num, "DNS lookups are blocked during a hunt")


_active: Policy | None = None
_hook_installed = False
#: Threads an attempt left running (ident -> the test whose attempt started them):
#: a call one of them makes during a later attempt names that test, not the
#: later one. Threads that existed when the attempt began are not the attempt's.
_left_by: dict[int, str] = {}
_attempt_threads: set[int] = set()
_attempt_test = ""


#: Audit events that start another program or process: the guard does not
#: reach into it; each is counted in the attempt (``counts["processes"]``).
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.fork",
     "os.forkpty", "pty.spawn"}
)  # fmt: skip


def _audit(event: str, args: tuple[Any, ...]) -> None:
    policy = _active
    if policy is None:
        return
    if event in PROCESS_EVENTS:
        if policy is not _between:
            policy.processes += 1
        return
    if not event.startswith("socket."):
        return
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        policy.check_address(event[7:], args[1])
    elif event == "socket.getaddrinfo":
        policy.check_lookup("getaddrinfo", args[0], args[1])
    elif event in ("socket.gethostbyname", "socket.gethostbyaddr"):
        policy.check_lookup(event[7:], args[0])
    elif event == "socket.getnameinfo":
        address = args[0]
        if isinstance(address, tuple) and address:
            policy.check_lookup("getnameinfo", address[0], address[1] if len(address) > 1 else None)


def ensure_audit_hook() -> None:
    """Install the (permanent, process-wide) audit hook once."""
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True


def _lookup(host: Any, port: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The host of a ``getaddrinfo(host, port, family, ...)`` call, exact and with
    ``localhost`` literal for its family, judged (as it is while no attempt is active)."""
    if _active is not None:
        host = loopback_literal(exact(host), kwargs.get("family", args[0] if args else None))
        _active.check_lookup("getaddrinfo", host, port)
    return host


def _port_of(address: Any) -> int | None:
    return address[1] if isinstance(address, tuple) and len(address) > 1 else None


# The wrappers below are created once and read the active policy, so entering
# an attempt costs a handful of setattr calls, not new functions or classes.
# A wrapper called with no attempt active (a reference kept past the attempt)
# passes straight through.


def _connect(self: Any, address: Any) -> Any:
    if _active is not None:
        address = _address(address, self.family)
        _active.check_address("connect", address)
    return REAL["connect"](self, address)


def _connect_ex(self: Any, address: Any) -> Any:
    if _active is not None:
        address = _address(address, self.family)
        try:
            _active.check_address("connect_ex", address)
        except ConnectionRefusedError:
            return errno.ECONNREFUSED
    return REAL["connect_ex"](self, address)


def _sendto(self: Any, data: Any, *args: Any) -> Any:
    if _active is not None and args:
        args = (*args[:-1], _address(args[-1], self.family))
        _active.check_address("sendto", args[-1])
    return REAL["sendto"](self, data, *args)


def _sendmsg(self: Any, buffers: Any, *args: Any) -> Any:
    if _active is not None and len(args) >= 3:
        args = (*args[:2], _address(args[2], self.family), *args[3:])
        _active.check_address("sendmsg", args[2])
    return REAL["sendmsg"](self, buffers, *args)


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    policy = _active
    host = _lookup(host, port, args, kwargs)
    infos = REAL["getaddrinfo"](host, port, *args, **kwargs)
    if policy is not None:
        policy.remember(port if isinstance(port, int) else None, infos)
    return infos


def _raw_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    return REAL["raw_getaddrinfo"](_lookup(host, port, args, kwargs), port, *args, **kwargs)


def _resolver(name: str) -> Callable[[Any], Any]:
    """The wrapper of ``socket.<name>(host)``: the host judged before the real call."""

    def wrapper(host: Any) -> Any:
        if _active is not None:
            host = loopback_literal(exact(host))
            _active.check_lookup(name, host)
        return REAL[name](host)

    wrapper.__name__ = wrapper.__qualname__ = f"_{name}"
    return wrapper


def _nameinfo_address(sockaddr: Any) -> Any:
    """``getnameinfo``'s address, judged (with ``localhost`` made literal)."""
    if _active is not None and isinstance(sockaddr, tuple) and sockaddr:
        sockaddr = _address(sockaddr, _socket.AF_INET6 if len(sockaddr) == 4 else None)
        _active.check_lookup("getnameinfo", sockaddr[0], _port_of(sockaddr))
    return sockaddr


def _getnameinfo(sockaddr: Any, flags: Any) -> Any:
    return REAL["getnameinfo"](_nameinfo_address(sockaddr), flags)


def _create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    if _active is not None and isinstance(address, tuple) and address:
        address = _address(address, None)
        _active.check_lookup("create_connection", address[0], _port_of(address))
    return REAL["create_connection"](address, *args, **kwargs)


# asyncio resolves in a thread pool: checked there, the call site would be the
# pool's thread. Checked in the loop's coroutine instead, the stack still holds
# the test's own awaiting frames.


async def _loop_getaddrinfo(self: Any, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    host = _lookup(host, port, args, kwargs)
    return await REAL["loop_getaddrinfo"](self, host, port, *args, **kwargs)


async def _loop_getnameinfo(self: Any, sockaddr: Any, flags: int = 0) -> Any:
    return await REAL["loop_getnameinfo"](self, _nameinfo_address(sockaddr), flags)


_RawSocket: Any = REAL["raw_socket"]


class _RawSocketMeta(type):
    # While swapped in as `_socket.socket`, every raw socket (made before the
    # attempt, or a `socket.socket`) still passes isinstance(x, _socket.socket).
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _RawSocket)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _RawSocket)


_SOCKET_METHODS: dict[str, Any] = {
    "connect": _connect,
    "connect_ex": _connect_ex,
    "sendto": _sendto,
}
if REAL["sendmsg"] is not None:
    _SOCKET_METHODS["sendmsg"] = _sendmsg
#: What ``_socket.socket(...)`` makes during an attempt: guarded like ``socket.socket``.
GuardedRawSocket = _RawSocketMeta(
    "socket", (_RawSocket,), {**_SOCKET_METHODS, "__module__": "_socket"}
)
_RESOLVERS: dict[str, Any] = {
    **{name: _resolver(name) for name in ("gethostbyname", "gethostbyname_ex", "gethostbyaddr")},
    "getnameinfo": _getnameinfo,
}
SOCKET_MODULE_PATCH: dict[str, Any] = {
    **_RESOLVERS,
    "getaddrinfo": _getaddrinfo,
    "create_connection": _create_connection,
}
# socket's resolvers *are* _socket's (``from _socket import *``): one REAL entry each.
RAW_MODULE_PATCH: dict[str, Any] = {
    **_RESOLVERS,
    "getaddrinfo": _raw_getaddrinfo,
    "socket": GuardedRawSocket,
}


def _wrap(patches: Patches) -> None:
    """Put every wrapper in place (undone with ``patches``)."""
    sock = _socket_module.socket
    for name, wrapper in _SOCKET_METHODS.items():
        patches.setattr(sock, name, wrapper)
    patches.update(vars(_socket_module), SOCKET_MODULE_PATCH)
    patches.update(vars(_socket), RAW_MODULE_PATCH)
    loop = asyncio.base_events.BaseEventLoop
    patches.setattr(loop, "getaddrinfo", _loop_getaddrinfo)
    patches.setattr(loop, "getnameinfo", _loop_getnameinfo)


#: The policy between attempts (None: no guard outside attempts); see
#: :func:`guard_between_attempts`.
_between: Policy | None = None
_JOB_PATCHES = Patches()


def guard_between_attempts(blocked_error: Callable[[object, str], Exception]) -> None:
    """Keep the guard on between the attempts of this process, for good (a job's child).

    A thread an attempt left running can reach for the network while no attempt
    is open (the runner between two tests, a round's end): the wrappers stay in
    place (an attempt's own patches then save and restore them) and a policy
    that allows loopback and unix sockets only judges those calls. What it blocks
    is named ``a thread left by TEST`` when the thread is known, else ``between
    attempts``, and is handed to the next guarded attempt's violations.
    """
    global _active, _between
    if _between is not None:
        return
    _between = Policy((), True, True, blocked_error)
    _wrap(_JOB_PATCHES)
    ensure_audit_hook()
    _active = _between


def suspend() -> None:
    """No guard for an attempt whose network is ``off`` (until :func:`uninstall`)."""
    global _active
    _active = None


def install(patches: Patches, policy: Policy, test_id: str = "") -> None:
    """Guard the socket modules for one attempt of ``test_id`` (undone with ``patches``)."""
    global _active, _attempt_test
    alive = {t.ident for t in threading.enumerate() if t.ident is not None}
    for ident in [i for i in _left_by if i not in alive]:
        del _left_by[ident]  # ended: an ident may be reused by a new thread
    _attempt_threads.clear()
    _attempt_threads.update(alive)
    _attempt_test = test_id
    _wrap(patches)
    if _between is not None and _between.violations:
        with _between._lock:
            policy.violations.extend(_between.violations)
            _between.violations.clear()
    _active = policy


def uninstall() -> None:
    global _active
    _active = _between
    if _attempt_test:
        for thread in threading.enumerate():
            if thread.ident is not None and thread.ident not in _attempt_threads:
                _left_by.setdefault(thread.ident, _attempt_test)
