"""Timing conditions of a hunt's rounds: --hermetic-hunt-time, switch-interval and stress rounds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import hunt, one, rows

from hermetic_hunt.engine.stress import BUSY_LOOP, CpuStress
from hermetic_hunt.hunt.schedule import CALM_ROUNDS, condition_for, plan_round
from hermetic_hunt.models import Settings
from hermetic_hunt.options import parse_time
from hermetic_hunt.seeds import second_edge
from hermetic_hunt.timing import DEFAULT_TIME_MIX, EXACT_MIX, TimeMix

SWITCHY = """
import sys
import threading

def test_switch_interval_as_a_plain_run_has_it():
    assert sys.getswitchinterval() == 0.005

def test_threads():
    done = []
    worker = threading.Thread(target=done.append, args=(1,))
    worker.start()
    worker.join()
    assert done == [1]
"""

#: A test that fails while its hunt's busy processes run (a stand-in for a
#: test that only fails on a loaded machine: deterministic by construction).
#: Only busy processes of its own hunt count: children of its ancestors.
LOADED = f"""
import os

PROGRAM = {BUSY_LOOP!r}.encode()

def parent(pid):
    with open(f"/proc/{{pid}}/stat") as handle:
        return int(handle.read().rpartition(")")[2].split()[1])

def busy_processes():
    ancestors, pid = set(), os.getpid()
    while pid > 1:
        pid = parent(pid)
        ancestors.add(pid)
    found = 0
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{{name}}/cmdline", "rb") as handle:
                busy = PROGRAM in handle.read().replace(b"\\0", b" ")
            found += busy and parent(int(name)) in ancestors
        except (OSError, ValueError):
            pass
    return found

def test_fast_enough():
    assert busy_processes() == 0

def test_calm():
    pass
