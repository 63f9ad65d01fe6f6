"""Entropy behind ``os.urandom`` and ``random._urandom`` during an attempt.

Both bindings matter: ``uuid.uuid4`` reads ``os.urandom`` at call time, while
``random.SystemRandom`` (and so ``secrets``) draws through the ``_urandom``
name that ``random`` bound at import.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from hermetic_hunt._sandbox.clock import Trace
from hermetic_hunt._sandbox.patches import Patches

REAL_URANDOM = os.urandom
REAL_RANDOM_URANDOM = random._urandom  # type: ignore[attr-defined]


class Entropy:
    def bytes(self, n: int) -> bytes:
        raise NotImplementedError


class SeededEntropy(Entropy):
    """A PRNG byte stream keyed to the attempt seed (created on first draw)."""

    def __init__(self, seed: int, trace: Trace) -> None:
        self._seed = seed
        self._rng: random.Random | None = None
        self.trace = trace

    def bytes(self, n: int) -> bytes:
        if self._rng is None:
            self._rng = random.Random(self._seed)
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
        self.fell_back = False

    def bytes(self, n: int) -> bytes:
        if self._used >= len(self._draws):
            if self._strict:
                raise self._exhausted("urandom", self._used)
            self.fell_back = True
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


def install(patches: Patches, entropy: Entropy) -> None:
    draw = entropy.bytes
    patches.set(os, "urandom", draw)
    patches.set(random, "_urandom", draw)
