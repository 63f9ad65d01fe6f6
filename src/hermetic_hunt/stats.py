"""How sure a hunt is: intervals for fail rates and bounds for clean tests.

Pure functions, no dependencies. Every rate a report shows comes with one of:

* a **Wilson score interval** (95% by default) for a test that failed ``k``
  times in ``n`` attempts -- unlike ``k/n +- 1.96*sd`` it stays inside
  [0, 1] and behaves for small ``n`` and for rates near 0 or 1;
* for a test that never failed, the **exact one-sided binomial bound**
  ``1 - alpha**(1/n)``: the highest flake rate still consistent (at
  ``1 - alpha`` confidence) with ``n`` clean attempts. 50 clean attempts
  give "< 6% at 95%" (the "rule of three", 3/n, is its approximation), and
  :func:`attempts_for_bound` says how many attempts it takes to push that
  bound down to, say, 1% (299).
"""

from __future__ import annotations

import math
from statistics import NormalDist

#: Confidence of every interval and bound a report prints.
CONFIDENCE = 0.95


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    return float(NormalDist().inv_cdf(0.5 + confidence / 2))


def wilson(failures: int, attempts: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` for ``failures / attempts``.

    ``attempts == 0`` says nothing: the interval is ``(0.0, 1.0)``.
    """
    if attempts < 0 or not 0 <= failures <= max(attempts, 0):
        raise ValueError(f"need 0 <= failures <= attempts, got {failures}/{attempts}")
    if attempts == 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = failures / attempts
    z2n = z * z / attempts
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(p * (1 - p) / attempts + z2n / (4 * attempts)) / (1 + z2n)
    low = 0.0 if failures == 0 else max(0.0, centre - half)
    high = 1.0 if failures == attempts else min(1.0, centre + half)
    return low, high


def clean_bound(attempts: int, confidence: float = CONFIDENCE) -> float:
    """Upper bound on the flake rate of a test that passed ``attempts`` times.

    Exact binomial: the rate ``p`` at which ``attempts`` clean runs in a row
    would happen with probability ``1 - confidence``. ``clean_bound(50)`` is
    0.058 ("< 6% at 95%").
    """
    if attempts < 0:
        raise ValueError(f"attempts must be >= 0, got {attempts}")
    if attempts == 0:
        return 1.0
    _z(confidence)  # validates
    return 1.0 - float((1.0 - confidence) ** (1.0 / attempts))


def attempts_for_bound(target: float = 0.01, confidence: float = CONFIDENCE) -> int:
    """Fewest clean attempts whose :func:`clean_bound` is at most ``target``.

    ``attempts_for_bound(0.01)`` is 299: a test must pass 299 times in a row
    before "it flakes less than 1% of the time" holds at 95%.
    """
    if not 0 < target < 1:
        raise ValueError(f"target must be between 0 and 1, got {target!r}")
    _z(confidence)
    n = math.ceil(math.log(1.0 - confidence) / math.log(1.0 - target))
    # Floating point can land one off either way: settle it on the definition.
    while n > 1 and clean_bound(n - 1, confidence) <= target:
        n -= 1
    while clean_bound(n, confidence) > target:
        n += 1
    return n


#: Fail rates are clamped to this range before :func:`runs_for_rate` (299 runs at most).
RATE_RANGE = (0.01, 0.95)


def runs_for_rate(rate: float, confidence: float = CONFIDENCE) -> int:
    """Runs in which a flake failing at ``rate`` shows at least once, ``confidence`` sure.

    The same number makes that sure a flake failing at ``rate`` is gone when
    every run passes: ``runs_for_rate(0.10)`` is 29 (29 passes in a row happen
    less than 5% of the time to a test that still fails one run in ten). The
    replay sizes its runs with it, the fix verifier its patched runs, the
    history its clean attempts still needed.
    """
    low, high = RATE_RANGE
    return attempts_for_bound(min(max(rate, low), high), confidence)


def more_attempts_for_bound(
    attempts: int, target: float = 0.01, confidence: float = CONFIDENCE
) -> int:
    """Clean attempts still needed, after ``attempts``, to reach ``target``."""
    return max(0, attempts_for_bound(target, confidence) - attempts)


def percent(rate: float) -> str:
    """A rate as a short percentage: ``0.0581`` -> ``5.8%``, ``0.93`` -> ``93%``.

    Two significant figures below 10%, whole percent above; never rounds a
    non-zero rate to "0%" or a rate below one to "100%".
    """
    if rate <= 0:
        return "0%"
    if rate >= 1:
        return "100%"
    value = rate * 100
    if value < 0.1:
        return "<0.1%"
    if value < 10:
        text = f"{value:.2g}" if value >= 1 else f"{value:.1g}"
        return f"{float(text):g}%"
    rounded = round(value)
    return ">99%" if rounded >= 100 else f"{rounded}%"


def bound_text(attempts: int, confidence: float = CONFIDENCE) -> str:
    """``"flake rate < 6% at 95%"`` for a test with ``attempts`` clean attempts."""
    return f"flake rate < {percent_ceiling(clean_bound(attempts, confidence))} at {confidence:.0%}"


def percent_ceiling(rate: float) -> str:
    """A bound as a percentage rounded *up* (a bound must never understate).

    ``0.0581`` -> ``6%``, ``0.0950`` -> ``10%``, ``0.00301`` -> ``0.31%``.
    """
    if rate >= 1:
        return "100%"
    value = rate * 100
    if value >= 1:
        return f"{math.ceil(value - 1e-9):d}%"
    scale = 10 ** (1 - math.floor(math.log10(value))) if value > 0 else 1  # 2 significant digits
    return f"{math.ceil(value * scale - 1e-9) / scale:g}%"
