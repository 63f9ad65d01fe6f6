"""Which test runs where and when: rounds x orders x workers -> plans.

Everything here is a pure function of ``(base_seed, tests, workers, round,
strategy)``: timing never changes what a worker runs. The orders, the
default round (round 0) and the packed rounds of a small suite are in
docs/how-it-works.md, "The schedule".

Attributes of a :class:`RoundPlan` (its invariants):

* ``order`` is a permutation of ``range(len(tests))``.
* ``slices`` partitions ``order`` into ``workers`` contiguous runs whose sizes
  differ by at most one (the earlier slices get the extra test) -- or, in a
  default or packed round, puts all of ``order`` in one slice and leaves the
  others empty.
* ``round_no`` is the *global* round: shard K of M runs rounds
  K-1, K-1+M, K-1+2M, ... so shards never repeat each other's rounds.
* ``twice``: each worker runs every test of its slice twice in a row; only
  the second run (``repeat`` 2) is *repeated* and never counts towards a
  fail rate (:data:`hermetic_hunt.models.REPEATED_RUN`; docs/how-it-works.md,
  "A twice round").
* ``condition`` is the round's timing condition (:func:`condition_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from hermetic_hunt.seeds import digest_int, round_key
from hermetic_hunt.timing import DEFAULT_TIME_MIX, VIRTUAL_CLOCK, Condition, TimeMix

#: What ``auto`` cycles through: a test-level shuffle, the exact reverse of
#: that shuffle (every pair of tests met in both orders), then a grouped
#: shuffle (module -> class -> function, cheaper module/class fixtures).
AUTO_CYCLE = ("shuffle", "reversed", "grouped")
#: The one round of an ``auto`` hunt that runs every test twice in a row.
AUTO_TWICE_ROUND = 3


#: Rounds before this one always run exact: a short hunt (and the first
#: cycle of ``auto``'s orders) sees the suite as a calm machine would.
CALM_ROUNDS = 4
#: 2**32 / golden ratio: consecutive rounds spread evenly over the mix.
_GOLDEN = 2654435769


@dataclass(frozen=True)
class RoundPlan:
    round_no: int
    strategy: str
    order: tuple[int, ...]
    slices: tuple[tuple[int, ...], ...]
    condition: Condition = "exact"

    @property
    def twice(self) -> bool:
        return self.strategy == "twice"

    @property
    def packed(self) -> bool:
        """Every test of the round runs on one worker."""
        return sum(1 for part in self.slices if part) <= 1 < len(self.slices)


def condition_for(
    base_seed: int, round_no: int, mix: TimeMix, mode: str, strategy: str = "shuffle"
) -> Condition:
    """The timing condition of ``round_no`` (a pure function of its arguments).

    Rounds before :data:`CALM_ROUNDS` and ``twice`` rounds run exact. Later
    rounds walk a golden-ratio sequence (offset by the base seed) over the
    mix's shares, so any stretch of rounds gets close to each share: 30
    rounds of the default mix have about five jitter, three slow, three
    stress and three switch rounds. A condition the mode cannot honour runs
    exact: ``jitter``/``slow``/``edge`` need the virtual clock (``seeded``),
    ``stress`` needs real time (``record``, ``off``).
    """
    if round_no < CALM_ROUNDS or strategy == "twice":
        return "exact"
    offset = digest_int("conditions", base_seed) % 2**32
    pick = ((offset + round_no * _GOLDEN) % 2**32) * 100 >> 32
    shares = mix.shares()
    ends = zip(shares, accumulate(share for _, share in shares), strict=True)
    chosen: Condition = next((name for (name, _), end in ends if pick < end), "exact")
    if chosen in (VIRTUAL_CLOCK if mode != "seeded" else {"stress"}):
        return "exact"
    return chosen


#: The strategy of round 0 of every hunt: collection order, in one process.
DEFAULT_ROUND = "default"


def strategy_for(order: str, round_no: int) -> str:
    """The concrete strategy of ``round_no`` under ``--hermetic-hunt-order``
    (round 0 is always the :data:`DEFAULT_ROUND`)."""
    if round_no == 0:
        return DEFAULT_ROUND
    if order == "auto":
        return "twice" if round_no == AUTO_TWICE_ROUND else AUTO_CYCLE[round_no % len(AUTO_CYCLE)]
    return order


def shuffled(base_seed: int, round_no: int, tests: Sequence[str]) -> list[int]:
    """Test-level shuffle: sort by a digest of (seed, round, nodeid).

    Sorting on a stable per-test key (as pytest-randomly does) means any
    subset of the tests keeps its relative order.
    """
    return sorted(range(len(tests)), key=lambda i: (round_key(base_seed, round_no, tests[i]), i))


def grouped(base_seed: int, round_no: int, tests: Sequence[str]) -> list[int]:
    """Shuffle modules, then classes within a module, then functions, then ids."""

    def key(i: int) -> tuple[int, int, int, int, int]:
        module, _, rest = tests[i].partition("::")
        *classes, function = rest.split("::") if rest else [""]
        cls, function = "::".join(classes), function.split("[", 1)[0]
        return (
            round_key(base_seed, round_no, "m", module),
            round_key(base_seed, round_no, "c", module, cls),
            round_key(base_seed, round_no, "f", module, cls, function),
            round_key(base_seed, round_no, "t", tests[i]),
            i,
        )

    return sorted(range(len(tests)), key=key)


#: The strategies that shuffle, each by its own key.
_SHUFFLES = {"shuffle": shuffled, "twice": shuffled, "grouped": grouped}


def round_order(base_seed: int, round_no: int, tests: Sequence[str], order: str) -> list[int]:
    """The order of ``round_no``: indices into ``tests``.

    ``reversed`` is the exact reverse of the previous round's order (of the
    collection order for round 0), so a reversed round meets every pair of
    tests the other way round.
    """
    strategy = strategy_for(order, round_no)
    if strategy == DEFAULT_ROUND:
        return list(range(len(tests)))
    if strategy == "reversed":
        # Walk back to the nearest non-reversed round (bounded: under "auto"
        # it is the previous round; under "reversed" it is the default round).
        earlier = round_no - 1
        while strategy_for(order, earlier) == "reversed":
            earlier -= 1
        base = round_order(base_seed, earlier, tests, order)
        return base[::-1] if (round_no - earlier) % 2 else base
    return _SHUFFLES[strategy](base_seed, round_no, tests)


def split(order: Sequence[int], workers: int) -> tuple[tuple[int, ...], ...]:
    """Contiguous, balanced slices of ``order``: one per worker."""
    size, extra = divmod(len(order), workers)
    starts = [w * size + min(w, extra) for w in range(workers + 1)]
    return tuple(tuple(order[starts[w] : starts[w + 1]]) for w in range(workers))


def plan_round(
    base_seed: int,
    round_no: int,
    tests: Sequence[str],
    workers: int,
    order: str,
    mix: TimeMix = DEFAULT_TIME_MIX,
    mode: str = "seeded",
) -> RoundPlan:
    """The full plan of one (global) round."""
    if workers < 1:
        raise ValueError("workers must be >= 1")
    ordering = round_order(base_seed, round_no, tests, order)
    strategy = strategy_for(order, round_no)
    if strategy == DEFAULT_ROUND or (len(tests) < 2 * workers and round_no % 2 == 1):
        slices = pack(ordering, workers, round_no)
    else:
        # Worker w gets slice (w + round) % workers: with contiguous slices the same
        # part of the order would otherwise always land on the first worker (e.g.
        # under grouped shuffles of few modules).
        parts = split(ordering, workers)
        slices = tuple(parts[(w + round_no) % workers] for w in range(workers))
    return RoundPlan(
        round_no=round_no,
        strategy=strategy,
        order=tuple(ordering),
        slices=slices,
        condition=condition_for(base_seed, round_no, mix, mode, strategy),
    )


def pack(order: Sequence[int], workers: int, round_no: int) -> tuple[tuple[int, ...], ...]:
    """All of ``order`` on one worker: the first in the default round (round 0),
    else the one the round turns to (each worker gets packed rounds in turn)."""
    slot = (round_no // 2) % workers
    return tuple(tuple(order) if w == slot else () for w in range(workers))
