"""Clock sources behind the patched ``time`` functions, and the patch itself.

* :class:`SeededClock` -- wall time frozen at the attempt's ``now`` (moved only
  by ``sleep``/``advance``/``set``); ``monotonic``/``perf_counter`` advance by
  ``tick`` per reading so elapsed-time code makes progress.
* :class:`RecordClock` -- real time flows through (``sleep`` really sleeps);
  every reading is journaled.
* :class:`ReplayClock` -- readings come back from a journal, in order.

Every source counts its readings (the per-source consumption stored with
each attempt) and, when asked, keeps a trace of the values it handed out.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable
from typing import Any

from hermetic_hunt._sandbox.patches import Patches

REAL_TIME = _time.time
REAL_MONOTONIC = _time.monotonic
REAL_PERF_COUNTER = _time.perf_counter
REAL_SLEEP = _time.sleep
REAL_LOCALTIME = _time.localtime
REAL_GMTIME = _time.gmtime
REAL_CTIME = _time.ctime
REAL_STRFTIME = _time.strftime
REAL_ASCTIME = _time.asctime

_MONO_BASE = 10_000.0
_PERF_BASE = 20_000.0
#: Readings kept per source in a journal; beyond it the source is marked
#: as overflowed (counts stay exact).
TRACE_CAP = 20_000
CLOCK_SOURCES = ("time", "monotonic", "perf_counter")


class Trace:
    """Per-source counts (always) and values (when ``keep``), thread-aware."""

    __slots__ = ("counts", "keep", "overflow", "threads", "values")

    def __init__(self, keep: bool) -> None:
        self.counts: dict[str, int] = {}
        self.values: dict[str, list[Any]] = {}
        self.keep = keep
        self.overflow: set[str] = set()
        self.threads: set[int] = set()

    def note(self, source: str, value: Any) -> None:
        self.counts[source] = self.counts.get(source, 0) + 1
        self.threads.add(threading.get_ident())
        if self.keep:
            queue = self.values.setdefault(source, [])
            if len(queue) < TRACE_CAP:
                queue.append(value)
            else:
                self.overflow.add(source)


class ClockSource:
    """What the patched functions call; see the module docstring."""

    trace: Trace

    def wall(self) -> float:
        raise NotImplementedError

    def monotonic(self) -> float:
        raise NotImplementedError

    def perf_counter(self) -> float:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        raise NotImplementedError

    def set_wall(self, epoch: float) -> None:
        raise NotImplementedError

    def peek_wall(self) -> float:
        return self.wall()


class SeededClock(ClockSource):
    def __init__(
        self,
        now: float,
        tick: float,
        spin_limit: int,
        trace: Trace,
        spin_error: Callable[[int], Exception],
    ) -> None:
        self._start = now
        self._offset = 0.0
        self._ticks = 0.0
        self._tick = tick
        self._reads = 0
        self._spin_limit = spin_limit
        self._spin_error = spin_error
        self._lock = threading.Lock()
        self.trace = trace

    def _read(self) -> None:
        self._reads += 1
        if self._spin_limit and self._reads > self._spin_limit:
            raise self._spin_error(self._reads)

    def wall(self) -> float:
        with self._lock:
            self._read()
            value = self._start + self._offset
        self.trace.note("time", value)
        return value

    def monotonic(self) -> float:
        with self._lock:
            self._read()
            value = _MONO_BASE + self._offset + self._ticks
            self._ticks += self._tick
        self.trace.note("monotonic", value)
        return value

    def perf_counter(self) -> float:
        with self._lock:
            self._read()
            value = _PERF_BASE + self._offset + self._ticks
            self._ticks += self._tick
        self.trace.note("perf_counter", value)
        return value

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.trace.note("sleep", seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("cannot move the clock backwards with advance()")
        with self._lock:
            self._offset += seconds
            self._reads = 0

    def set_wall(self, epoch: float) -> None:
        with self._lock:
            self._start = epoch - self._offset
            self._reads = 0

    def peek_wall(self) -> float:
        return self._start + self._offset


class RecordClock(ClockSource):
    """Real time; ``advance``/``set`` shift it so the clock API keeps working."""

    def __init__(self, trace: Trace) -> None:
        self._offset = 0.0
        self._wall_shift = 0.0
        self.trace = trace

    def wall(self) -> float:
        value = REAL_TIME() + self._offset + self._wall_shift
        self.trace.note("time", value)
        return value

    def monotonic(self) -> float:
        value = REAL_MONOTONIC() + self._offset
        self.trace.note("monotonic", value)
        return value

    def perf_counter(self) -> float:
        value = REAL_PERF_COUNTER() + self._offset
        self.trace.note("perf_counter", value)
        return value

    def sleep(self, seconds: float) -> None:
        self.trace.note("sleep", seconds)
        REAL_SLEEP(seconds)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("cannot move the clock backwards with advance()")
        self._offset += seconds

    def set_wall(self, epoch: float) -> None:
        self._wall_shift = epoch - (REAL_TIME() + self._offset)

    def peek_wall(self) -> float:
        return REAL_TIME() + self._offset + self._wall_shift


class ReplayClock(ClockSource):
    """Feeds journaled readings back; ``exhausted(source, n)`` builds the error."""

    def __init__(
        self,
        queues: dict[str, list[float]],
        fallback: SeededClock,
        strict: bool,
        exhausted: Callable[[str, int], Exception],
        trace: Trace,
    ) -> None:
        self._queues = {name: list(values) for name, values in queues.items()}
        self._used = dict.fromkeys(self._queues, 0)
        self._fallback = fallback
        self._strict = strict
        self._exhausted = exhausted
        self._lock = threading.Lock()
        self.trace = trace
        self.fell_back: set[str] = set()

    def _next(self, source: str, fallback: Callable[[], float]) -> float:
        with self._lock:
            queue = self._queues.get(source, [])
            used = self._used.get(source, 0)
            if used < len(queue):
                self._used[source] = used + 1
                value = queue[used]
                self.trace.note(source, value)
                return value
        if self._strict:
            raise self._exhausted(source, used)
        self.fell_back.add(source)
        return fallback()

    def wall(self) -> float:
        return self._next("time", self._fallback.wall)

    def monotonic(self) -> float:
        return self._next("monotonic", self._fallback.monotonic)

    def perf_counter(self) -> float:
        return self._next("perf_counter", self._fallback.perf_counter)

    def sleep(self, seconds: float) -> None:
        self.trace.note("sleep", seconds)

    def advance(self, seconds: float) -> None:
        """Recorded readings already include the recorded run's advances."""

    def set_wall(self, epoch: float) -> None:
        """Recorded readings already include the recorded run's jumps."""

    def unconsumed(self) -> dict[str, tuple[int, int]]:
        """``{source: (used, recorded)}`` for sources read fewer times than recorded."""
        return {
            name: (self._used.get(name, 0), len(queue))
            for name, queue in self._queues.items()
            if self._used.get(name, 0) < len(queue)
        }


