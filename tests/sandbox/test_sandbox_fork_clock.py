"""A process a test forks during a virtual-clock attempt lives in real time."""

from __future__ import annotations

import datetime
import json
import os
import time

import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, clock

NOW = 2_000_000_000.0  # 2033-05-18: far from the real clock


def _in_child(write: int) -> None:
    first = time.time()
    time.sleep(0.05)  # a real sleep: the clock moves because real time passed
    report = {
        "source": type(clock._source).__name__,
        "first": first,
        "after_sleep": time.time(),
        "year": datetime.datetime.now().year,
    }
    os.write(write, json.dumps(report).encode())
    os._exit(0)


@pytest.mark.process
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_goes_on_in_real_time_from_the_parents_virtual_instant(
    engine: Sandbox,
) -> None:
    engine.enter(SandboxSpec(seed=3, now=NOW, test_id="t.py::t"))
    try:
        time.sleep(3600)  # virtual: an hour passes at once in the attempt itself
        before_fork = time.time()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            _in_child(write)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as pipe:
            child = json.loads(pipe.read())
        assert isinstance(clock._source, clock.SeededClock)  # the parent keeps its clock
    finally:
        engine.exit()
    assert child["source"] == "ShiftedClock"
    assert child["year"] == 2033
    # the child's clock starts where the parent's was and moves with the real sleep
    assert before_fork <= child["first"] < before_fork + 60
    assert child["after_sleep"] - child["first"] >= 0.05
    assert before_fork >= NOW + 3600
