"""The timing conditions vocabulary (pure): clock profiles, round conditions, the mix.

A hunt's rounds run under timing conditions (``--hermetic-hunt-time``,
``docs/sandbox.md``): a clock profile of the seeded sandbox, CPU stress, or
a tiny switch interval. These names, the :class:`TimeMix` that says how
many rounds get each, and the validation of conditions read back from a
database live here; :mod:`hermetic_hunt.models` uses them in
:class:`~hermetic_hunt.models.Settings` and :class:`~hermetic_hunt.models.Step`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from hermetic_hunt.untrusted import is_number, is_whole

Profile = Literal["exact", "jitter", "slow"]
#: Clock profiles of a seeded attempt (see ``docs/sandbox.md``): ``exact``
#: (the virtual clock moves only by sleeps), ``jitter`` (every read advances
#: a little, sleeps last longer, heavy-tailed), ``slow`` (every read advances
#: by about a millisecond, as on an overloaded CI runner).
PROFILES: tuple[Profile, ...] = get_args(Profile)

Condition = Literal["exact", "jitter", "slow", "stress", "switch", "edge"]
#: What a round runs under (``--hermetic-hunt-time``): a clock profile
#: (seeded mode), CPU stress (record and off modes), a tiny switch interval,
#: or second edges (seeded mode: every attempt starts 1-20 ms before a whole
#: second of the virtual clock, :func:`hermetic_hunt.seeds.second_edge`).
CONDITIONS: tuple[Condition, ...] = get_args(Condition)
#: Conditions that need the virtual clock: other modes run them exact.
VIRTUAL_CLOCK: frozenset[Condition] = frozenset({"jitter", "slow", "edge"})


@dataclass(frozen=True)
class TimeMix:
    """Shares of a hunt's rounds (percent) run under each timing condition.

    The rest run exact (calm). Which rounds is a pure function of the base
    seed and the round (:func:`hermetic_hunt.hunt.schedule.condition_for`).
    A condition a mode cannot honour runs exact: ``jitter`` and ``slow``
    need the virtual clock (seeded mode), ``stress`` needs real time
    (record and off modes).
    """

    jitter: int = 20
    slow: int = 10
    stress: int = 10
    switch: int = 10
    edge: int = 10

    def shares(self) -> tuple[tuple[Condition, int], ...]:
        return (("jitter", self.jitter), ("slow", self.slow), ("stress", self.stress),
                ("switch", self.switch), ("edge", self.edge))  # fmt: skip

    def spec(self) -> str:
        """As ``--hermetic-hunt-time`` takes it: ``default``, ``exact``, ``jitter=30,switch=10``."""
        if self == DEFAULT_TIME_MIX:
            return "default"
        parts = [f"{name}={share}" for name, share in self.shares() if share]
        return ",".join(parts) if parts else "exact"

    def describe(self) -> str:
        """``jitter 20% · slow 10% · stress 10% · switch 10% · edge 10%`` (``exact``: none)."""
        parts = [f"{name} {share}%" for name, share in self.shares() if share]
        return " · ".join(parts) if parts else "exact"

    def to_json(self) -> dict[str, int]:
        return dict(self.shares())

    @classmethod
    def from_json(cls, data: Any) -> TimeMix:
        """Stored shares (untrusted); a run from before mixes existed ran all exact, and
        a condition a run's version did not have (``edge``) ran in none of its rounds."""
        if not isinstance(data, dict):
            return EXACT_MIX
        values = {name: data.get(name, 0) for name, _ in DEFAULT_TIME_MIX.shares()}
        values = {k: v if is_whole(v) and 0 <= v <= 100 else 0 for k, v in values.items()}
        if sum(values.values()) > 100:
            return EXACT_MIX
        return cls(**values)


#: The default mix: most rounds exact, a share of each condition (docs/sandbox.md).
DEFAULT_TIME_MIX = TimeMix()
#: No timing condition: every round exact (as before timing conditions existed).
EXACT_MIX = TimeMix(0, 0, 0, 0, 0)


def profile_of(condition: str, mode: str) -> Profile | None:
    """The clock profile ``condition`` gives an attempt in ``mode`` (None: no virtual clock)."""
    return (as_profile(condition) or "exact") if mode == "seeded" else None


def as_profile(value: object) -> Profile | None:
    """``value`` as a :data:`Profile` (None when it is none of them)."""
    return next((profile for profile in PROFILES if profile == value), None)


#: The largest switch interval a step may ask for (sys.setswitchinterval
#: accepts more; a stored value above this is not one a hunt drew).
MAX_SWITCH_INTERVAL = 1.0


def switch_interval(value: object) -> float | None:
    """A stored switch interval (untrusted): seconds in (0, 1], else None."""
    return float(value) if is_number(value) and 0 < value <= MAX_SWITCH_INTERVAL else None


def step_conditions(raw: dict[str, Any]) -> dict[str, Any]:
    """A step's stored timing conditions (untrusted JSON): ValueError if malformed.

    Absent keys (a reproducer from before timing conditions) mean none.
    """
    profile, interval, stress = raw.get("profile"), raw.get("switch_interval"), raw.get("stress", 0)
    if profile is not None and as_profile(profile) is None:
        raise ValueError(f"unknown clock profile {profile!r} (known: {', '.join(PROFILES)})")
    seconds = switch_interval(interval)
    if interval is not None and seconds is None:
        raise ValueError(
            f"switch_interval must be a number of seconds in (0, {MAX_SWITCH_INTERVAL:g}], "
            f"got {interval!r}"
        )
    if not is_whole(stress) or not 0 <= stress <= 1024:
        raise ValueError(f"stress must be a number of busy processes (0-1024), got {stress!r}")
    out = {"profile": profile, "switch_interval": seconds, "stress": stress or None}
    return {key: value for key, value in out.items() if value is not None}
