"""The hunt: shuffled, repeated, sandboxed rounds, every attempt stored."""

from __future__ import annotations

import json
from contextlib import closing

import pytest
from helpers import hunt, one, rows, sequences

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

SUITE = """
import random
import pytest

CACHE = []

def test_fill_cache():
    CACHE.append("stale")

def test_cache_starts_empty():
    assert CACHE == []

def test_lucky_draw():
    assert random.random() < 0.6

@pytest.mark.parametrize("n", [1, 2, 3])
def test_square(n):
    assert n * n == n ** 2

class TestMath:
    def test_add(self):
        assert 1 + 1 == 2
"""
TESTS = 7


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_shop=SUITE)
    return pytester


@pytest.mark.parametrize(
    "workers", [[], ["-n", "2"], ["-p", "no:xdist"]], ids=["n0", "n2", "no-xdist"]
)
def test_a_hunt_stores_every_attempt_of_every_round(suite, workers):
    result = hunt(
        suite, "--hermetic-hunt=4", "--hermetic-hunt-order=shuffle", "--hermetic-hunt-isolate=off",
        *workers,
    )  # fmt: skip
    db = suite.path / "flakes.db"
    assert result.ret == 1
    assert one(db, "SELECT count(*) FROM attempts") == 4 * TESTS
    per_round = rows(
        db, "SELECT round, count(*), count(DISTINCT test_id) FROM attempts GROUP BY round"
    )
    assert per_round == [(r, TESTS, TESTS) for r in range(4)]
    status, rounds_done, planned, workers_n, base_seed, mode = one(
        db, "SELECT status, rounds_done, rounds_planned, workers, base_seed, mode FROM runs"
    )
    assert (status, rounds_done, planned, base_seed, mode) == ("complete", 4, 4, 2, "seeded")
    assert workers_n == (2 if workers == ["-n", "2"] else 1)
    seeds = [s for (s,) in rows(db, "SELECT seed FROM attempts")]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**63 for s in seeds)
    assert one(db, "SELECT count(*) FROM attempts WHERE now IS NULL") == 0
    environment = json.loads(one(db, "SELECT environment FROM runs"))
    assert {"python", "platform", "git_sha", "versions"} <= set(environment)
    # positions number each worker's sequence in each round (a fresh process), no gaps
    for worker, round_no, count, low, high in rows(
        db,
        "SELECT worker, round, count(*), min(position), max(position) FROM attempts "
        "GROUP BY worker, round",
    ):
        assert (low, high) == (0, count - 1), (worker, round_no)


def test_rounds_run_in_different_orders(suite):
    hunt(suite, "--hermetic-hunt=6", "--hermetic-hunt-isolate=off")
    db = suite.path / "flakes.db"
    orders = {}
    for round_no, nodeid in rows(
        db,
        "SELECT a.round, t.nodeid FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.repeat < 2 ORDER BY a.position",
    ):
        orders.setdefault(round_no, []).append(nodeid)
    assert len({tuple(o) for o in orders.values()}) == 6
    assert orders[1] == orders[0][::-1]  # auto: shuffle, then its exact reverse


def test_the_same_base_seed_gives_the_same_worker_sequences(suite):
    db = suite.path / "flakes.db"
    for seed in ("5", "5", "6"):
        suite.runpytest_subprocess(
            "-p",
            "no:randomly",
            f"--hermetic-seed={seed}",
            "--hermetic-hunt=3",
            "-n",
            "2",
            "--hermetic-hunt-isolate=off",
        )
    first, second, third = (sequences(db, run) for run in (1, 2, 3))
    assert set(first) == {"gw0", "gw1"}
    assert first == second
    assert first != third


