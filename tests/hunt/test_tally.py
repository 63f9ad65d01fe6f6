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
    counts = (tallies.passed["t.py::a"], tallies.failed["t.py::a"])
    assert counts == (3, 0) and tallies.second_run_failures["t.py::a"] == 1
    assert not tallies.is_flaky("t.py::a") and tallies.failed_attempts == 1
    assert tallies.not_idempotent() == ["t.py::a"]


def test_a_first_run_that_failed_is_a_plain_failure_and_nominates_nothing() -> None:
    tallies = Tallies()
    tallies.add(Attempt("t.py::b", "passed", round_no=1))
    tallies.add(Attempt("t.py::b", "failed", round_no=2, repeat=1))
    tallies.add(Attempt("t.py::b", "failed", round_no=2, repeat=2))
    assert (tallies.passed["t.py::b"], tallies.failed["t.py::b"]) == (1, 1)
    assert not tallies.second_run_failures and tallies.is_flaky("t.py::b")
    assert tallies.flaky == 1 and tallies.repeated == 1
