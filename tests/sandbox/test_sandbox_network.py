"""The network guard stops every way out before a packet or lookup leaves.

Proof without traffic: every real function the guard protects
(``netguard.REAL``) is replaced by a spy for the test, the call under test
goes to a TEST-NET address or a ``.invalid`` host, and we assert that no
spy was reached, that the safety net underneath (``tests/conftest.py``)
refused nothing, and that the attempt recorded the violation with its call
site -- even when the test swallowed the error.
"""

from __future__ import annotations

import _socket
import asyncio
import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import hermetic
import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, netguard

HERE = os.path.abspath(__file__)
TEST_NET = "192.0.2.1"
TEST_NET6 = "2001:db8::1"


def spec(**changes: Any) -> SandboxSpec:
    changes.setdefault("test_id", "tests/x.py::t")
    return SandboxSpec(seed=7, now=1_700_000_000.0, **changes)


def _udp(family: int = socket.AF_INET) -> socket.socket:
    return socket.socket(family, socket.SOCK_DGRAM)


def connect() -> None:
    with socket.socket() as sock:
        sock.connect((TEST_NET, 9))


def connect_ex() -> None:
    with socket.socket() as sock:
        assert sock.connect_ex((TEST_NET, 9)) == errno.ECONNREFUSED


def sendto_udp() -> None:
    with _udp() as sock:
        sock.sendto(b"ping", (TEST_NET, 9))


def sendto_with_flags() -> None:
    with _udp() as sock:
        sock.sendto(b"ping", 0, (TEST_NET, 9))


def sendmsg_udp() -> None:
    with _udp() as sock:
        sock.sendmsg([b"ping"], [], 0, (TEST_NET, 9))


