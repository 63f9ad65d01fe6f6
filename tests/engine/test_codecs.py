"""One codec for every value that crosses a process boundary: round trips and bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermetic_hunt import journal as journal_format
from hermetic_hunt.engine import wire
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.models import (
    MODES,
    OUTCOMES,
    PLAIN_KEYS,
    Attempt,
    Columns,
    Failure,
    Leak,
    Step,
    Violation,
)
from hermetic_hunt.timing import CONDITIONS, PROFILES

texts = st.text(max_size=20)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
seeds = st.none() | st.integers(min_value=0, max_value=2**63 - 1)
failures = st.builds(Failure, texts, texts, texts, texts)
violations = st.builds(Violation, texts, texts, st.none() | st.integers(0, 65535), texts)
leaks = st.builds(Leak, texts, texts, texts, texts)
attempts = st.builds(
    Attempt,
    nodeid=texts,
    outcome=st.sampled_from(OUTCOMES),
    round_no=st.integers(0, 10_000),
    position=st.integers(0, 10_000),
    execution=st.integers(1, 5),
    phase=st.none() | st.sampled_from(["setup", "call", "teardown"]),
    duration=st.floats(0, 1e6).map(lambda d: round(d, 6)),
    seed=seeds,
    now=st.none() | floats,
    mode=st.sampled_from(MODES),
    hash_seed=st.none() | st.integers(0, 4_294_967_295),
    counts=st.none() | st.dictionaries(texts, st.integers(1, 9), min_size=1, max_size=3),
    violations=st.lists(violations, max_size=2).map(tuple),
    failure=st.none() | failures,
    leaks=st.lists(leaks, max_size=2).map(tuple),
    repeat=st.integers(0, 2),
    profile=st.none() | st.sampled_from(PROFILES),
    switch_interval=st.none() | st.floats(1e-7, 0.01),
    stress=st.integers(0, 4),
    started=st.none() | floats,
    writes=st.lists(texts, max_size=2).map(tuple),
    warnings=st.lists(texts, max_size=2).map(tuple),
    journal=st.none() | st.binary(max_size=64),
    journal_format=st.none() | texts,
)


@given(attempts)
def test_an_attempt_survives_its_codec_through_json(attempt: Attempt) -> None:
    back = Attempt.from_json(json.loads(json.dumps(attempt.to_json())))
    assert back == attempt


steps = st.builds(
    Step,
    nodeid=texts,
    seed=seeds,
    now=st.none() | floats,
    mode=st.sampled_from(MODES),
    attempt_id=st.none() | st.integers(1, 10**9),
    profile=st.none() | st.sampled_from(PROFILES),
    switch_interval=st.none() | st.floats(1e-7, 0.01),
    stress=st.integers(0, 4),
)


@given(steps)
def test_a_step_survives_its_codec_through_json(step: Step) -> None:
    assert Step.from_json(json.loads(json.dumps(step.to_json()))) == step


@st.composite
def jobs(draw: Any) -> Job:
    found = tuple(draw(st.lists(steps, max_size=4)))
    repeats = tuple(draw(st.lists(st.integers(0, 2), min_size=len(found), max_size=len(found))))
    return Job(
        steps=found,
        round_no=draw(st.integers(0, 1000)),
        start=draw(st.none() | floats),
        repeats=draw(st.sampled_from([(), repeats])),
        first_position=draw(st.integers(0, 1000)),
        condition=draw(st.sampled_from(CONDITIONS)),
        stress=draw(st.integers(0, 4)),
    )


@given(jobs())
def test_a_job_survives_its_codec_through_json(job: Job) -> None:
    assert Job.from_json(json.loads(json.dumps(job.to_json()))) == job


def test_a_jobs_journals_travel_with_it() -> None:
    journal = journal_format.Journal(
        test="t.py::test_x", mode="record", seed=1, now=2.0, random_seed=None, config={},
        events={}, counts={},
    )  # fmt: skip
    job = Job((Step("t.py::test_x", mode="record", attempt_id=7),), journals={7: journal})
    back = Job.from_json(json.loads(json.dumps(job.to_json())))
    assert back.journals[7].test == "t.py::test_x"


def test_the_journal_bytes_that_crashed_xdist_hunts_travel_as_text() -> None:
    attempt = Attempt("t.py::test_x", "failed", journal=b"\x1f\x8b\x00\xff")
    line = json.dumps(attempt.to_json())  # issue 18: TypeError on bytes before
    assert Attempt.from_json(json.loads(line)).journal == b"\x1f\x8b\x00\xff"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ([], "must be an object"),
        ({"o": "passed"}, "nodeid must be text"),
        ({"n": "t", "o": "exploded"}, "unknown outcome"),
        ({"n": "t", "o": "passed", "m": "chaos"}, "unknown mode"),
        ({"n": "t", "o": "passed", "r": -1}, "at least 0"),
        ({"n": "t", "o": "passed", "r": True}, "whole number"),
        ({"n": "t", "o": "passed", "d": "fast"}, "finite number"),
        ({"n": "t", "o": "failed", "f": ["only", "three", "parts"]}, "a failure must be"),
        ({"n": "t", "o": "failed", "v": [[1, 2, 3, 4]]}, "op must be text"),
        ({"n": "t", "o": "failed", "j": "not base64!"}, "base64"),
        ({"n": "t", "o": "passed", "c": [1]}, "counts must be an object"),
    ],
)
def test_a_malformed_attempt_is_refused_with_the_reason(raw: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Attempt.from_json(raw)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"steps": "t.py::test_x"}, "must be a list"),
        ({"steps": [{"nodeid": "t"}], "repeats": [1, 2]}, "number its steps"),
        ({"steps": [], "condition": "hot"}, "unknown timing condition"),
        ({"steps": [], "journals": {"x": "AAAA"}}, "by attempt id"),
        ({"steps": [{"nodeid": "t", "seed": 1.5}]}, "whole number"),
    ],
)
def test_a_malformed_job_is_refused_with_the_reason(raw: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Job.from_json(raw)


def expanded(decoded: list[Attempt | Columns]) -> list[Attempt]:
    """What :meth:`Attempt.many_from_json` decoded, every row as an attempt."""
    out: list[Attempt] = []
    for found in decoded:
        if isinstance(found, Attempt):
            out.append(found)
            continue
        aside = dict(found.aside)
        for index, row in enumerate(zip(*found.values, strict=True)):
            values = dict(zip(found.fields, row, strict=True))
            if index in aside:  # (read whole: its plain values are the row's)
                assert {field: getattr(aside[index], field) for field in values} == values
                out.append(aside[index])
                continue
            out.append(Attempt(**values, run_id=found.run_id, worker=found.worker))
    return out


#: A value an attempt's key may hold on a forged line: anything JSON has.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | floats | st.sampled_from([1e308, -1.0, 0.0])
    | texts | st.sampled_from([*OUTCOMES, *MODES]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=2),
    max_leaves=4,
)  # fmt: skip


#: Attempts that carry plain values only: what a batch decodes a column at a time.
plain_attempts = st.builds(
    Attempt, nodeid=texts, outcome=st.sampled_from(OUTCOMES), round_no=st.integers(0, 9),
    position=st.integers(0, 9), execution=st.integers(1, 3),
    phase=st.none() | st.sampled_from(["setup", "call"]), duration=st.floats(0, 9).map(
        lambda d: round(d, 6)), seed=seeds, now=st.none() | floats, mode=st.sampled_from(MODES),
    hash_seed=st.none() | st.integers(0, 9), repeat=st.integers(0, 2),
    counts=st.none() | st.dictionaries(texts, st.integers(1, 9), min_size=1, max_size=2),
    profile=st.none() | st.sampled_from(PROFILES), switch_interval=st.none() | st.floats(1e-7, 0.01),
    stress=st.integers(0, 2), started=st.none() | floats,
)  # fmt: skip


@st.composite
def forged(draw: Any) -> Any:
    """A line's attempt: a real one, one with a key set to any value, or no object."""
    raw = draw(plain_attempts | plain_attempts | attempts).to_json()
    choice = draw(st.integers(0, 3))
    if choice == 1:
        raw[draw(st.sampled_from([*raw, "x", "c", "s", "rp", "zz"]))] = draw(json_values)
    elif choice == 2:
        del raw[draw(st.sampled_from(sorted(raw)))]
    elif choice == 3:
        return draw(json_values)
    return raw


