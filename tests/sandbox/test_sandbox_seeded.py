"""Seeded mode explains: per-source counts for every attempt, journals for failing ones."""

from __future__ import annotations

import json
import os
import random
import time
import uuid

import pytest
from helpers import rows

from hermetic_hunt import journal as journal_format
from hermetic_hunt.journal import Journal, compare
from hermetic_hunt.sandbox import Sandbox, SandboxSpec, state


def seeded(seed: int = 3) -> SandboxSpec:
    return SandboxSpec(seed=seed, now=1_700_000_000.0, test_id="t.py::t")


def test_an_attempt_counts_what_it_read_from_each_source(engine: Sandbox) -> None:
    engine.enter(seeded())
    try:
        for _ in range(3):
            time.time()
        time.monotonic()
        time.perf_counter()
        time.sleep(1)
        uuid.uuid4()
        os.urandom(3)
    finally:
        facts = engine.exit()
    assert facts.counts == {
        "time": 3,
        "monotonic": 1,
        "perf_counter": 1,
        "sleep": 1,
        "urandom": 2,
    }
    assert facts.journal is None


def test_the_same_seed_gives_the_same_values_and_another_seed_others(engine: Sandbox) -> None:
    def values(seed: int) -> tuple[float, str, float]:
        engine.enter(seeded(seed))
        try:
            return random.random(), uuid.uuid4().hex, time.time()
        finally:
            engine.exit()

    assert values(3) == values(3)
    assert values(3)[:2] != values(4)[:2]
    assert values(3)[2] == 1_700_000_000.0


def test_uuid4_bits_are_not_the_random_streams_bits(engine: Sandbox) -> None:
    engine.enter(seeded())
    try:
        drawn = os.urandom(8)
        state.seed_random(3)
        assert drawn != random.randbytes(8)
    finally:
        engine.exit()


def attempt(engine: Sandbox, reads: int, draws: list[int], words: int, seed: int = 3) -> Journal:
    engine.enter(seeded(seed))
    try:
        for _ in range(reads):
            time.time()
        for size in draws:
            os.urandom(size)
        random.getrandbits(32 * words)
    finally:
        facts = engine.exit(keep_journal=True)
    assert facts.journal is not None
    return facts.journal


def test_compare_says_how_a_failing_and_a_passing_attempt_differ(engine: Sandbox) -> None:
    failing = attempt(engine, reads=3, draws=[4, 4], words=4)
    passing = attempt(engine, reads=5, draws=[4, 8], words=6)
    assert compare(failing, passing) == [
        "random: took 4 word(s) in the failing attempt, 6 in the passing one",
        "time: read 3 time(s) in the failing attempt, 5 in the passing one",
        f"urandom: first different value at draw 2 ({failing.events['urandom'][1]!r} vs "
        f"{passing.events['urandom'][1]!r})",
    ]
    # What every attempt stores -- the counts -- compares too.
    assert compare({"time": 3, "urandom": 2}, {"time": 3, "urandom": 1, "leaks": ["tz"]}) == [
        "urandom: drew 2 time(s) in the failing attempt, 1 in the passing one"
    ]
    assert compare(failing, failing) == []


def test_a_journal_counts_random_words_across_blocks_and_gives_up_on_reseeding(
    engine: Sandbox,
) -> None:
    assert attempt(engine, reads=0, draws=[], words=1_500).counts["random"] == 1_500
    engine.enter(seeded())
    try:
        random.seed(99)  # no longer the attempt's stream: no count rather than a wrong one
        random.random()
    finally:
        facts = engine.exit(keep_journal=True)
    assert facts.journal is not None and "random" not in facts.journal.counts


def test_a_seeded_journal_round_trips_through_the_database_format(engine: Sandbox) -> None:
    journal = attempt(engine, reads=2, draws=[16], words=2)
    again = journal_format.decode(journal_format.encode(journal), where="A1", expect_test="t.py::t")
    assert again == journal
    assert (again.mode, again.seed, again.random_seed) == ("seeded", 3, None)


SUITE = """
import random, time

def test_reads_the_clock_three_times():
    time.time(); time.time(); time.time()

def test_fails_on_a_high_draw():
    time.monotonic()
    assert random.random() < 0.5
"""


@pytest.mark.slow
def test_a_seeded_hunt_stores_counts_for_every_attempt_and_journals_for_failing_ones(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_seeded=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-seed=3", "--hermetic-hunt=8",
        "--hermetic-hunt-isolate=off", "--hermetic-hunt-order=shuffle",
    )  # fmt: skip
    assert result.ret == 1
    db = pytester.path / "flakes.db"
    found = rows(
        db,
        "SELECT t.nodeid, a.outcome, a.seed, a.counts, j.data FROM attempts a "
        "JOIN tests t ON t.id = a.test_id LEFT JOIN journals j ON j.attempt_id = a.id",
    )
    assert len(found) == 16
    outcomes = set()
    for nodeid, outcome, seed, counts, data in found:
        outcomes.add((nodeid.rsplit("::", 1)[1], outcome))
        if nodeid.endswith("three_times"):
            assert json.loads(counts) == {"time": 3}
        else:
            assert json.loads(counts) == {"monotonic": 1}
            assert (random.Random(seed).random() < 0.5) == (outcome == "passed")
        if outcome == "passed":
            assert data is None
            continue
        journal = journal_format.decode(data, where="test", expect_test=nodeid)
        assert (journal.mode, journal.seed) == ("seeded", seed)
        assert journal.counts == {"monotonic": 1, "random": 2}
    assert ("test_fails_on_a_high_draw", "failed") in outcomes
    assert ("test_fails_on_a_high_draw", "passed") in outcomes
