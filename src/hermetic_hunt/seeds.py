"""Seeds, start times and hash seeds, derived from stable digests.

Everything here is a pure function of its arguments (BLAKE2b digests, never
``hash()`` or an unseeded ``random``), so any attempt's seed and virtual start
time can be re-derived from the run's base seed, the test's nodeid, the round
and the execution number -- on the controller, on a worker, or years later
from the database.

Seeds are 63-bit so they fit SQLite's signed 64-bit INTEGER.
"""

from __future__ import annotations

import bisect
import calendar
import hashlib
import itertools
import math
import os
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

MAX_SEED = (1 << 63) - 1
#: How far ahead of today start times reach by default (``--hermetic-hunt-horizon``):
#: four years hold a Feb 29, every month end and DST change of each rule.
DEFAULT_HORIZON_DAYS = 4 * 365 + 1
#: The last second a signed 32-bit ``time_t`` holds (2038-01-19 03:14:07 UTC).
Y2038 = float(2**31 - 1)
_DAY = 86400.0


@dataclass(frozen=True)
class Dates:
    """The instants a hunt's start times are drawn from: ``[start, start + days]``.

    ``start`` is the run's today (fixed when the run starts and stored with
    its settings, so a hunt is re-derivable), or the commit date for an old
    checkout. Time only moves forward: a failure before the real today is
    no CI risk, so nothing is drawn before ``start``.
    """

    start: float
    days: int = DEFAULT_HORIZON_DAYS

    @property
    def end(self) -> float:
        return self.start + self.days * _DAY

    def __contains__(self, epoch: object) -> bool:
        return isinstance(epoch, (int, float)) and self.start <= epoch <= self.end

    @classmethod
    def from_now(cls, days: int = DEFAULT_HORIZON_DAYS) -> Dates:
        """From the real clock's now (whole seconds): only where nothing was stored."""
        return cls(float(int(time.time())), days)


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


#: Kinds of instants a virtual start time is drawn from, with weights. Date
#: code breaks at these edges; today and plain instants keep the draw honest.
EDGE_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("today", 10),
    ("month-end", 16),
    ("year-end", 8),
    ("leap-day", 8),
    ("midnight", 12),
    ("dst", 10),
    ("weekend", 12),
    ("y2038", 2),
    ("uniform", 22),
)
#: Percent of start instants put just before a second boundary (1-20 ms
#: before it), and just before a minute boundary (second 59, 1-20 ms
#: before the minute), whatever their date edge: code comparing
#: ``int(time.time())`` or ``now().minute`` before and after a short call
#: breaks there.
SECOND_EDGE = 30
MINUTE_EDGE = 10
#: Draws of an edge kind tried before a start time falls back to a uniform
#: instant of the window (an edge the window does not hold, e.g. 2038).
_TRIES = 8


def attempt_now(seed: int, dates: Dates | None = None) -> float:
    """The virtual start time (UTC epoch seconds) of the attempt with ``seed``.

    Drawn from ``dates`` (None: from the real today on, see
    :meth:`Dates.from_now`). Most draws land on instants where date code
    breaks: the last day of a month, New Year's Eve, Feb 29, a second
    before midnight, a US or EU daylight-saving change, a weekend,
    2038-01-19 (when the window holds it); the rest are today or uniform
    over the window. Independently, 30% start 1-20 ms before a whole second
    and 10% 1-20 ms before a whole minute (:data:`SECOND_EDGE`,
    :data:`MINUTE_EDGE`). Always a whole number of milliseconds, never
    before ``dates.start``.
    """
    return now_for(seed, dates)[1]


def round_now(base_seed: int, round_no: int, slot: int, dates: Dates | None = None) -> float:
    """Where round ``round_no``'s virtual clock starts on worker ``slot``.

    Drawn like :func:`attempt_now` (weighted toward the instants where date
    code breaks, from ``dates.start`` on) from the round's own key: every
    attempt of the round then runs on one continuous timeline from there.
    """
    return now_for(digest_int("round", base_seed, round_no, slot) & MAX_SEED, dates)[1]


