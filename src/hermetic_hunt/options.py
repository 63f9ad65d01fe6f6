"""Parsing and validating option values (pure; the plugin registers them).

Each parser returns a value or raises :class:`~hermetic_hunt.errors.BadOption`
with a message that shows the bad value and the fix.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import TypeVar

from hermetic_hunt.errors import BadOption
from hermetic_hunt.models import MAX_HORIZON_DAYS, Shard
from hermetic_hunt.timing import DEFAULT_TIME_MIX, EXACT_MIX, TimeMix

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs)\s*$", re.I)
#: Seconds per unit, by the unit's first letter.
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
MAX_ROUNDS = 1_000_000
_Word = TypeVar("_Word", bound=str)


def parse_duration(text: str) -> float | None:
    """``"90s"`` -> 90.0, ``"10m"`` -> 600.0, ``"1h"`` -> 3600.0; else None."""
    match = _DURATION.match(text)
    if not match:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)[0].lower()]


def parse_hunt(text: str) -> tuple[int | None, float | None]:
    """``--hermetic-hunt`` value -> ``(rounds, None)`` or ``(None, seconds)``."""
    value = text.strip()
    if value.isdigit():
        rounds = int(value)
        if not 1 <= rounds <= MAX_ROUNDS:
            raise BadOption(
                f"--hermetic-hunt: expected between 1 and {MAX_ROUNDS:,} rounds, got {text!r}"
            )
        return rounds, None
    seconds = parse_duration(value)
    if seconds is None:
        raise BadOption(
            "--hermetic-hunt: expected a number of rounds or a duration like 90s, "
            f"10m or 1h, got {text!r}"
        )
    if seconds <= 0:
        raise BadOption(f"--hermetic-hunt: the time budget must be positive, got {text!r}")
    return None, seconds


def parse_choice(option: str, text: str, choices: tuple[_Word, ...]) -> _Word:
    """One of ``choices`` (``--hermetic-hunt-mode``: one of :data:`MODES`, ...)."""
    value = text.strip().lower()
    if value in choices:
        return choices[choices.index(value)]
    raise BadOption(f"{option}: expected one of {', '.join(choices)}, got {text!r}")


def parse_shard(text: str) -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)``."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise BadOption(f"--hermetic-hunt-shard: expected K/M such as 1/4, got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise BadOption(
            f"--hermetic-hunt-shard: K must be between 1 and M (got {text!r}); "
            "shards are numbered 1/M ... M/M"
        )
    return Shard(index, count)


def parse_seconds(option: str, text: str) -> float:
    """A duration (``30s``, ``2m``) or plain seconds (``30``)."""
    value = text.strip()
    try:
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError(value)
    except ValueError:
        parsed = parse_duration(value)
        if parsed is None:
            raise BadOption(
                f"{option}: expected seconds or a duration like 30s or 2m, got {text!r}"
            ) from None
        seconds = parsed
    if seconds <= 0:
        raise BadOption(f"{option}: expected a positive duration, got {text!r}")
    return seconds


def parse_marker_name(option: str, text: str) -> str:
    value = text.strip()
    if not value.isidentifier():
        raise BadOption(f"{option}: expected a marker name such as integration, got {text!r}")
    return value


def parse_isolate_budget(
    text: str, option: str = "--hermetic-hunt-isolate-budget"
) -> tuple[int | None, float | None, bool]:
    """``--hermetic-hunt-isolate-budget``: probes per flaky test and/or overall time.

    ``"300"`` -> 300 probes; ``"15m"`` -> 15 minutes; ``"300,15m"`` both;
    ``"auto"`` the default time (as long as the rounds took). Returns
    ``(probes or None, seconds or None, auto)``; what is not given keeps
    its default.
    """
    probes: int | None = None
    seconds: float | None = None
    auto = False
    items = [item for item in re.split(r"[\s,]+", text.strip()) if item]
    if not items:
        raise BadOption(_BUDGET_HELP.format(option=option, text=text))
    for item in items:
        if item.lower() == "auto":
            auto = True
        elif item.isdigit() and probes is None:
            probes = int(item)
            if probes < 1:
                raise BadOption(f"{option}: needs at least 1 probe, got {text!r}")
        elif (duration := parse_duration(item)) is not None and seconds is None:
            if duration <= 0:
                raise BadOption(f"{option}: the time must be positive, got {text!r}")
            seconds = duration
        else:
            raise BadOption(_BUDGET_HELP.format(option=option, text=text))
    if auto and seconds is not None:
        raise BadOption(f"{option}: give a time or auto, not both, got {text!r}")
    return probes, seconds, auto


_BUDGET_HELP = (
    "{option}: expected probes per flaky test (300), an overall time (15m), both "
    "(300,15m) or auto, got {text!r}"
)
_TIME_USAGE = (
    "--hermetic-hunt-time: expected default, exact, or percents of rounds like "
    "jitter=20,slow=10,stress=10,switch=10,edge=10 (at most 100 in all)"
)


def parse_time(text: str) -> TimeMix:
    """``--hermetic-hunt-time``: ``default``, ``exact`` or ``jitter=30,switch=10``.

    Shares are percents of the rounds; conditions not named get none, the
    rest of the rounds run exact.
    """
    value = text.strip().lower()
    if value == "default":
        return DEFAULT_TIME_MIX
    if value == "exact":
        return EXACT_MIX
    names = [name for name, _ in DEFAULT_TIME_MIX.shares()]
    shares: dict[str, int] = {}
    for part in value.split(","):
        name, sep, number = part.partition("=")
        name, number = name.strip(), number.strip().removesuffix("%").strip()
        if not sep or name not in names or not number.isdigit():
            raise BadOption(f"{_TIME_USAGE}, got {text!r}")
        if name in shares:
            raise BadOption(f"--hermetic-hunt-time: {name} is given twice in {text!r}")
        shares[name] = int(number)
    if sum(shares.values()) > 100:
        raise BadOption(
            f"--hermetic-hunt-time: the shares add up to {sum(shares.values())}%, over 100%: "
            f"got {text!r}"
        )
    return TimeMix(**{name: shares.get(name, 0) for name in names})


_HORIZON = re.compile(r"^\s*(\d+)\s*(d|w|y)?\s*$", re.I)
_HORIZON_DAYS = {"d": 1, "w": 7, "y": 365}


def parse_horizon(text: str) -> int:
    """``--hermetic-hunt-horizon``: ``4y``, ``26w``, ``90d`` or plain days -> days.

    A year counts 365 days, plus one per four years (so ``4y`` holds a Feb 29).
    """
    match = _HORIZON.match(text)
    if match is None or int(match.group(1)) < 1:
        raise BadOption(
            f"--hermetic-hunt-horizon: expected how far ahead start dates reach, like 4y, "
            f"26w or 90d, got {text!r}"
        )
    count = int(match.group(1))
    unit = (match.group(2) or "d").lower()
    days = count * _HORIZON_DAYS[unit] + (count // 4 if unit == "y" else 0)
    if days > MAX_HORIZON_DAYS:
        raise BadOption(f"--hermetic-hunt-horizon: at most 100y, got {text!r}")
    return days


_DAY_TEXT = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})\s*$")


def parse_today(text: str) -> str | float | None:
    """``--hermetic-hunt-today``: ``now`` -> None (the run's today), ``commit`` (the plugin
    resolves it) or a day ``YYYY-MM-DD`` -> its midnight (UTC epoch seconds)."""
    value = text.strip().lower()
    if value in ("now", "commit"):
        return None if value == "now" else value
    match = _DAY_TEXT.match(value)
    try:
        if match is None:
            raise ValueError(value)
        year, month, day_of_month = (int(part) for part in match.groups())
        day = datetime(year, month, day_of_month, tzinfo=timezone.utc)
    except ValueError:
        raise BadOption(
            f"--hermetic-hunt-today: expected now, commit or a day like 2024-02-29, got {text!r}"
        ) from None
    return day.timestamp()
