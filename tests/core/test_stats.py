"""Intervals and bounds: the numbers behind "how sure are we"."""

from __future__ import annotations

import math

import pytest

from hermetic_hunt import stats


def test_fifty_clean_attempts_bound_the_flake_rate_below_six_percent():
    assert stats.clean_bound(50) == pytest.approx(1 - 0.05 ** (1 / 50))
    assert 0.058 < stats.clean_bound(50) < 0.059
    assert stats.bound_text(50) == "flake rate < 6% at 95%"


def test_the_bound_is_exact_the_probability_of_n_clean_attempts_at_the_bound_is_five_percent():
    for n in (1, 3, 30, 299, 1000):
        assert (1 - stats.clean_bound(n)) ** n == pytest.approx(0.05)


def test_the_rule_of_three_approximates_the_exact_bound_for_large_n():
    assert stats.clean_bound(3000) == pytest.approx(3 / 3000, rel=0.01)


def test_two_hundred_ninety_nine_clean_attempts_are_needed_for_one_percent():
    assert stats.attempts_for_bound(0.01) == 299
    assert stats.clean_bound(299) <= 0.01 < stats.clean_bound(298)
    assert stats.more_attempts_for_bound(50) == 249
    assert stats.more_attempts_for_bound(400) == 0


def test_no_attempts_bound_nothing():
    assert stats.clean_bound(0) == 1.0
    assert stats.wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("failures", "attempts", "low", "high"),
    [
        # Reference values (Wilson score interval, z = 1.959964).
        (28, 30, 0.7868, 0.9815),
        (5, 30, 0.0734, 0.3356),
        (1, 2, 0.0945, 0.9055),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
    ],
)
def test_the_wilson_interval_matches_reference_values(failures, attempts, low, high):
    got = stats.wilson(failures, attempts)
    assert got == pytest.approx((low, high), abs=1e-4)


def test_the_wilson_interval_contains_the_observed_rate_and_stays_in_range():
    for attempts in (1, 7, 50, 999):
        for failures in range(0, attempts + 1, max(1, attempts // 7)):
            low, high = stats.wilson(failures, attempts)
            assert 0.0 <= low <= failures / attempts <= high <= 1.0


def test_impossible_counts_are_refused():
    with pytest.raises(ValueError, match="failures <= attempts"):
        stats.wilson(3, 2)
    with pytest.raises(ValueError, match="confidence"):
        stats.clean_bound(5, confidence=1.5)
    with pytest.raises(ValueError, match="target"):
        stats.attempts_for_bound(0)


@pytest.mark.parametrize(
    ("rate", "text"),
    [
        (0, "0%"),
        (0.0004, "<0.1%"),
        (0.005, "0.5%"),
        (0.0581, "5.8%"),
        (0.5, "50%"),
        (0.9333, "93%"),
        (0.996, ">99%"),
        (1, "100%"),
    ],
)
def test_percentages_never_round_a_finding_away(rate, text):
    assert stats.percent(rate) == text


@pytest.mark.parametrize(
    ("rate", "text"), [(0.0581, "6%"), (0.0950, "10%"), (0.00301, "0.31%"), (0.01, "1%")]
)
def test_bounds_round_up_so_they_never_understate(rate, text):
    assert stats.percent_ceiling(rate) == text
    assert float(text.rstrip("%")) / 100 >= rate - 1e-12


def test_a_higher_confidence_asks_for_more_attempts():
    assert stats.attempts_for_bound(0.01, confidence=0.99) == math.ceil(
        math.log(0.01) / math.log(0.99)
    )
    assert stats.attempts_for_bound(0.01, confidence=0.99) > stats.attempts_for_bound(0.01)


def test_the_attempt_count_names_the_repeated_runs_apart():
    from hermetic_hunt.models import attempts_text

    assert attempts_text(1953) == "1,953 attempts"
    assert attempts_text(1953, 63) == "1,890 plain attempts + 63 repeated"
