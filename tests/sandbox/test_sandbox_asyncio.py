"""Virtual asyncio time: event loops of a seeded attempt run on its virtual clock.

Nothing here measures real time: a sleep of an hour that returns is the
proof that no real hour passed (the suite would hang otherwise).
"""

from __future__ import annotations

import asyncio
import selectors
import threading

import pytest
from helpers import rows

from hermetic_hunt import _compat
from hermetic_hunt.sandbox import Sandbox, SandboxSpec
from hermetic_hunt.sandbox.clock import REAL_SLEEP
from hermetic_hunt.sandbox.profiles import Noise

NOW = 1_700_000_000.0


def seed_with_stretch(profile: str, over: float) -> int:
    """A seed whose first sleep lasts more than ``over`` times its duration."""
    return next(seed for seed in range(1000) if Noise(profile, seed).stretch() > over)


def seed_without_stretch(profile: str, under: float) -> int:
    return next(seed for seed in range(1000) if Noise(profile, seed).stretch() < under)


async def elapsed_sleep(seconds: float) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.sleep(seconds)
    return loop.time() - start


def test_an_hour_of_asyncio_sleep_passes_on_the_virtual_clock(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW))
    import time

    before = time.time()
    took = asyncio.run(elapsed_sleep(3600))
    after = time.time()
    engine.exit()
    assert 3600 <= took < 3600.01
    assert after - before == pytest.approx(3600, abs=0.01)  # wall time moved along


def test_timers_fire_in_deadline_order_and_wait_for_times_out_on_virtual_time(
    engine: Sandbox,
) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW))
    fired: list[str] = []

    async def main() -> str:
        loop = asyncio.get_running_loop()
        loop.call_later(30, fired.append, "30s")
        loop.call_later(10, fired.append, "10s")
        await asyncio.sleep(60)
        try:
            await asyncio.wait_for(asyncio.sleep(120), timeout=90)
        except asyncio.TimeoutError:
            return "timed out"
        return "finished"

    outcome = asyncio.run(main())
    engine.exit()
    assert fired == ["10s", "30s"]
    assert outcome == "timed out"


def test_work_that_races_its_timeout_loses_only_under_a_stretching_profile(
    engine: Sandbox,
) -> None:
    async def race() -> str:
        try:
            await asyncio.wait_for(asyncio.sleep(0.09), timeout=0.1)
        except asyncio.TimeoutError:
            return "timeout"
        return "ok"

    outcomes = {}
    for label, profile, seed in (
        ("exact", "exact", 1),
        ("stretched", "jitter", seed_with_stretch("jitter", 1.2)),
        ("barely", "jitter", seed_without_stretch("jitter", 1.05)),
    ):
        engine.enter(SandboxSpec(seed=seed, now=NOW, profile=profile))
        outcomes[label] = asyncio.run(race())
        facts = engine.exit()
        if label == "stretched":
            assert facts.counts["stretch"] > 1200
    assert outcomes == {"exact": "ok", "stretched": "timeout", "barely": "ok"}


def test_a_loop_waiting_on_another_thread_waits_for_it_in_real_time(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW))

    async def main() -> int:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()

        def worker() -> None:
            REAL_SLEEP(0.05)  # real work in a thread, not a virtual sleep
            loop.call_soon_threadsafe(future.set_result, 42)

        thread = threading.Thread(target=worker)
        thread.start()
        try:
            return await asyncio.wait_for(future, timeout=30)
        finally:
            thread.join()

    # Advancing the clock to the timeout would have failed it: the thread answers first.
    assert asyncio.run(main()) == 42
    engine.exit()


def test_other_selectors_keep_real_time(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW))
    import time

    selector = selectors.DefaultSelector()
    before = time.monotonic()
    try:
        assert selector.select(0.01) == []
    finally:
        selector.close()
    after = time.monotonic()
    engine.exit()
    assert after - before < 0.001  # the virtual clock did not jump by the timeout


