"""A hunt's clock behaves as a real machine's: what CI never fails, the hunt never
reports (file times follow the virtual clock, a forked child lives in real time);
a TTL whose clock is bound before the attempt is caught."""

from __future__ import annotations

import pytest
from helpers import hunt, rows

CACHE = """
import time


class Cache:
    def __init__(self, ttl, clock=time.monotonic):
        self.ttl, self._clock = ttl, clock
        self._stored = None

    def put(self, value):
        self._stored = (self._clock(), value)

    def get(self):
        stamp, value = self._stored
        return value if self._clock() - stamp < self.ttl else None
"""

SUITE = """
import multiprocessing
import os
import threading
import time

from cache import Cache


def test_rate_of_two_readings():
    start = time.time()
    done = sum(range(1000))
    assert done / (time.time() - start) > 0


def test_thread_poll_with_a_deadline():
    flag = [0]
    timer = threading.Timer(0.01, lambda: flag.__setitem__(0, 1))
    timer.start()
    deadline = time.monotonic() + 2.0
    while flag[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    timer.join()
    assert flag[0] == 1


def test_sleep_with_an_exclusive_bound():
    start = time.time()
    time.sleep(0.25)
    assert time.time() - start > 0.25


def test_a_file_just_written_is_fresh(tmp_path):
    cache = tmp_path / "cache.json"
    cache.write_text("{}")
    assert time.time() - os.path.getmtime(cache) < 60


def _hold(seconds):
    time.sleep(seconds)


def test_a_forked_child_still_holds_on():
    child = multiprocessing.get_context("fork").Process(target=_hold, args=(30,))
    child.start()
    try:
        time.sleep(0.2)
        assert child.is_alive()  # its sleep is real: it has not given up yet
    finally:
        child.terminate()
        child.join()


def test_ttl_with_a_bound_clock():
    cache = Cache(ttl=0.1)
    cache.put("x")
    time.sleep(0.09)
    assert cache.get() == "x"
"""


@pytest.mark.slow
def test_only_the_bound_clock_ttl_is_flaky(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(cache=CACHE, test_clocks=SUITE)
    result = hunt(pytester, "--hermetic-hunt=16", "--hermetic-hunt-isolate=off", "-n", "2")
    db = pytester.path / "flakes.db"
    failed = dict(
        rows(
            db,
            "SELECT t.nodeid, sum(a.outcome = 'failed') FROM attempts a "
            "JOIN tests t ON t.id = a.test_id GROUP BY t.nodeid",
        )
    )
    out = result.stdout.str()
    assert failed["test_clocks.py::test_rate_of_two_readings"] == 0, out[-3000:]
    assert failed["test_clocks.py::test_thread_poll_with_a_deadline"] == 0, out[-3000:]
    assert failed["test_clocks.py::test_sleep_with_an_exclusive_bound"] == 0, out[-3000:]
    assert failed["test_clocks.py::test_a_file_just_written_is_fresh"] == 0, out[-3000:]
    assert failed["test_clocks.py::test_a_forked_child_still_holds_on"] == 0, out[-3000:]
    assert failed["test_clocks.py::test_ttl_with_a_bound_clock"] > 0, out[-3000:]
    assert "1 flaky" in out
