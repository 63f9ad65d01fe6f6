"""Bad journals are one clear error; replays say when they consumed less than recorded."""

from __future__ import annotations

import gzip
import json
import os
import time
from typing import Any

import hermetic
import pytest

from hermetic_hunt import journal as journal_format
from hermetic_hunt.errors import BadJournal
from hermetic_hunt.journal import Journal
from hermetic_hunt.sandbox import Sandbox, SandboxSpec

WHERE = "the journal of A12"
NODEID = "tests/test_a.py::test_x"


def good() -> dict[str, Any]:
    return {
        "format": "hermetic-hunt-journal",
        "version": 1,
        "test": NODEID,
        "mode": "record",
        "seed": 12,
        "now": 1_700_000_000.0,
        "random_seed": "9f0c",
        "config": {"clock": "virtual", "rng": "all", "tick": 1e-06, "network": "block"},
        "events": {"time": [1.5, 2.5], "urandom": ["ab01"]},
        "counts": {"time": 2, "urandom": 1},
        "overflow": [],
        "threads": 1,
        "fingerprint": {"python": "3.11.7", "tzname": ["UTC", "UTC"], "tz": None},
    }


def packed(obj: Any) -> bytes:
    return gzip.compress(json.dumps(obj).encode())


def bad(data: object, expect: str | None = NODEID) -> str:
    with pytest.raises(BadJournal) as caught:
        journal_format.decode(data, where=WHERE, expect_test=expect)
    message = str(caught.value)
    assert message.startswith(f"{WHERE}: ") and "\n" not in message, message
    return message


def changed(**fields: Any) -> bytes:
    return packed({**good(), **fields})


def test_a_good_journal_decodes() -> None:
    journal = journal_format.decode(packed(good()), where=WHERE, expect_test=NODEID)
    assert journal.events == {"time": [1.5, 2.5], "urandom": ["ab01"]}
    assert journal_format.decode(journal_format.encode(journal), where=WHERE) == journal


def test_a_truncated_gzip_journal() -> None:
    data = packed(good())
    assert "truncated" in bad(data[: len(data) // 2])


def test_a_corrupt_gzip_journal() -> None:
    data = bytearray(packed(good()))
    data[12:20] = b"\xff" * 8
    assert "not valid gzip" in bad(bytes(data))


def test_bytes_after_the_gzip_stream() -> None:
    assert "after its gzip stream" in bad(packed(good()) + b"junk")


@pytest.mark.parametrize(
    "data", [b"\x00\x01binary", gzip.compress(b"{not json"), b""], ids=["raw", "gzipped", "empty"]
)
def test_a_journal_that_is_not_json(data: bytes) -> None:
    assert "is not JSON" in bad(data)


@pytest.mark.parametrize("value", [[1, 2], "text", 3, None])
def test_a_journal_that_is_not_an_object(value: Any) -> None:
    assert bad(packed(value)).endswith("journal is not a JSON object")


def test_a_journal_stored_as_something_else_than_bytes() -> None:
    assert "stored as int" in bad(12)
    journal_format.decode(json.dumps(good()), where=WHERE)  # JSON text is fine


WRONG = [
    ({"format": "other"}, "not a hermetic-hunt journal"),
    ({"version": 2}, "version 2 is not supported"),
    ({"test": ""}, "'test' must be a nodeid"),
    ({"test": ["x"]}, "'test' must be a nodeid"),
    ({"mode": "replay"}, "'mode' must be one of seeded, record, got 'replay'"),
    ({"seed": "12"}, "'seed' must be an integer"),
    ({"seed": -1}, "'seed' must be an integer"),
    ({"seed": 2**64}, "'seed' must be an integer"),
    ({"seed": True}, "'seed' must be an integer"),
    ({"now": "2024-01-01"}, "'now' must be epoch seconds"),
    ({"now": 1e300}, "'now' must be epoch seconds"),
    ({"random_seed": "xyz"}, "'random_seed' must be hex"),
    ({"random_seed": "0x12"}, "'random_seed' must be hex"),
    ({"config": {"clock": ["virtual"]}}, "'config' must be an object of plain values"),
    ({"config": []}, "'config' must be an object"),
    ({"events": []}, "'events' must be an object"),
    ({"events": {"disk": []}}, "unknown event source 'disk'"),
    ({"events": {"time": "1.0"}}, "events of 'time' must be a list"),
    ({"events": {"time": ["1.0"]}}, "'time' events must be numbers"),
    ({"events": {"time": [True]}}, "'time' events must be numbers"),
    ({"events": {"urandom": ["zz"]}}, "urandom events must be hex strings"),
    ({"events": {"urandom": ["abc"]}}, "urandom events must be hex strings"),
    ({"counts": {"time": -1}}, "'counts' must map sources to non-negative integers"),
    ({"counts": {"time": True}}, "'counts' must map sources to non-negative integers"),
    ({"counts": {"time": 1.5}}, "'counts' must map sources to non-negative integers"),
    ({"overflow": ["disk"]}, "'overflow' must be a list of source names"),
    ({"threads": -1}, "'threads' must be a count"),
    ({"threads": "1"}, "'threads' must be a count"),
    ({"fingerprint": {"python": {"v": 3}}}, "'fingerprint' must be an object of plain values"),
]


@pytest.mark.parametrize(("fields", "expected"), WRONG, ids=[w[1][:30] for w in WRONG])
def test_a_field_of_the_wrong_type_is_named(fields: dict[str, Any], expected: str) -> None:
    assert expected in bad(changed(**fields))


def test_a_journal_for_another_test_is_refused_by_exact_nodeid() -> None:
    for other in ("tests/test_a.py::test_x2", "tests/test_a.py::test_", "test_a.py::test_x"):
        message = bad(packed({**good(), "test": other}))
        assert message == f"{WHERE}: journal was recorded for {other!r}, not {NODEID!r}"
    assert "tests/test_a.py::test_x[1]" in bad(packed(good()), expect="tests/test_a.py::test_x[1]")


def test_an_oversized_journal_is_refused_before_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    data = packed(good())
    monkeypatch.setattr(journal_format, "MAX_COMPRESSED", len(data) - 1)
    assert f"journal is {len(data):,} bytes, over the" in bad(data)


def test_a_journal_that_inflates_too_far_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_format, "MAX_DECOMPRESSED", 10_000)
    bomb = gzip.compress(b" " * 20_000)
    assert "expands past 10,000 bytes" in bad(bomb)


def test_too_many_events_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_format, "MAX_EVENTS_PER_SOURCE", 3)
    assert "4 events for 'time' exceed the 3 limit" in bad(
        changed(events={"time": [1.0, 2.0, 3.0, 4.0]})
    )


