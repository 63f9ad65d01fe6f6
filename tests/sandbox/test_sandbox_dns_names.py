"""Names that look local but reach a resolver are refused before the C call.

CPython resolves a hostname inside ``connect()``/``sendto()`` before the
``socket.connect`` audit event fires, so the guard must judge the *name* at
the Python level. Only literal loopback addresses and the exact name
``localhost`` are local; every call below is refused by the guard and no
real function (spied) is ever reached.
"""

from __future__ import annotations

import errno
import socket

import hermetic
import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, netguard

LOOKALIKES = [
    "api.localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "localhost.",
    "LOCALHOST.localdomain",
    "x.y.localhost",
    "127.0.0.1.invalid",
    "LocalHost",  # hosts are compared as exact text: another spelling is a name for a resolver
    " localhost",
]


def spec() -> SandboxSpec:
    return SandboxSpec(seed=7, now=1_700_000_000.0, test_id="tests/x.py::t")


@pytest.mark.parametrize("name", LOOKALIKES)
def test_a_local_looking_name_is_not_loopback(name: str) -> None:
    assert not netguard.is_loopback(name)


@pytest.mark.parametrize(
    "host", ["localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]", b"127.0.0.1"]
)
def test_literal_loopback_and_the_exact_name_localhost_are_loopback(host: object) -> None:
    assert netguard.is_loopback(host)


@pytest.mark.parametrize("name", LOOKALIKES)
@pytest.mark.parametrize("call", ["connect", "connect_ex", "sendto", "getaddrinfo", "create"])
def test_connect_and_lookups_to_a_local_looking_name_are_blocked_before_the_real_call(
    engine: Sandbox,
    spies: list[str],
    safety_net: list[tuple[str, str]],
    name: str,
    call: str,
) -> None:
    engine.enter(spec())
    try:
        if call == "connect":
            with socket.socket() as sock, pytest.raises(hermetic.NetworkBlockedError):
                sock.connect((name, 80))
        elif call == "connect_ex":
            with socket.socket() as sock:
                assert sock.connect_ex((name, 80)) == errno.ECONNREFUSED
        elif call == "sendto":
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            with udp as sock, pytest.raises(hermetic.NetworkBlockedError):
                sock.sendto(b"x", (name, 53))
        elif call == "getaddrinfo":
            with pytest.raises(hermetic.NetworkBlockedError):
                socket.getaddrinfo(name, 80)
        else:
            with pytest.raises(hermetic.NetworkBlockedError):
                socket.create_connection((name, 80), timeout=0.01)
    finally:
        facts = engine.exit()
    assert spies == []
    assert safety_net == []
    assert len(facts.violations) == 1
    assert facts.violations[0].host == name.lower().rstrip(".")
