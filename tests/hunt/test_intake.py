"""Tests for hermetic_hunt.hunt.intake: lines of finished steps in, attempts stored.

In process: a real store, the lines fake workers would send (forged ones too).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import rows

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.intake import Intake
from hermetic_hunt.models import Attempt, Failure, Leak
from hermetic_hunt.store import Store

TESTS = [f"t.py::test_{i}" for i in range(4)]


@pytest.fixture
def intake(tmp_path: Path) -> Intake:
    store = Store.open(tmp_path / "flakes.db")
    taken = Intake(store, lambda report: None, lambda old, how, new: None)
    taken.test_ids = store.test_ids(TESTS)
    return taken


def line(*attempts: Any) -> bytes:
    """A step line holding ``attempts`` as they are (forged ones too)."""
    return wire.encode({"step": 0, "attempts": list(attempts)})


def stored(intake: Intake) -> list[tuple[Any, ...]]:
    intake.flush()
    return rows(intake.store.path, "SELECT a.id, t.nodeid, a.execution, a.outcome, a.worker "
                "FROM attempts a JOIN tests t ON t.id = a.test_id ORDER BY a.id")  # fmt: skip


def test_forged_attempts_are_rejected_and_counted_and_the_rest_stored(intake: Intake) -> None:
    good = Attempt(TESTS[0], "passed").to_json()
    forged = [
        {**good, "o": []},  # an outcome no set can hold
        {**good, "n": "t.py::not_scheduled"},
        {**good, "r": -1},
        {**good, "d": "fast"},
        {**good, "f": ["only", "three", "parts"]},
        [good],
        "text",
    ]
    lines = [line(good, *forged), wire.encode({"step": 1, "attempts": {"a": 1}}),
             wire.encode({"step": 2, "attempts": [], "reports": "not a list"}),
             b"not json\n", wire.end_line("completed", rejected=2)]  # fmt: skip
    steps, ends = intake.take(lines, 1, "gw0", 0)
    assert (steps, len(ends)) == (3, 1)
    assert intake.rejected == len(forged) + 1 + 1 + 2
    assert [(nodeid, worker) for _, nodeid, _, _, worker in stored(intake)] == [(TESTS[0], "gw0")]
    assert intake.tallies.attempts == 1 and intake.stored == 1


def test_attempts_are_numbered_in_the_order_they_came(intake: Intake) -> None:
    failure = Failure("AssertionError", "boom", "t.py:3")
    first = Attempt(TESTS[1], "failed", phase="call", failure=failure)
    rerun = Attempt(TESTS[1], "passed", execution=2)
    plain = [Attempt(name, "passed", position=i) for i, name in enumerate(TESTS)]
    intake.take([line(plain[0].to_json()), line(first.to_json(), rerun.to_json()),
                 line(*(a.to_json() for a in plain[2:]))], 1, "gw1", 0)  # fmt: skip
    assert [(nodeid, execution, outcome) for _, nodeid, execution, outcome, _ in stored(intake)] == [
        (TESTS[0], 1, "passed"), (TESTS[1], 1, "failed"), (TESTS[1], 2, "passed"),
        (TESTS[2], 1, "passed"), (TESTS[3], 1, "passed"),
    ]  # fmt: skip
    assert intake.tallies.failed[TESTS[1]] == 1 and intake.tallies.flaky == 1


def test_a_rounds_leaks_are_stored_with_their_attempts_and_what_persisted(intake: Intake) -> None:
    leak = Leak("env", "X", "added", "'1'")
    gone = Leak("cwd", "cwd", "changed")
    left = Attempt(TESTS[2], "passed", round_no=3, position=1, leaks=(leak, gone))
    end = wire.end_line("completed", leaks={1: [leak]})
    intake.take([line(Attempt(TESTS[0], "passed", round_no=3).to_json()), line(left.to_json()),
                 end], 1, "gw1", 3)  # fmt: skip
    intake.store_leaks(1, 3)
    found = rows(intake.store.path, "SELECT t.nodeid, l.resource, l.persisted FROM leaks l "
                 "JOIN attempts a ON a.id = l.attempt_id JOIN tests t ON t.id = a.test_id "
                 "ORDER BY l.id")  # fmt: skip
    assert found == [(TESTS[2], "env", 1), (TESTS[2], "cwd", 0)]
    assert intake.leaks == []


def test_a_batch_becomes_columns_of_values_and_is_stored_as_the_codec_reads_it(
    intake: Intake,
) -> None:
    sent = [Attempt(name, "passed", round_no=2, position=i, seed=i, now=1.5e9, hash_seed=4,
                    counts={"time": i + 1}, started=1.7e9, duration=0.25)
            for i, name in enumerate(TESTS)]  # fmt: skip
    intake.take([line(*(a.to_json() for a in sent))], 7, "gw3", 2)
    assert [type(found).__name__ for found in intake.pending] == ["Columns"]
    intake.flush()
    back = rows(intake.store.path, "SELECT run_id, worker, round, seed, counts FROM attempts "
                "ORDER BY id")  # fmt: skip
    assert back == [(7, "gw3", 2, i, json.dumps({"time": i + 1}, separators=(",", ":")))
                    for i in range(4)]  # fmt: skip


def test_a_twice_rounds_second_run_that_fails_in_the_batch_of_its_passing_first_is_counted(
    intake: Intake,
) -> None:
    first = Attempt(TESTS[0], "passed", round_no=3, repeat=1)
    second = Attempt(TESTS[0], "failed", round_no=3, position=1, repeat=2, phase="call",
                     failure=Failure("AssertionError", "boom", "t.py:3"))  # fmt: skip
    intake.take([line(first.to_json(), second.to_json())], 1, "gw0", 3)
    tallies = intake.tallies
    assert tallies.second_run_failures[TESTS[0]] == 1 and tallies.not_idempotent() == [TESTS[0]]
    assert (tallies.attempts, tallies.repeated) == (2, 1)


def test_a_failing_attempt_among_plain_ones_is_stored_whole_in_its_place(intake: Intake) -> None:
    leak = Leak("env", "X", "added", "'1'")
    ran = [Attempt(TESTS[i % 4], "passed", round_no=1, position=i, seed=i) for i in range(6)]
    failed = replace(ran[2], outcome="failed", phase="call", leaks=(leak,),
                     failure=Failure("AssertionError", "boom", "t.py:3"))  # fmt: skip
    stray = replace(ran[1], nodeid="t.py::not_scheduled")
    intake.take([line(*(a.to_json() for a in (ran[0], stray, failed, *ran[3:])))], 1, "gw2", 1)
    assert [type(found).__name__ for found in intake.pending] == ["Columns"]
    assert [(nodeid, outcome) for _, nodeid, _, outcome, _ in stored(intake)] == [
        (TESTS[0], "passed"), (TESTS[2], "failed"), (TESTS[3], "passed"), (TESTS[0], "passed"),
        (TESTS[1], "passed"),
    ]  # fmt: skip
    assert rows(intake.store.path, "SELECT attempt_id, exc_type FROM failures") == [
        (2, "AssertionError")
    ]
    assert rows(intake.store.path, "SELECT phase FROM attempts WHERE id = 2") == [("call",)]
    assert [(x.position, x.leak) for x in intake.leaks] == [(2, leak)]
    assert intake.rejected == 1 and intake.tallies.failed[TESTS[2]] == 1


def test_a_row_aside_is_counted_as_its_whole_attempt_even_what_its_run_does_not_carry(
    intake: Intake,
) -> None:
    first = [Attempt(name, "passed", round_no=2, position=i) for i, name in enumerate(TESTS)]
    second = replace(first[0], outcome="failed", position=4, repeat=2, phase="call",
                     failure=Failure("AssertionError", "boom", "t.py:3"))  # fmt: skip
    intake.take([line(*(a.to_json() for a in (*first, second)))], 1, "gw0", 2)
    assert [type(found).__name__ for found in intake.pending] == ["Columns"]
    tallies = intake.tallies
    assert (tallies.attempts, tallies.repeated, tallies.failed_attempts) == (5, 1, 1)
    assert not tallies.failed and tallies.passed[TESTS[0]] == 1