def test_pytest_randomly_does_not_change_the_schedule(suite):
    pytest.importorskip("pytest_randomly")
    db = suite.path / "flakes.db"
    for randomly_seed in ("1", "2"):
        suite.runpytest_subprocess(
            "-p",
            "randomly",
            f"--randomly-seed={randomly_seed}",
            "--hermetic-seed=5",
            "--hermetic-hunt=3",
            "--hermetic-hunt-isolate=off",
        )
    assert sequences(db, 1) == sequences(db, 2)
    draws = rows(
        db,
        "SELECT a.run_id, a.round, a.outcome FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid LIKE '%lucky_draw' ORDER BY a.run_id, a.round",
    )
    assert [d[1:] for d in draws if d[0] == 1] == [d[1:] for d in draws if d[0] == 2]


def test_the_terminal_shows_the_header_progress_and_a_summary_with_replay_commands(suite):
    result = hunt(suite, "--hermetic-hunt=3", "--hermetic-hunt-isolate=off")
    out = result.stdout
    out.fnmatch_lines(
        [
            "hermetic-hunt: run 1 · 3 rounds · mode seeded · order auto · time default · base seed 2 "
            "(--hermetic-seed=2) · database flakes.db",
            "hermetic-hunt: round 1/3 [[]default[]] · 7 attempts · * failed · * flaky so far · ETA *",
            "hermetic-hunt: round 2/3 [[]reversed[]] · 14 attempts*",
            "hermetic-hunt: round 3/3 [[]grouped[]] · 21 attempts*",
        ]
    )
    out.fnmatch_lines(
        [
            "hermetic-hunt: run 1 · 3 round(s) · 21 attempts in * · * failed · flakes.db",
            "hermetic-hunt: 1 flaky · 0 broken · 0 sandbox-incompatible · 6 stable · 0 with "
            "network violations",
            "hermetic-hunt: what CI will see: 1 fails under shuffling or xdist",
            "",
            "fails under shuffling or xdist (1 finding):",
            "  -   test_shop.py::test_cache_starts_empty",
            "      not isolated",
            "      failed * of 3 attempts: *",
            "      failure: AssertionError: assert [[]'stale'* == [[][]] at test_shop.py:*",
            "      replay: pytest --hermetic-replay-db=flakes.db::A*",
        ]
    )
    assert result.ret == 1
    # passing attempts print no dots; the summary line counts every attempt
    assert "......" not in out.str()


def test_a_time_budget_runs_whole_rounds_until_it_is_spent(suite):
    result = hunt(suite, "--hermetic-hunt=1s", "--hermetic-hunt-isolate=off")
    db = suite.path / "flakes.db"
    rounds_done, budget, planned = one(
        db, "SELECT rounds_done, budget_seconds, rounds_planned FROM runs"
    )
    assert rounds_done >= 1 and budget == 1.0 and planned is None
    assert whole_rounds(db) == rounds_done
    result.stdout.fnmatch_lines(["hermetic-hunt: run 1 · a 1s budget *", "*round 1/? *left*"])


def test_a_time_budget_under_xdist_sends_whole_rounds(suite):
    hunt(suite, "--hermetic-hunt=2s", "-n", "2", "--hermetic-hunt-isolate=off")
    db = suite.path / "flakes.db"
    rounds_done = one(db, "SELECT rounds_done FROM runs")
    assert rounds_done >= 2
    assert whole_rounds(db) == rounds_done


def whole_rounds(db):
    """Rounds in which every test ran (exactly once, or twice in a twice round)."""
    per_round = rows(
        db,
        "SELECT round, count(DISTINCT test_id), count(*), max(repeat) FROM attempts GROUP BY round",
    )
    for _round, tests, attempts, repeat in per_round:
        assert tests == TESTS and attempts == TESTS * (2 if repeat else 1)
    return len(per_round)


def test_several_hunts_accumulate_in_one_database(suite):
    hunt(suite, "--hermetic-hunt=2", "--hermetic-hunt-isolate=off")
    hunt(suite, "--hermetic-hunt=3", "--hermetic-hunt-isolate=off")
    db = suite.path / "flakes.db"
    assert rows(db, "SELECT id, rounds_done FROM runs ORDER BY id") == [(1, 2), (2, 3)]
    assert one(db, "SELECT count(*) FROM attempts") == 5 * TESTS
    assert one(db, "SELECT count(*) FROM tests") == TESTS


