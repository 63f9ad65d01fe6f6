"""What a sandbox changes in the process, saved at enter and put back at exit.

A sandbox undoes its *own* changes only (which, in docs/sandbox.md,
'Modes'); whatever the test itself changed stays changed, as in a plain
pytest run, and the engine's leak checks (:mod:`hermetic_hunt.engine.leaks`)
record it.

The global ``random`` state (2.5 KB) is the dearest thing to save:
:class:`RawRandomState` copies the bytes of CPython's ``_random.Random``
(an index and 624 words, no pointers) where the type's size matches that
layout and a copy was checked to reproduce the stream, else the portable
path is taken (``docs/sandbox.md``, "The ``random`` state is copied as bytes").
"""

from __future__ import annotations

import _random
import ctypes
import os
import random
import tempfile
from typing import Any

_C_RANDOM: Any = _random.Random
_HEADER = object.__basicsize__
_DATA = _C_RANDOM.__basicsize__ - _HEADER
_BLOCK = 624  # words of the Mersenne Twister's state


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
    if _C_RANDOM.__basicsize__ != _HEADER + -(-(4 + 4 * _BLOCK) // 8) * 8:
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


class Saved:
    """What the sandbox may change, as it was before the attempt."""

    __slots__ = ("env", "gauss", "generator", "random", "tempdir")

    def __init__(self) -> None:
        self.generator: Any = random._inst
        self.random = RandomState(self.generator)
        self.gauss = getattr(self.generator, "gauss_next", None)
        self.tempdir = tempfile.tempdir
        self.env: dict[str, str | None] = {}

    def set_env(self, name: str, value: str | None) -> None:
        """The sandbox itself sets ``name`` (None: removes it); its value before is kept."""
        if name not in self.env:
            self.env[name] = os.environ.get(name)
        set_env(name, value)


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


def words_consumed(seed: int, end: tuple[int, ...]) -> int | None:
    """How many 32-bit words the stream seeded with ``seed`` gave to reach ``end``.

    (``random()`` takes 2 words, ``getrandbits(k)`` ceil(k/32), ``choice``
    one or more.) None when ``end`` is not on that stream -- the test
    reseeded -- or lies beyond :data:`_MAX_TWISTS` blocks. Only failing
    attempts pay for it: it re-runs the generator block by block.
    """
    probe = _C_RANDOM.__new__(_C_RANDOM)
    _C_RANDOM.seed(probe, seed)
    return words_between(_C_RANDOM.getstate(probe), end)


def words_between(start: tuple[int, ...], end: tuple[int, ...]) -> int | None:
    """How many 32-bit words the global stream gave from state ``start`` to ``end``
    (None: ``end`` is not ahead on that stream, or too far; see :func:`words_consumed`)."""
    if start == end:
        return 0
    key, index = end[:_BLOCK], end[_BLOCK]
    if start[:_BLOCK] == key and index >= start[_BLOCK]:
        return index - start[_BLOCK]
    probe = _C_RANDOM.__new__(_C_RANDOM)
    _C_RANDOM.setstate(probe, start)
    left = _BLOCK - start[_BLOCK]  # words still in the start block
    if left > 0:
        probe.getrandbits(32 * left)
    for twist in range(_MAX_TWISTS):
        probe.getrandbits(32)  # twists the block, position 1
        if _C_RANDOM.getstate(probe)[:_BLOCK] == key:
            return left + twist * _BLOCK + index
        probe.getrandbits(32 * (_BLOCK - 1))
    return None


def set_env(name: str, value: str | None) -> None:
    """Set the environment variable ``name`` (None: remove it)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def restore(
    saved: Saved, *, cwd: str | None = None, tempdir: bool = False, stream: bool = False
) -> None:
    """Undo the sandbox's own changes.

    ``cwd``: where to go back to when the sandbox moved the working
    directory; ``tempdir``: the sandbox set ``tempfile.tempdir``;
    ``stream``: the global ``random`` stream flowed (it stays where the test left it).
    """
    if not stream:
        saved.random.restore(saved.generator)
        saved.generator.gauss_next = saved.gauss
    if tempdir:
        tempfile.tempdir = saved.tempdir
    for name, value in saved.env.items():
        set_env(name, value)
    if cwd is not None:
        try:
            os.chdir(cwd)
        except OSError:
            os.chdir(os.path.expanduser("~"))