def install_time(patches: Patches, source: ClockSource) -> None:
    """Point the ``time`` module's clock functions at ``source``."""
    mod = _time

    def localtime(secs: float | None = None) -> _time.struct_time:
        return REAL_LOCALTIME(source.wall() if secs is None else secs)

    def gmtime(secs: float | None = None) -> _time.struct_time:
        return REAL_GMTIME(source.wall() if secs is None else secs)

    def ctime(secs: float | None = None) -> str:
        return REAL_CTIME(source.wall() if secs is None else secs)

    omitted: Any = object()

    def strftime(fmt: str, t: Any = omitted) -> str:
        return REAL_STRFTIME(fmt, REAL_LOCALTIME(source.wall()) if t is omitted else t)

    def asctime(t: Any = omitted) -> str:
        return REAL_ASCTIME(REAL_LOCALTIME(source.wall()) if t is omitted else t)

    patches.set(mod, "time", source.wall)
    patches.set(mod, "time_ns", lambda: int(source.wall() * 1e9))
    patches.set(mod, "monotonic", source.monotonic)
    patches.set(mod, "monotonic_ns", lambda: int(source.monotonic() * 1e9))
    patches.set(mod, "perf_counter", source.perf_counter)
    patches.set(mod, "perf_counter_ns", lambda: int(source.perf_counter() * 1e9))
    patches.set(mod, "sleep", source.sleep)
    patches.set(mod, "localtime", localtime)
    patches.set(mod, "gmtime", gmtime)
    patches.set(mod, "ctime", ctime)
    patches.set(mod, "strftime", strftime)
    patches.set(mod, "asctime", asctime)
