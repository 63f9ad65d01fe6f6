"""Record mode explores: fresh real entropy, its own random stream, real time, a journal."""

from __future__ import annotations

import json
import os
import random
import time
import uuid

import pytest
from helpers import rows

from hermetic_hunt import journal as journal_format
from hermetic_hunt.sandbox import Sandbox, SandboxSpec, clock, entropy


def record(**changes: object) -> SandboxSpec:
    return SandboxSpec(seed=11, now=1_700_000_000.0, mode="record", test_id="t.py::t", **changes)


def test_three_record_mode_attempts_see_three_different_random_streams(engine: Sandbox) -> None:
    outside = random.getstate()
    values = []
    for _ in range(3):
        engine.enter(record())
        try:
            values.append(random.random())
        finally:
            engine.exit()
    assert len(set(values)) == 3
    assert random.getstate() == outside


def test_record_mode_draws_real_entropy_every_attempt(
    engine: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[int] = []

    def real(size: int) -> bytes:  # stands in for the OS, to count what it is asked
        drawn.append(size)
        return b"\x07" * size

    monkeypatch.setattr(entropy, "REAL_URANDOM", real)
    engine.enter(record())
    try:
        token = uuid.uuid4()
    finally:
        engine.exit()
    # 16 bytes to seed the attempt's random stream, 16 for the uuid: both real.
    assert drawn == [16, 16]
    assert token.bytes[:6] == b"\x07" * 6


def test_sleep_really_sleeps_in_record_mode_and_not_in_seeded_mode(engine: Sandbox) -> None:
    engine.enter(record())
    try:
        start = clock.REAL_MONOTONIC()
        time.sleep(0.01)
        slept = clock.REAL_MONOTONIC() - start
        assert time.time() == pytest.approx(clock.REAL_TIME(), abs=1.0)
    finally:
        engine.exit()
    assert slept >= 0.009
    engine.enter(SandboxSpec(seed=11, now=1_700_000_000.0, test_id="t.py::t"))
    try:
        before = time.time()
        time.sleep(3600)  # virtual: returns at once, the clock moves an hour (and a bit)
        assert 3600 < time.time() - before < 3600.001
    finally:
        engine.exit()


def test_the_journal_captures_what_the_attempt_consumed(engine: Sandbox) -> None:
    engine.enter(record())
    try:
        first, second = time.time(), time.time()
        monotonic = time.monotonic()
        time.sleep(0.001)
        token = os.urandom(8)
        value = random.random()
    finally:
        facts = engine.exit(keep_journal=True)
    journal = facts.journal
    assert journal is not None and journal.mode == "record"
    assert journal.events["time"] == [first, second]
    assert journal.events["monotonic"] == [monotonic]
    assert journal.events["sleep"] == [0.001]
    assert journal.events["urandom"] == [token.hex()]
    assert journal.counts == {"time": 2, "monotonic": 1, "sleep": 1, "urandom": 1, "random": 2}
    assert facts.counts == {"time": 2, "monotonic": 1, "sleep": 1, "urandom": 1}
    # The random stream is stored as its seed, which regenerates it.
    assert journal.random_seed is not None
    assert random.Random(int(journal.random_seed, 16)).random() == value


def test_a_journal_stores_the_random_seed_not_the_random_state(engine: Sandbox) -> None:
    engine.enter(record())
    try:
        random.random()
    finally:
        facts = engine.exit(keep_journal=True)
    assert facts.journal is not None
    data = journal_format.encode(facts.journal)
    assert len(data) < 1_000  # the 625-int random state alone is ~2.5 KB gzipped
    payload = facts.journal.as_dict()
    assert len(payload["random_seed"]) <= 32
    assert all(len(v) < 50 for v in payload["events"].values())


def test_passing_attempts_build_no_journal(engine: Sandbox) -> None:
    engine.enter(record())
    engine.exit()
    engine.enter(record())
    assert engine.exit(keep_journal=False).journal is None


SUITE = """
import os, random, time, uuid

def test_always_fails():
    time.time(); time.time()
    uuid.uuid4()
    assert random.random() < 0, "value"

def test_passes():
    time.time()
    os.urandom(4)
"""


@pytest.mark.slow
def test_a_record_mode_hunt_stores_the_journals_of_failing_attempts(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_rec=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-seed=5", "--hermetic-hunt=3",
        "--hermetic-hunt-mode=record", "--hermetic-hunt-isolate=off", "-n", "2",
    )  # fmt: skip
    assert result.ret == 1
    db = pytester.path / "flakes.db"
    attempts = rows(
        db,
        "SELECT t.nodeid, a.outcome, a.mode, a.counts, j.format, j.size, j.data "
        "FROM attempts a JOIN tests t ON t.id = a.test_id "
        "LEFT JOIN journals j ON j.attempt_id = a.id ORDER BY t.nodeid",
    )
    assert len(attempts) == 6
    seeds = set()
    for nodeid, outcome, mode, counts, fmt, size, data in attempts:
        assert mode == "record"
        if nodeid.endswith("test_passes"):
            assert (outcome, fmt, data) == ("passed", None, None)
            assert json.loads(counts) == {"time": 1, "urandom": 1}
            continue
        assert outcome == "failed"
        assert (fmt, size) == ("record/1", len(data))
        journal = journal_format.decode(data, where="test", expect_test=nodeid)
        assert journal.mode == "record"
        assert len(journal.events["time"]) == 2 and len(journal.events["urandom"]) == 1
        assert json.loads(counts) == {"time": 2, "urandom": 1}
        seeds.add(journal.random_seed)
    assert len(seeds) == 3  # every failing attempt explored its own stream