def test_any_gateway_spec_works_not_only_dash_n(suite):
    result = hunt(
        suite, "--hermetic-hunt=2", "--tx", "2*popen", "--dist=load", "--hermetic-hunt-isolate=off"
    )
    db = suite.path / "flakes.db"
    assert result.ret == 1
    assert one(db, "SELECT count(*) FROM attempts") == 2 * TESTS
    assert one(db, "SELECT worker_spec FROM runs") == '["popen", "popen"]'


def test_workers_get_distinct_recorded_hash_seeds(suite):
    hunt(suite, "--hermetic-hunt=2", "-n", "2", "--hermetic-hunt-isolate=off")
    db = suite.path / "flakes.db"
    seeds = rows(
        db, "SELECT worker, count(DISTINCT hash_seed), min(hash_seed) FROM attempts GROUP BY worker"
    )
    assert len(seeds) == 2
    assert all(count == 1 and seed is not None for _, count, seed in seeds)
    assert seeds[0][2] != seeds[1][2]


#: Counter files exist before the hunt: a file that was there is never touched
#: between rounds (one a round creates would be removed, as a new checkout).
COUNTER = "from pathlib import Path\nCOUNTER = Path(__file__).with_name('runs.txt')\n"


def counted(pytester: pytest.Pytester, name: str, body: str) -> None:
    pytester.makepyfile(**{name: COUNTER + body})
    (pytester.path / "runs.txt").write_text("0")


CRASHING = """
import ctypes, os, signal

def test_steady():
    pass

def test_dies_on_its_third_run():
    runs = int(COUNTER.read_text())
    COUNTER.write_text(str(runs + 1))
    if runs == 2:
        {how}

def test_also_steady():
    pass
"""
DEATHS = {
    "exit": "os._exit(3)",
    "sigkill": "os.kill(os.getpid(), signal.SIGKILL)",
    "segfault": "ctypes.string_at(0)",
}


@pytest.mark.parametrize("how", sorted(DEATHS))
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_test_that_kills_its_process_costs_only_its_attempt(pytester, workers, how):
    counted(pytester, "test_crash", CRASHING.replace("{how}", DEATHS[how]))
    result = hunt(
        pytester, "--hermetic-hunt=5", "--hermetic-hunt-order=shuffle",
        "--hermetic-hunt-isolate=off", "-p", "no:faulthandler", *workers,
    )  # fmt: skip
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT count(*) FROM attempts") == 15
    assert one(db, "SELECT attempts FROM runs") == 15
    crashed = rows(
        db,
        "SELECT t.nodeid, a.round FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.outcome = 'crashed'",
    )
    assert len(crashed) == 1 and crashed[0][0].endswith("test_dies_on_its_third_run")
    assert crashed[0][1] == 2
    exc_type, message = one(db, "SELECT exc_type, message FROM failures")
    assert exc_type == "Crashed"
    assert ("SIG" in message) == (how != "exit"), message
    assert one(db, "SELECT status, rounds_done FROM runs") == ("complete", 5)
    assert result.ret == 1


