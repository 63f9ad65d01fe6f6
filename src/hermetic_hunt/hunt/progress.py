"""The hunt's live progress line and its ETA (pure functions)."""

from __future__ import annotations

from dataclasses import dataclass

from hermetic_hunt.models import attempts_text


@dataclass(frozen=True)
class Progress:
    round_done: int
    rounds: int | None  # None: time budget
    strategy: str
    attempts: int
    failed: int
    flaky: int
    violations: int
    elapsed: float
    budget: float | None = None
    tests: int = 0
    repeated: int = 0  # of the attempts, a twice round's repeated runs


def eta_seconds(p: Progress) -> float | None:
    if p.rounds is None:
        return max(0.0, (p.budget or 0.0) - p.elapsed)
    if p.round_done <= 0 or p.elapsed <= 0:
        return None
    per_round = p.elapsed / p.round_done
    return max(0.0, per_round * (p.rounds - p.round_done))


def clock(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def line(p: Progress) -> str:
    total = str(p.rounds) if p.rounds is not None else "?"
    width = len(total)
    parts = [
        f"round {p.round_done:>{width}}/{total} [{p.strategy}]",
        attempts_text(p.attempts, p.repeated),
        f"{p.failed:,} failed",
        f"{p.flaky} flaky so far",
    ]
    if p.violations:
        parts.append(f"{p.violations:,} with network violations")
    eta = eta_seconds(p)
    if eta is not None:
        parts.append(f"ETA {clock(eta)}" if p.rounds is not None else f"{clock(eta)} left")
    return "hermetic-hunt: " + " · ".join(parts)
