"""The hunt's live progress line and its ETA (pure functions)."""

from __future__ import annotations

from hermetic_hunt.hunt.tally import Tallies
from hermetic_hunt.models import Settings, attempts_text


def clock(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def line(done: int, settings: Settings, strategy: str, t: Tallies, elapsed: float) -> str:
    """After ``done`` rounds (``elapsed`` seconds): the attempts' counts, and the ETA of
    a round count (once a round took time) or the time a budget has left."""
    rounds = settings.rounds
    total = str(rounds) if rounds is not None else "?"
    parts = [
        f"round {done:>{len(total)}}/{total} [{strategy}]",
        attempts_text(t.attempts, t.repeated),
        f"{t.failed_attempts:,} failed",
        f"{t.flaky} flaky so far",
    ]
    if t.violation_attempts:
        parts.append(f"{t.violation_attempts:,} with network violations")
    if rounds is None:
        parts.append(f"{clock(max(0.0, (settings.budget_seconds or 0.0) - elapsed))} left")
    elif done > 0 and elapsed > 0:
        parts.append(f"ETA {clock(max(0.0, elapsed / done * (rounds - done)))}")
    return "hermetic-hunt: " + " · ".join(parts)
