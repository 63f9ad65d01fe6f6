"""Isolation end to end: a hunt, its probes, the database and the terminal summary."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import hunt

from hermetic_hunt.cli import main

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

MINI = {
    "state": "POLLUTED = []\n",
    "test_mini": """
        import select
        import time

        import state

        def test_polluter():
            state.POLLUTED.append(1)

        def test_cleaner():
            state.POLLUTED.clear()

        def test_victim():
            assert not state.POLLUTED, "polluted"

        def test_stable_a():
            pass

        def test_stable_b():
            pass

        def test_broken():
            assert False, "always"

        def test_needs_the_real_clock():
            # Python's clock against the C library's: apart only under a virtual clock
            assert abs(time.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 0.5
    """,
}
#: With this base seed, 4 rounds run test_victim both after test_polluter
#: (without test_cleaner in between) and without it.
SEED = 2


@pytest.fixture
def mini(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(**MINI)
    pytester.makeini("[pytest]\npythonpath = .\n")
    return pytester


def hunt_mini(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result: pytest.RunResult = hunt(pytester, "--hermetic-hunt=4", *args, seed=SEED)
    return result


def rows(path: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(path / "flakes.db")) as conn, conn:
        return conn.execute(sql).fetchall()


def flake(path: Path, nodeid: str) -> dict:
    with closing(sqlite3.connect(path / "flakes.db")) as conn, conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute(
            "SELECT fl.* FROM flakes fl JOIN tests t ON t.id = fl.test_id WHERE t.nodeid = ?",
            (nodeid,),
        ).fetchone()
    assert row is not None, f"no flake row for {nodeid}"
    return dict(row)


def test_a_hunt_ends_by_isolating_its_victim_with_polluter_and_cleaner(mini) -> None:
    result = hunt_mini(mini)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: isolating 1 test(s) in 1 finding(s) · budget 200 probes each, "
            "1m in all",
            "hermetic-hunt: F1 1/1 · victim · * probes · *s",
            "hermetic-hunt: run 1 · 4 round(s) · * attempts * in * · * failed · flakes.db",
            "hermetic-hunt: 1 flaky · 1 broken · 1 sandbox-incompatible · 4 stable · 0 with "
            "network violations",
            "hermetic-hunt: what CI will see: 1 fails in normal runs · 1 fails under shuffling "
            "or xdist · 1 fails only under the sandbox",
            "",
            "hermetic-hunt isolation: 1 test · * probes (*, 1 at a time) in *",
            "  F1 test_mini.py::test_victim  victim · fails under shuffling or xdist "
            "(* probes, *s)",
            "      polluters: test_mini.py::test_polluter",
            "      cleaners: test_mini.py::test_cleaner",
            "      replay: pytest --hermetic-replay-db=flakes.db::F1",
        ]
    )
    row = flake(mini.path, "test_mini.py::test_victim")
    assert row["flake_id"] == "F1"
    assert json.loads(row["kinds"]) == ["victim"]
    assert json.loads(row["polluters"]) == [["test_mini.py::test_polluter"]]
    assert json.loads(row["cleaners"]) == ["test_mini.py::test_cleaner"]
    assert row["status"] == "isolated" and row["confirmed"] == 1
    reproducer = json.loads(row["reproducer"])
    assert [s["nodeid"] for s in reproducer["steps"]] == [
        "test_mini.py::test_polluter",
        "test_mini.py::test_victim",
    ]
    lines = (mini.path / "test_mini.py").read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(lines) if "assert not state.POLLUTED" in text)
    assert reproducer["signature"]["location"] == f"test_mini.py:{line}"
    steps = rows(mini.path, "SELECT step, outcome, duration FROM isolation_steps ORDER BY step")
    assert [s[0] for s in steps] == list(range(1, row["probes"] + 1))
    assert {s[1] for s in steps} <= {"passed", "failed"}
    assert row["probe_seconds"] == pytest.approx(sum(s[2] for s in steps), abs=0.01)
    evidence = json.loads(row["evidence"])
    (victim,) = [v for v in evidence["verdicts"] if v.get("kind") == "victim"]
    outcomes = dict(rows(mini.path, "SELECT step, outcome FROM isolation_steps"))
    assert "failed" in {outcomes[n] for n in victim["probes"]}


def test_tests_that_always_fail_are_checked_without_the_sandbox(mini) -> None:
    result = hunt_mini(mini)
    result.stdout.fnmatch_lines(
        [
            "always failing (run once with the sandbox off):",
            "  test_mini.py::test_broken  broken: fails with the sandbox off too",
            "  test_mini.py::test_needs_the_real_clock  sandbox-incompatible: passes with the "
            "sandbox off",
        ]
    )
    checks = rows(
        mini.path,
        "SELECT t.nodeid, c.check_name, c.outcome FROM test_checks c "
        "JOIN tests t ON t.id = c.test_id ORDER BY t.nodeid",
    )
    assert checks == [
        ("test_mini.py::test_broken", "sandbox-off", "failed"),
        ("test_mini.py::test_needs_the_real_clock", "sandbox-off", "passed"),
    ]
    # Neither is a flake.
    assert rows(mini.path, "SELECT count(*) FROM flakes") == [(1,)]


def test_isolate_off_skips_it_and_the_isolate_command_does_it_later(mini) -> None:
    result = hunt_mini(mini, "--hermetic-hunt-isolate=off")
    assert "hermetic-hunt isolation" not in result.stdout.str()
    assert rows(mini.path, "SELECT count(*) FROM flakes") == [(0,)]
    outcome = CliRunner().invoke(main, ["isolate", "--db", "flakes.db"])
    assert outcome.exit_code == 0, outcome.output
    assert "hermetic-hunt: F1 1/1 · victim · " in outcome.output  # progress, as it goes
    assert "  F1 test_mini.py::test_victim  victim · fails under shuffling or xdist (" in (
        outcome.output
    )
    assert "      polluters: test_mini.py::test_polluter" in outcome.output
    assert json.loads(flake(mini.path, "test_mini.py::test_victim")["kinds"]) == ["victim"]
    # Again, by id: the same flake row is updated, its id kept.
    again = CliRunner().invoke(main, ["isolate", "--db", "flakes.db", "F1"])
    assert again.exit_code == 0, again.output
    assert rows(mini.path, "SELECT flake_id FROM flakes") == [("F1",)]
    assert "always failing" not in again.output  # only F1 was asked for


def test_the_isolate_command_refuses_an_unknown_id_in_one_line(mini) -> None:
    hunt_mini(mini, "--hermetic-hunt-isolate=off")
    outcome = CliRunner().invoke(main, ["isolate", "--db", "flakes.db", "F9"])
    assert outcome.exit_code == 3
    assert outcome.output.strip().splitlines() == [
        f"Error: 'F9' is neither a flake id nor a test in {mini.path / 'flakes.db'}: "
        "see 'hermetic-hunt list' for the flakes it holds"
    ]


def test_a_test_renamed_since_the_hunt_is_said_not_collected(mini) -> None:
    hunt_mini(mini, "--hermetic-hunt-isolate=off")
    source = mini.path / "test_mini.py"
    source.write_text(source.read_text().replace("def test_victim", "def test_victim_renamed"))
    outcome = CliRunner().invoke(main, ["isolate", "--db", "flakes.db"])
    assert outcome.exit_code == 0, outcome.output
    assert "  F1 test_mini.py::test_victim  not classified [not-collected] (0 probes" in (
        outcome.output
    )
    assert "note: test_mini.py::test_victim is not collected any more" in outcome.output
    assert flake(mini.path, "test_mini.py::test_victim")["status"] == "not-collected"


def test_a_search_over_its_budget_stores_a_partial_result_and_says_so(mini) -> None:
    result = hunt_mini(mini, "--hermetic-hunt-isolate-budget=16")
    result.stdout.fnmatch_lines(
        [
            "  F1 test_mini.py::test_victim  victim · fails under shuffling or xdist [[]partial] "
            "(16 probes, *)",
            "      polluters (search unfinished, not minimal): * + test_mini.py::test_polluter*",
            "      note: probe budget of 16 exhausted during the polluter search "
            "(--hermetic-hunt-isolate-budget): partial result, the set is not minimal yet",
        ]
    )
    row = flake(mini.path, "test_mini.py::test_victim")
    assert row["status"] == "partial" and row["probes"] == 16


def test_a_probe_that_hangs_is_stopped_and_recorded(mini) -> None:
    mini.makepyfile(
        test_hang="""
        import os
        import select

        import state

        def test_hangs_in_probes_after_the_polluter():
            if os.environ.get("HERMETIC_HUNT_PROBE") and state.POLLUTED:
                select.select([], [], [], 300)  # a real wait
            assert not state.POLLUTED
        """
    )
    result = hunt_mini(
        mini,
        "--hermetic-hunt-probe-timeout=1s",
        "--hermetic-hunt-isolate-budget=18",
        "-k",
        "hang or polluter",
    )
    assert result.ret == 1
    timeouts = rows(
        mini.path,
        "SELECT s.purpose, s.detail FROM isolation_steps s JOIN flakes fl ON fl.id = s.flake_id "
        "WHERE s.outcome = 'timeout'",
    )
    assert timeouts and {t[1] for t in timeouts} == {"stopped after 1s"}
    row = flake(mini.path, "test_hang.py::test_hangs_in_probes_after_the_polluter")
    assert "victim" not in json.loads(row["kinds"])


def test_a_probe_step_that_outlives_the_test_timeout_is_a_timeout_attempt(mini) -> None:
    """The step is stopped at --hermetic-hunt-timeout (not the probe's own timeout):
    its Timeout is the probe's answer, and the search goes on."""
    mini.makepyfile(
        test_hang="""
        import os

        import state

        def test_hangs_in_probes_after_the_polluter():
            while os.environ.get("HERMETIC_HUNT_PROBE") and state.POLLUTED:
                pass  # a busy loop: sleeps are virtual
            assert not state.POLLUTED
        """
    )
    result = hunt_mini(
        mini, "--hermetic-hunt-timeout=1s", "--hermetic-hunt-isolate-budget=18",
        "-k", "hang or polluter",
    )  # fmt: skip
    assert result.ret == 1
    outcomes = rows(
        mini.path,
        "SELECT s.outcome, s.detail FROM isolation_steps s JOIN flakes fl ON fl.id = s.flake_id",
    )
    assert outcomes and not [o for o in outcomes if o[0] == "timeout"], outcomes
    stopped = rows(mini.path, "SELECT count(*) FROM isolation_steps WHERE detail LIKE '%Timeout%'")
    assert stopped[0][0] > 0, outcomes
