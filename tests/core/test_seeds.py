"""Seeds and virtual start times are stable, 63-bit and weighted towards date edges."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone

from hermetic_hunt.seeds import (
    FIRST_YEAR,
    LAST_YEAR,
    MAX_SEED,
    attempt_now,
    attempt_seed,
    digest_int,
    now_for,
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


def test_start_times_stay_in_range_and_are_deterministic():
    low = datetime(FIRST_YEAR, 1, 1, tzinfo=timezone.utc).timestamp() - 86400
    high = datetime(LAST_YEAR + 1, 1, 2, tzinfo=timezone.utc).timestamp()
    for seed in range(2000):
        assert low <= attempt_now(seed) <= high
    assert attempt_now(99) == attempt_now(99)


def _is_last_day(epoch: float) -> bool:
    day = datetime.fromtimestamp(epoch, timezone.utc)
    return day.day == calendar.monthrange(day.year, day.month)[1]


def test_start_times_favour_the_instants_where_date_code_breaks():
    draws = [now_for(seed) for seed in range(3000)]
    kinds = {kind for kind, _ in draws}
    assert kinds == {"month-end", "year-end", "leap-day", "midnight", "dst", "weekend", "uniform"}
    month_end = [epoch for kind, epoch in draws if kind == "month-end"]
    assert all(_is_last_day(epoch) for epoch in month_end)
    leap = [datetime.fromtimestamp(e, timezone.utc) for k, e in draws if k == "leap-day"]
    assert any((d.month, d.day) == (2, 29) for d in leap)
    midnight = [datetime.fromtimestamp(e, timezone.utc) for k, e in draws if k == "midnight"]
    assert all((d + timedelta(seconds=4)).date() != d.date() for d in midnight)
    edge_share = sum(kind != "uniform" for kind, _ in draws) / len(draws)
    assert 0.55 < edge_share < 0.8


def test_each_worker_gets_its_own_hash_seed():
    seeds = {worker_hash_seed(7, slot) for slot in range(8)}
    assert len(seeds) == 8
    assert all(0 <= s < 2**32 for s in seeds)