HANGING = """
def test_steady():
    pass

def test_hangs_on_its_third_run():
    runs = int(COUNTER.read_text())
    COUNTER.write_text(str(runs + 1))
    # a busy loop, on one line: the stop finds it there wherever the loop is
    # (sleeps are virtual in a hunt)
    while runs == 2: pass

def test_also_steady():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_test_that_hangs_is_stopped_at_the_timeout_and_the_hunt_goes_on(pytester, workers):
    """Plain pytest would wait forever; the hunt stops the attempt (a Timeout where
    the test was) and runs every round."""
    counted(pytester, "test_hang", HANGING)
    result = hunt(
        pytester, "--hermetic-hunt=4", "--hermetic-hunt-order=shuffle",
        "--hermetic-hunt-isolate=off", "--hermetic-hunt-timeout=1", *workers, timeout=300,
    )  # fmt: skip
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT count(*) FROM attempts") == 12
    assert one(db, "SELECT status, rounds_done FROM runs") == ("complete", 4)
    stopped = rows(
        db,
        "SELECT t.nodeid, a.outcome, f.exc_type, f.message, f.location, f.excerpt "
        "FROM attempts a JOIN tests t ON t.id = a.test_id JOIN failures f ON f.attempt_id = a.id",
    )
    assert len(stopped) == 1, stopped
    nodeid, outcome, exc_type, message, location, excerpt = stopped[0]
    assert nodeid.endswith("test_hangs_on_its_third_run") and outcome == "crashed"
    assert exc_type == "Timeout"
    assert message == "ran longer than 1s: hermetic-hunt stopped it (--hermetic-hunt-timeout)"
    source = (pytester.path / "test_hang.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if text.startswith("    while runs"))
    assert location == f"test_hang.py:{line}", excerpt
    assert "test_hangs_on_its_third_run" in excerpt
    assert result.ret == 1


OPTIONAL = """
import module_that_is_not_installed

def test_needs_it():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_module_that_cannot_be_imported_stops_the_hunt_at_once_and_is_named(suite, workers):
    suite.makepyfile(test_optional=OPTIONAL)
    result = hunt(suite, "--hermetic-hunt=3", *workers, timeout=120)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    result.stdout.fnmatch_lines([
        "*hermetic-hunt: the hunt stopped early: test_optional.py could not be collected "
        "(1 error during collection), so no round ran: fix it, leave it out (--ignore=PATH, "
        "--deselect=ID), or hunt the rest with --continue-on-collection-errors",
        "*ERROR test_optional.py*",
        "*Interrupted: 1 error during collection*",
    ])  # fmt: skip
    db = suite.path / "flakes.db"
    assert one(db, "SELECT status, rounds_done FROM runs") == ("interrupted", 0)
    assert one(db, "SELECT count(*) FROM attempts") == 0


def test_with_continue_on_collection_errors_every_worker_count_hunts_the_rest_alike(suite):
    suite.makepyfile(test_optional=OPTIONAL)
    seen = []
    for workers in ([], ["-n", "2"]):
        db = suite.path / f"flakes{len(workers)}.db"
        result = hunt(suite, "--hermetic-hunt=3", "--continue-on-collection-errors",
                      "--hermetic-hunt-isolate=off", f"--hermetic-hunt-db={db}", *workers)  # fmt: skip
        assert result.ret == 1, result.stdout.str()
        result.stdout.fnmatch_lines(["*ERROR test_optional.py*"])
        assert one(db, "SELECT status, rounds_done FROM runs") == ("complete", 3)
        seen.append(rows(db, "SELECT a.round, t.nodeid, a.seed, a.outcome FROM attempts a "
                             "JOIN tests t ON t.id = a.test_id ORDER BY a.round, t.nodeid"))  # fmt: skip
    assert seen[0] == seen[1]
    assert len(seen[0]) == 3 * TESTS


INTERRUPTED = """
def test_a():
    pass

def test_interrupts_on_its_third_run():
    runs = int(COUNTER.read_text())
    COUNTER.write_text(str(runs + 1))
    if runs == 2:
        raise KeyboardInterrupt

def test_b():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_test_that_raises_keyboard_interrupt_fails_and_the_hunt_goes_on(pytester, workers):
    """Issue 18 item 8: only a real Ctrl-C (SIGINT) stops a hunt (test_faults.py)."""
    counted(pytester, "test_stop", INTERRUPTED)
    result = hunt(pytester, "--hermetic-hunt=10", "--hermetic-hunt-isolate=off", *workers)
    db = pytester.path / "flakes.db"
    assert result.ret == 1
    assert one(db, "SELECT status, incomplete FROM runs") == ("complete", "")
    stored = one(db, "SELECT count(*) FROM attempts")
    assert stored >= 30 and one(db, "SELECT attempts FROM runs") == stored  # (+3: a twice round)
    assert rows(db, "SELECT exc_type FROM failures") == [("KeyboardInterrupt",)]


RERUN = """
def test_fails_every_other_time():
    runs = int(COUNTER.read_text())
    COUNTER.write_text(str(runs + 1))
    assert runs % 2 == 1
