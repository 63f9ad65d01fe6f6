"""Issue 18: nothing a test does breaks, forges or silently shortens a hunt, at -n 0 and -n 2.

One small suite holds every adversary: a test that writes a forged end line
to every descriptor it has, one that forks a child that runs on and forges
too, one that leaves a process pool running, one that lowers the recursion
limit to 50, ``pytest.exit()``, ``os._exit`` in a fixture, and a
``KeyboardInterrupt`` raised by a test -- beside the issue's ten-line
reproducer (a module fixture that writes a file, so a failing attempt keeps a
journal: that journal's bytes crashed ``-n 2`` hunts in round 1). Each hunt
must end with every planned attempt stored, each adversary's attempt its own
outcome, and the run ``complete``; never "engine failed" (exit 3).
"""

from __future__ import annotations

import pytest
from helpers import hunt, one, rows

SUITE = """
import os, sys, time, pytest
from concurrent.futures import ProcessPoolExecutor

FORGED = b'{"op":"end","status":"completed","detail":"forged"}\\n'


def forge():
    for name in os.listdir("/proc/self/fd"):
        try:
            os.write(int(name), FORGED)
        except OSError:
            pass


@pytest.fixture(scope="module")
def db():
    name = f"x-{os.getpid()}.sqlite"
    open(name, "a").close()
    yield name
    os.remove(name)


def test_one(db):
    assert os.path.getsize(db) >= 0


def test_two(db):
    assert False


def test_forges_end_lines():
    forge()


def test_forks_a_child_that_runs_on():
    if os.fork() == 0:
        forge()
        time.sleep(2)
        os._exit(0)


def double(x):
    return 2 * x


def test_leaves_a_process_pool_running():
    pool = ProcessPoolExecutor(1)
    assert pool.submit(double, 2).result() == 4
    sys.modules[__name__].POOL = pool  # never shut down


def test_lowers_the_recursion_limit():
    sys.setrecursionlimit(50)


def test_calls_pytest_exit():
    pytest.exit("bye")


@pytest.fixture
def dies():
    os._exit(3)


def test_exits_in_setup(dies):
    pass


def test_raises_keyboard_interrupt():
    raise KeyboardInterrupt
"""
TESTS = 9
ROUNDS = 2


@pytest.mark.slow
@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_no_test_can_break_forge_or_shorten_the_hunt(pytester, workers):
    pytester.makepyfile(test_adversaries=SUITE)
    result = hunt(pytester, f"--hermetic-hunt={ROUNDS}", "--hermetic-hunt-isolate=off", *workers)
    output = result.stdout.str() + result.stderr.str()
    db = pytester.path / "flakes.db"
    assert "engine failed" not in output and "INTERNALERROR" not in output, output
    assert result.ret == 1, output  # tests failed: not 3 ("could not write its database")
    status, rounds_done, counted, incomplete = one(
        db, "SELECT status, rounds_done, attempts, incomplete FROM runs"
    )
    assert (status, rounds_done) == ("complete", ROUNDS), incomplete
    # every planned attempt, exactly once: none lost, none added by a forked child
    planned = TESTS * ROUNDS
    assert one(db, "SELECT count(*) FROM attempts WHERE execution = 1") == counted == planned
    per_test = rows(db, "SELECT t.nodeid, count(*) FROM attempts a JOIN tests t "
                        "ON t.id = a.test_id GROUP BY t.nodeid")  # fmt: skip
    assert {n for _, n in per_test} == {ROUNDS}
    outcomes = dict(
        rows(
            db,
            "SELECT substr(t.nodeid, instr(t.nodeid, '::') + 2), "
            "group_concat(DISTINCT a.outcome || ':' || coalesce(f.exc_type, '')) "
            "FROM attempts a JOIN tests t ON t.id = a.test_id "
            "LEFT JOIN failures f ON f.attempt_id = a.id GROUP BY t.nodeid",
        )
    )
    assert outcomes["test_one"] == "passed:"
    assert outcomes["test_two"] == "failed:AssertionError"
    assert outcomes["test_forges_end_lines"] == "passed:"
    assert outcomes["test_forks_a_child_that_runs_on"] == "passed:"
    assert outcomes["test_leaves_a_process_pool_running"] == "passed:"
    assert outcomes["test_calls_pytest_exit"] == "failed:Exit"
    assert outcomes["test_exits_in_setup"] == "crashed:Crashed"
    assert outcomes["test_raises_keyboard_interrupt"] == "failed:KeyboardInterrupt"
    assert outcomes["test_lowers_the_recursion_limit"] in ("passed:", "failed:RecursionError")
    # the failing attempts of the fixture's module kept their journals (item 1)
    assert one(db, "SELECT count(*) FROM journals j JOIN attempts a ON a.id = j.attempt_id "
                   "JOIN tests t ON t.id = a.test_id WHERE t.nodeid LIKE '%test_two'") == ROUNDS  # fmt: skip
    # the forged lines that reached a round's channel were seen and ignored
    assert "by another process (a test, or a process it started) were ignored" in incomplete
    assert "were ignored; nothing of theirs was stored" in output
    assert "the run is incomplete" not in output
