"""Entropy behind ``os.urandom`` and ``random._urandom`` during an attempt.

Both bindings matter: ``uuid.uuid4`` reads ``os.urandom`` at call time, while
``random.SystemRandom`` (and so ``secrets``) draws through the ``_urandom``
name that ``random`` bound at import.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any, Protocol

from hermetic_hunt.sandbox.clock import Trace

REAL_URANDOM = os.urandom


class Entropy(Protocol):
    def bytes(self, n: int) -> bytes: ...


class SeededEntropy(Entropy):
    """A PRNG byte stream keyed to the attempt seed (created on first draw)."""

    def __init__(self, seed: int, trace: Trace) -> None:
        self._seed = seed
        self._rng: random.Random | None = None
        self.trace = trace

    def bytes(self, n: int) -> bytes:
        if self._rng is None:
            # Keyed apart from the attempt's `random` stream (seeded with the
            # bare seed), so uuid4() values are not the same bits as random().
            self._rng = random.Random(f"urandom:{self._seed}")  # noqa: S311 - reproducible on purpose
        value = self._rng.randbytes(n)
        self.trace.note("urandom", value.hex())
        return value


class RecordEntropy(Entropy):
    """Real entropy, every draw journaled."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def bytes(self, n: int) -> bytes:
        value = REAL_URANDOM(n)
        self.trace.note("urandom", value.hex())
        return value


class ReplayEntropy(Entropy):
    """Journaled draws fed back in order; sizes must match the recording."""

    def __init__(
        self,
        draws: list[str],
        fallback: SeededEntropy,
        strict: bool,
        exhausted: Callable[[str, int], Exception],
        mismatch: Callable[[str], Exception],
        trace: Trace,
    ) -> None:
        self._draws = draws
        self._used = 0
        self._fallback = fallback
        self._strict = strict
        self._exhausted = exhausted
        self._mismatch = mismatch
        self.trace = trace

    def bytes(self, n: int) -> bytes:
        if self._used >= len(self._draws):
            if self._strict:
                raise self._exhausted("urandom", self._used)
            return self._fallback.bytes(n)
        value = bytes.fromhex(self._draws[self._used])
        self._used += 1
        if len(value) != n:
            raise self._mismatch(
                f"hermetic-hunt replay diverged: urandom draw #{self._used} asked for {n} "
                f"byte(s), the recording has {len(value)}"
            )
        self.trace.note("urandom", value.hex())
        return value

    def unconsumed(self) -> tuple[int, int] | None:
        return (self._used, len(self._draws)) if self._used < len(self._draws) else None


_source: Entropy | None = None


def _urandom(size: int) -> bytes:
    source = _source
    return REAL_URANDOM(size) if source is None else source.bytes(size)


def _getrandom(size: int, flags: int = 0) -> bytes:
    source = _source
    if source is None:
        assert REAL_GETRANDOM is not None  # only installed where it exists
        return REAL_GETRANDOM(size, flags)
    return source.bytes(size)


#: Installed with ``rng="all"`` (the names ``random`` bound at import included).
OS_PATCH: dict[str, Any] = {"urandom": _urandom}
REAL_GETRANDOM: Callable[..., bytes] | None = getattr(os, "getrandom", None)
if REAL_GETRANDOM is not None:
    OS_PATCH["getrandom"] = _getrandom
RANDOM_PATCH: dict[str, Any] = {"_urandom": _urandom}


def activate(source: Entropy | None) -> None:
    """Point the patched functions at ``source`` (None: real entropy)."""
    global _source
    _source = source
