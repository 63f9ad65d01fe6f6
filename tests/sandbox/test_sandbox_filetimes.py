"""File times on the attempt's virtual clock (``sandbox/filetimes``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, filetimes

NOW = 2_000_000_000.0  # 2033-05-18: far from the real clock


@pytest.fixture
def fresh_map(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MAP", "_REALS", "_VIRTUALS"):
        monkeypatch.setattr(filetimes, name, [])


def test_a_file_written_in_a_seeded_attempt_is_as_old_as_the_virtual_clock_says(
    engine: Sandbox, tmp_path: Path, fresh_map: None
) -> None:
    old = tmp_path / "checked-in.txt"
    old.write_text("x")
    os.utime(old, (time.time() - 86400, time.time() - 86400))  # a day old, for real
    engine.enter(SandboxSpec(seed=4, now=NOW, test_id="t.py::t"))
    try:
        cache = tmp_path / "cache.json"
        cache.write_text("{}")
        assert abs(time.time() - os.path.getmtime(cache)) < 5  # just written
        assert abs(time.time() - cache.stat().st_mtime_ns / 1e9) < 5
        assert 86400 - 5 < time.time() - old.stat().st_mtime < 86400 + 5  # still a day old
        time.sleep(3600)  # virtual
        assert 3600 - 1 < time.time() - os.path.getmtime(cache) < 3600 + 5
        later = tmp_path / "later.json"
        later.write_text("{}")
        assert abs(time.time() - os.path.getmtime(later)) < 5  # written after the sleep
        with open(later) as handle:
            assert os.fstat(handle.fileno()).st_mtime == os.stat(later).st_mtime
        os.utime(cache, (time.time() + 60, time.time() + 60))  # virtual times in
        assert 55 < os.path.getmtime(cache) - time.time() < 65
        copy = tmp_path / "copy.json"
        shutil.copy2(cache, copy)  # copystat: os.stat, then os.utime, both virtual
        assert abs(os.path.getmtime(copy) - os.path.getmtime(cache)) < 1e-3
    finally:
        engine.exit()
    # outside the attempt: the real times, and what utime wrote is real time too
    assert abs(time.time() - os.path.getmtime(cache)) < 120
    assert os.stat is filetimes.REAL_STAT and os.utime is filetimes.REAL_UTIME


def test_the_mapping_keeps_each_distance_from_where_it_began(fresh_map: None) -> None:
    filetimes.note(100.0, 1000.0)
    filetimes.note(150.0, 1050.001)  # within STEP: the same distance
    filetimes.note(200.0, 4700.0)  # a virtual hour-long sleep at real 200
    assert filetimes.MAP == [(100.0, 1000.0), (200.0, 4700.0)]
    assert filetimes.to_virtual(50.0) == 950.0  # before the first point: its distance
    assert filetimes.to_virtual(199.0) == 1099.0
    assert filetimes.to_virtual(201.0) == 4701.0
    for real in (50.0, 199.0, 201.0):
        assert filetimes.to_real(filetimes.to_virtual(real)) == pytest.approx(real)


def test_off_and_record_attempts_leave_file_times_real(engine: Sandbox, fresh_map: None) -> None:
    for spec in (
        SandboxSpec(seed=4, now=NOW, test_id="t.py::t", clock="off"),
        SandboxSpec(seed=4, now=NOW, test_id="t.py::t", mode="record"),
    ):
        engine.enter(spec)
        try:
            assert os.stat is filetimes.REAL_STAT
        finally:
            engine.exit()