@given(st.lists(forged(), max_size=6))
def test_a_batch_decodes_as_each_attempt_alone_would_in_order_rejecting_the_same(raws):
    raws = json.loads(json.dumps(raws))
    alone, refused = [], 0
    for raw in raws:
        try:
            alone.append(Attempt.from_json(raw, run_id=3, worker="gw1"))
        except ValueError:
            refused += 1
    decoded, rejected = Attempt.many_from_json(raws, run_id=3, worker="gw1")
    assert (list(map(repr, expanded(decoded))), rejected) == (list(map(repr, alone)), refused)


def test_a_null_leak_or_violation_in_a_line_is_refused_alone_and_in_a_batch() -> None:
    """Found by the property above: a null leak raised TypeError (an empty Leak)."""
    raw = Attempt("t.py::t", "passed").to_json()
    for key in ("l", "v"):
        bad = {**raw, key: [None]}
        with pytest.raises(ValueError):
            Attempt.from_json(bad)
        assert Attempt.many_from_json([bad, raw])[1] == 1


def test_plain_attempts_come_as_columns_and_the_others_as_attempts_in_order() -> None:
    ran = [Attempt(f"t.py::t{i}", "passed", position=i, seed=i, duration=0.5) for i in range(3)]
    failed = Attempt("t.py::t3", "failed", position=3, failure=Failure("E", "m", "t.py:1"))
    raws = [a.to_json() for a in (ran[0], ran[1], failed, ran[2])]
    decoded, rejected = Attempt.many_from_json(json.loads(json.dumps(raws)))
    assert [type(found).__name__ for found in decoded] == ["Columns", "Attempt", "Columns"]
    assert rejected == 0 and expanded(decoded) == [ran[0], ran[1], failed, ran[2]]


