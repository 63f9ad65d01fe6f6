"""Seeds, start times and hash seeds, derived from stable digests.

Everything here is a pure function of its arguments (BLAKE2b digests, never
``hash()`` or an unseeded ``random``), so any attempt's seed and virtual start
time can be re-derived from the run's base seed, the test's nodeid, the round
and the execution number -- on the controller, on a worker, or years later
from the database.

Seeds are 63-bit so they fit SQLite's signed 64-bit INTEGER.
"""

from __future__ import annotations

import calendar
import hashlib
import os
from datetime import datetime, timedelta, timezone

MAX_SEED = (1 << 63) - 1
#: Virtual start times are drawn from [2001-01-01, 2037-12-31]: wide enough for
#: leap years and DST rule changes, short of the 2038 32-bit time_t edge.
FIRST_YEAR = 2001
LAST_YEAR = 2037


def digest_int(*parts: object) -> int:
    """A 64-bit unsigned integer digest of ``parts`` (stable across runs)."""
    text = "\x1f".join(str(part) for part in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def new_base_seed() -> int:
    """A fresh 32-bit base seed from real entropy (short enough to type)."""
    return int.from_bytes(os.urandom(4), "big")


def attempt_seed(base_seed: int, nodeid: str, round_no: int, execution: int = 1) -> int:
    """The sandbox seed of one execution of ``nodeid`` in ``round_no``.

    ``execution`` counts executions within the attempt (1, then 2, 3... for
    pytest-rerunfailures reruns), so a rerun explores a new seed.
    """
    return digest_int("attempt", base_seed, nodeid, round_no, execution) & MAX_SEED


def round_key(base_seed: int, round_no: int, *parts: object) -> int:
    """Sort key for shuffling within one round (see :mod:`schedule`)."""
    return digest_int("order", base_seed, round_no, *parts)


def worker_hash_seed(base_seed: int, worker_slot: int, incarnation: int = 0) -> int:
    """PYTHONHASHSEED for a hunt worker: distinct per worker, re-derivable."""
    return digest_int("hashseed", base_seed, worker_slot, incarnation) % 4294967296


def probe_hash_seed(base: int, index: int) -> int:
    """The ``index``-th alternative PYTHONHASHSEED an isolation probe tries."""
    return digest_int("probe-hashseed", base, index) % 4294967296


class Stream:
    """A tiny deterministic number stream over BLAKE2b (no ``random`` module).

    One 64-byte digest gives eight 64-bit draws (a start time needs at most
    six); further blocks are digests of (key, block number).
    """

    def __init__(self, *key: object) -> None:
        self._key = "\x1f".join(str(part) for part in key).encode("utf-8", "surrogatepass")
        self._block = 0
        self._words: list[int] = []

    def _next(self) -> int:
        if not self._words:
            data = hashlib.blake2b(
                self._key + b"\x1f" + str(self._block).encode(), digest_size=64
            ).digest()
            self._block += 1
            self._words = [int.from_bytes(data[i : i + 8], "big") for i in range(56, -8, -8)]
        return self._words.pop()

    def below(self, n: int) -> int:
        return self._next() % n

    def unit(self) -> float:
        return self._next() / 2**64


_Stream = Stream


def _last_day(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> datetime:
    """The n-th (1-based; -1 = last) ``weekday`` (Mon=0) of a month, at 00:00 UTC."""
    if n > 0:
        first = datetime(year, month, 1, tzinfo=timezone.utc)
        shift = (weekday - first.weekday()) % 7
        return first + timedelta(days=shift + 7 * (n - 1))
    last = datetime(year, month, _last_day(year, month), tzinfo=timezone.utc)
    return last - timedelta(days=(last.weekday() - weekday) % 7)


def _leap_years() -> list[int]:
    return [y for y in range(FIRST_YEAR, LAST_YEAR + 1) if calendar.isleap(y)]


#: Kinds of instants a virtual start time is drawn from, with weights. Date
#: code breaks at these edges; plain instants keep the draw honest.
EDGE_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("month-end", 16),
    ("year-end", 8),
    ("leap-day", 8),
    ("midnight", 12),
    ("dst", 10),
    ("weekend", 12),
    ("uniform", 34),
)
#: Percent of start instants put just before a second boundary (1-20 ms
#: before it), and just before a minute boundary (second 59, 1-20 ms
#: before the minute), whatever their date edge: code comparing
#: ``int(time.time())`` or ``now().minute`` before and after a short call
#: breaks there.
SECOND_EDGE = 30
MINUTE_EDGE = 10


def attempt_now(seed: int) -> float:
    """The virtual start time (UTC epoch seconds) of the attempt with ``seed``.

    Two thirds of the draws land on instants where date code breaks: the last
    day of a month, New Year's Eve, Feb 29, a second before midnight, a US or
    EU daylight-saving change, a weekend; the rest are uniform over
    2001-2037. Independently, 30% start 1-20 ms before a whole second and
    10% 1-20 ms before a whole minute (:data:`SECOND_EDGE`,
    :data:`MINUTE_EDGE`). Always a whole number of milliseconds.
    """
    return now_for(seed)[1]


def round_now(base_seed: int, round_no: int, slot: int) -> float:
    """Where round ``round_no``'s virtual clock starts on worker ``slot``.

    Drawn like :func:`attempt_now` (weighted toward the instants where date
    code breaks) from the round's own key: every attempt of the round then
    runs on one continuous timeline from there.
    """
    return now_for(digest_int("round", base_seed, round_no, slot) & MAX_SEED)[1]


def now_for(seed: int) -> tuple[str, float]:
    """``(edge kind, epoch seconds)`` for ``seed``; see :func:`attempt_now`."""
    stream = _Stream("now", seed)
    total = sum(weight for _, weight in EDGE_WEIGHTS)
    pick = stream.below(total)
    kind = EDGE_WEIGHTS[-1][0]
    for name, weight in EDGE_WEIGHTS:
        if pick < weight:
            kind = name
            break
        pick -= weight
    year = FIRST_YEAR + stream.below(LAST_YEAR - FIRST_YEAR + 1)
    month = 1 + stream.below(12)
    if kind == "month-end":
        day = datetime(year, month, _last_day(year, month), tzinfo=timezone.utc)
        instant = day + timedelta(seconds=12 * 3600 + stream.below(12 * 3600))
    elif kind == "year-end":
        instant = datetime(year, 12, 31, 23, 59, tzinfo=timezone.utc) + timedelta(
            seconds=stream.below(60)
        )
    elif kind == "leap-day":
        leap = _leap_years()
        leap_year = leap[stream.below(len(leap))]
        start = datetime(leap_year, 2, 28, 12, tzinfo=timezone.utc)
        instant = start + timedelta(seconds=stream.below(36 * 3600))
    elif kind == "midnight":
        day = datetime(year, month, 1 + stream.below(_last_day(year, month)), tzinfo=timezone.utc)
        instant = day + timedelta(days=1) - timedelta(seconds=1 + stream.below(3))
    elif kind == "dst":
        # US: second Sunday of March / first Sunday of November, 2:00 local
        # (~07:00-10:00 UTC); EU: last Sunday of March / October, 01:00 UTC.
        rule = stream.below(4)
        if rule == 0:
            base = _nth_weekday(year, 3, 6, 2) + timedelta(hours=7)
        elif rule == 1:
            base = _nth_weekday(year, 11, 6, 1) + timedelta(hours=6)
        elif rule == 2:
            base = _nth_weekday(year, 3, 6, -1) + timedelta(hours=1)
        else:
            base = _nth_weekday(year, 10, 6, -1) + timedelta(hours=1)
        instant = base + timedelta(seconds=stream.below(4 * 3600) - 2 * 3600)
    elif kind == "weekend":
        saturday = _nth_weekday(year, month, 5, 1 + stream.below(4))
        instant = saturday + timedelta(seconds=stream.below(2 * 86400))
    else:
        first = datetime(FIRST_YEAR, 1, 1, tzinfo=timezone.utc)
        span = datetime(LAST_YEAR, 12, 31, tzinfo=timezone.utc) - first
        instant = first + span * stream.unit()
    edge = stream.below(100)
    millis = stream.below(1000)
    if edge < SECOND_EDGE + MINUTE_EDGE:
        millis = 999 - millis % 20  # 1-20 ms before the next whole second
        if edge >= SECOND_EDGE:
            instant = instant.replace(second=59)  # ... and the next minute
    epoch = instant.timestamp()
    return kind, float(int(epoch)) + millis / 1000.0


#: Switch intervals a ``switch`` round draws from (log-uniform), in seconds:
#: CPython's default is 0.005; pytest-run-parallel uses 1e-6.
SWITCH_RANGE = (1e-6, 1e-4)


def switch_interval_for(seed: int) -> float:
    """The ``sys.setswitchinterval`` of the attempt with ``seed`` in a ``switch`` round.

    Log-uniform over :data:`SWITCH_RANGE`, two significant digits (stored
    with the attempt; a replay sets it again).
    """
    low, high = SWITCH_RANGE
    fraction = Stream("switch", seed).unit()
    return float(f"{low * (high / low) ** fraction:.2g}")


def iso(epoch: float) -> str:
    """ISO-8601 UTC text of an epoch, for humans and the database views."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")
