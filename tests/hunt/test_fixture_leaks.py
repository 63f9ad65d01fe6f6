"""What a fixture wider than a test starts is the fixture's, not the first test's."""

from __future__ import annotations

import pytest
from helpers import hunt, rows

#: Hunts in fresh pytest processes.
pytestmark = pytest.mark.slow

CONFTEST = """
import threading
import pytest

@pytest.fixture(scope="session")
def server():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="hh-server", daemon=True)
    thread.start()
    yield thread
    stop.set()
    thread.join()

@pytest.fixture(scope="module")
def forgotten():
    thread = threading.Thread(target=threading.Event().wait, name="hh-forgotten", daemon=True)
    thread.start()
    yield
"""

SUITE = """
import threading

def test_uses_the_server(server):
    assert server.is_alive()

def test_also_uses_the_server(server):
    assert server.is_alive()

def test_starts_its_own_thread():
    threading.Thread(target=threading.Event().wait, name="hh-own", daemon=True).start()
"""

FORGETFUL = """
def test_uses_the_forgotten_one(forgotten):
    pass

def test_also_uses_the_forgotten_one(forgotten):
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_wider_fixtures_thread_is_its_own_and_a_leak_only_past_its_teardown(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_server=SUITE, test_forgetful=FORGETFUL)
    result = hunt(pytester, "--hermetic-hunt=4", "--hermetic-hunt-isolate=off", *workers)
    assert result.ret == 0, result.stdout.str()
    left = rows(
        pytester.path / "flakes.db",
        "SELECT t.nodeid, l.name, l.detail, l.persisted FROM leaks l "
        "JOIN attempts a ON a.id = l.attempt_id JOIN tests t ON t.id = a.test_id "
        "WHERE l.resource = 'thread'",
    )
    by_name: dict[str, list[tuple[str, str, int]]] = {}
    for nodeid, name, detail, persisted in left:
        by_name.setdefault(name, []).append((nodeid, detail, persisted))
    # The session server, stopped at its teardown, is nobody's leak.
    assert "hh-server" not in by_name, left
    # A test's own thread is its leak, every round.
    own = {n for n, _, _ in by_name["hh-own"]}
    assert own == {"test_server.py::test_starts_its_own_thread"}
    assert len(by_name["hh-own"]) == 5  # four rounds, and the twice round's second run
    # The module fixture never stops its thread: a leak once per set-up, named as the fixture's,
    # on the attempt that set it up (whichever of its two tests ran first in that process).
    forgotten = by_name["hh-forgotten"]
    source = (pytester.path / "conftest.py").read_text().splitlines()
    line = source.index("def forgotten():")  # its decorator's line, as pytest names it
    owner = f"started by module fixture 'forgotten' at conftest.py:{line}, still running after its teardown"
    assert {detail for _, detail, _ in forgotten} == {owner}, forgotten
    assert {persisted for _, _, persisted in forgotten} == {1}
    assert len(forgotten) >= 4  # one per round, at least (a shared worker may set it up more)
    assert {n.split("::")[0] for n, _, _ in forgotten} == {"test_forgetful.py"}
    out = result.stdout.str()
    assert "tests that leave state behind (3)" in out or "tests that leave state behind (2)" in out
    assert "hh-server" not in out
    assert f"left 1 thread running: hh-forgotten ({owner})" in out