def test_a_deeply_nested_journal_is_refused() -> None:
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert bad(gzip.compress(deep)).endswith("journal is nested too deeply")
    nested: Any = 1
    for _ in range(20):
        nested = [nested]
    assert "nested deeper than a journal is" in bad(changed(fingerprint={"x": nested}))


# -- replaying a journal -------------------------------------------------------


def recorded(engine: Sandbox) -> tuple[Journal, list[Any]]:
    engine.enter(SandboxSpec(seed=4, now=1_700_000_000.0, mode="record", test_id=NODEID))
    try:
        seen = [time.time(), time.time(), time.time(), os.urandom(4), os.urandom(2)]
    finally:
        facts = engine.exit(keep_journal=True)
    assert facts.journal is not None
    data = journal_format.encode(facts.journal)
    return journal_format.decode(data, where=WHERE, expect_test=NODEID), seen


def replay(journal: Journal, **changes: Any) -> SandboxSpec:
    return SandboxSpec(
        seed=4, now=1_700_000_000.0, mode="replay", test_id=NODEID, replay=journal, **changes
    )


def test_a_replay_feeds_back_the_recorded_values(engine: Sandbox) -> None:
    journal, seen = recorded(engine)
    engine.enter(replay(journal))
    try:
        again = [time.time(), time.time(), time.time(), os.urandom(4), os.urandom(2)]
    finally:
        facts = engine.exit()
    assert again == seen
    assert facts.warnings == []


def test_a_replay_that_consumes_less_than_was_recorded_says_so(engine: Sandbox) -> None:
    journal, seen = recorded(engine)
    engine.enter(replay(journal))
    try:
        assert time.time() == seen[0]
        assert os.urandom(4) == seen[3]
    finally:
        facts = engine.exit()
    assert facts.warnings == [
        "replay read time 1 of 3 recorded time(s): the code path consumed less than the recording",
        "replay drew urandom 1 of 2 recorded time(s): the code path consumed less than the "
        "recording",
    ]


def test_a_replay_that_consumes_more_than_was_recorded_fails_the_test(engine: Sandbox) -> None:
    journal, _ = recorded(engine)
    engine.enter(replay(journal))
    try:
        for _ in range(3):
            time.time()
        with pytest.raises(hermetic.ReplayExhausted):
            time.time()
    finally:
        engine.exit()
    engine.enter(replay(journal, strict_replay=False))
    try:
        for _ in range(4):
            time.time()  # the fourth comes from the seed
    finally:
        assert engine.exit().warnings[-1].startswith("replay drew urandom 0 of 2")


def test_a_replay_whose_urandom_sizes_differ_fails_clearly(engine: Sandbox) -> None:
    journal, _ = recorded(engine)
    engine.enter(replay(journal))
    try:
        with pytest.raises(hermetic.ReplayMismatch, match="asked for 8 byte"):
            os.urandom(8)
    finally:
        engine.exit()


def test_an_overflowed_source_replays_its_tail_from_the_seed(engine: Sandbox) -> None:
    journal, seen = recorded(engine)
    clipped = Journal(**{**journal.__dict__, "events": {"time": [seen[0]]}, "overflow": ("time",)})
    engine.enter(replay(clipped))
    try:
        assert time.time() == seen[0]
        assert time.time() == 1_700_000_000.0  # the seed's frozen clock goes on
    finally:
        engine.exit()
