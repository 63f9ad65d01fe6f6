"""Clock sources behind the patched ``time`` functions, and the patch itself.

* :class:`SeededClock` -- virtual time that behaves as a real machine's:
  wall time starts at the attempt's ``now``; every reading of any clock
  (``time``, ``monotonic``, ``perf_counter``) advances all of them by
  ``tick``, so two readings are never equal; ``sleep(d)`` moves the clock by
  ``d`` plus :data:`SLEEP_LATENCY` (a real sleep never ends exactly on
  time), and -- when other threads of the test are alive -- also sleeps
  for real, so they run as they would in CI. Under a noisy clock profile
  (:mod:`hermetic_hunt.sandbox.profiles`) every reading first advances the
  whole clock by a drawn amount and sleeps last longer.
* :class:`RecordClock` -- real time flows through (``sleep`` really sleeps);
  every reading is journaled.
* :class:`ReplayClock` -- readings come back from a journal, in order.

Every source counts its readings (the per-source consumption stored with
each attempt) and, when asked, keeps a trace of the values it handed out.
"""

from __future__ import annotations

import math
import os
import threading
import time as _time_module
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hermetic_hunt.sandbox import filetimes

if TYPE_CHECKING:
    from hermetic_hunt.sandbox.profiles import Noise

REAL_TIME = _time_module.time
REAL_TIME_NS = _time_module.time_ns
REAL_MONOTONIC = _time_module.monotonic
REAL_MONOTONIC_NS = _time_module.monotonic_ns
REAL_PERF_COUNTER = _time_module.perf_counter
REAL_PERF_COUNTER_NS = _time_module.perf_counter_ns
REAL_SLEEP = _time_module.sleep
REAL_LOCALTIME = _time_module.localtime
REAL_GMTIME = _time_module.gmtime
REAL_CTIME = _time_module.ctime
REAL_STRFTIME = _time_module.strftime
REAL_ASCTIME = _time_module.asctime

_MONO_BASE = 10_000.0
#: Seconds a virtual ``sleep(d)`` lasts beyond ``d`` (and beyond its profile's
#: stretch): on a real machine a sleep ends when the scheduler wakes the thread,
#: tens of microseconds after it was due, never exactly on time.
SLEEP_LATENCY = 50e-6
#: Real seconds between two readings beyond which the virtual clock moves by
#: them: the test was blocked in C (a lock's or a database's busy timeout,
#: ``Event.wait``) or computing, and on a real machine that time shows.
#: Shorter gaps are not added, so readings stay a function of the seed.
REAL_GAP = 0.05
_PERF_BASE = 20_000.0
#: Readings kept per source in a journal, and characters of text values
#: (urandom draws, as hex) in all; beyond either the source is marked as
#: overflowed (counts stay exact, a replay takes later values from the seed).
TRACE_CAP = 20_000
TRACE_CHARS = 2 * 1024 * 1024
CLOCK_SOURCES = ("time", "monotonic", "perf_counter")
TIME_NAMESPACE: dict[str, Any] = vars(_time_module)
T = TypeVar("T")


@dataclass(slots=True, eq=False)
class Trace:
    """Per-source counts (always) and values (when ``keep``), thread-aware."""

    keep: bool
    counts: dict[str, int] = field(default_factory=dict)
    values: dict[str, list[Any]] = field(default_factory=dict)
    chars: int = 0
    overflow: set[str] = field(default_factory=set)
    threads: set[int] = field(default_factory=set)

    def note(self, source: str, value: T) -> T:
        """Count a reading of ``source`` (and keep ``value``, while there is room); ``value``."""
        self.counts[source] = self.counts.get(source, 0) + 1
        self.threads.add(threading.get_ident())
        if not self.keep or source in self.overflow:
            return value
        queue = self.values.setdefault(source, [])
        if isinstance(value, str):
            self.chars += len(value)
            if self.chars > TRACE_CHARS:
                self.overflow.add(source)
                return value
        if len(queue) < TRACE_CAP:
            queue.append(value)
        else:
            self.overflow.add(source)
        return value


