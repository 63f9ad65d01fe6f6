"""Seeds and virtual start times are stable, 63-bit and weighted towards date edges."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from hermetic_hunt.seeds import (
    MAX_SEED,
    Y2038,
    Dates,
    attempt_now,
    attempt_seed,
    digest_int,
    now_for,
    round_now,
    worker_hash_seed,
)


def test_attempt_seeds_are_63_bit_and_re_derivable():
    seeds = [attempt_seed(12345, f"t.py::test_{i}", r) for i in range(50) for r in range(5)]
    assert all(0 <= s <= MAX_SEED for s in seeds)
    assert len(set(seeds)) == len(seeds)
    assert attempt_seed(12345, "t.py::test_3", 2) == seeds[3 * 5 + 2]


def test_a_rerun_explores_a_new_seed():
    assert attempt_seed(1, "t", 0, 1) != attempt_seed(1, "t", 0, 2)


def test_digests_do_not_depend_on_the_hash_seed():
    # A known value: BLAKE2b, never hash().
    assert digest_int("a", 1) == digest_int("a", 1)
    assert digest_int("a", 1) != digest_int("a", 2)
    assert isinstance(digest_int("x"), int) and digest_int("x") < 2**64


TODAY = datetime(2026, 12, 3, 14, 0, tzinfo=timezone.utc).timestamp()
WINDOW = Dates(TODAY)


def test_start_times_stay_in_the_window_and_are_deterministic():
    for seed in range(2000):
        assert WINDOW.start <= attempt_now(seed, WINDOW) <= WINDOW.end
    assert attempt_now(99, WINDOW) == attempt_now(99, WINDOW)
    assert round_now(5, 2, 1, WINDOW) == round_now(5, 2, 1, WINDOW)


@given(
    seed=st.integers(0, MAX_SEED),
    start=st.integers(0, 2**33),
    days=st.integers(1, 36525),
)
def test_a_start_time_is_never_before_today_nor_past_the_horizon(seed, start, days):
    dates = Dates(float(start), days)
    _kind, epoch = now_for(seed, dates)
    assert dates.start <= epoch <= dates.end
    assert abs(epoch * 1000 - round(epoch * 1000)) < 1e-3  # whole milliseconds


def test_2038_is_drawn_only_when_the_horizon_reaches_it():
    near = {kind for kind, _ in (now_for(seed, WINDOW) for seed in range(3000))}
    assert "y2038" not in near
    far = Dates(TODAY, 12 * 365)
    draws = [now_for(seed, far) for seed in range(3000)]
    y2038 = [epoch for kind, epoch in draws if kind == "y2038"]
    assert y2038 and all(Y2038 - 3600 <= epoch <= Y2038 + 1 for epoch in y2038)


def test_today_is_one_of_the_start_times():
    draws = [now_for(seed, WINDOW) for seed in range(3000)]
    today = [epoch for kind, epoch in draws if kind == "today"]
    assert today and all(epoch - TODAY <= 86400 for epoch in today)


def _is_last_day(epoch: float) -> bool:
    day = datetime.fromtimestamp(epoch, timezone.utc)
    return day.day == calendar.monthrange(day.year, day.month)[1]


def test_start_times_favour_the_instants_where_date_code_breaks():
    draws = [now_for(seed, WINDOW) for seed in range(3000)]
    kinds = {kind for kind, _ in draws}
    assert kinds == {
        "today",
        "month-end",
        "year-end",
        "leap-day",
        "midnight",
        "dst",
        "weekend",
        "uniform",
    }
    month_end = [epoch for kind, epoch in draws if kind == "month-end"]
    assert all(_is_last_day(epoch) for epoch in month_end)
    leap = [datetime.fromtimestamp(e, timezone.utc) for k, e in draws if k == "leap-day"]
    assert any((d.month, d.day) == (2, 29) for d in leap)
    assert all(d.year == 2028 for d in leap)  # the window's only leap year
    midnight = [datetime.fromtimestamp(e, timezone.utc) for k, e in draws if k == "midnight"]
    assert all((d + timedelta(seconds=4)).date() != d.date() for d in midnight)
    edge_share = sum(kind != "uniform" for kind, _ in draws) / len(draws)
    assert 0.55 < edge_share < 0.8


def test_each_worker_gets_its_own_hash_seed():
    seeds = {worker_hash_seed(7, slot) for slot in range(8)}
    assert len(seeds) == 8
    assert all(0 <= s < 2**32 for s in seeds)