"""


@pytest.mark.process
def test_busy_processes_run_from_start_to_stop() -> None:
    stress = CpuStress(2)
    assert stress.start() == 2
    processes = list(stress._running)
    assert all(p.poll() is None for p in processes)
    stress.stop()
    assert stress.running == 0
    assert all(p.poll() is not None for p in processes)


# -- the mix (pure) -----------------------------------------------------------------


def test_round_conditions_are_a_pure_function_of_seed_round_mix_and_mode() -> None:
    first = [condition_for(7, r, DEFAULT_TIME_MIX, "seeded") for r in range(200)]
    assert first == [condition_for(7, r, DEFAULT_TIME_MIX, "seeded") for r in range(200)]
    assert first != [condition_for(8, r, DEFAULT_TIME_MIX, "seeded") for r in range(200)]
    tests = [f"t.py::test_{i}" for i in range(9)]
    plan = plan_round(7, 10, tests, 2, "auto", DEFAULT_TIME_MIX, "seeded")
    assert plan.condition == condition_for(7, 10, DEFAULT_TIME_MIX, "seeded", plan.strategy)


def test_the_first_rounds_and_twice_rounds_run_exact() -> None:
    everything = TimeMix(jitter=100, slow=0, stress=0, switch=0, edge=0)
    assert {condition_for(1, r, everything, "seeded") for r in range(CALM_ROUNDS)} == {"exact"}
    assert condition_for(1, 9, everything, "seeded", "twice") == "exact"
    assert condition_for(1, CALM_ROUNDS, everything, "seeded") == "jitter"


def test_each_condition_gets_its_share_of_rounds() -> None:
    mix = TimeMix(20, 10, 10, 10, 10)
    conditions = [condition_for(3, r, mix, "seeded") for r in range(4, 1004)]
    assert conditions.count("jitter") == pytest.approx(200, abs=3)
    assert conditions.count("slow") == pytest.approx(100, abs=3)
    assert conditions.count("switch") == pytest.approx(100, abs=3)
    assert conditions.count("edge") == pytest.approx(100, abs=3)
    # stress needs real time: in seeded mode those rounds run exact
    assert "stress" not in conditions
    assert conditions.count("exact") == pytest.approx(500, abs=5)


def test_a_mode_runs_only_the_conditions_it_can_honour() -> None:
    mix = TimeMix(20, 20, 20, 20, 20)
    seen = {mode: {condition_for(5, r, mix, mode) for r in range(4, 200)} for mode in
            ("seeded", "record", "off")}  # fmt: skip
    assert seen == {
        "seeded": {"exact", "jitter", "slow", "switch", "edge"},
        "record": {"exact", "stress", "switch"},
        "off": {"exact", "stress", "switch"},
    }
    assert {condition_for(5, r, EXACT_MIX, "seeded") for r in range(200)} == {"exact"}


@pytest.mark.parametrize(
    "text, mix",
    [
        ("default", DEFAULT_TIME_MIX),
        ("exact", EXACT_MIX),
        ("jitter=30,switch=10", TimeMix(30, 0, 0, 10, 0)),
        (" Stress = 50% , slow=5 ", TimeMix(0, 5, 50, 0, 0)),
        ("edge=25", TimeMix(0, 0, 0, 0, 25)),
    ],
)
def test_the_time_option_takes_default_exact_or_shares(text: str, mix: TimeMix) -> None:
    assert parse_time(text) == mix


def test_the_time_mix_is_stored_with_the_settings_and_old_settings_ran_exact() -> None:
    settings = Settings(rounds=3, budget_seconds=None, base_seed=1, time=TimeMix(30, 0, 5, 10, 15))
    assert Settings.from_json(settings.to_json()).time == TimeMix(30, 0, 5, 10, 15)
    old = {k: v for k, v in settings.to_json().items() if k != "time"}
    assert Settings.from_json(old).time == EXACT_MIX
    assert Settings.from_json({**old, "time": {"jitter": 90, "slow": 90}}).time == EXACT_MIX
    assert Settings.from_json({**old, "time": {"jitter": "lots"}}).time == EXACT_MIX
    # a run from before edge rounds: its stored mix has no edge share, and none ran
    before_edges = {"jitter": 20, "slow": 10, "stress": 10, "switch": 10}
    assert Settings.from_json({**old, "time": before_edges}).time == TimeMix(20, 10, 10, 10, 0)
    assert DEFAULT_TIME_MIX.spec() == "default" and TimeMix(30, 0, 0, 0, 0).spec() == "jitter=30"


# -- switch-interval rounds ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_switch_rounds_run_each_attempt_with_a_tiny_stored_switch_interval(
    pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makepyfile(test_switchy=SWITCHY)
    result = hunt(
        pytester, "--hermetic-hunt=7", "-n", workers, "--hermetic-hunt-time=switch=100",
        "--hermetic-hunt-isolate=off",
    )  # fmt: skip
    assert result.ret == 1, result.stdout.str()[-3000:]
    db = pytester.path / "flakes.db"
    by_round = rows(
        db,
        "SELECT a.round, t.nodeid, a.switch_interval, a.outcome FROM attempts a "
        "JOIN tests t ON t.id = a.test_id ORDER BY a.round, t.nodeid",
    )
    for round_no, nodeid, interval, outcome in by_round:
        if round_no < CALM_ROUNDS:
            assert interval is None and outcome == "passed"
        else:
            assert 1e-6 <= interval <= 1e-4
            # the test saw the interval; the thread test runs fine under it
            assert outcome == ("failed" if "as_a_plain_run" in nodeid else "passed")
    # put back before the leak checks: the hunt's own change is no leak
    assert one(db, "SELECT count(*) FROM leaks WHERE resource = 'switch-interval'") == 0
    result.stdout.fnmatch_lines(["hermetic-hunt: round 5/7 [[]* · switch[]] *"])


@pytest.mark.slow
def test_a_switch_interval_flake_is_concurrency_and_its_replay_sets_the_interval(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_switchy=SWITCHY)
    result = hunt(pytester, "--hermetic-hunt=6", "--hermetic-hunt-time=switch=100")
    assert result.ret == 1, result.stdout.str()[-3000:]
    db = pytester.path / "flakes.db"
    kinds, reproducer = one(
        db,
        "SELECT fl.kinds, fl.reproducer FROM flakes fl JOIN tests t ON t.id = fl.test_id "
        "WHERE t.nodeid LIKE '%as_a_plain_run_has_it'",
    )
    assert kinds == '["concurrency"]'
    assert '"switch_interval": ' in reproducer
    flake = one(db, "SELECT flake_id FROM flakes WHERE kinds = '[\"concurrency\"]'")
    replayed = pytester.runpytest_subprocess(
        "-p", "no:randomly", f"--hermetic-replay-db=flakes.db::{flake}"
    )
    replayed.stdout.fnmatch_lines([f"reproduced {flake}: *"])


@pytest.mark.slow
def test_a_test_that_changes_the_switch_interval_itself_still_leaks_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_leaky="import sys\n\ndef test_tune():\n    sys.setswitchinterval(0.001)\n"
    )
    result = hunt(pytester, "--hermetic-hunt=5", "--hermetic-hunt-time=switch=100",
                  "--hermetic-hunt-isolate=off")  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    leaked = rows(
        pytester.path / "flakes.db",
        "SELECT a.round FROM leaks l JOIN attempts a ON a.id = l.attempt_id "
        "WHERE l.resource = 'switch-interval' ORDER BY a.round",
    )
    assert {0, 4} <= {r for (r,) in leaked}  # a calm round and a switch round


# -- second-edge rounds ----------------------------------------------------------------


@pytest.mark.parametrize("wall", [100.0, 100.5, 100.981, 100.99649, 100.999, 1.7e9 + 0.0004])
def test_an_edge_start_is_1_to_20_ms_before_the_next_whole_second_and_never_earlier(
    wall: float,
) -> None:
    starts = {second_edge(wall, seed) for seed in range(200)}
    for start in starts:
        assert wall <= start < wall + 1
        before = round((math.floor(start) + 1 - start) * 1000)
        assert 1 <= before <= 20, (wall, start)
    assert len(starts) > 10  # drawn from the seed
    assert second_edge(wall, 7) == second_edge(wall, 7)


SECOND_BOUNDARY = """
import time

