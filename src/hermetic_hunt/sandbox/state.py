"""Process state an attempt may change, saved at enter and put back at exit.

The global ``random`` state, the environment, the working directory, the
C library's timezone (``TZ`` + ``time.tzset()``) and ``tempfile.tempdir``
are restored *exactly* after every attempt, whatever the test did; what the
test changed and did not put back itself is reported as a leak (a polluter
in the making).

The global ``random`` state (2.5 KB) is the dearest thing to save: through
``getstate()``/``setstate()`` it becomes 625 Python ints and back, about a
third of an attempt's cost. On CPython, whose ``_random.Random`` object is a
header followed by plain data (an index and 624 words, no pointers),
:class:`RawRandomState` copies those bytes instead; it is used only when
the type's size matches that layout *and* a copy between two generators
was checked to reproduce the stream, else the portable path is taken.
"""

from __future__ import annotations

import _random
import ctypes
import os
import random
import tempfile
import time
from typing import Any

from hermetic_hunt.sandbox import clock

_C_RANDOM: Any = _random.Random
_HEADER = object.__basicsize__
_DATA = _C_RANDOM.__basicsize__ - _HEADER


class RawRandomState:
    """A byte copy of a generator's state (see the module docstring)."""

    __slots__ = ("_buffer",)

    def __init__(self, generator: Any) -> None:
        self._buffer = ctypes.create_string_buffer(_DATA)
        ctypes.memmove(self._buffer, id(generator) + _HEADER, _DATA)

    def restore(self, generator: Any) -> None:
        ctypes.memmove(id(generator) + _HEADER, self._buffer, _DATA)


class PortableRandomState:
    """``getstate()``/``setstate()`` through the C methods."""

    __slots__ = ("_state",)

    def __init__(self, generator: Any) -> None:
        self._state = _C_RANDOM.getstate(generator)

    def restore(self, generator: Any) -> None:
        _C_RANDOM.setstate(generator, self._state)


def _raw_copy_works() -> bool:
    words = 624
    if _C_RANDOM.__basicsize__ != _HEADER + -(-(4 + 4 * words) // 8) * 8:
        return False
    try:
        source, target = _C_RANDOM(20240229), _C_RANDOM(1)
        source.getrandbits(32 * 700)  # mid-block, after a twist
        RawRandomState(source).restore(target)
        return bool(
            _C_RANDOM.getstate(target) == _C_RANDOM.getstate(source)
            and target.getrandbits(32 * 1000) == source.getrandbits(32 * 1000)
        )
    except Exception:
        return False


RandomState: Any = RawRandomState if _raw_copy_works() else PortableRandomState


def _encoded(name: str) -> Any:
    encode = getattr(os.environ, "encodekey", None)
    return encode(name) if encode is not None else name


#: Variables pytest itself changes around every test phase: never a leak, and
#: left as pytest set them.
_PYTEST_OWNED = tuple(_encoded(name) for name in ("PYTEST_CURRENT_TEST",))


def _environ() -> dict[Any, Any]:
    data = getattr(os.environ, "_data", None)
    return dict(data) if data is not None else dict(os.environ)


def _tz() -> tuple[Any, ...]:
    return (time.tzname, time.timezone, time.altzone, time.daylight)


def _getcwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


class Saved:
    """The state before an attempt."""

    __slots__ = ("cwd", "env", "gauss", "generator", "random", "tempdir", "tz")

    def __init__(self) -> None:
        self.env = _environ()
        self.cwd = _getcwd()
        self.tz = _tz()
        self.generator: Any = random._inst
        self.random = RandomState(self.generator)
        self.gauss = getattr(self.generator, "gauss_next", None)
        self.tempdir = tempfile.tempdir
        clock.take_tzset_called()


def seed_random(seed: int) -> None:
    """``random.seed(seed)`` for an int seed, minus the Python wrapper."""
    generator: Any = random._inst
    _C_RANDOM.seed(generator, seed)
    generator.gauss_next = None


def random_state() -> tuple[int, ...]:
    """The global generator's internal state (625 ints) right now."""
    return _C_RANDOM.getstate(random._inst)  # type: ignore[no-any-return]


#: How far :func:`words_consumed` follows a stream (64 twists: ~40,000 words).
_MAX_TWISTS = 64
_BLOCK = 624


def words_consumed(seed: int, end: tuple[int, ...]) -> int | None:
    """How many 32-bit words the stream seeded with ``seed`` gave to reach ``end``.

    (``random()`` takes 2 words, ``getrandbits(k)`` ceil(k/32), ``choice``
    one or more.) None when ``end`` is not on that stream -- the test
    reseeded -- or lies beyond :data:`_MAX_TWISTS` blocks. Only failing
    attempts pay for it: it re-runs the generator block by block.
    """
    probe = _C_RANDOM.__new__(_C_RANDOM)
    _C_RANDOM.seed(probe, seed)
    if _C_RANDOM.getstate(probe) == end:
        return 0
    key, index = end[:_BLOCK], end[_BLOCK]
    for twist in range(_MAX_TWISTS):
        probe.getrandbits(32)  # twists the block, position 1
        if _C_RANDOM.getstate(probe)[:_BLOCK] == key:
            return twist * _BLOCK + index
        probe.getrandbits(32 * (_BLOCK - 1))
    return None


def restore(saved: Saved, *, expected_env: frozenset[str], moved_cwd: bool) -> list[str]:
    """Put everything back; the leaks (``env:NAME``, ``tz``, ``cwd``) found.

    ``expected_env`` names variables the sandbox itself set (marker ``env``,
    ``fs="isolate"``), ``moved_cwd`` says the sandbox itself changed the
    working directory: neither is the test's leak.
    """
    leaks: list[str] = []
    saved.random.restore(saved.generator)
    saved.generator.gauss_next = saved.gauss
    tempfile.tempdir = saved.tempdir
    data = getattr(os.environ, "_data", None)
    current = data if data is not None else _environ()
    for key in _PYTEST_OWNED:
        if key in current:
            saved.env[key] = current[key]
        else:
            saved.env.pop(key, None)
    if current != saved.env:
        leaks.extend(f"env:{name}" for name in _changed(saved.env) if name not in expected_env)
        _restore_environ(saved.env)
    tz_now = _tz()
    if clock.take_tzset_called() or tz_now != saved.tz:
        if tz_now != saved.tz:
            leaks.append("tz")
        if clock.REAL_TZSET is not None:
            clock.REAL_TZSET()
    cwd = _getcwd()
    if cwd != saved.cwd and saved.cwd is not None:
        try:
            os.chdir(saved.cwd)
        except OSError:
            os.chdir(os.path.expanduser("~"))
        if not moved_cwd:
            leaks.append("cwd")
    return leaks


def _decode(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def _changed(before: dict[Any, Any]) -> list[str]:
    now = _environ()
    keys = set(now) ^ set(before)
    keys |= {key for key in now.keys() & before.keys() if now[key] != before[key]}
    return sorted(_decode(key) for key in keys)


def _restore_environ(snapshot: dict[Any, Any]) -> None:
    current = _environ()
    for key in current:
        if key not in snapshot:
            os.environ.pop(_decode(key), None)
    for key, value in snapshot.items():
        if current.get(key) != value:
            os.environ[_decode(key)] = _decode(value)
