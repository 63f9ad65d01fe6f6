"""The hunt's running tallies: what counts as a plain attempt, and what is repeated."""

from __future__ import annotations

from hermetic_hunt.hunt.tally import Tallies
from hermetic_hunt.models import Attempt, attempts_text


def test_a_twice_rounds_first_run_is_plain_and_only_its_second_is_repeated() -> None:
    tallies = Tallies()
    for round_no in (1, 2):  # two ordinary rounds
        tallies.add(Attempt("t.py::a", "passed", round_no=round_no))
    # a twice round: first run passes, the second (in the same process) fails
    tallies.add(Attempt("t.py::a", "passed", round_no=3, repeat=1))
    tallies.add(Attempt("t.py::a", "failed", round_no=3, repeat=2))
    assert (tallies.attempts, tallies.repeated) == (4, 1)
    assert attempts_text(tallies.attempts, tallies.repeated) == "3 plain attempts + 1 repeated"
    tally = tallies.tests["t.py::a"]
    assert (tally.passed, tally.failed, tally.second_run_failures) == (3, 0, 1)
    assert not tally.flaky and tallies.failed_attempts == 1


def test_a_first_run_that_failed_is_a_plain_failure_and_nominates_nothing() -> None:
    tallies = Tallies()
    tallies.add(Attempt("t.py::b", "passed", round_no=1))
    tallies.add(Attempt("t.py::b", "failed", round_no=2, repeat=1))
    tallies.add(Attempt("t.py::b", "failed", round_no=2, repeat=2))
    tally = tallies.tests["t.py::b"]
    assert (tally.passed, tally.failed, tally.second_run_failures) == (1, 1, 0)
    assert tally.flaky and tallies.repeated == 1
