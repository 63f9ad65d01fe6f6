"""The virtual clock behaves as a real machine's: readings advance, sleeps overshoot,
threads run while a test sleeps, and clock references bound before the attempt follow it."""

from __future__ import annotations

import importlib
import itertools
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, bound, follow_bound_clocks
from hermetic_hunt.sandbox.clock import REAL_FUNCTIONS, SLEEP_LATENCY, TIME_PATCH

NOW = 1_900_000_000.0


@pytest.fixture
def attempt(engine: Sandbox) -> Iterator[Sandbox]:
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    yield engine
    if engine.active:
        engine.exit()


def test_two_wall_readings_are_never_equal_so_a_rate_never_divides_by_zero(
    attempt: Sandbox,
) -> None:
    readings = [time.time() for _ in range(1000)]
    assert all(b > a for a, b in itertools.pairwise(readings))
    start = time.time()
    done = sum(range(100))
    rate = done / (time.time() - start)  # ZeroDivisionError under a frozen clock
    assert rate > 0
    assert time.time_ns() != time.time_ns()


def test_wall_readings_advance_even_with_a_zero_tick(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t", tick=0.0))
    try:
        readings = [time.time() for _ in range(50)]
    finally:
        engine.exit()
    assert len(set(readings)) == 50 and readings == sorted(readings)
    assert readings[-1] - NOW < 1e-4  # the date stays where the round put it


@pytest.mark.parametrize("seconds", [0.001, 0.1, 0.3, 1.0, 7.0])
def test_a_sleep_lasts_longer_than_asked_never_exactly(attempt: Sandbox, seconds: float) -> None:
    before, wall = time.monotonic(), time.time()
    time.sleep(seconds)
    elapsed, wall_elapsed = time.monotonic() - before, time.time() - wall
    assert elapsed > seconds and wall_elapsed > seconds  # holds on a real machine
    assert elapsed < seconds + SLEEP_LATENCY + 1e-4


def _poll(flag: list[int], deadline_seconds: float) -> bool:
    deadline = time.monotonic() + deadline_seconds
    while flag[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    return flag[0] == 1


def test_a_thread_poll_with_a_deadline_sees_the_thread_run(attempt: Sandbox) -> None:
    flag = [0]
    go = threading.Event()

    def work() -> None:
        go.wait(0.05)  # blocks in real time, as a thread waiting for I/O does
        flag[0] = 1

    thread = threading.Thread(target=work)
    thread.start()
    try:
        assert _poll(flag, 2.0)
    finally:
        thread.join()


@pytest.mark.usefixtures("real_gaps")
def test_time_blocked_in_c_shows_on_the_virtual_clock(attempt: Sandbox) -> None:
    # A lock's or a database's busy timeout waits in C, in real time: on a real
    # machine the clock shows it, so a test measuring its timeout sees it.
    started = time.perf_counter()
    threading.Event().wait(0.12)
    assert time.perf_counter() - started >= 0.12
    # Short real gaps (a Python line, a small computation) are not added:
    # readings stay a function of the seed.
    first = time.monotonic()
    assert time.monotonic() - first < 1e-3


@pytest.mark.usefixtures("real_gaps")
def test_the_real_time_before_an_attempts_first_reading_is_not_the_tests(
    attempt: Sandbox,
) -> None:
    # A loaded machine may take 80 ms to get from the attempt's start to the test's
    # first line: the test's first reading is still its seed's (the marker's ``now``).
    REAL_FUNCTIONS["sleep"](0.12)
    assert time.time() == NOW
    threading.Event().wait(0.12)  # between two readings, a stall shows as before
    assert time.time() - NOW >= 0.12


def test_without_other_threads_sleeps_take_no_real_time(attempt: Sandbox) -> None:
    real = REAL_FUNCTIONS["monotonic"]
    begin, virtual = real(), time.monotonic()
    for _ in range(20):
        time.sleep(0.5)
    assert real() - begin < 5.0  # 10 virtual seconds, nowhere near in real time
    assert time.monotonic() - virtual > 10.0


@pytest.mark.process
def test_a_sleep_gives_a_child_process_real_time(attempt: Sandbox, tmp_path: Path) -> None:
    # ``sleep(0.5)  # let the other process settle``: it must get the time.
    marker = tmp_path / "settled"
    child = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep(0.2); open({str(marker)!r}, 'w').close()"]
    )
    try:
        deadline = time.monotonic() + 30.0
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()
    finally:
        child.wait()


def test_sleeps_of_two_threads_overlap_as_real_ones_do(attempt: Sandbox) -> None:
    thread = threading.Thread(target=time.sleep, args=(0.05,))
    before = time.monotonic()
    thread.start()
    time.sleep(0.05)
    thread.join()
    elapsed = time.monotonic() - before
    # Two 50 ms sleeps side by side last about 50 ms, not 100.
    assert 0.05 < elapsed < 0.09


BOUND = textwrap.dedent(
    """
    import time
    from time import monotonic, sleep
    from time import time as now


    class Cache:
        clock = time.monotonic

        def __init__(self, ttl, clock=time.monotonic, *, wall=time.time):
            self.ttl, self._clock, self._wall = ttl, clock, wall
            self.stamp = clock()

        def fresh(self):
            return self._clock() - self.stamp < self.ttl

        def by_class(self):
            return self.clock()

        @staticmethod
        def helper(clock=time.perf_counter):
            return clock()

        class Inner:
            tick = time.monotonic


    def reading(clock=time.monotonic):
        return clock()


    SHARED = Cache(10)
    """
)


@pytest.fixture
def bound_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    (tmp_path / "hh_bound_clocks.py").write_text(BOUND)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("hh_bound_clocks")
    yield module
    sys.modules.pop("hh_bound_clocks", None)


def _virtual(value: float) -> bool:
    """Readings of the virtual monotonic clock start at 10,000 s; real ones are far off."""
    return 10_000.0 <= value < 10_100.0 or 20_000.0 <= value < 20_100.0


def test_bound_references_under_the_rootdir_follow_the_virtual_clock(
    engine: Sandbox, bound_module: object, tmp_path: Path
) -> None:
    module = bound_module
    assert module.monotonic is REAL_FUNCTIONS["monotonic"]  # type: ignore[attr-defined]
    assert follow_bound_clocks(str(tmp_path)) >= 9
    assert follow_bound_clocks(str(tmp_path)) == 0  # each module once
    cache_cls = module.Cache  # type: ignore[attr-defined]
    assert module.monotonic is TIME_PATCH["monotonic"]  # type: ignore[attr-defined]
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    try:
        cache = cache_cls(ttl=1.0)
        fresh = cache.fresh()
        module.sleep(2.0)  # type: ignore[attr-defined]  # ``from time import sleep``: virtual
        stale = cache.fresh()
        readings = [
            module.monotonic(),  # type: ignore[attr-defined]
            module.reading(),  # type: ignore[attr-defined]
            cache.by_class(),
            cache_cls.helper(),
            cache_cls.Inner.tick(),
            module.SHARED._clock(),  # type: ignore[attr-defined]
        ]
        wall = (module.now(), cache._wall())  # type: ignore[attr-defined]
    finally:
        engine.exit()
    assert fresh and not stale  # the TTL expired in virtual time
    assert all(_virtual(value) for value in readings), readings
    assert all(NOW <= value < NOW + 3 for value in wall)
    # Outside an attempt the swapped references read the real clock again.
    assert abs(module.now() - REAL_FUNCTIONS["time"]()) < 5  # type: ignore[attr-defined]
    assert not _virtual(module.reading())  # type: ignore[attr-defined]


def test_modules_outside_the_rootdir_keep_their_real_clock(
    bound_module: object, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = bound.replaced
    follow_bound_clocks(str(elsewhere))
    assert bound.replaced == before
    assert bound_module.monotonic is REAL_FUNCTIONS["monotonic"]  # type: ignore[attr-defined]


def test_a_module_imported_again_under_its_name_is_looked_at_again(
    bound_module: object, tmp_path: Path
) -> None:
    # pytester's in-process runs (and a test's own importlib.reload-like
    # juggling) drop a module and import it again: sys.modules keeps its size
    # and its newest name, yet the module object is new and holds real clocks.
    assert follow_bound_clocks(str(tmp_path)) >= 9
    sys.modules.pop("hh_bound_clocks")
    again = importlib.import_module("hh_bound_clocks")
    assert again is not bound_module
    assert again.monotonic is REAL_FUNCTIONS["monotonic"]  # type: ignore[attr-defined]
    assert follow_bound_clocks(str(tmp_path)) >= 9
    assert again.monotonic is TIME_PATCH["monotonic"]  # type: ignore[attr-defined]