"""


def test_with_rerunfailures_every_rerun_is_an_attempt_and_failures_are_kept(pytester):
    pytest.importorskip("pytest_rerunfailures")
    counted(pytester, "test_rerun", RERUN)
    hunt(
        pytester,
        "--hermetic-hunt=3",
        "-p",
        "rerunfailures",
        "--reruns=1",
        "--hermetic-hunt-isolate=off",
    )
    db = pytester.path / "flakes.db"
    attempts = rows(db, "SELECT round, execution, outcome, seed FROM attempts ORDER BY id")
    # every round: the first execution fails, its rerun passes; both are stored
    assert [(r, e, o) for r, e, o, _ in attempts] == [
        (0, 1, "failed"),
        (0, 2, "passed"),
        (1, 1, "failed"),
        (1, 2, "passed"),
        (2, 1, "failed"),
        (2, 2, "passed"),
    ]
    assert len({seed for *_, seed in attempts}) == 6  # a rerun explores a new seed


def test_with_rerunfailures_under_xdist_reruns_are_attempts_too(pytester):
    pytest.importorskip("pytest_rerunfailures")
    counted(pytester, "test_rerun", RERUN)
    hunt(
        pytester,
        "--hermetic-hunt=4",
        "-p",
        "rerunfailures",
        "--reruns=1",
        "-n",
        "2",
        "--hermetic-hunt-isolate=off",
    )
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT count(*) FROM attempts WHERE execution = 1 AND repeat < 2") == 4
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome = 'failed'") >= 2


VIOLATION = """
import socket

def test_swallows_a_blocked_call():
    try:
        socket.getaddrinfo("api.example.invalid", 443)
    except OSError:
        pass