class ClockSource(Protocol):
    """What the patched functions call; see the module docstring."""

    trace: Trace

    def wall(self) -> float: ...
    def monotonic(self) -> float: ...
    def perf_counter(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    def advance(self, seconds: float) -> None: ...
    def set_wall(self, epoch: float) -> None: ...

    def peek_wall(self) -> float:
        return self.wall()


class SeededClock(ClockSource):
    """Virtual time: wall time starts at ``now``; the monotonic clocks at ``elapsed``.

    A round's attempts share one timeline: each attempt's clock starts where
    the previous one ended (:meth:`end`), so ``monotonic`` never runs
    backwards between two tests of a round and a fixture's reading agrees
    with the tests that use it.

    Time passes as the module docstring says (all sources move together, so
    wall time measured across two readings agrees with ``monotonic``); a wall
    reading is later than the last even where ``tick`` is below an epoch's
    float spacing.

    ``noise`` (a noisy clock profile) moves the one offset that wall time
    and the monotonic clocks share: every source tells the same story.
    """

    def __init__(
        self,
        now: float,
        tick: float,
        spin_limit: int,
        trace: Trace,
        spin_error: Callable[[int], Exception],
        elapsed: float = 0.0,
        noise: Noise | None = None,
    ) -> None:
        self._start = now
        self._offset = 0.0
        self._ticks = elapsed
        self._ticks0 = elapsed
        self._tick = tick
        self._last_wall = -math.inf
        #: The real time of the last reading (None before the first: the time
        #: pytest takes to reach the test is no gap of the test's).
        self._real: float | None = None
        self._reads = 0
        self._spin_limit = spin_limit
        self._spin_error = spin_error
        self._lock = threading.Lock()
        self._noise = noise
        self.trace = trace

    @property
    def stretched(self) -> float:
        """The largest factor a sleep was stretched by (1.0: none)."""
        return self._noise.stretched if self._noise is not None else 1.0

    def _read(self) -> None:
        self._reads += 1
        real, last = REAL_MONOTONIC(), self._real
        self._real = real
        if last is not None and real - last > REAL_GAP:
            self._offset += real - last
        if self._noise is not None:
            self._offset += self._noise.read()
        filetimes.note(REAL_TIME(), self._wall_now())
        if self._spin_limit and self._reads > self._spin_limit:
            raise self._spin_error(self._reads)

    def note_file_times(self) -> None:
        """Where the virtual wall clock stands against the real one (for file times)."""
        with self._lock:
            filetimes.note(REAL_TIME(), self._wall_now())

    def _wall_now(self) -> float:
        return self._start + self._offset + (self._ticks - self._ticks0)

    def wall(self) -> float:
        with self._lock:
            self._read()
            value = self._wall_now()
            if value <= self._last_wall:  # tick below the float spacing at this epoch
                value = math.nextafter(self._last_wall, math.inf)
            self._last_wall = value
            self._ticks += self._tick
        return self.trace.note("time", value)

    def monotonic(self) -> float:
        return self._elapsed("monotonic", _MONO_BASE)

    def perf_counter(self) -> float:
        return self._elapsed("perf_counter", _PERF_BASE)

    def _elapsed(self, source: str, base: float) -> float:
        with self._lock:
            self._read()
            value = base + self._offset + self._ticks
            self._ticks += self._tick
        return self.trace.note(source, value)

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of virtual time, plus a little, as a real sleep does.

        The clock moves to the sleeper's wake-up time: ``seconds`` (times the
        profile's stretch) plus :data:`SLEEP_LATENCY` after the sleep began.
        While threads a test started (or child processes) are alive the sleep
        also lasts its (stretched) duration in real time, so they run meanwhile, and
        sleeps of several threads overlap as real ones do: the clock ends at
        the latest wake-up, not at the sum of the sleeps.
        """
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.trace.note("sleep", seconds)
        lasts = seconds * self.stretch() + SLEEP_LATENCY if seconds else 0.0
        if not others_alive():
            self.advance(lasts)
            return
        with self._lock:
            wake = self._offset + self._ticks + lasts
        REAL_SLEEP(lasts)
        with self._lock:
            self._offset = max(self._offset, wake - self._ticks)
            self._real = REAL_MONOTONIC()  # the real sleep is in ``wake`` already
            self._reads = 0
            filetimes.note(REAL_TIME(), self._wall_now())

    def stretch(self) -> float:
        """The factor the next sleep lasts (1.0 under the exact profile)."""
        if self._noise is None:
            return 1.0
        with self._lock:
            return self._noise.stretch()

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("cannot move the clock backwards with advance()")
        with self._lock:
            self._offset += seconds
            # A loop that waited for real before advancing (asyncio's select)
            # has its wait in ``seconds``: not counted again as a real gap.
            self._real = REAL_MONOTONIC()
            self._reads = 0
            filetimes.note(REAL_TIME(), self._wall_now())

    def set_wall(self, epoch: float) -> None:
        with self._lock:
            self._start = epoch - self._offset - (self._ticks - self._ticks0)
            self._last_wall = -math.inf
            self._reads = 0

    def peek_wall(self) -> float:
        return self._wall_now()

    def peek_all(self) -> tuple[float, float, float]:
        """``(wall, monotonic, perf_counter)`` as the next readings would be, without a tick."""
        with self._lock:
            return (
                self._wall_now(),
                _MONO_BASE + self._offset + self._ticks,
                _PERF_BASE + self._offset + self._ticks,
            )

    def end(self) -> tuple[float, float]:
        """``(wall, elapsed)`` now: where the next attempt's clock starts."""
        with self._lock:
            return self._wall_now(), self._offset + self._ticks


#: Threads alive when this process first entered an attempt: never a test's
#: (a plugin's own, such as pytest-rerunfailures' server). See :func:`threads_alive`.
_baseline: frozenset[threading.Thread] | None = None


def note_baseline() -> None:
    """Remember the threads alive now as the process's own (the first attempt calls it)."""
    global _baseline
    if _baseline is None:
        _baseline = frozenset(threading.enumerate())


def children() -> frozenset[int]:
    """Pids of the children this process's main thread started (Linux; else empty).

    One read of ``/proc/self/task/<pid>/children`` (children started from
    other threads are listed under those threads' tasks: rare in tests, and
    the round's end would still show them as a leak of the thread).
    """
    try:
        with open(f"/proc/self/task/{os.getpid()}/children", "rb") as handle:
            return frozenset(int(pid) for pid in handle.read().split())
    except OSError:
        return frozenset()


def others_alive() -> bool:
    """Does the test run alongside something: a thread it started, or a child process?

    While one is, a virtual sleep also sleeps for real (:meth:`SeededClock.sleep`):
    ``sleep(0.5)  # let the other process settle`` gives it the time.
    """
    return threads_alive() or bool(children())


def threads_alive() -> bool:
    """Is a thread alive that a test (or its fixtures) started (the caller, if it is one)?

    While one is, the test runs concurrently with something: a sleep in the
    test lets that thread run, a sleep in that thread lets the test run.
    """
    baseline = _baseline or frozenset()
    if threading.active_count() <= len(baseline):
        return any(t not in baseline for t in threading.enumerate())
    return True


class ReplayClock(ClockSource):
    """Feeds journaled readings back; ``exhausted(source, n)`` builds the error."""

    def __init__(
        self,
        queues: dict[str, list[float]],
        fallback: SeededClock,
        strict: bool,
        exhausted: Callable[[str, int], Exception],
        trace: Trace,
        overflow: tuple[str, ...] = (),
    ) -> None:
        self._queues = {name: list(values) for name, values in queues.items()}
        self._used = dict.fromkeys(self._queues, 0)
        self._fallback = fallback
        self._strict = strict
        # A source the recording stopped keeping goes on from the seed.
        self._lenient = frozenset(overflow)
        self._exhausted = exhausted
        self._lock = threading.Lock()
        self.trace = trace

    def _next(self, source: str, fallback: Callable[[], float]) -> float:
        with self._lock:
            queue = self._queues.get(source, [])
            used = self._used.get(source, 0)
            if used < len(queue):
                self._used[source] = used + 1
                return self.trace.note(source, queue[used])
        if self._strict and source not in self._lenient:
            raise self._exhausted(source, used)
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


_source: ClockSource | None = None
#: The source outside attempts (None: real time); see :func:`rest_on`.
_resting: ClockSource | None = None


# The patched ``time`` functions are created once and read the active source,
# so entering an attempt is one dict update, not new closures. Called with no
# attempt active (a reference kept past an attempt), they are the real ones.


def _time() -> float:
    source = _source
    return REAL_TIME() if source is None else source.wall()


def _time_ns() -> int:
    source = _source
    return REAL_TIME_NS() if source is None else int(source.wall() * 1e9)


def _monotonic() -> float:
    source = _source
    return REAL_MONOTONIC() if source is None else source.monotonic()


def _monotonic_ns() -> int:
    source = _source
    return REAL_MONOTONIC_NS() if source is None else int(source.monotonic() * 1e9)


def _perf_counter() -> float:
    source = _source
    return REAL_PERF_COUNTER() if source is None else source.perf_counter()


def _perf_counter_ns() -> int:
    source = _source
    return REAL_PERF_COUNTER_NS() if source is None else int(source.perf_counter() * 1e9)


def _sleep(seconds: float) -> None:
    source = _source
    if source is None:
        REAL_SLEEP(seconds)
    else:
        source.sleep(seconds)


def _wall_or(secs: float | None) -> float | None:
    if secs is not None:
        return secs
    source = _source
    return None if source is None else source.wall()


def _localtime(secs: float | None = None) -> _time_module.struct_time:
    return REAL_LOCALTIME(_wall_or(secs))


def _gmtime(secs: float | None = None) -> _time_module.struct_time:
    return REAL_GMTIME(_wall_or(secs))


def _ctime(secs: float | None = None) -> str:
    return REAL_CTIME(_wall_or(secs))


_OMITTED: Any = object()


def _strftime(format: str, t: Any = _OMITTED) -> str:
    return REAL_STRFTIME(format, REAL_LOCALTIME(_wall_or(None)) if t is _OMITTED else t)


def _asctime(t: Any = _OMITTED) -> str:
    return REAL_ASCTIME(REAL_LOCALTIME(_wall_or(None)) if t is _OMITTED else t)


#: What an attempt with a virtual clock puts into the ``time`` module.
TIME_PATCH: dict[str, Any] = {
    "time": _time,
    "time_ns": _time_ns,
    "monotonic": _monotonic,
    "monotonic_ns": _monotonic_ns,
    "perf_counter": _perf_counter,
    "perf_counter_ns": _perf_counter_ns,
    "sleep": _sleep,
    "localtime": _localtime,
    "gmtime": _gmtime,
    "ctime": _ctime,
    "strftime": _strftime,
    "asctime": _asctime,
}


#: The real functions :data:`TIME_PATCH` replaces, by name.
REAL_FUNCTIONS: dict[str, Any] = {name: TIME_NAMESPACE[name] for name in TIME_PATCH}


def activate(source: ClockSource | None) -> None:
    """Point the patched functions at ``source`` (None: the resting source, else real time)."""
    global _source
    _source = _resting if source is None else source


@dataclass(eq=False)
class ShiftedClock(ClockSource):
    """Real time moved by fixed offsets (``offset`` on the wall clock, ``mono`` and
    ``perf`` on the monotonic ones); ``sleep`` is real, ``advance`` moves all three.

    The whole process of :func:`hermetic_hunt.sandbox.shift.shift_process`, and a
    process a test forks during a virtual-clock attempt (:func:`_follow_real_time`).
    """

    offset: float
    mono: float = 0.0
    perf: float = 0.0
    trace: Trace = field(default_factory=lambda: Trace(False))

    def wall(self) -> float:
        return REAL_TIME() + self.offset

    def monotonic(self) -> float:
        return REAL_MONOTONIC() + self.mono

    def perf_counter(self) -> float:
        return REAL_PERF_COUNTER() + self.perf

    def sleep(self, seconds: float) -> None:
        REAL_SLEEP(seconds)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("cannot move the clock backwards with advance()")
        self.offset += seconds
        self.mono += seconds
        self.perf += seconds

    def set_wall(self, epoch: float) -> None:
        self.offset = epoch - REAL_TIME()


class RecordClock(ShiftedClock):
    """Real time, every reading journaled; ``advance``/``set`` shift it so the clock
    API keeps working (``RecordClock(0.0, trace=trace)``)."""

    def wall(self) -> float:
        return self.trace.note("time", REAL_TIME() + self.offset)

    def monotonic(self) -> float:
        return self.trace.note("monotonic", REAL_MONOTONIC() + self.mono)

    def perf_counter(self) -> float:
        return self.trace.note("perf_counter", REAL_PERF_COUNTER() + self.perf)

    def sleep(self, seconds: float) -> None:
        self.trace.note("sleep", seconds)
        REAL_SLEEP(seconds)

    peek_wall = ShiftedClock.wall  # without a journal entry


def _follow_real_time() -> None:
    """In a process a test forked during a virtual-clock attempt (``os.fork``,
    multiprocessing's ``fork`` start method): the clock goes on in real time from
    the parent's virtual instant, and ``sleep`` sleeps. A child that holds a lock
    for five seconds, or polls for a parent's signal, then behaves as in CI;
    the virtual clock, which moves only when read or slept on, belongs to the
    attempt's own process."""
    global _source
    source = _source
    if isinstance(source, SeededClock):
        wall, mono, perf = source.peek_all()
        _source = ShiftedClock(
            wall - REAL_TIME(), mono - REAL_MONOTONIC(), perf - REAL_PERF_COUNTER()
        )


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_follow_real_time)


def rest_on(source: ClockSource | None) -> None:
    """What the patched functions read outside attempts from now on (None: real time)."""
    global _resting, _source
    if _source is _resting:
        _source = source
    _resting = source
