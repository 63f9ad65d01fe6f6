"""The journal of one attempt: what it consumed from each nondeterministic source.

A journal is JSON, gzip-compressed in the database (``journals.data``)::

    {"format": "hermetic-hunt-journal", "version": 1,
     "test": "tests/test_x.py::test_y", "mode": "seeded" | "record",
     "seed": 123, "now": 1700000000.0, "random_seed": "9f0c..." | null,
     "config": {"clock": "virtual", "rng": "all", "tick": 1e-06},
     "events": {"time": [...], "monotonic": [...], "perf_counter": [...],
                "sleep": [...], "urandom": ["hex", ...]},
     "counts": {"time": 3, ...}, "overflow": [], "threads": 1,
     "fingerprint": {"python": "3.11.7", "platform": "...", "tz": null, ...}}

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
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

from hermetic_hunt.errors import BadJournal

FORMAT = "hermetic-hunt-journal"
VERSION = 1
#: Bounds on what we accept from a database (bigger journals are refused).
MAX_COMPRESSED = 16 * 1024 * 1024
MAX_DECOMPRESSED = 64 * 1024 * 1024
MAX_EVENTS_PER_SOURCE = 100_000
CLOCK_EVENTS = ("time", "monotonic", "perf_counter", "sleep")
SOURCES = (*CLOCK_EVENTS, "urandom")
_MODES = ("seeded", "record")


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
        return {
            "format": FORMAT,
            "version": VERSION,
            "test": self.test,
            "mode": self.mode,
            "seed": self.seed,
            "now": self.now,
            "random_seed": self.random_seed,
            "config": self.config,
            "events": self.events,
            "counts": self.counts,
            "overflow": list(self.overflow),
            "threads": self.threads,
            "fingerprint": self.fingerprint,
        }


def encode(journal: Journal) -> bytes:
    payload = json.dumps(journal.as_dict(), separators=(",", ":"), allow_nan=False)
    return gzip.compress(payload.encode(), compresslevel=6, mtime=0)


def _inflate(data: bytes, where: str) -> bytes:
    if len(data) > MAX_COMPRESSED:
        raise BadJournal(f"{where}: journal is {len(data):,} bytes, over the {MAX_COMPRESSED:,} limit")
    if data[:2] != b"\x1f\x8b":
        return data
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_DECOMPRESSED + 1)
    except zlib.error as exc:
        raise BadJournal(f"{where}: journal is not valid gzip ({exc})") from None
    if len(out) > MAX_DECOMPRESSED:
        raise BadJournal(f"{where}: journal expands past {MAX_DECOMPRESSED:,} bytes; refusing it")
    if not inflater.eof:
        raise BadJournal(f"{where}: journal is truncated (gzip stream ends early)")
    return out


def _number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _require(condition: bool, where: str, what: str) -> None:
    if not condition:
        raise BadJournal(f"{where}: {what}")


def decode(data: bytes, *, where: str, expect_test: str | None = None) -> Journal:
    """Validate and parse a stored journal; ``where`` names it in errors."""
    raw = _inflate(data, where)
    try:
        obj = json.loads(raw)
    except RecursionError:
        raise BadJournal(f"{where}: journal is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadJournal(f"{where}: journal is not JSON ({exc})") from None
    _require(isinstance(obj, dict), where, "journal is not a JSON object")
    _require(obj.get("format") == FORMAT, where, "not a hermetic-hunt journal (format field)")
    _require(
        obj.get("version") == VERSION,
        where,
        f"journal version {obj.get('version')!r} is not supported (this version reads {VERSION})",
    )
    test = obj.get("test")
    _require(isinstance(test, str) and test != "", where, "'test' must be a nodeid")
    if expect_test is not None and test != expect_test:
        raise BadJournal(f"{where}: journal was recorded for {test!r}, not {expect_test!r}")
    mode = obj.get("mode")
    _require(mode in _MODES, where, f"'mode' must be one of {', '.join(_MODES)}")
    seed = obj.get("seed")
    _require(
        seed is None or (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0),
        where,
        "'seed' must be a non-negative integer",
    )
    now = obj.get("now")
    _require(now is None or _number(now), where, "'now' must be a number")
    random_seed = obj.get("random_seed")
    _require(
        random_seed is None
        or (isinstance(random_seed, str) and len(random_seed) <= 64 and _is_hex(random_seed)),
        where,
        "'random_seed' must be hex text",
    )
    config = obj.get("config", {})
    _require(isinstance(config, dict), where, "'config' must be an object")
    for key, value in config.items():
        _require(
            isinstance(key, str) and (value is None or isinstance(value, (str, int, float, bool))),
            where,
            "'config' values must be plain scalars",
        )
    events = obj.get("events", {})
    _require(isinstance(events, dict), where, "'events' must be an object")
    clean: dict[str, list[Any]] = {}
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
            _require(all(_number(v) for v in values), where, f"{source!r} events must be numbers")
        clean[source] = values
    counts = obj.get("counts", {})
    _require(
        isinstance(counts, dict)
        and all(isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in counts.items()),
        where,
        "'counts' must map sources to non-negative integers",
    )
    overflow = obj.get("overflow", [])
    _require(
        isinstance(overflow, list) and all(isinstance(s, str) for s in overflow),
        where,
        "'overflow' must be a list of source names",
    )
    threads = obj.get("threads", 1)
    _require(isinstance(threads, int) and threads >= 0, where, "'threads' must be a count")
    fingerprint = obj.get("fingerprint", {})
    _require(isinstance(fingerprint, dict), where, "'fingerprint' must be an object")
    return Journal(
        test=test,
        mode=mode,
        seed=seed,
        now=float(now) if now is not None else None,
        random_seed=random_seed,
        config=config,
        events=clean,
        counts=counts,
        overflow=tuple(overflow),
        threads=threads,
        fingerprint={k: v for k, v in fingerprint.items() if isinstance(k, str)},
    )


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text) if len(text) % 2 == 0 else int(text, 16)
    except ValueError:
        return False
    return True


def compare(failing: Journal | dict[str, int], passing: Journal | dict[str, int]) -> list[str]:
    """Source-by-source differences between two attempts, as sentences.

    Accepts full journals or bare per-source counts (what every attempt
    stores). Values are compared only when both sides kept them.
    """
    fail_counts = failing.counts if isinstance(failing, Journal) else failing
    pass_counts = passing.counts if isinstance(passing, Journal) else passing
    lines = []
    for source in sorted(set(fail_counts) | set(pass_counts)):
        a, b = fail_counts.get(source, 0), pass_counts.get(source, 0)
        if a != b:
            lines.append(f"{source}: read {a} time(s) in the failing attempt, {b} in the passing one")
    if isinstance(failing, Journal) and isinstance(passing, Journal):
        for source in SOURCES:
            left, right = failing.events.get(source, []), passing.events.get(source, [])
            for index, (x, y) in enumerate(zip(left, right), start=1):
                if x != y:
                    lines.append(f"{source}: first different value at draw {index} ({x!r} vs {y!r})")
                    break
    return lines
