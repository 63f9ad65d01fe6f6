"""Clock profiles: the same seed gives the same readings, and every clock tells one story."""

from __future__ import annotations

import datetime
import itertools
import time
from typing import Any

import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec
from hermetic_hunt.sandbox.clock import SLEEP_LATENCY
from hermetic_hunt.sandbox.profiles import (
    JITTER_READ,
    MAX_STRETCH,
    SLOW_READ,
    SLOW_STRETCH,
    Noise,
    noise_for,
)
from hermetic_hunt.seeds import SWITCH_RANGE, switch_interval_for

NOW = 1_700_000_000.0
PROFILES = ("exact", "jitter", "slow")


def readings(engine: Sandbox, profile: str, seed: int = 11) -> tuple[list[Any], dict[str, Any]]:
    """A fixed script of clock reads and sleeps, inside one attempt's sandbox."""
    engine.enter(SandboxSpec(seed=seed, now=NOW, profile=profile))
    seen: list[Any] = []
    for delay in (0.0, 0.01, 0.25, 1.5):
        seen += [time.time(), time.monotonic(), time.perf_counter(), time.time_ns()]
        seen.append(datetime.datetime.now(datetime.timezone.utc).timestamp())
        time.sleep(delay)
    facts = engine.exit()
    return seen, facts.counts


@pytest.mark.parametrize("profile", PROFILES)
def test_the_same_seed_gives_the_same_readings(engine: Sandbox, profile: str) -> None:
    assert readings(engine, profile) == readings(engine, profile)


@pytest.mark.parametrize("profile", ["jitter", "slow"])
def test_another_seed_gives_other_readings(engine: Sandbox, profile: str) -> None:
    assert readings(engine, profile, seed=1)[0] != readings(engine, profile, seed=2)[0]


def test_the_exact_profile_moves_by_a_tick_per_reading_and_by_sleeps(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=3, now=NOW))
    walls = [time.time() for _ in range(3)]
    ticks = [time.monotonic() for _ in range(3)]
    time.sleep(2.5)
    after = time.time()
    facts = engine.exit()
    # Every reading of any clock moves all of them by a tick (1 us), as on a
    # real machine: two readings are never equal, a date stays where it was put.
    assert walls[0] == NOW
    # (an epoch's float spacing is 2.4e-7 s: the tick is rounded to it)
    assert [b - a for a, b in itertools.pairwise(walls)] == [pytest.approx(1e-6, abs=3e-7)] * 2
    assert ticks[1] - ticks[0] == pytest.approx(1e-6)
    # A sleep lasts what was asked plus the wake-up latency, never exactly.
    assert after - walls[-1] == pytest.approx(2.5 + SLEEP_LATENCY + 4e-6, abs=3e-7)
    assert after - walls[-1] > 2.5
    assert "stretch" not in facts.counts
    assert facts.profile == "exact"


@pytest.mark.parametrize("profile", ["jitter", "slow"])
def test_every_reading_moves_wall_time_and_the_monotonic_clocks_together(
    engine: Sandbox, profile: str
) -> None:
    engine.enter(SandboxSpec(seed=5, now=NOW, profile=profile, tick=0.0))
    pairs = []
    for _ in range(20):
        pairs.append((time.time(), time.monotonic()))
        time.sleep(0.05)
    engine.exit()
    walls = [w for w, _ in pairs]
    assert walls == sorted(walls) and len(set(walls)) == len(walls)
    # One offset behind every source: wall time and the monotonic clock keep
    # their distance, give or take the advance of the one reading between them.
    gaps = [m - w for w, m in pairs]
    read = JITTER_READ if profile == "jitter" else sum(SLOW_READ)
    assert max(gaps) - min(gaps) <= read + 1e-6


def test_a_jitter_reading_advances_by_at_most_fifty_microseconds(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=8, now=NOW, profile="jitter", tick=0.0))
    values = [time.monotonic() for _ in range(500)]
    engine.exit()
    steps = [b - a for a, b in itertools.pairwise(values)]
    assert all(0 <= step <= JITTER_READ + 1e-9 for step in steps)
    assert sum(steps) > 0


def test_a_slow_reading_advances_by_about_a_millisecond(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=8, now=NOW, profile="slow", tick=0.0))
    values = [time.perf_counter() for _ in range(200)]
    engine.exit()
    steps = [b - a for a, b in itertools.pairwise(values)]
    low, span = SLOW_READ
    assert all(low - 1e-9 <= step <= low + span + 1e-9 for step in steps)


@pytest.mark.parametrize("profile", ["jitter", "slow"])
def test_sleeps_last_longer_but_never_more_than_twice(engine: Sandbox, profile: str) -> None:
    engine.enter(SandboxSpec(seed=21, now=NOW, profile=profile, tick=0.0))
    lasted = []
    for _ in range(300):
        before = time.monotonic()
        time.sleep(0.1)
        lasted.append(time.monotonic() - before)
    facts = engine.exit()
    read = JITTER_READ if profile == "jitter" else sum(SLOW_READ)
    assert all(0.1 < d <= 0.1 * MAX_STRETCH + SLEEP_LATENCY + read + 1e-9 for d in lasted)
    assert max(lasted) > 0.105
    # the largest stretch is stored with the attempt, in thousandths
    assert facts.counts["stretch"] == pytest.approx(
        max(lasted) / 0.1 * 1000, abs=(read + SLEEP_LATENCY) * 1e4 + 1
    )
    assert facts.profile == profile


def test_the_jitter_profile_is_calibrated_like_a_loaded_ci_runner() -> None:
    factors = [Noise("jitter", seed).stretch() for seed in range(4000)]
    share = lambda over: sum(f > over for f in factors) / len(factors)  # noqa: E731
    assert 0.40 < share(1.04) < 0.60  # half the sleeps overshoot by less than 4%
    assert 0.20 < share(1.11) < 0.30  # a quarter by more than 11%
    assert 0.08 < share(1.25) < 0.15
    assert max(factors) <= MAX_STRETCH and min(factors) >= 1.0


def test_the_slow_profile_stretches_sleeps_by_up_to_half() -> None:
    factors = [Noise("slow", seed).stretch() for seed in range(2000)]
    assert min(factors) >= 1.0 and max(factors) < 1.0 + SLOW_STRETCH


def test_the_exact_profile_has_no_noise() -> None:
    assert noise_for("exact", 1) is None and noise_for(None, 1) is None
    with pytest.raises(ValueError, match="no noise in clock profile 'fast'"):
        Noise("fast", 1)


def test_a_sleep_draws_from_its_own_stream_so_extra_readings_do_not_change_it() -> None:
    quiet, busy = Noise("jitter", 9), Noise("jitter", 9)
    for _ in range(50):
        busy.read()  # a fixture read the clock 50 more times
    assert [quiet.stretch() for _ in range(5)] == [busy.stretch() for _ in range(5)]


def test_a_record_attempt_has_no_profile(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW, mode="record", profile="jitter"))
    time.time()
    facts = engine.exit()
    assert facts.profile is None and "stretch" not in facts.counts


def test_switch_intervals_are_drawn_from_the_seed_within_their_range() -> None:
    drawn = [switch_interval_for(seed) for seed in range(500)]
    low, high = SWITCH_RANGE
    assert all(low <= value <= high for value in drawn)
    assert drawn == [switch_interval_for(seed) for seed in range(500)]
    assert len(set(drawn)) > 20
    assert all(float(f"{value:.2g}") == value for value in drawn)
