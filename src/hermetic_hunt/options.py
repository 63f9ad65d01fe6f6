"""Parsing and validating option values (pure; the plugin registers them).

Each parser returns a value or raises :class:`~hermetic_hunt.errors.BadOption`
with a message that shows the bad value and the fix.
"""

from __future__ import annotations

import math
import re

from hermetic_hunt.errors import BadOption
from hermetic_hunt.models import MODES, ORDERS, Mode, Order, Shard
from hermetic_hunt.timing import DEFAULT_TIME_MIX, EXACT_MIX, TimeMix

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs)\s*$", re.I)
_UNITS = {"s": 1.0, "sec": 1.0, "secs": 1.0, "m": 60.0, "min": 60.0, "mins": 60.0}
_UNITS.update({"h": 3600.0, "hr": 3600.0, "hrs": 3600.0})
MAX_ROUNDS = 1_000_000


def parse_duration(text: str) -> float | None:
    """``"90s"`` -> 90.0, ``"10m"`` -> 600.0, ``"1h"`` -> 3600.0; else None."""
    match = _DURATION.match(text)
    if not match:
        return None
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


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


def parse_choice(option: str, text: str, choices: tuple[str, ...]) -> str:
    value = text.strip().lower()
    if value not in choices:
        raise BadOption(f"{option}: expected one of {', '.join(choices)}, got {text!r}")
    return value


def parse_mode(text: str) -> Mode:
    value = parse_choice("--hermetic-hunt-mode", text, MODES)
    return next(mode for mode in MODES if mode == value)


def parse_order(text: str) -> Order:
    value = parse_choice("--hermetic-hunt-order", text, ORDERS)
    return next(order for order in ORDERS if order == value)


def parse_isolate(text: str) -> bool:
    return parse_choice("--hermetic-hunt-isolate", text, ("on", "off")) == "on"


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


def parse_positive_int(option: str, text: str) -> int:
    value = text.strip()
    if not value.isdigit() or int(value) < 1:
        raise BadOption(f"{option}: expected a positive whole number, got {text!r}")
    return int(value)


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


_TIME_USAGE = (
    "--hermetic-hunt-time: expected default, exact, or percents of rounds like "
    "jitter=20,slow=10,stress=10,switch=10 (at most 100 in all)"
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
