"""The example suite's shared fixtures, and its network safety net.

``ledger_file`` is one JSON file for the whole session (tests that share it
are order-dependent: see README.md).

Safety net: no test in this suite may reach the network, whatever happens.

Installed before any test runs: an audit hook refuses every non-loopback
socket operation (connect, sendto, sendmsg, DNS and reverse lookups) before
the system call is made. hermetic-hunt's guard stops these calls first; this
hook only matters if the guard is off (``--hermetic-hunt-mode=off``) or has a
bug -- then the call fails here instead of sending a packet.
"""

from __future__ import annotations

import ipaddress
import json
import sys

import pytest

_EVENTS = (
    "socket.connect",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
)


def _is_local(host: object) -> bool:
    if host is None or host in ("", b""):
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    text = str(host).strip("[]")
    # Only the exact name "localhost" and literal loopback addresses: any other
    # name (api.localhost, localhost.localdomain, "localhost.") may go to DNS.
    if text.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _safety_net(event: str, args: tuple) -> None:
    if event not in _EVENTS:
        return
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        address = args[1]
        if not isinstance(address, tuple):
            return  # unix sockets and other local families
        host = address[0]
    elif event == "socket.getnameinfo":
        host = args[0][0] if isinstance(args[0], tuple) and args[0] else args[0]
    else:
        host = args[0]
    if not _is_local(host):
        raise ConnectionRefusedError(
            f"example safety net: refused {event} to {host!r} before it left the machine"
        )


if not getattr(sys, "_hermetic_hunt_example_net", False):
    sys.addaudithook(_safety_net)
    sys._hermetic_hunt_example_net = True


@pytest.fixture(scope="session")
def price_feed():
    """The price feed's server thread, for the whole session: stopped at its end.
    It runs from the first test that asks for it, but it is this fixture's."""
    from shop.catalog import PriceFeed

    feed = PriceFeed().start()
    yield feed
    feed.stop()


@pytest.fixture(scope="session")
def ledger_file(tmp_path_factory):
    """One sales ledger for the whole session, created empty."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.json"
    path.write_text(json.dumps([]))
    return path


def pytest_addoption(parser, pluginmanager):
    # pytest.ini sets pytest-asyncio's loop scope; without pytest-asyncio the
    # key is declared here, so that pytest does not warn it is unknown.
    if not pluginmanager.has_plugin("asyncio"):
        parser.addini("asyncio_default_fixture_loop_scope", "pytest-asyncio's (not installed)")
