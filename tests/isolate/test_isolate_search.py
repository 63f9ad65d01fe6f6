"""The pure search core, driven by fake ``signal(subset)`` functions."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from hermetic_hunt.isolate.search import (
    Budget,
    BudgetExceeded,
    Oracle,
    bisect,
    ddmin,
    find_cleaners,
    find_culprits,
    repeats_for,
)


class Counting:
    """A fake signal that counts its calls and records every subset probed."""

    def __init__(self, rule) -> None:
        self.rule = rule
        self.calls: list[list[str]] = []

    def __call__(self, subset: Sequence[str]) -> bool:
        self.calls.append(list(subset))
        return bool(self.rule(subset))


def names(n: int) -> list[str]:
    return [f"t{i:04d}" for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 100, 257, 1000])
def test_a_single_polluter_is_found_within_log2_n_plus_two_search_probes(n: int) -> None:
    tests = names(n)
    bound = math.ceil(math.log2(n)) + 2 if n > 1 else 2
    for position in sorted({0, n // 3, n // 2, n - 1}):
        culprit = tests[position]
        signal = Counting(lambda subset, c=culprit: c in subset)
        search = find_culprits(tests, signal)
        assert search.sets == [[culprit]]
        assert search.confirmed and not search.partial
        # + the caller's probe of the whole sequence = ceil(log2 n) + 3
        assert len(signal.calls) <= bound, (n, position, len(signal.calls))


def test_the_confirmation_and_the_completeness_check_are_real_probes() -> None:
    tests = names(16)
    signal = Counting(lambda subset: "t0003" in subset)
    find_culprits(tests, signal)
    assert signal.calls[-2] == ["t0003"]  # confirmed by running it again
    assert "t0003" not in signal.calls[-1] and len(signal.calls[-1]) == 15


def test_two_polluters_that_only_fail_together_are_found_as_one_set() -> None:
    tests = names(40)
    signal = Counting(lambda subset: "t0005" in subset and "t0031" in subset)
    search = find_culprits(tests, signal)
    assert search.sets == [["t0005", "t0031"]]
    assert search.confirmed
    # ddmin: about 2k·log2(n), plus the checks; a scan of all pairs would be 780
    assert len(signal.calls) <= 4 * 2 * math.ceil(math.log2(40)) + 4


def test_three_polluters_that_only_fail_together_are_found_as_one_set() -> None:
    tests = names(64)
    needed = {"t0002", "t0040", "t0063"}
    search = find_culprits(tests, Counting(lambda subset: needed <= set(subset)))
    assert search.sets == [sorted(needed)]


def test_independent_polluters_are_reported_as_separate_minimal_sets() -> None:
    tests = names(50)
    signal = Counting(lambda subset: "t0007" in subset or "t0042" in subset)
    search = find_culprits(tests, signal)
    assert sorted(search.sets) == [["t0007"], ["t0042"]]
    assert search.confirmed


def test_a_probabilistic_polluter_is_found_by_repeating_probes_to_a_confidence() -> None:
    tests = names(32)
    rng = random.Random(1234)
    signal = Counting(lambda subset: "t0020" in subset and rng.random() < 0.5)
    search = find_culprits(tests, signal, confidence=0.99)
    assert search.sets == [["t0020"]]
    assert search.confirmed
    assert search.repeats == repeats_for(search.rate, 0.99) > 1
    assert any("every 'no' now rests on" in note for note in search.notes)


@pytest.mark.parametrize("seed", range(20))
def test_probabilistic_polluters_are_found_for_many_random_streams(seed: int) -> None:
    tests = names(24)
    rng = random.Random(seed)
    culprit = tests[rng.randrange(24)]
    signal = Counting(lambda subset: culprit in subset and rng.random() < 0.6)
    search = find_culprits(tests, signal, confidence=0.999)
    assert search.sets[:1] == [[culprit]]


def test_a_signal_that_never_comes_back_yields_no_set() -> None:
    # The caller saw the whole sequence fail once; it never fails again.
    search = find_culprits(names(8), Counting(lambda subset: False))
    assert search.sets == []
    assert not search.confirmed
    assert search.notes


def test_a_state_setter_is_found_the_same_way() -> None:
    # Brittle test: passes only when t0011 ran before it (signal = it passed).
    tests = names(20)
    search = find_culprits(tests, Counting(lambda subset: "t0011" in subset))
    assert search.sets == [["t0011"]]


def test_the_budget_stops_the_search_with_a_partial_result() -> None:
    tests = names(1000)
    budget = Budget(limit=4)
    search = find_culprits(tests, Counting(lambda subset: "t0900" in subset), budget=budget)
    assert search.partial and not search.confirmed
    assert budget.used == 4
    (best,) = search.sets
    assert "t0900" in best and len(best) < 1000  # the smallest subset seen failing


def test_a_budget_spent_raises_budget_exceeded() -> None:
    budget = Budget(limit=1)
    budget.spend()
    with pytest.raises(BudgetExceeded, match="budget of 1"):
        budget.spend()


def test_cleaners_are_found_by_group_testing() -> None:
    others = names(64)
    cleaners = {"t0009", "t0050"}
    signal = Counting(lambda group: bool(cleaners & set(group)))
    found, probes, partial = find_cleaners(others, signal)
    assert sorted(found) == sorted(cleaners)
    assert not partial
    assert probes == len(signal.calls) < 64
    assert ["t0009"] in signal.calls and ["t0050"] in signal.calls  # each probed alone


def test_no_cleaner_costs_one_probe() -> None:
    signal = Counting(lambda group: False)
    assert find_cleaners(names(100), signal) == ([], 1, False)


def test_a_cleaner_must_clean_in_every_repetition() -> None:
    rng = random.Random(5)
    # t0003 cleans; t0004 only "cleans" when the victim happens to pass.
    signal = Counting(lambda group: "t0003" in group or ("t0004" in group and rng.random() < 0.5))
    found, _, _ = find_cleaners(names(8), signal, repeats=8)
    assert found == ["t0003"]


def test_ddmin_returns_a_one_minimal_subset() -> None:
    oracle = Oracle(lambda subset: {"b", "e"} <= set(subset))
    assert ddmin(list("abcdefgh"), oracle) == ["b", "e"]


def test_bisect_assumes_the_second_half_without_probing_it() -> None:
    signal = Counting(lambda subset: "h" in subset)
    answer, verified = bisect(list("abcdefgh"), Oracle(signal))
    assert answer == ["h"]
    assert verified == list("abcdefgh")  # no half was ever seen failing
    assert len(signal.calls) == 3


def test_the_oracle_caches_answers_and_counts_probes() -> None:
    signal = Counting(lambda subset: "x" in subset)
    oracle = Oracle(signal)
    assert oracle(["x", "y"]) and oracle(["x", "y"])
    assert not oracle(["y"]) and not oracle(["y"])
    assert oracle.probes == 2


def test_the_oracle_refuses_an_unknown_requirement() -> None:
    with pytest.raises(ValueError, match="'any' or 'all'"):
        Oracle(lambda subset: True, require="most")


@pytest.mark.parametrize(
    ("rate", "confidence", "runs"),
    [(1.0, 0.99, 1), (0.5, 0.95, 5), (0.5, 0.99, 7), (0.25, 0.95, 11), (0.0, 0.95, 12)],
)
def test_repeats_for_gives_enough_runs_to_see_a_signal(rate, confidence, runs) -> None:
    assert repeats_for(rate, confidence) == runs


@pytest.mark.process
def test_the_search_and_the_decision_procedure_import_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, hermetic_hunt.isolate.classifier, hermetic_hunt.isolate.search; "
        "print(sorted(m for m in ('pytest', '_pytest', 'sqlite3', 'sqlite_utils', 'click', "
        "'hermetic', 'subprocess') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