def _edge(kind: str, stream: Stream, dates: Dates) -> datetime:
    """One instant of ``kind`` in a year the window touches (maybe outside the window)."""
    first = datetime.fromtimestamp(dates.start, timezone.utc)
    last = datetime.fromtimestamp(dates.end, timezone.utc)
    year = first.year + stream.below(last.year - first.year + 1)
    month = 1 + stream.below(12)
    if kind == "today":
        return first + timedelta(seconds=stream.below(86400))
    if kind == "month-end":
        day = datetime(year, month, _last_day(year, month), tzinfo=timezone.utc)
        return day + timedelta(seconds=12 * 3600 + stream.below(12 * 3600))
    if kind == "year-end":
        return datetime(year, 12, 31, 23, 59, stream.below(60), tzinfo=timezone.utc)
    if kind == "leap-day":
        leap = [y for y in range(first.year, last.year + 1) if calendar.isleap(y)] or [year]
        start = datetime(leap[stream.below(len(leap))], 2, 28, 12, tzinfo=timezone.utc)
        return start + timedelta(seconds=stream.below(36 * 3600))
    if kind == "midnight":
        day = datetime(year, month, 1 + stream.below(_last_day(year, month)), tzinfo=timezone.utc)
        return day + timedelta(days=1) - timedelta(seconds=1 + stream.below(3))
    if kind == "dst":
        # US: second Sunday of March / first Sunday of November, 2:00 local
        # (~07:00-10:00 UTC); EU: last Sunday of March / October, 01:00 UTC.
        # (month, which Sunday, hour UTC) of each rule:
        month, nth, hour = ((3, 2, 7), (11, 1, 6), (3, -1, 1), (10, -1, 1))[stream.below(4)]
        base = _nth_weekday(year, month, 6, nth) + timedelta(hours=hour)
        return base + timedelta(seconds=stream.below(4 * 3600) - 2 * 3600)
    if kind == "weekend":
        saturday = _nth_weekday(year, month, 5, 1 + stream.below(4))
        return saturday + timedelta(seconds=stream.below(2 * 86400))
    if kind == "y2038":
        return datetime.fromtimestamp(Y2038, timezone.utc) - timedelta(seconds=stream.below(3600))
    return datetime.fromtimestamp(dates.start + (dates.end - dates.start) * stream.unit(),
                                  timezone.utc)  # fmt: skip


def now_for(seed: int, dates: Dates | None = None) -> tuple[str, float]:
    """``(edge kind, epoch seconds)`` for ``seed``; see :func:`attempt_now`."""
    window = dates if dates is not None else Dates.from_now()
    stream = Stream("now", seed)
    bounds = list(itertools.accumulate(weight for _, weight in EDGE_WEIGHTS))
    kind = EDGE_WEIGHTS[bisect.bisect_right(bounds, stream.below(bounds[-1]))][0]
    for _ in range(_TRIES):
        instant = _edge(kind, stream, window)
        if instant.timestamp() in window:
            break
    else:
        kind = "uniform"
        instant = _edge(kind, stream, window)
    edge, millis = stream.below(100), stream.below(1000)
    if edge < SECOND_EDGE + MINUTE_EDGE:
        millis = 999 - millis % 20  # 1-20 ms before the next whole second
        if edge >= SECOND_EDGE:
            instant = instant.replace(second=59)  # ... and the next minute
    epoch = float(int(instant.timestamp())) + millis / 1000.0
    # (the second edge can move an instant of the window's first or last
    # second out of it)
    return kind, min(max(epoch, window.start), window.end)


def second_edge(wall: float, seed: int) -> float:
    """Where the attempt with ``seed`` starts in an ``edge`` round: 1-20 ms
    (whole milliseconds, drawn from the seed) before the first whole second
    after ``wall``. Never before ``wall``: the round's clock only moves on.
    Why, in docs/sandbox.md, 'Second edges'.
    """
    before = 1 + Stream("edge", seed).below(20)
    millis = math.ceil(round(wall * 1000, 6))  # the first whole millisecond not before it
    edge = (millis // 1000 + 1) * 1000 - before
    if edge < millis:
        edge += 1000
    return edge / 1000.0


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
