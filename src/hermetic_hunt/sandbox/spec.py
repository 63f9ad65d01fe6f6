"""What one attempt's sandbox is: :class:`SandboxSpec`, and the marker that configures it.

``@pytest.mark.hermetic(**kwargs)`` takes hermetic-sandbox's own keyword
arguments (see its README); :func:`spec_from_marker` validates them into a
spec, with a one-line :class:`~hermetic_hunt.errors.BadOption` naming the bad
value and the accepted ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from hermetic_hunt.errors import BadOption
from hermetic_hunt.journal import INSTANTS, Journal
from hermetic_hunt.untrusted import is_number, is_whole


@dataclass(frozen=True)
class SandboxSpec:
    """How one attempt is sandboxed (hermetic's keyword arguments + ours)."""

    seed: int
    now: float
    mode: str = "seeded"  # seeded | record | replay
    #: Virtual seconds the round's timeline has run before this attempt
    #: (where ``monotonic``/``perf_counter`` continue from).
    elapsed: float = 0.0
    #: Clock profile of a seeded attempt (:mod:`hermetic_hunt.sandbox.profiles`).
    profile: str = "exact"
    test_id: str = ""
    tick: float = 1e-6
    clock: str = "virtual"
    rng: str = "all"
    #: The global ``random`` stream flows through the attempt as in a plain
    #: run: neither seeded nor put back (the suite seeds it at import, so a
    #: test's draws depend on the tests before it: see :mod:`hermetic_hunt.engine.rng`).
    stream: bool = False
    network: str | tuple[str, ...] = "block"
    allow_loopback: bool = True
    allow_unix: bool = True
    fs: str = "off"
    chdir: bool = True
    env: tuple[tuple[str, str | None], ...] = ()
    scrub_env: bool = False
    deep_datetime: bool = True
    spin_limit: int = 1_000_000
    strict_replay: bool = True
    replay: Journal | None = None


_BOOL_KEYS = ("allow_loopback", "allow_unix", "chdir", "scrub_env", "strict_replay",
              "deep_datetime")  # fmt: skip
CHOICES = {"clock": ("virtual", "off"), "rng": ("all", "seed", "off"), "fs": ("off", "isolate")}
_MARKER_KEYS = frozenset(
    {"off", "seed", "now", "tick", "network", "env", "spin_limit", *_BOOL_KEYS, *CHOICES}
)
#: What ``scrub_env=True`` keeps (plus ``PYTEST_*`` and ``HERMETIC*``).
SCRUB_KEEP = frozenset(
    {"PATH", "HOME", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
     "SHELL", "USER", "PYTHONHASHSEED", "VIRTUAL_ENV", "PYTHONPATH"}
)  # fmt: skip


def _bad(key: str, expected: str, value: Any) -> BadOption:
    return BadOption(f"@pytest.mark.hermetic({key}=...): expected {expected}, got {value!r}")


def start_time(value: Any) -> float:
    """An ISO date, ``datetime`` or epoch seconds as epoch seconds (naive = UTC)."""
    seconds: float | None = None
    if is_number(value):
        seconds = float(value)
    elif isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        seconds = aware.timestamp()
    elif isinstance(value, str):
        try:
            return start_time(datetime.fromisoformat(value))
        except ValueError:
            pass
    if seconds is None or not INSTANTS[0] <= seconds <= INSTANTS[1]:
        raise _bad("now", "an ISO date, a datetime or epoch seconds within years 1-9999", value)
    return seconds


def _network(value: Any) -> str | tuple[str, ...]:
    if isinstance(value, str) and value in ("block", "off", "allow"):
        return "off" if value == "allow" else value
    if isinstance(value, (list, tuple, set, frozenset)) and all(
        isinstance(entry, str) and entry for entry in value
    ):
        return tuple(sorted(value)) if isinstance(value, (set, frozenset)) else tuple(value)
    raise _bad("network", "'block', 'off' or a list of 'host[:port]'", value)


def _env(value: Any) -> tuple[tuple[str, str | None], ...]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
    ):
        raise _bad("env", "a dict of str to str (or None to unset)", value)
    return tuple(value.items())


#: Marker keys that take a non-negative number: (is it one, what is expected, the value kept).
_NUMBERS: dict[str, tuple[Callable[[Any], bool], str, Callable[[Any], Any]]] = {
    "seed": (is_whole, "a non-negative int", lambda value: value & ((1 << 63) - 1)),
    "tick": (is_number, "a non-negative number of seconds", float),
    "spin_limit": (is_whole, "a non-negative int (0 disables the spin detector)", lambda v: v),
}
_READERS: dict[str, Callable[[Any], Any]] = {"now": start_time, "network": _network, "env": _env}


def _value(key: str, value: Any) -> Any:
    if key in _NUMBERS:
        check, expected, kept = _NUMBERS[key]
        if not check(value) or value < 0:
            raise _bad(key, expected, value)
        return kept(value)
    if key in _READERS:
        return _READERS[key](value)
    if key in _BOOL_KEYS:
        if not isinstance(value, bool):
            raise _bad(key, "True or False", value)
        return value
    if value not in CHOICES[key]:
        raise _bad(key, f"one of {', '.join(map(repr, CHOICES[key]))}", value)
    return value


def spec_from_marker(base: SandboxSpec, kwargs: Mapping[str, Any]) -> SandboxSpec | None:
    """Apply ``@pytest.mark.hermetic(**kwargs)`` to ``base``; None means ``off=True``."""
    unknown = sorted(set(kwargs) - _MARKER_KEYS)
    if unknown:
        if any(key in ("record", "replay") for key in unknown):
            raise BadOption(
                f"@pytest.mark.hermetic({unknown[0]}=...) is not allowed during a hunt: "
                "use --hermetic-hunt-mode=record, then --hermetic-replay-db"
            )
        raise BadOption(
            f"@pytest.mark.hermetic got unknown argument(s) {', '.join(unknown)}; "
            f"expected some of: {', '.join(sorted(_MARKER_KEYS))}"
        )
    if kwargs.get("off"):
        return None
    changes = {key: _value(key, value) for key, value in kwargs.items() if key != "off"}
    return replace(base, **changes)
