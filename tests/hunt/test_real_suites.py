"""What real suites need from a hunt: collections that differ between workers,
``-q`` output, and an end summary that agrees with ``hermetic-hunt report``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from helpers import hunt, one, rows

from hermetic_hunt.cli import main

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

#: Eight names in a set: their order follows PYTHONHASHSEED.
SAME_TESTS = """
import pytest

NAMES = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}


@pytest.mark.parametrize("name", NAMES)
def test_name(name):
    assert name
"""
#: Three of them: *which* three follows PYTHONHASHSEED (with the hunt's base
#: seed 2, the two workers' hash seeds pick different ones).
OTHER_TESTS = SAME_TESTS.replace("NAMES)", "list(NAMES)[:3])")
#: Hangs are caught here, never timed: a hunt that waits forever fails the test.
GUARD = 300


@pytest.fixture(autouse=True)
def _hash_seeds_vary(monkeypatch: pytest.MonkeyPatch) -> None:
    # A hunt started with PYTHONHASHSEED set keeps it for every worker.
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["default", "q"])
def test_a_parametrization_over_a_set_under_two_workers_is_mapped_by_nodeid(
    pytester: pytest.Pytester, quiet: list[str]
) -> None:
    pytester.makepyfile(test_set=SAME_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-seed=2", "--hermetic-hunt=3", "-n", "2", *quiet,
        timeout=GUARD,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT count(*) FROM attempts WHERE repeat < 2") == 3 * 8
    assert rows(db, "SELECT DISTINCT worker FROM attempts ORDER BY worker") == [("gw0",), ("gw1",)]
    result.stdout.fnmatch_lines(["hermetic-hunt: round 3/3 *"])


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["default", "q"])
def test_workers_that_collect_different_tests_stop_the_hunt_at_once_with_one_line(
    pytester: pytest.Pytester, quiet: list[str]
) -> None:
    pytester.makepyfile(test_set=OTHER_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-seed=2", "--hermetic-hunt=3", "-n", "2", *quiet,
        "test_set.py", timeout=GUARD,
    )  # fmt: skip
    assert result.ret == 3
    errors = [line for line in result.outlines if "the hunt stopped early" in line]
    assert len(errors) == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: the hunt stopped early: workers collected different tests: worker "
            "gw? (PYTHONHASHSEED=*) collected 'test_set.py::test_name[[]*[]]' and gw? "
            "(PYTHONHASHSEED=*) did not. A hunt gives each worker its own PYTHONHASHSEED and "
            "this suite's collection depends on it (a parametrization built from a set or "
            "dict?): sort it, or hunt with -n 0 or PYTHONHASHSEED set; compare: "
            "PYTHONHASHSEED=* pytest --collect-only -q -p no:randomly test_set.py with: "
            "PYTHONHASHSEED=* pytest --collect-only -q -p no:randomly test_set.py"
        ]
    )
    assert one(pytester.path / "flakes.db", "SELECT count(*) FROM attempts") == 0
    # The commands it prints show the difference with plain pytest.
    seeds = [part.split(" ", 1)[0] for part in errors[0].split("PYTHONHASHSEED=")[3:]]
    collected = []
    for seed in seeds:
        done = pytester.run(
            "env", f"PYTHONHASHSEED={seed}", "pytest", "--collect-only", "-q", "-p",
            "no:randomly", "test_set.py", timeout=GUARD,
        )  # fmt: skip
        collected.append({line for line in done.outlines if "::" in line})
    assert collected[0] != collected[1]


VICTIM = """
import state


def test_victim():
    assert not state.POLLUTED, "polluted"


def test_polluter():
    state.POLLUTED.append(1)


def test_a():
    pass


def test_b():
    pass
"""


def test_quiet_keeps_a_header_one_line_per_round_and_isolation_progress_on_its_own_lines(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(state="POLLUTED = []\n", test_mini=VICTIM)
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = hunt(pytester, "--hermetic-hunt=4", "-q")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: run 1 · 4 rounds · mode seeded · order auto · time default · base seed 2 "
            "(--hermetic-seed=2) · database flakes.db",
            "hermetic-hunt: round 1/4 *",
            "hermetic-hunt: round 2/4 *",
            "hermetic-hunt: round 3/4 *",
            "hermetic-hunt: round 4/4 *",
            "hermetic-hunt: isolating 1 test(s) in 1 finding(s) · budget 200 probes "
            "each, 1m in all",
            "hermetic-hunt: F1 1/1 · victim · * probes · *",
        ]
    )
    rounds = [line for line in result.outlines if "hermetic-hunt: round " in line]
    assert len(rounds) == 4 and all(line.startswith("hermetic-hunt: ") for line in rounds)


def test_the_end_of_a_hunt_counts_as_the_report_of_its_database_does(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        state="POLLUTED = []\n",
        test_mini="import time\n\n"
        + VICTIM
        + """

def test_broken():
    assert False


def test_real_clock():
    assert abs(time.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 0.5
""",
    )
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = hunt(pytester, "--hermetic-hunt=4")
    # The sandbox-off check turned one "broken" test into sandbox-incompatible:
    # the end of the hunt says so, as the report does.
    counts = "1 flaky · 1 broken · 1 sandbox-incompatible · 3 stable · 0 with network violations"
    result.stdout.fnmatch_lines([f"hermetic-hunt: {counts}"])
    monkeypatch.chdir(pytester.path)
    report = CliRunner().invoke(main, ["report"])
    assert counts in report.output.splitlines()