def test_a_failing_attempt_among_plain_ones_stays_a_row_of_their_run_read_whole() -> None:
    ran = [Attempt(f"t.py::t{i}", "passed", position=i, seed=i, duration=0.5) for i in range(6)]
    failed = replace(ran[3], outcome="failed", phase="call", failure=Failure("E", "m", "t.py:1"),
                     violations=(Violation("connect", "192.0.2.1", 80, ""),))  # fmt: skip
    sent = [*ran[:3], failed, *ran[4:]]
    decoded, rejected = Attempt.many_from_json(json.loads(json.dumps([a.to_json() for a in sent])))
    assert [type(found).__name__ for found in decoded] == ["Columns"] and rejected == 0
    assert [index for index, _ in decoded[0].aside] == [3] and expanded(decoded) == sent
    forged = [a.to_json() for a in sent]
    forged[3]["f"] = ["only", "two"]  # (refused as alone: the others still a run)
    decoded, rejected = Attempt.many_from_json(json.loads(json.dumps(forged)))
    assert rejected == 1 and expanded(decoded) == [*ran[:3], *ran[4:]]


#: Values of every JSON type, and the numbers a check could let through.
ODD_VALUES = [None, True, 0, -1, 2**70, 0.5, 1e308, "text", "", [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("key", sorted(PLAIN_KEYS))
def test_a_plain_key_of_any_value_decodes_in_a_batch_as_alone(key: str) -> None:
    base = Attempt("t.py::t", "passed", seed=5, now=1.5, hash_seed=2, started=2.5).to_json()
    for value in ODD_VALUES:
        raws = json.loads(json.dumps([base, {**base, key: value}, base], allow_nan=False))
        alone, refused = [], 0
        for raw in raws:
            try:
                alone.append(Attempt.from_json(raw, run_id=3, worker="gw1"))
            except ValueError:
                refused += 1
        decoded, rejected = Attempt.many_from_json(raws, run_id=3, worker="gw1")
        got = (list(map(repr, expanded(decoded))), rejected)
        assert got == (list(map(repr, alone)), refused), (key, value)


def test_a_line_with_a_failure_or_a_jobs_end_is_urgent_without_being_decoded() -> None:
    from hermetic_hunt.engine import wire

    failed = Attempt("t.py::t", "failed", failure=Failure("E", "m", "t.py:1"))
    passed = Attempt("t.py::t", "passed", execution=2)
    assert wire.urgent(wire.step_line(0, [failed, passed], []))
    assert wire.urgent(wire.end_line("completed"))
    assert not wire.urgent(wire.step_line(0, [passed], []))
    assert wire.decode(wire.step_line(4, [failed], []))["step"] == 4


def test_counts_on_the_wire_are_bounded_and_malformed_ones_are_none() -> None:
    assert wire.report_counts(wire.counts_report({"subtests passed": 6})) == {"subtests passed": 6}
    assert wire.report_counts({"counts": {"passed": -1, "x" * 41: 1, "ok": True}}) == {}
    report = {"counts": {"passed": 1}, "nodeid": "t"}  # a report, not counts
    assert wire.report_counts(report) == {}
    assert wire.report_counts({"counts": [1]}) == {}
