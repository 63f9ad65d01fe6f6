"""pytest's ``subtests``: a hunt's terminal counts and names them as a plain run does."""

from __future__ import annotations

import pytest
from helpers import hunt, rows

#: Hunts in fresh pytest processes.
pytestmark = pytest.mark.slow

SUITE = """
def test_values(subtests):
    for i in range(4):
        with subtests.test(msg="check", i=i):
            assert i != 2

def test_all_pass(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i < 5

def test_plain():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_hunt_counts_subtests_and_fails_their_test_as_pytest_does(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytest.importorskip("_pytest.subtests")  # pytest 9's built-in subtests
    pytester.makepyfile(test_sub=SUITE)
    plain = pytester.runpytest_subprocess("-p", "no:randomly", "-q")
    plain.stdout.fnmatch_lines(["2 failed, 2 passed, 6 subtests passed in *"])
    result = hunt(pytester, "--hermetic-hunt=2", "--hermetic-hunt-isolate=off", "-q", *workers)
    assert result.ret == 1
    # Two rounds: every count is of attempts, a failure shown once and its repeat counted.
    result.stdout.fnmatch_lines(
        [
            "SUBFAILED[[]check[]] (i=2) test_sub.py::test_values - assert 2 != 2",
            "FAILED test_sub.py::test_values - contains 1 failed subtest",
            "2 failed, 4 passed, 12 subtests passed, 2 repeated failures in *",
        ]
    )
    stored = rows(
        pytester.path / "flakes.db",
        "SELECT t.nodeid, a.outcome FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid LIKE '%test_values'",
    )
    assert stored == [("test_sub.py::test_values", "failed")] * 2