def test_stamped_in_the_second_it_was_ordered():
    ordered = int(time.time())
    time.sleep(0.02)
    assert int(time.time()) == ordered

def test_steady():
    time.sleep(0.3)
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_edge_rounds_start_every_attempt_just_before_a_second_and_show_second_flakes(
    pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makepyfile(test_stamps=SECOND_BOUNDARY)
    result = hunt(pytester, "--hermetic-hunt=7", "-n", workers, "--hermetic-hunt-time=edge=100",
                  "--hermetic-hunt-isolate=off", "--hermetic-hunt-order=shuffle")  # fmt: skip
    assert result.ret == 1, result.stdout.str()[-3000:]
    db = pytester.path / "flakes.db"
    attempts = rows(
        db,
        "SELECT a.round, t.nodeid, a.now, a.outcome, a.profile FROM attempts a "
        "JOIN tests t ON t.id = a.test_id ORDER BY a.round, t.nodeid",
    )
    for round_no, nodeid, now, outcome, profile in attempts:
        if round_no < CALM_ROUNDS:
            continue
        assert 980 <= round(now * 1000) % 1000 <= 999, (round_no, nodeid, now)
        assert profile == "exact"
        # whatever ran before it on its worker: the second-boundary flake fails every time
        assert outcome == ("failed" if "stamped" in nodeid else "passed")
    result.stdout.fnmatch_lines(["hermetic-hunt: round 5/7 [[]* · edge[]] *"])


# -- stress rounds ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
@pytest.mark.parametrize("workers, busy", [("0", 1), ("2", 2)])
def test_stress_rounds_run_beside_busy_processes_and_record_how_many(
    pytester: pytest.Pytester, workers: str, busy: int
) -> None:
    pytester.makepyfile(test_loaded=LOADED)
    result = hunt(
        pytester, "--hermetic-hunt=6", "-n", workers, "--hermetic-hunt-mode=record",
        "--hermetic-hunt-time=stress=100", "--hermetic-hunt-isolate=off",
    )  # fmt: skip
    assert result.ret == 1, result.stdout.str()[-3000:]
    db = pytester.path / "flakes.db"
    attempts = rows(
        db,
        "SELECT a.round, a.stress, a.outcome, a.profile FROM attempts a "
        "JOIN tests t ON t.id = a.test_id WHERE t.nodeid LIKE '%fast_enough'",
    )
    assert {(s, o, p) for r, s, o, p in attempts if r < CALM_ROUNDS} == {(0, "passed", None)}
    assert {(r, s, o) for r, s, o, _ in attempts if r >= CALM_ROUNDS} == {
        (4, busy, "failed"),
        (5, busy, "failed"),
    }


@pytest.mark.slow
def test_a_seeded_hunt_adds_no_stress(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_loaded=LOADED)
    result = hunt(pytester, "--hermetic-hunt=6", "--hermetic-hunt-time=stress=100",
                  "--hermetic-hunt-isolate=off")  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert rows(pytester.path / "flakes.db", "SELECT DISTINCT stress FROM attempts") == [(0,)]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_a_test_that_fails_only_under_stress_is_time_with_the_stress_evidence(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_loaded=LOADED)
    result = hunt(pytester, "--hermetic-hunt=6", "--hermetic-hunt-mode=record",
                  "--hermetic-hunt-time=stress=100")  # fmt: skip
    assert result.ret == 1, result.stdout.str()[-3000:]
    db = pytester.path / "flakes.db"
    kinds, evidence = one(db, "SELECT kinds, evidence FROM flakes")
    assert kinds == '["time"]'
    assert "fails under CPU stress 5/5 (1 busy process), 0/5 calm" in evidence
    stressed = rows(
        db,
        "SELECT environment, outcome FROM isolation_steps WHERE purpose = 'cpu stress'",
    )
    assert len(stressed) == 5
    assert all('"stress":1' in env and outcome == "failed" for env, outcome in stressed)
