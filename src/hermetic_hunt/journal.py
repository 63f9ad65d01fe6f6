"""The journal of one attempt: what it consumed from each nondeterministic source.

A journal is JSON, gzip-compressed in the database (``journals.data``); its
fields and limits are in docs/sandbox.md, 'Journals and counts'.

Seeded journals are explanations (the values are re-derivable from the
seed); record journals are reproducers (real values, fed back on replay).
Journals contain recorded entropy (verbatim ``os.urandom`` draws): treat a
database holding them like a log file.

Journals come out of databases that may come from elsewhere, so
:func:`decode` validates everything and bounds sizes; any problem is a
:class:`~hermetic_hunt.errors.BadJournal` naming what is wrong.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermetic_hunt.errors import BadJournal
from hermetic_hunt.untrusted import depth, is_number

FORMAT = "hermetic-hunt-journal"
VERSION = 1
#: Bounds on what we accept from a database (bigger journals are refused).
MAX_COMPRESSED = 16 * 1024 * 1024
MAX_DECOMPRESSED = 64 * 1024 * 1024
MAX_EVENTS_PER_SOURCE = 100_000
#: Deepest JSON nesting a valid journal has (fingerprint lists: 3).
MAX_DEPTH = 4
SOURCES = ("time", "monotonic", "perf_counter", "sleep", "urandom")
_MODES = ("seeded", "record")
_MAX_SEED = (1 << 63) - 1
#: Epoch seconds a datetime can represent (years 1..9999).
INSTANTS = (-62_135_596_800.0, 253_402_300_799.0)


@dataclass(frozen=True)
class Journal:
    test: str
    mode: str
    seed: int | None
    now: float | None
    random_seed: str | None
    config: dict[str, Any]
    events: dict[str, list[Any]]
    counts: dict[str, int]
    overflow: tuple[str, ...] = ()
    threads: int = 1
    fingerprint: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **vars(self), "overflow": list(self.overflow)}


def encode(journal: Journal) -> bytes:
    payload = json.dumps(journal.as_dict(), separators=(",", ":"), allow_nan=False)
    return gzip.compress(payload.encode(), compresslevel=6, mtime=0)


def _bytes_of(data: object, where: str) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):  # JSON text someone stored as TEXT
        return data.encode("utf-8", "surrogatepass")
    raise BadJournal(f"{where}: journal is stored as {type(data).__name__}, expected gzip bytes")


def _inflate(data: bytes, where: str) -> bytes:
    if len(data) > MAX_COMPRESSED:
        raise BadJournal(
            f"{where}: journal is {len(data):,} bytes, over the {MAX_COMPRESSED:,} limit"
        )
    if data[:2] != b"\x1f\x8b":
        return data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_DECOMPRESSED + 1)
    except zlib.error as exc:
        raise BadJournal(f"{where}: journal is not valid gzip ({exc})") from None
    if len(out) > MAX_DECOMPRESSED:
        raise BadJournal(f"{where}: journal expands past {MAX_DECOMPRESSED:,} bytes; refusing it")
    _require(inflater.eof, where, "journal is truncated (gzip stream ends early)")
    if inflater.unused_data:
        raise BadJournal(
            f"{where}: journal has {len(inflater.unused_data):,} byte(s) after its gzip stream"
        )
    return out


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _require(condition: bool, where: str, what: str) -> None:
    if not condition:
        raise BadJournal(f"{where}: {what}")


def _parse(data: object, where: str) -> dict[str, Any]:
    raw = _inflate(_bytes_of(data, where), where)
    try:
        obj = json.loads(raw)
    except RecursionError:
        raise BadJournal(f"{where}: journal is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadJournal(f"{where}: journal is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise BadJournal(f"{where}: journal is not a JSON object")
    _require(
        depth(obj, MAX_DEPTH) <= MAX_DEPTH,
        where,
        f"journal is nested deeper than a journal is ({MAX_DEPTH} levels)",
    )
    _require(obj.get("format") == FORMAT, where, "not a hermetic-hunt journal (format field)")
    _require(
        obj.get("version") == VERSION,
        where,
        f"journal version {obj.get('version')!r} is not supported (this version reads {VERSION})",
    )
    return obj


def _events(obj: dict[str, Any], where: str) -> dict[str, list[Any]]:
    events = obj.get("events", {})
    _require(isinstance(events, dict), where, "'events' must be an object")
    for source, values in events.items():
        _require(source in SOURCES, where, f"unknown event source {source!r}")
        _require(isinstance(values, list), where, f"events of {source!r} must be a list")
        _require(
            len(values) <= MAX_EVENTS_PER_SOURCE,
            where,
            f"{len(values):,} events for {source!r} exceed the {MAX_EVENTS_PER_SOURCE:,} limit",
        )
        if source == "urandom":
            _require(
                all(isinstance(v, str) and len(v) % 2 == 0 and _is_hex(v) for v in values),
                where,
                "urandom events must be hex strings",
            )
        else:
            _require(all(is_number(v) for v in values), where, f"{source!r} events must be numbers")
    return dict(events)


def _scalars(value: Any) -> bool:
    if isinstance(value, list):
        return all(_scalars(v) and not isinstance(v, list) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


#: The fields :func:`decode` checks one by one: (name, default, valid, what is wrong).
_FIELDS: tuple[tuple[str, Any, Callable[[Any], bool], str], ...] = (
    ("seed", None, lambda seed: seed is None or (_count(seed) and seed <= _MAX_SEED),
     "'seed' must be an integer between 0 and 2**63-1, got {!r}"),
    ("now", None, lambda now: now is None
     or (is_number(now) and INSTANTS[0] <= now <= INSTANTS[1]),
     "'now' must be epoch seconds within years 1-9999, got {!r}"),
    ("random_seed", None, lambda seed: seed is None
     or (isinstance(seed, str) and 0 < len(seed) <= 64 and _is_hex(seed)),
     "'random_seed' must be hex text (at most 64 digits)"),
    ("config", {}, lambda config: isinstance(config, dict)
     and all(_scalars(v) and not isinstance(v, list) for v in config.values()),
     "'config' must be an object of plain values"),
    ("counts", {}, lambda counts: isinstance(counts, dict) and all(map(_count, counts.values())),
     "'counts' must map sources to non-negative integers"),
    ("overflow", [], lambda overflow: isinstance(overflow, list)
     and all(s in SOURCES for s in overflow),
     "'overflow' must be a list of source names"),
    ("threads", 1, _count, "'threads' must be a count, got {!r}"),
    ("fingerprint", {}, lambda fingerprint: isinstance(fingerprint, dict)
     and all(map(_scalars, fingerprint.values())),
     "'fingerprint' must be an object of plain values or lists of them"),
)  # fmt: skip


def decode(data: object, *, where: str, expect_test: str | None = None) -> Journal:
    """Validate and parse a stored journal; ``where`` names it in errors.

    ``expect_test`` is the nodeid the journal must have been recorded for
    (compared exactly). Every problem is one :class:`BadJournal` line.
    """
    obj = _parse(data, where)
    test = obj.get("test")
    _require(isinstance(test, str) and test != "", where, f"'test' must be a nodeid, got {test!r}")
    if expect_test is not None and test != expect_test:
        raise BadJournal(f"{where}: journal was recorded for {test!r}, not {expect_test!r}")
    mode = obj.get("mode")
    _require(mode in _MODES, where, f"'mode' must be one of {', '.join(_MODES)}, got {mode!r}")
    values: dict[str, Any] = {}
    for name, default, valid, what in _FIELDS:
        value = values[name] = obj.get(name, default)
        _require(valid(value), where, what.format(value))
    now, overflow = values.pop("now"), values["overflow"]
    values.update(test=test, mode=mode, events=_events(obj, where), overflow=tuple(overflow))
    return Journal(**values, now=None if now is None else float(now))


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text) if len(text) % 2 == 0 else int(text, 16)
    except ValueError:
        return False
    return text.isascii() and "-" not in text and "_" not in text and " " not in text


#: How compare() words each source: (verb, unit); the default is ("read", "time(s)").
_WORDING = {"sleep": ("slept", "time(s)"), "urandom": ("drew", "time(s)"),
            "random": ("took", "word(s)")}  # fmt: skip


def _counts(side: Journal | dict[str, Any]) -> dict[str, int]:
    counts = side.counts if isinstance(side, Journal) else side
    return {k: v for k, v in counts.items() if type(v) is int}


def compare(failing: Journal | dict[str, Any], passing: Journal | dict[str, Any]) -> list[str]:
    """Source-by-source differences between two attempts, as sentences.

    Accepts full journals or bare per-source counts (what every attempt
    stores), e.g. ``time: read 3 time(s) in the failing attempt, 5 in the
    passing one`` and ``urandom: first different value at draw 2 (...)``.
    Values are compared only when both sides kept them.
    """
    fail_counts, pass_counts = _counts(failing), _counts(passing)
    lines = []
    for source in sorted(set(fail_counts) | set(pass_counts)):
        a, b = fail_counts.get(source, 0), pass_counts.get(source, 0)
        if a != b:
            verb, unit = _WORDING.get(source, ("read", "time(s)"))
            lines.append(
                f"{source}: {verb} {a} {unit} in the failing attempt, {b} in the passing one"
            )
    if isinstance(failing, Journal) and isinstance(passing, Journal):
        for source in SOURCES:
            left, right = failing.events.get(source, []), passing.events.get(source, [])
            for index, (x, y) in enumerate(zip(left, right, strict=False), start=1):
                if x != y:
                    lines.append(
                        f"{source}: first different value at draw {index} ({x!r} vs {y!r})"
                    )
                    break
    return lines
