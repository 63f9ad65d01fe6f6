"""Delta debugging over a yes/no oracle: polluters, cleaners and state-setters.

Pure: no pytest, SQLite or processes. The caller supplies a *signal*
function that runs one probe for a subset of candidates (kept in their
original order) and answers whether the probe showed what we look for:

* polluters -- "the victim failed after this subset" (signal: a failure);
* state-setters -- "the brittle test passed after this subset" (signal: a pass);
* cleaners -- "the victim passed with this group between polluters and
  victim" (a pass, and it must hold in every repetition).

The strategies and their costs in probes (bisection, then ddmin from the
last subset *seen* to show the signal; probabilistic culprits, where every
later "no" rests on :func:`repeats_for` runs and the empty subset is probed
as often) are in docs/isolation.md, "Polluter, cleaner and state-setter
search".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)
#: One probe of a subset (in the candidates' order): did it show the signal?
Signal = Callable[[Sequence[T]], bool]

#: Default confidence of every "no" once a culprit is known to be probabilistic.
CONFIDENCE = 0.99
#: Most repetitions of one probe, whatever the estimated rate.
MAX_REPEATS = 12
#: Extra runs of a positive subset that tell deterministic from probabilistic
#: (all positive: deterministic), then that estimate the rate.
DETERMINISM_RUNS = 3
ESTIMATE_RUNS = 4
#: Times a minimal set may be disproved (then searched again with more runs).
MAX_RETRIES = 4


class BudgetExceeded(Exception):
    """The per-flake probe budget ran out (the search keeps what it has)."""


@dataclass
class Budget:
    """Most probes one flake may use; :meth:`spend` raises when exhausted."""

    limit: int
    used: int = 0

    def spend(self) -> None:
        if self.used >= self.limit:
            raise BudgetExceeded(f"probe budget of {self.limit} exhausted")
        self.used += 1

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)


def repeats_for(rate: float, confidence: float = CONFIDENCE, cap: int = MAX_REPEATS) -> int:
    """Runs needed to see a signal of probability ``rate`` at least once.

    ``1 - (1 - rate) ** r >= confidence``; ``rate >= 1`` needs one run.
    """
    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return cap
    runs = math.ceil(math.log(1.0 - confidence) / math.log(1.0 - rate))
    return max(1, min(cap, runs))


class Oracle(Generic[T]):
    """A signal with repetition, a cache, a probe count and an optional budget.

    ``require="any"``: a subset shows the signal if any of ``repeats`` runs
    does (a signal is proof: polluters, state-setters). ``require="all"``:
    only if every run does (cleaners: one failure disproves a cleaner).
    Positive answers under ``any`` are cached for good; other answers are
    cached with the number of runs they rest on.
    """

    def __init__(
        self,
        signal: Signal[T],
        *,
        budget: Budget | None = None,
        repeats: int = 1,
        require: str = "any",
    ) -> None:
        if require not in ("any", "all"):
            raise ValueError(f"require must be 'any' or 'all', got {require!r}")
        self.signal = signal
        self.budget = budget
        self.repeats = max(1, repeats)
        self.require = require
        self.probes = 0
        #: The smallest subset seen to show the signal since the caller last set it.
        self.smallest: list[T] | None = None
        self._cache: dict[tuple[T, ...], tuple[bool, int]] = {}

    def run_once(self, subset: Sequence[T]) -> bool:
        """One uncached probe."""
        if self.budget is not None:
            self.budget.spend()
        self.probes += 1
        shown = bool(self.signal(list(subset)))
        smaller = self.smallest is None or len(subset) < len(self.smallest)
        if shown and self.require == "any" and smaller:
            self.smallest = list(subset)
        return shown

    def seen(self, subset: Sequence[T]) -> None:
        """Record that the caller already saw ``subset`` show the signal."""
        self._cache[tuple(subset)] = (True, self.repeats)

    def __call__(self, subset: Sequence[T]) -> bool:
        key = tuple(subset)
        cached = self._cache.get(key)
        if cached is not None:
            shown, runs = cached
            if (shown and self.require == "any") or runs >= self.repeats:
                return shown
        tries = (self.run_once(subset) for _ in range(self.repeats))
        result = any(tries) if self.require == "any" else all(tries)
        self._cache[key] = (result, self.repeats)
        return result


def halves(items: Sequence[T]) -> tuple[list[T], list[T]]:
    pivot = len(items) // 2
    return list(items[:pivot]), list(items[pivot:])


def bisect(candidates: Sequence[T], oracle: Oracle[T]) -> tuple[list[T], list[T]]:
    """Single-culprit bisection: ``(answer, last subset seen positive)``.

    Probes the first half; positive -> keep it, else keep the second half
    *without probing it* (one probe per level). The answer is right when
    exactly one deterministic culprit exists; the caller confirms it.
    """
    current = list(candidates)
    verified = list(candidates)
    while len(current) > 1:
        left, right = halves(current)
        if oracle(left):
            current = verified = left
        else:
            current = right
    return current, verified


def ddmin(candidates: Sequence[T], oracle: Oracle[T]) -> list[T]:
    """A 1-minimal subset of ``candidates`` (which must show the signal).

    Zeller's ddmin: try each of n chunks, then each complement; on success
    restart from the smaller set, else double the granularity.
    """
    current = list(candidates)
    n = 2
    while len(current) >= 2:
        size = len(current)
        chunks = [current[i * size // n : (i + 1) * size // n] for i in range(n)]
        chunks = [chunk for chunk in chunks if chunk]
        found = next((chunk for chunk in chunks if oracle(chunk)), None)
        if found is not None:
            current, n = found, 2
            continue
        if len(chunks) > 2:
            complements = ([c for c in current if c not in chunk] for chunk in chunks)
            found = next((rest for rest in complements if oracle(rest)), None)
        if found is not None:
            current, n = found, max(n - 1, 2)
        elif n >= size:
            break
        else:
            n = min(size, 2 * n)
    return current


@dataclass
class Search(Generic[T]):
    """What a culprit search found.

    ``sets`` are minimal culprit sets, each confirmed by a fresh probe after
    the search (``confirmed``: all of them were). ``partial``: the budget ran
    out; ``sets`` then ends with the smallest subset seen to show the signal
    (not minimal, not confirmed) unless that is the last confirmed set.
    """

    sets: list[list[T]] = field(default_factory=list)
    confirmed: bool = False
    partial: bool = False
    repeats: int = 1
    rate: float = 1.0
    probes: int = 0
    notes: list[str] = field(default_factory=list)
    #: Did the empty subset show the signal? (probabilistic searches probe it; None: not yet)
    baseline: bool | None = None


def find_culprits(
    candidates: Sequence[T],
    signal: Signal[T],
    *,
    budget: Budget | None = None,
    confidence: float = CONFIDENCE,
    max_sets: int = 3,
    repeats: int = 1,
) -> Search[T]:
    """Minimal sets of ``candidates`` that make the signal show.

    Precondition: the caller saw ``candidates`` as a whole show the signal.
    After each set, the candidates without it are probed once more: if they
    still show the signal another, disjoint set is searched (up to
    ``max_sets``).
    """
    oracle: Oracle[T] = Oracle(signal, budget=budget, repeats=repeats)
    search: Search[T] = Search(repeats=repeats)
    remaining = list(candidates)
    oracle.seen(remaining)
    oracle.smallest = list(remaining)
    confirmed = 0
    try:
        while remaining and len(search.sets) < max_sets:
            found = _one_set(remaining, oracle, confidence, search)
            if found is None:
                search.notes.append(
                    "no minimal set could be confirmed: the signal did not come back"
                )
                break
            search.sets.append(found)
            confirmed += 1
            members = set(found)
            rest = [c for c in remaining if c not in members]
            if not rest or not oracle(rest):
                break
            search.notes.append(f"{len(rest)} candidates still show the signal without {found}")
            remaining = rest
            oracle.smallest = list(remaining)
    except BudgetExceeded as exc:
        search.partial = True
        search.notes.append(str(exc))
        best = oracle.smallest
        if best and (not search.sets or best != search.sets[-1]):
            search.sets.append(list(best))
    # Every set from _one_set was confirmed; a partial one appended last was not.
    search.confirmed = bool(search.sets) and (confirmed == len(search.sets))
    search.repeats = oracle.repeats
    search.probes = oracle.probes
    return search


def _one_set(
    candidates: list[T], oracle: Oracle[T], confidence: float, search: Search[T]
) -> list[T] | None:
    """One confirmed minimal set of ``candidates`` (None: none confirmed)."""
    answer, verified = bisect(candidates, oracle)
    if _confirm(answer, oracle):
        return answer
    # Several culprits acting together, or a probabilistic one.
    rate = _estimate(verified, oracle)
    if rate < 1.0 and not _probabilistic(oracle, rate, confidence, search):
        return None
    minimal = ddmin(verified, oracle)
    for _ in range(MAX_RETRIES):
        if not _confirm(minimal, oracle):
            # Seen positive during the search, not now: probabilistic.
            if oracle.repeats >= repeats_for(search.rate / 2, confidence):
                return None
            if not _probabilistic(oracle, search.rate / 2, confidence, search):
                return None
            continue
        smaller = _not_minimal(minimal, oracle)
        if smaller is None:
            return minimal
        # A subset the search had ruled out showed the signal after all:
        # the culprit is probabilistic, whatever the estimate said.
        if not _probabilistic(oracle, search.rate / 2, confidence, search):
            return None
        minimal = ddmin(smaller, oracle)
    return None


def _probabilistic(oracle: Oracle[T], rate: float, confidence: float, search: Search[T]) -> bool:
    """Switch to repeated probes; False when no candidate is needed at all.

    A signal that shows at random must also be ruled out *without* any
    candidate, as often as every other "no" is: else a test that fails at
    random now and then would pass for the victim of whatever ran before.
    """
    oracle.repeats = max(oracle.repeats, repeats_for(rate, confidence))
    search.rate = min(search.rate, rate)
    search.notes.append(
        f"the signal shows in about {rate:.0%} of runs: every 'no' now rests on "
        f"{oracle.repeats} runs ({confidence:.0%} confidence)"
    )
    if search.baseline is None:
        shown = sum(oracle.run_once([]) for _ in range(oracle.repeats))
        search.baseline = bool(shown)
        if shown:
            search.notes.append(
                f"the signal shows without any candidate too ({shown} of {oracle.repeats} "
                "runs): it is not caused by them"
            )
            return False
    return not search.baseline


def _not_minimal(subset: list[T], oracle: Oracle[T]) -> list[T] | None:
    """A one-smaller subset that shows the signal in fresh runs, if any.

    The empty subset is the caller's "alone" probe, known negative.
    """
    if len(subset) < 2:
        return None
    runs = max(oracle.repeats, DETERMINISM_RUNS)
    for index in range(len(subset)):
        smaller = subset[:index] + subset[index + 1 :]
        if any(oracle.run_once(smaller) for _ in range(runs)):
            return smaller
    return None


def _confirm(subset: list[T], oracle: Oracle[T]) -> bool:
    """Fresh runs of ``subset`` (never the cache): any positive confirms it."""
    return any(oracle.run_once(subset) for _ in range(oracle.repeats))


def _estimate(subset: list[T], oracle: Oracle[T]) -> float:
    """Share of positive runs of ``subset`` (seen positive once before).

    Fresh runs that all show the signal: deterministic (1.0; a later
    minimality check can still disprove it). Else one more, and the rate
    counts the earlier positive run too.
    """
    shown = sum(oracle.run_once(subset) for _ in range(DETERMINISM_RUNS))
    if shown == DETERMINISM_RUNS:
        return 1.0
    shown += sum(oracle.run_once(subset) for _ in range(ESTIMATE_RUNS - DETERMINISM_RUNS))
    return (shown + 1) / (ESTIMATE_RUNS + 1)


def find_cleaners(
    candidates: Sequence[T],
    cleans: Signal[T],
    *,
    budget: Budget | None = None,
    repeats: int = 1,
) -> tuple[list[T], int, bool]:
    """Candidates that, alone between polluters and victim, make it pass.

    Adaptive group testing: a group that does not clean holds no cleaner (a
    cleaner cleans whatever runs beside it); a group that cleans is split
    until single cleaners are left. Each cleaner reported was probed alone.
    Returns ``(cleaners, probes, partial)``.
    """
    oracle: Oracle[T] = Oracle(cleans, budget=budget, repeats=repeats, require="all")
    found: list[T] = []
    stack = [list(candidates)] if candidates else []
    try:
        while stack:
            group = stack.pop()
            if not oracle(group):
                continue
            if len(group) == 1:
                found.append(group[0])
                continue
            left, right = halves(group)
            stack.extend([right, left])
    except BudgetExceeded:
        return found, oracle.probes, True
    return found, oracle.probes, False