def sendmsg_udp6() -> None:
    try:
        sock = _udp(socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 sockets here")
    with sock:
        sock.sendmsg([b"ping"], [], 0, (TEST_NET6, 9, 0, 0))


def getaddrinfo() -> None:
    socket.getaddrinfo("api.example.invalid", 443)


def raw_getaddrinfo() -> None:
    _socket.getaddrinfo("api.example.invalid", 443)


def gethostbyname() -> None:
    socket.gethostbyname("api.example.invalid")


def raw_gethostbyname() -> None:
    _socket.gethostbyname("api.example.invalid")


def gethostbyname_ex() -> None:
    socket.gethostbyname_ex("api.example.invalid")


def gethostbyaddr() -> None:
    socket.gethostbyaddr(TEST_NET)


def getnameinfo() -> None:
    socket.getnameinfo((TEST_NET, 443), 0)


def create_connection() -> None:
    socket.create_connection(("api.example.invalid", 443), timeout=0.01).close()


def raw_socket_connect() -> None:
    sock = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.connect((TEST_NET, 9))
    finally:
        sock.close()


def raw_socket_sendto() -> None:
    sock = _socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.sendto(b"ping", (TEST_NET, 9))
    finally:
        sock.close()


def urlopen() -> None:
    urllib.request.urlopen("http://metrics.example.invalid/v1/events", timeout=0.01).close()


# asyncio resolves in a thread pool: the violation must still name this file's line.


def asyncio_getaddrinfo() -> None:
    async def lookup() -> None:
        await asyncio.get_running_loop().getaddrinfo("api.example.invalid", 443)

    asyncio.run(lookup())


def asyncio_open_connection() -> None:
    async def connect() -> None:
        await asyncio.open_connection("api.example.invalid", 443)

    asyncio.run(connect())


def asyncio_getnameinfo() -> None:
    async def lookup() -> None:
        await asyncio.get_running_loop().getnameinfo((TEST_NET, 443))

    asyncio.run(lookup())


CALLS: list[tuple[Callable[[], None], str, str, int | None]] = [
    (connect, "connect", TEST_NET, 9),
    (connect_ex, "connect_ex", TEST_NET, 9),
    (sendto_udp, "sendto", TEST_NET, 9),
    (sendto_with_flags, "sendto", TEST_NET, 9),
    (sendmsg_udp, "sendmsg", TEST_NET, 9),
    (sendmsg_udp6, "sendmsg", TEST_NET6, 9),
    (getaddrinfo, "getaddrinfo", "api.example.invalid", 443),
    (raw_getaddrinfo, "getaddrinfo", "api.example.invalid", 443),
    (gethostbyname, "gethostbyname", "api.example.invalid", None),
    (raw_gethostbyname, "gethostbyname", "api.example.invalid", None),
    (gethostbyname_ex, "gethostbyname_ex", "api.example.invalid", None),
    (gethostbyaddr, "gethostbyaddr", TEST_NET, None),
    (getnameinfo, "getnameinfo", TEST_NET, 443),
    (create_connection, "create_connection", "api.example.invalid", 443),
    (raw_socket_connect, "connect", TEST_NET, 9),
    (raw_socket_sendto, "sendto", TEST_NET, 9),
    (urlopen, "create_connection", "metrics.example.invalid", 80),
    (asyncio_getaddrinfo, "getaddrinfo", "api.example.invalid", 443),
    (asyncio_open_connection, "getaddrinfo", "api.example.invalid", 443),
    (asyncio_getnameinfo, "getnameinfo", TEST_NET, 443),
]


@pytest.mark.parametrize(("call", "op", "host", "port"), CALLS, ids=[c[0].__name__ for c in CALLS])
def test_every_way_out_is_stopped_before_the_real_function_and_recorded(
    engine: Sandbox,
    spies: list[str],
    safety_net: list[tuple[str, str]],
    call: Callable[[], None],
    op: str,
    host: str,
    port: int | None,
) -> None:
    engine.enter(spec())
    try:
        try:
            call()
        except OSError as exc:  # swallowed, as code under test often does
            cause = getattr(exc, "reason", exc)  # urllib wraps it in a URLError
            assert isinstance(cause, hermetic.NetworkBlockedError), exc
    finally:
        facts = engine.exit()
    assert spies == []
    assert safety_net == []
    assert [(v.op, v.host, v.port) for v in facts.violations] == [(op, host, port)]
    site = facts.violations[0].detail
    assert site.startswith(f"{HERE}:"), site
    assert site.rsplit(":", 1)[1].isdigit()


def test_a_blocked_call_raises_a_connection_refused_error_that_says_how_to_allow_it(
    engine: Sandbox, spies: list[str]
) -> None:
    engine.enter(spec())
    try:
        with pytest.raises(ConnectionRefusedError) as caught:
            connect()
    finally:
        engine.exit()
    assert isinstance(caught.value, hermetic.NetworkBlockedError)
    message = str(caught.value)
    assert message.startswith(f"hermetic-hunt: blocked connect to ('{TEST_NET}', 9)")
    assert "integration marker" in message
    assert "\n" not in message


def test_outside_an_attempt_the_socket_functions_are_the_real_ones(engine: Sandbox) -> None:
    engine.enter(spec())
    engine.exit()
    assert socket.getaddrinfo is netguard.REAL["getaddrinfo"]
    assert socket.create_connection is netguard.REAL["create_connection"]
    assert _socket.socket is netguard.REAL["raw_socket"]
    assert _socket.getaddrinfo is netguard.REAL["raw_getaddrinfo"]
    for name in ("connect", "connect_ex", "sendto", "sendmsg"):
        assert name not in vars(socket.socket), name  # inherited again, not copied


def test_a_raw_socket_class_swapped_in_still_passes_isinstance(engine: Sandbox) -> None:
    with socket.socket() as before:
        engine.enter(spec())
        try:
            assert isinstance(before, _socket.socket)
            assert issubclass(socket.socket, _socket.socket)
            raw = _socket.socket()
            assert type(raw).__name__ == "socket"
            raw.close()
        finally:
            engine.exit()


@pytest.fixture
def listener() -> Iterator[tuple[str, int]]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        yield server.getsockname()


def _connect_to(address: Any, family: int = socket.AF_INET) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.connect(address)


def test_loopback_is_allowed_by_default_and_blocked_when_configured(
    engine: Sandbox, listener: tuple[str, int], spies: list[str]
) -> None:
    engine.enter(spec())
    try:
        with pytest.raises(OSError, match="spy: the real connect was reached"):
            _connect_to(listener)  # allowed: goes on to the (spied) real connect
    finally:
        facts = engine.exit()
    assert facts.violations == []
    engine.enter(spec(allow_loopback=False))
    try:
        with pytest.raises(hermetic.NetworkBlockedError):
            _connect_to(listener)
    finally:
        facts = engine.exit()
    assert [(v.op, v.host) for v in facts.violations] == [("connect", "127.0.0.1")]


def test_a_loopback_connection_really_works_inside_an_attempt(
    engine: Sandbox, listener: tuple[str, int], safety_net: list[tuple[str, str]]
) -> None:
    engine.enter(spec())
    try:
        _connect_to(listener)
    finally:
        facts = engine.exit()
    assert facts.violations == []
    assert safety_net == []


@pytest.fixture
def unix_listener() -> Iterator[str]:
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no unix sockets here")
    folder = tempfile.mkdtemp(prefix="hh-")  # short: unix socket paths are limited
    path = os.path.join(folder, "s")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        yield path
    os.unlink(path)
    os.rmdir(folder)


def test_unix_sockets_are_allowed_by_default_and_blocked_when_configured(
    engine: Sandbox, unix_listener: str
) -> None:
    engine.enter(spec())
    try:
        _connect_to(unix_listener, socket.AF_UNIX)
    finally:
        facts = engine.exit()
    assert facts.violations == []
    engine.enter(spec(allow_unix=False))
    try:
        with pytest.raises(hermetic.NetworkBlockedError):
            _connect_to(unix_listener, socket.AF_UNIX)
    finally:
        facts = engine.exit()
    assert [(v.op, v.host, v.port) for v in facts.violations] == [("connect", unix_listener, None)]


def test_allowlisted_hosts_and_allow_network_let_calls_through(
    engine: Sandbox, listener: tuple[str, int]
) -> None:
    host, port = listener
    engine.enter(spec(allow_loopback=False, network=(f"{host}:{port}",)))
    try:
        _connect_to(listener)
    finally:
        assert engine.exit().violations == []
    handle = engine.enter(spec(allow_loopback=False))
    try:
        handle.allow_network(host)
        _connect_to(listener)
    finally:
        assert engine.exit().violations == []


def test_network_off_installs_no_guard(engine: Sandbox, listener: tuple[str, int]) -> None:
    handle = engine.enter(spec(network="off", allow_loopback=False))
    try:
        assert socket.getaddrinfo is netguard.REAL["getaddrinfo"]
        _connect_to(listener)
        with pytest.raises(hermetic.SandboxError, match="network='off'"):
            handle.allow_network("example.invalid")
    finally:
        assert engine.exit().violations == []


AUDIT_SCRIPT = textwrap.dedent(
    """
    import _socket, json, socket, sys
    from hermetic_hunt.sandbox import Sandbox, SandboxSpec

    engine = Sandbox()  # installs the guard's audit hook first
    tripped = []

    def tripwire(event, args):  # runs after ours: anything we let through stops here
        if event.startswith("socket.") and event != "socket.__new__":
            text = repr(args)
            if "192.0.2" in text or ".invalid" in text:
                tripped.append(event)
                raise ConnectionAbortedError("tripwire")

    sys.addaudithook(tripwire)
    # Made before the attempt: none of the Python-level wrappers apply to these.
    raw_tcp = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw_udp = _socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lookup = _socket.getaddrinfo
    byname = _socket.gethostbyname
    calls = {
        "connect": lambda: raw_tcp.connect(("192.0.2.1", 9)),
        "sendto": lambda: raw_udp.sendto(b"x", ("192.0.2.1", 9)),
        "sendmsg": lambda: raw_udp.sendmsg([b"x"], [], 0, ("192.0.2.1", 9)),
        "getaddrinfo": lambda: lookup("api.example.invalid", 443),
        "gethostbyname": lambda: byname("api.example.invalid"),
    }
    errors = {}
    engine.enter(SandboxSpec(seed=1, now=1.0e9, test_id="t"))
    try:
        for name, call in calls.items():
            try:
                call()
            except OSError as exc:
                errors[name] = type(exc).__name__
    finally:
        facts = engine.exit()
    control = None
    try:
        byname("control.example.invalid")  # no attempt: the tripwire must catch it
    except OSError as exc:
        control = str(exc)
    raw_tcp.close(); raw_udp.close()
    print(json.dumps({
        "violations": [[v.op, v.host, v.port] for v in facts.violations],
        "errors": errors, "tripped": tripped, "control": control,
    }))
    """
)


@pytest.mark.process
def test_the_audit_hook_stops_what_slips_past_the_wrappers() -> None:
    done = subprocess.run(
        [sys.executable, "-c", AUDIT_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["tripped"] == ["socket.gethostbyname"]  # only the control call
    assert result["control"] == "tripwire"
    assert result["errors"] == dict.fromkeys(
        ("connect", "sendto", "sendmsg", "getaddrinfo", "gethostbyname"), "NetworkBlocked"
    )
    assert result["violations"] == [
        ["connect", "192.0.2.1", 9],
        ["sendto", "192.0.2.1", 9],
        ["sendmsg", "192.0.2.1", 9],
        ["getaddrinfo", "api.example.invalid", 443],
        ["gethostbyname", "api.example.invalid", None],
    ]


# -- side doors (issue 19) --------------------------------------------------------------


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What each protected real function was handed (its first arguments); it then
    refuses, so nothing is ever sent."""
    seen: list[tuple[str, Any]] = []
    for key, real in list(netguard.REAL.items()):
        if key == "raw_socket" or real is None:
            continue

        def spy(*args: Any, _key: str = key, **kwargs: Any) -> Any:
            shown = args[1] if _key in ("connect", "connect_ex") else args[0]
            if _key in ("sendto",):
                shown = args[-1]
            seen.append((_key, shown))
            raise OSError(f"spy: the real {_key} was reached")

        monkeypatch.setitem(netguard.REAL, key, spy)
    return seen


def _v6() -> socket.socket:
    try:
        return socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        pytest.skip("no IPv6 sockets here")


def test_localhost_reaches_the_c_layer_as_the_literal_address_of_the_family(
    engine: Sandbox, handed: list[tuple[str, Any]], safety_net: list[tuple[str, str]]
) -> None:
    # This machine's /etc/hosts has no "::1 localhost": handed to C, the name
    # in an AF_INET6 call would be a DNS query.
    engine.enter(spec())
    try:
        with _v6() as sock6, pytest.raises(OSError, match="spy"):
            sock6.connect(("localhost", 9, 0, 0))
        with socket.socket() as sock4, pytest.raises(OSError, match="spy"):
            sock4.connect(("localhost", 9))
        with pytest.raises(OSError, match="spy"):
            socket.getaddrinfo("localhost", 80, socket.AF_INET6)
        with pytest.raises(OSError, match="spy"):
            socket.getaddrinfo("localhost", 80)
        with pytest.raises(OSError, match="spy"):
            socket.gethostbyname("localhost")
        with _udp() as udp, pytest.raises(OSError, match="spy"):
            udp.sendto(b"x", ("localhost", 9))
    finally:
        facts = engine.exit()
    assert handed == [
        ("connect", ("::1", 9, 0, 0)),
        ("connect", ("127.0.0.1", 9)),
        ("getaddrinfo", "::1"),
        ("getaddrinfo", "127.0.0.1"),
        ("gethostbyname", "127.0.0.1"),
        ("sendto", ("127.0.0.1", 9)),
    ]
    assert facts.violations == []
    assert safety_net == []


class _Sneaky(str):
    """A host whose methods say localhost while its characters say otherwise."""

    def strip(self, chars: Any = None) -> str:
        return "localhost"

    def lower(self) -> str:
        return "localhost"

    def __eq__(self, other: object) -> bool:
        return other == "localhost" or str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    "call",
    [
        lambda host: _connect_to((host, 80)),
        lambda host: socket.getaddrinfo(host, 80),
        lambda host: socket.gethostbyname(host),
        lambda host: socket.create_connection((host, 80)),
    ],
    ids=["connect", "getaddrinfo", "gethostbyname", "create_connection"],
)
def test_a_str_subclass_is_judged_by_its_characters_not_its_methods(
    engine: Sandbox,
    handed: list[tuple[str, Any]],
    safety_net: list[tuple[str, str]],
    call: Callable[[str], None],
) -> None:
    engine.enter(spec())
    try:
        with pytest.raises(hermetic.NetworkBlockedError):
            call(_Sneaky("name.invalid"))
    finally:
        facts = engine.exit()
    assert handed == []
    assert safety_net == []
    assert [v.host for v in facts.violations] == ["name.invalid"]
    assert all(type(v.host) is str for v in facts.violations)


def test_a_call_from_a_thread_an_earlier_attempt_left_names_that_test(
    engine: Sandbox, spies: list[str], safety_net: list[tuple[str, str]]
) -> None:
    go, done = threading.Event(), threading.Event()
    caught: list[BaseException] = []

    def later() -> None:
        go.wait(30)
        try:
            socket.getaddrinfo("api.example.invalid", 443)
        except OSError as exc:
            caught.append(exc)
        done.set()

    engine.enter(spec(test_id="tests/x.py::test_leaves_a_thread"))
    thread = threading.Thread(target=later, daemon=True)
    thread.start()
    engine.exit()
    engine.enter(spec(test_id="tests/x.py::test_innocent"))
    try:
        go.set()
        assert done.wait(30)
    finally:
        facts = engine.exit()
    thread.join(30)
    assert spies == [] and safety_net == []
    assert [isinstance(e, hermetic.NetworkBlockedError) for e in caught] == [True]
    assert [v.detail.split(": ", 1)[0] for v in facts.violations] == [
        "a thread left by tests/x.py::test_leaves_a_thread"
    ]