"""


def test_a_blocked_network_call_fails_the_hunt_even_when_the_test_passes(pytester):
    pytester.makepyfile(test_net=VIOLATION)
    result = hunt(pytester, "--hermetic-hunt=2", "--hermetic-hunt-isolate=off")
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome = 'passed'") == 2
    assert rows(db, "SELECT DISTINCT op, host, port FROM violations") == [
        ("getaddrinfo", "api.example.invalid", 443)
    ]
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "network violations (outbound calls the guard blocked):",
            "  test_net.py::test_swallows_a_blocked_call  in 2 attempt(s)",
        ]
    )


def test_a_test_that_always_fails_is_broken_not_flaky(pytester):
    pytester.makepyfile(test_broken="def test_broken():\n    assert 1 == 2\n")
    result = hunt(pytester, "--hermetic-hunt=3", "--hermetic-hunt-isolate=off")
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: 0 flaky · 1 broken · 0 sandbox-incompatible · 0 stable · 0 with "
            "network violations",
            "fails in normal runs (1 finding):",
            "  -   test_broken.py::test_broken",
            "      broken: failed in every attempt",
        ]
    )
    assert " flaky tests" not in result.stdout.str()


def test_verbose_output_lists_every_attempt(suite):
    result = hunt(suite, "--hermetic-hunt=2", "-v", "--hermetic-hunt-isolate=off")
    assert result.stdout.str().count("test_shop.py::TestMath::test_add PASSED") == 2


def test_a_hunt_prints_no_tracebacks_only_one_line_per_failing_test(suite):
    result = hunt(suite, "--hermetic-hunt=4", "--hermetic-hunt-isolate=off")
    text = result.stdout.str()
    assert "FAILURES" not in text and "_ test_cache_starts_empty _" not in text
    assert text.count("FAILED test_shop.py::test_cache_starts_empty") == 1
    # no letter per failed attempt: the round lines count them
    assert not any(set(line) == {"F"} for line in text.splitlines())
    result.stdout.re_match_lines([r".*\d+ failed, \d+ passed, \d+ repeated failures in .*"])
    result.stdout.fnmatch_lines(
        ["next:", "  hermetic-hunt report --format html   # every finding with its fix and replay"]
    )


def test_tb_shows_each_failure_once_and_counts_the_repeats(suite):
    result = hunt(suite, "--hermetic-hunt=4", "--hermetic-hunt-isolate=off", "--tb=short")
    text = result.stdout.str()
    assert text.count("_ test_cache_starts_empty _") == 1
    result.stdout.re_match_lines([r".*\d+ failed, \d+ passed, \d+ repeated failures in .*"])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_setup_error_is_shown_once_and_its_repeats_are_counted_apart(pytester, workers):
    """pytest's last line said "4 errors" for one fixture that failed in 4 attempts,
    with one ERROR line to explain them: the repeats are counted as such (a twice
    round runs it once more)."""
    pytester.makepyfile(
        test_setup="""
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("no database")

        def test_needs_it(broken):
            pass

        def test_fine():
            pass
        """
    )
    result = hunt(pytester, "--hermetic-hunt=4", "--hermetic-hunt-isolate=off", *workers)
    text = result.stdout.str()
    assert text.count("ERROR test_setup.py::test_needs_it") == 1, text
    db = pytester.path / "flakes.db"
    passed, errors = (
        one(db, f"SELECT count(*) FROM attempts WHERE outcome {op} 'passed'") for op in ("=", "!=")
    )
    # every count is of attempts, the twice round's repeated runs included
    result.stdout.re_match_lines(
        [rf".* {passed} passed, 1 error, {errors - 1} repeated errors in .*"]
    )


@pytest.mark.parametrize(("quiet", "header", "rounds"), [("-q", True, True), ("-qq", False, False)])
def test_quiet_hunts_keep_the_summary_and_drop_what_pytest_drops(suite, quiet, header, rounds):
    result = hunt(suite, "--hermetic-hunt=2", "--hermetic-hunt-isolate=off", quiet)
    text = result.stdout.str()
    assert "test session starts" not in text
    assert ("hermetic-hunt: run 1 · 2 rounds · mode seeded" in text) is header
    assert ("hermetic-hunt: round 1/2" in text) is rounds
    result.stdout.fnmatch_lines(
        ["hermetic-hunt: run 1 · 2 round(s) · 14 attempts in * · * failed · flakes.db",
         "*replay: pytest --hermetic-replay-db=flakes.db::A*"]
    )  # fmt: skip
    assert result.ret == 1


def test_the_database_file_is_complete_on_its_own_when_the_hunt_ends(suite, tmp_path):
    import shutil
    import sqlite3

    from hermetic_hunt.store import Store

    db = suite.path / "flakes.db"
    Store.open(db).close()
    # Another process (a dashboard, datasette) has the file open while the
    # hunt ends: the hunt's close is not the last one, so SQLite would leave
    # the attempts in flakes.db-wal.
    reader = sqlite3.connect(db)
    reader.execute("SELECT count(*) FROM runs").fetchone()
    try:
        hunt(suite, "--hermetic-hunt=3", "--hermetic-hunt-isolate=off")
        # what a CI job uploads: the .db file alone, without -wal / -shm
        alone = tmp_path / "uploaded.db"
        shutil.copy(db, alone)
    finally:
        reader.close()
    with closing(sqlite3.connect(alone)) as conn, conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM attempts").fetchone() == (3 * TESTS,)