def test_the_selectors_are_put_back_when_the_attempt_ends(engine: Sandbox) -> None:
    originals = {cls: cls.__dict__.get("select") for cls in selectors.BaseSelector.__subclasses__()}
    engine.enter(SandboxSpec(seed=1, now=NOW, profile="jitter"))
    assert selectors.DefaultSelector.select is not originals.get(selectors.DefaultSelector)
    loop_class, _ = _compat.asyncio_sleep_timer(asyncio)
    assert loop_class is not None and "call_later" in loop_class.__dict__
    engine.exit()
    after = {cls: cls.__dict__.get("select") for cls in selectors.BaseSelector.__subclasses__()}
    assert after == originals
    assert getattr(loop_class.call_later, "__wrapped__", None) is None


def test_record_mode_loops_run_in_real_time(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW, mode="record"))
    took = asyncio.run(elapsed_sleep(0.01))
    engine.exit()
    assert took >= 0.01


def test_the_compat_helpers_find_what_they_rely_on() -> None:
    loop_class, callback = _compat.asyncio_sleep_timer(asyncio)
    assert loop_class is asyncio.base_events.BaseEventLoop
    assert callback is not None and callback.__name__ == "_set_result_unless_cancelled"
    assert _compat.running_loop_selector() is None

    async def main() -> object:
        return _compat.running_loop_selector()

    assert isinstance(asyncio.run(main()), selectors.BaseSelector)


PYTEST_ASYNCIO = """
import asyncio
import pytest
import pytest_asyncio

@pytest_asyncio.fixture
async def warmed_up():
    await asyncio.sleep(10)
    return asyncio.get_running_loop().time()

@pytest.mark.asyncio
async def test_a_long_sleep(warmed_up):
    loop = asyncio.get_running_loop()
    await asyncio.sleep(600)
    assert loop.time() - warmed_up >= 600

@pytest.mark.asyncio
async def test_a_timeout():
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.sleep(3600), timeout=300)
"""

ANYIO = """
import anyio
import pytest

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def test_a_long_sleep():
    start = anyio.current_time()
    await anyio.sleep(600)
    assert anyio.current_time() - start >= 600

@pytest.mark.anyio
async def test_fail_after():
    with pytest.raises(TimeoutError):
        with anyio.fail_after(300):
            await anyio.sleep(3600)

@pytest.mark.anyio
async def test_a_task_group():
    done = []
    async def worker(n):
        await anyio.sleep(n * 100)
        done.append(n)
    async with anyio.create_task_group() as group:
        for n in (3, 1, 2):
            group.start_soon(worker, n)
    assert done == [1, 2, 3]
"""


@pytest.mark.parametrize("plugin, source", [("asyncio", PYTEST_ASYNCIO), ("anyio", ANYIO)])
def test_async_tests_run_on_the_virtual_loop_clock_in_a_hunt(
    pytester: pytest.Pytester, plugin: str, source: str
) -> None:
    pytest.importorskip("pytest_asyncio" if plugin == "asyncio" else "anyio")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_async=source)
    result = pytester.runpytest_subprocess(
        "-p", plugin, "--hermetic-hunt=6", "--hermetic-seed=3",
        "--hermetic-hunt-time=jitter=50,slow=50", "--hermetic-hunt-isolate=off",
        timeout=300,
    )  # fmt: skip
    tests = 2 if plugin == "asyncio" else 3
    assert result.ret == 0, result.stdout.str()[-3000:]
    # pytest's count is of attempts: 6 rounds of plain runs and the twice round's
    # second runs (the progress line names those apart)
    result.assert_outcomes(passed=tests * 7)
    result.stdout.fnmatch_lines(
        [f"hermetic-hunt: run 1 · 6 round(s) · {tests * 6} plain attempts + {tests} repeated *"]
    )
    db = pytester.path / "flakes.db"
    assert rows(db, "SELECT DISTINCT outcome FROM attempts") == [("passed",)]
    profiles = {p for (p,) in rows(db, "SELECT DISTINCT profile FROM attempts")}
    assert profiles == {"exact", "slow"} or profiles == {"exact", "jitter", "slow"}
