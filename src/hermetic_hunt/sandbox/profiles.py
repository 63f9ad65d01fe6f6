"""Clock profiles: how a seeded attempt's virtual clock misbehaves, drawn from its seed.

A profile is one of :data:`hermetic_hunt.models.PROFILES`; what each does to
a reading and to a sleep, and the calibration (no sleep lasts more than
twice its duration), are in docs/sandbox.md, 'Clock profiles (seeded mode)'.
``jitter``'s factor is 1 + a Lomax (Pareto II) draw, capped at 2.

The draws come from two streams keyed by the attempt's seed, one for
readings and one for sleeps (each a ``random.Random`` seeded with a BLAKE2b
digest of the profile and the seed; its ``random()`` sequence is guaranteed
across Python versions), so the same seed gives the same readings: a
timing flake found this way replays by seed. Sleeps have their own stream
so that an extra clock reading (a fixture set up alone rather than by an
earlier test) does not change how long the test's own sleeps last.
"""

from __future__ import annotations

import random

from hermetic_hunt.seeds import digest_int

#: The most a profile stretches a sleep (a factor).
MAX_STRETCH = 2.0
#: jitter: a reading advances the clock by up to this many seconds.
JITTER_READ = 50e-6
#: jitter: the Lomax scale and shape of a sleep's overshoot.
JITTER_SCALE = 0.05
JITTER_SHAPE = 1.2
#: slow: a reading advances the clock by SLOW_READ[0] + u * SLOW_READ[1] seconds.
SLOW_READ = (0.5e-3, 1e-3)
#: slow: a sleep lasts d x (1 + u * SLOW_STRETCH).
SLOW_STRETCH = 0.5


class Noise:
    """One attempt's draws under a noisy profile (``jitter`` or ``slow``).

    Not thread-safe on its own: the clock calls it under its lock.
    ``stretched`` is the largest sleep factor drawn so far (1.0: none).
    """

    __slots__ = ("_reads", "_sleeps", "name", "stretched")

    def __init__(self, name: str, seed: int) -> None:
        if name not in ("jitter", "slow"):
            raise ValueError(f"no noise in clock profile {name!r}")
        self.name = name
        # Mersenne Twisters seeded with digests: random.Random(n).random() is
        # guaranteed to give the same sequence for the same n on every Python,
        # and costs a tenth of a digest per draw.
        self._reads = random.Random(digest_int("clock-reads", name, seed)).random  # noqa: S311
        self._sleeps = random.Random(digest_int("clock-sleeps", name, seed)).random  # noqa: S311
        self.stretched = 1.0

    def read(self) -> float:
        """Seconds the clock advances before a reading."""
        if self.name == "jitter":
            return JITTER_READ * self._reads()
        return SLOW_READ[0] + SLOW_READ[1] * self._reads()

    def stretch(self) -> float:
        """The factor (>= 1, <= :data:`MAX_STRETCH`) the next sleep lasts."""
        u = self._sleeps()
        if self.name == "jitter":
            # Lomax: P(overshoot > x) = (1 + x / scale) ** -shape.
            overshoot = JITTER_SCALE * (float((1.0 - u) ** (-1.0 / JITTER_SHAPE)) - 1.0)
            factor = min(MAX_STRETCH, 1.0 + overshoot)
        else:
            factor = 1.0 + SLOW_STRETCH * u
        if factor > self.stretched:
            self.stretched = factor
        return factor


def noise_for(profile: str | None, seed: int) -> Noise | None:
    """The noise of ``profile`` for the attempt with ``seed`` (None: exact)."""
    return None if profile is None or profile == "exact" else Noise(profile, seed)
