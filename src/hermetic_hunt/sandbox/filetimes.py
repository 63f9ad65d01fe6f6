"""File times on the attempt's virtual clock.

A seeded attempt's wall clock is on its start date (a month's last day, a
coming year), while the files it writes get their times from the real
clock. A test that compares the two -- a cache that is stale when its file
is older than a minute, a lock broken when its file's time is in the past --
would fail on every virtual date, and on none in CI. Which calls report
virtual times (the ``os`` module's) and which do not is in
docs/limitations.md, 'File times are real outside the ``os`` module'.

The mapping is the one the clock itself keeps (:data:`MAP`): the
``(real, virtual)`` instants where the distance between the two clocks
changed (a virtual sleep, a jump, the slow drift of readings), so a file
written before a virtual ``sleep(3600)`` is an hour older after it, as it
would be on a real machine, and a file last touched before the round began
keeps its real age.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

#: ``(real, virtual)`` wall-clock instants where the two clocks' distance
#: changed, in time order; kept by :class:`~hermetic_hunt.sandbox.clock.SeededClock`
#: for the whole process (a round's attempts share one timeline).
MAP: list[tuple[float, float]] = []
_REALS: list[float] = []
_VIRTUALS: list[float] = []
#: Seconds the clocks' distance may move before a new point is kept.
STEP = 0.005
#: Points kept per process at most (then the last distance stands).
LIMIT = 100_000

REAL_STAT = os.stat
REAL_LSTAT = os.lstat
REAL_FSTAT = os.fstat
REAL_UTIME = os.utime
_SEQUENCE_TIMES = {7: "st_atime", 8: "st_mtime", 9: "st_ctime"}
_HIDDEN = tuple(
    name
    for name in dir(REAL_STAT("."))
    if name.startswith("st_") and name not in ("st_mode", "st_ino", "st_dev", "st_nlink",
                                                "st_uid", "st_gid", "st_size")
)  # fmt: skip
_TIME_FIELDS = ("st_atime", "st_mtime", "st_ctime", "st_birthtime")


def note(real: float, virtual: float) -> None:
    """Keep ``(real, virtual)`` if the clocks' distance moved since the last point."""
    if MAP and abs((virtual - real) - (MAP[-1][1] - MAP[-1][0])) <= STEP:
        return
    if len(MAP) >= LIMIT or (MAP and real < MAP[-1][0]):
        return
    MAP.append((real, virtual))
    _REALS.append(real)
    _VIRTUALS.append(virtual)


def _through(value: float, keys: list[float], side: int) -> float:
    """``value`` on one clock (``keys``: its points, ``side``: 0 real, 1 virtual)
    as the other one's, from the last point at or before it."""
    if not MAP:
        return value
    point = MAP[max(bisect.bisect_right(keys, value) - 1, 0)]
    return point[1 - side] + (value - point[side])


def to_virtual(real: float) -> float:
    """A real file time as the virtual clock would have given it."""
    return _through(real, _REALS, 0)


def to_real(virtual: float) -> float:
    """A virtual time (``os.utime``'s) as the real file time it stands for."""
    return _through(virtual, _VIRTUALS, 1)


#: How each hidden field is carried over: 0 as it is, 1 a time in seconds, 2 in ns.
_PLAN = tuple(
    (name, 1 if name in _TIME_FIELDS else 2 if name[:-3] in _TIME_FIELDS else 0) for name in _HIDDEN
)


def _shifted(result: os.stat_result) -> os.stat_result:
    if not MAP:
        return result
    hidden: dict[str, Any] = {}
    seen: dict[float, float] = {}  # a file's times are often equal: each mapped once
    for name, how in _PLAN:
        value = getattr(result, name, None)
        if value is None:
            continue
        if how:
            real = value if how == 1 else value / 1e9
            virtual = seen.get(real)
            if virtual is None:
                virtual = seen[real] = to_virtual(real)
            value = virtual if how == 1 else int(virtual * 1e9)
        hidden[name] = value
    sequence = list(result[:10])
    for index, name in _SEQUENCE_TIMES.items():
        sequence[index] = int(hidden.get(name, sequence[index]))
    return os.stat_result(sequence, hidden)


def _stat(*args: Any, **kwargs: Any) -> os.stat_result:
    return _shifted(REAL_STAT(*args, **kwargs))


def _lstat(*args: Any, **kwargs: Any) -> os.stat_result:
    return _shifted(REAL_LSTAT(*args, **kwargs))


def _fstat(fd: int) -> os.stat_result:
    return _shifted(REAL_FSTAT(fd))


def _utime(path: Any, times: Any = None, *, ns: Any = None, **kwargs: Any) -> None:
    if times is not None:
        atime, mtime = times
        times = (to_real(atime), to_real(mtime))
    if ns is not None:  # passed on only when given: os.utime refuses ns=None
        atime_ns, mtime_ns = ns
        kwargs["ns"] = (int(to_real(atime_ns / 1e9) * 1e9), int(to_real(mtime_ns / 1e9) * 1e9))
    REAL_UTIME(path, times, **kwargs)


#: What a seeded attempt puts into the ``os`` module.
OS_PATCH: dict[str, Any] = {"stat": _stat, "lstat": _lstat, "fstat": _fstat, "utime": _utime}
