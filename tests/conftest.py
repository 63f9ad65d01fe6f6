"""Shared fixtures, and the network safety net installed before anything else.

The safety net is an audit hook that refuses any non-loopback socket
operation (connect, sendto, sendmsg, DNS and reverse lookups) *before* the
system call, and counts it. Tests of the network guard assert that the guard
stopped a call and that the safety net was never reached: nothing in this
suite may send a packet or a DNS query.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:  # (a test extra: without it this conftest still loads, for `pytest --help`)
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover
    pass
else:
    # Property tests check what is drawn, never how fast: on a loaded 2-core machine
    # drawing one batch can take seconds (Hypothesis's too_slow check and its
    # per-example deadline are timing assertions, which this suite does not make).
    settings.register_profile(
        "hermetic-hunt", deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile("hermetic-hunt")

_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
#: Every refused call, as (event, host): tests assert it stays empty.
SAFETY_NET_TRIPS: list[tuple[str, str]] = []


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
            return
        host = address[0]
    elif event == "socket.getnameinfo":
        host = args[0][0] if isinstance(args[0], tuple) and args[0] else args[0]
    else:
        host = args[0]
    if not _is_local(host):
        SAFETY_NET_TRIPS.append((event, str(host)))
        raise ConnectionAbortedError(f"test safety net: refused {event} to {host!r}")


sys.addaudithook(_safety_net)


def _keep_bytecode() -> None:
    """One bytecode folder, outside the checkout, for every process the suite starts.

    With ``PYTHONDONTWRITEBYTECODE`` set (CI's machine sets it) each of the
    suite's thousands of Python processes -- pytest sessions, xdist workers,
    probe servers, replays -- would compile hermetic-hunt, hermetic-sandbox
    (assertion-rewritten: both are pytest plugins) and the test files again:
    about 0.6 s of CPU a process. ``PYTHONPYCACHEPREFIX`` keeps the bytecode in
    a private folder of the temporary directory instead of ``__pycache__``
    folders in the trees under test.
    """
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    folder = Path(tempfile.gettempdir()) / f"hermetic-hunt-tests-bytecode-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.is_symlink() or folder.stat().st_uid != os.getuid():
            return  # not ours: compile as before
    except OSError:
        return
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


_keep_bytecode()

#: Audit events that start a process: a test that raises one must be marked ``process``.
_PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "subprocess.Popen", "os.posix_spawn",
                             "os.exec", "os.spawn", "os.system", "pty.spawn"})  # fmt: skip
#: The running test's process starts (None: no test is being watched).
_STARTED: list[str] | None = None


def _process_watch(event: str, args: tuple) -> None:
    if _STARTED is not None and event in _PROCESS_EVENTS:
        import traceback

        frames = [f for f in traceback.extract_stack()[:-1] if "conftest" not in f.filename]
        where = next((f for f in reversed(frames) if "/tests/" in f.filename), frames[-1])
        _STARTED.append(f"{event} at {where.filename}:{where.lineno}")


sys.addaudithook(_process_watch)


def _network_isolation() -> str:
    import socket

    try:
        names = {name for _, name in socket.if_nameindex()}
    except OSError:
        names = set()
    if names == {"lo"}:
        return "an empty network namespace (loopback only) + the audit-hook safety net"
    return "the host's network, guarded by the audit-hook safety net only"


#: Fixtures that start processes: a test that uses one is a ``process`` test.
_PROCESS_FIXTURES = frozenset({"pytester", "demo_hunt"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & _PROCESS_FIXTURES or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.process)
    # The tests of the session's demo hunt first (in pytest-randomly's order: it
    # shuffles before this hook): the ~90 s hunt starts at once, and xdist's first
    # batch of consecutive tests gives them all to one worker, so the other never
    # waits on the hunt's lock and the hunt never starts last. (Only these: sending
    # all slow tests first fills both workers' first batches with minutes of work
    # that xdist cannot hand over when one worker runs dry.)
    items.sort(key=lambda item: "demo_hunt" not in getattr(item, "fixturenames", ()))


@pytest.fixture(autouse=True)
def _in_process_tests_start_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """The ``process`` marker is kept honest: an unmarked test that forks or starts a
    subprocess fails, so ``-m "not process"`` really is the in-process pyramid base."""
    global _STARTED
    marked = request.node.get_closest_marker("process") is not None
    _STARTED = None if marked else []
    try:
        yield
        started = _STARTED or []
    finally:
        _STARTED = None
    if started:
        pytest.fail(
            f"this test started a process ({', '.join(sorted(set(started)))}) but is not "
            "marked @pytest.mark.process",
            pytrace=False,
        )


def pytest_report_header() -> str:
    return f"hermetic-hunt tests: network isolation: {_network_isolation()}"


ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "src" / "hermetic_hunt" / "examples" / "shop"


@pytest.fixture
def engine() -> Iterator[Any]:
    """A sandbox engine, closed after the test if the test left it open."""
    from hermetic_hunt.sandbox import Sandbox

    engine = Sandbox()
    yield engine
    if engine.active:
        engine.exit()


@pytest.fixture
def safety_net() -> list[tuple[str, str]]:
    """The safety net's record of refused calls, cleared for this test."""
    SAFETY_NET_TRIPS.clear()
    return SAFETY_NET_TRIPS


@pytest.fixture(scope="session")
def demo_hunt(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The seeded demo's hunt of the example suite, once per session (helpers.DemoHunt)."""
    from helpers import DemoHunt, run_demo_hunt, shared_once

    root, result = shared_once(tmp_path_factory, "demo", run_demo_hunt)
    return DemoHunt(root, result)


@pytest.fixture
def example_suite(tmp_path: Path) -> Path:
    """A private copy of the bundled example suite."""
    target = tmp_path / "shop"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own, with PYTEST_ADDOPTS set as for every session a test starts
    (pytester clears it first)."""
    from helpers import QUIET_PLUGINS

    for key, value in QUIET_PLUGINS.items():
        monkeypatch.setenv(key, value)
    return pytester


@pytest.fixture(autouse=True)
def _no_inherited_hunt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Our own suite runs under xdist: never let a worker's hash seed or
    # PYTEST_ADDOPTS leak into the pytest sessions a test starts.
    from helpers import QUIET_PLUGINS

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    for key, value in QUIET_PLUGINS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("HERMETIC_HUNT_EXAMPLE_STATE", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
