"""Plain data passed between the layers (frozen where shared).

No pytest, click, SQLite or hermetic imports: these are the values the hooks
produce and the core consumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermetic_hunt.hunt.schedule import Shard

#: Sandbox modes of a hunt (``--hermetic-hunt-mode``).
MODES = ("seeded", "record", "off")
#: Attempt outcomes stored in ``attempts.outcome``.
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "crashed")
#: Flake kinds, exactly as stored and reported.
KINDS = (
    "victim",
    "brittle",
    "self-polluting",
    "random",
    "time",
    "hash-order",
    "network",
    "concurrency",
    "unexplained",
)
#: The largest PYTHONHASHSEED Python accepts (it refuses to start above it).
MAX_HASH_SEED = 4_294_967_295


def hash_seed_problem(value: int | None) -> str | None:
    """Why ``value`` cannot be a PYTHONHASHSEED (None: it can, or there is none)."""
    if value is None or 0 <= value <= MAX_HASH_SEED:
        return None
    return f"hash seed {value} is outside PYTHONHASHSEED's range 0..{MAX_HASH_SEED}"


@dataclass(frozen=True)
class HuntSettings:
    """A hunt's configuration, resolved once on the controller.

    Exactly one of ``rounds`` / ``budget_seconds`` is set.
    """

    rounds: int | None
    budget_seconds: float | None
    base_seed: int
    mode: str = "seeded"
    order: str = "auto"
    db_path: Path = Path("flakes.db")
    isolate: bool = True
    isolate_budget: int = 200
    probe_timeout: float = 120.0
    integration_marker: str = "integration"
    shard: Shard = field(default_factory=Shard)

    @property
    def describe_length(self) -> str:
        if self.rounds is not None:
            return f"{self.rounds} round{'s' if self.rounds != 1 else ''}"
        return f"a {format_seconds(self.budget_seconds or 0)} budget"


@dataclass(frozen=True)
class Failure:
    """What one failing attempt looked like.

    The *signature* of a failure is ``(exc_type, location)``; ``message`` is
    normalised (memory addresses and temporary paths masked) so that equal
    failures compare equal across attempts and machines.
    """

    exc_type: str
    message: str
    location: str
    excerpt: str

    @property
    def signature(self) -> str:
        return f"{self.exc_type} at {self.location}" if self.location else self.exc_type

    def describe(self) -> str:
        text = f"{self.exc_type} {self.message}".strip() if self.message else self.exc_type
        return f"{text} at {self.location}" if self.location else text


@dataclass(frozen=True)
class Violation:
    """A network operation the guard blocked."""

    op: str
    host: str
    port: int | None
    detail: str = ""

    def describe(self) -> str:
        where = self.host if self.port is None else f"{self.host}:{self.port}"
        return f"{self.op} {where}"


@dataclass
class AttemptRecord:
    """One execution of one test, as stored in ``attempts``.

    ``execution`` is 1 for the scheduled run and 2, 3... for reruns made by
    pytest-rerunfailures inside the same attempt slot.
    """

    run_id: int
    round_no: int
    worker: str
    position: int
    nodeid: str
    execution: int
    outcome: str
    phase: str | None
    duration: float
    seed: int | None
    now: float | None
    mode: str
    hash_seed: int | None
    counts: dict[str, Any] | None = None
    violations: list[Violation] = field(default_factory=list)
    failure: Failure | None = None
    journal: bytes | None = None
    journal_format: str | None = None
    attempt_id: int | None = None  # set once stored


@dataclass(frozen=True)
class RunInfo:
    """Facts about a hunt stored in ``runs`` when it starts."""

    uuid: str
    argv: list[str]
    invocation_dir: str
    rootdir: str
    settings: HuntSettings
    workers: int
    worker_spec: list[str]
    environment: dict[str, Any]


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3600`` -> ``1h``; ``0.5`` -> ``0.5s``."""
    if seconds < 60:
        return f"{seconds:g}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if secs:
        text += f"{secs}s"
    return text


@dataclass(frozen=True)
class ReproStep:
    """One attempt of a reproducer: which test, with what seed / start time.

    ``attempt_id`` names the stored attempt the step was taken from: a
    ``record``-mode step replays its journal; for a ``seeded`` step it is
    informational (the seed is the reproducer).
    """

    nodeid: str
    seed: int | None
    now: float | None
    mode: str = "seeded"
    attempt_id: int | None = None


@dataclass(frozen=True)
class Reproducer:
    """The smallest sequence that reproduces a flake, and what it should do.

    ``steps`` run in order in one fresh process: polluters or state-setters
    first, the flaky test last (twice for a self-polluting test). The last
    step is expected to fail with ``exc_type`` at ``location``.
    Stored as JSON in ``flakes.reproducer`` (see ``docs/database.md``).
    """

    steps: tuple[ReproStep, ...]
    hash_seed: int | None
    exc_type: str
    location: str
    message: str = ""
    run_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [
                {
                    "nodeid": s.nodeid,
                    "seed": s.seed,
                    "now": s.now,
                    "mode": s.mode,
                    "attempt_id": s.attempt_id,
                }
                for s in self.steps
            ],
            "hash_seed": self.hash_seed,
            "signature": {
                "exc_type": self.exc_type,
                "location": self.location,
                "message": self.message,
            },
            "run_id": self.run_id,
        }

    @classmethod
    def from_json(cls, data: Any) -> Reproducer:
        """Parse stored JSON (untrusted): ValueError on anything malformed."""

        def opt_int(value: Any) -> int | None:
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError("expected an integer")
            return value

        def opt_float(value: Any) -> float | None:
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError("expected a number")
            return float(value)

        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ValueError("reproducer must be an object with a list of steps")
        if not data["steps"] or len(data["steps"]) > 10_000:
            raise ValueError("reproducer must have between 1 and 10,000 steps")
        steps = []
        for raw in data["steps"]:
            if not isinstance(raw, dict) or not isinstance(raw.get("nodeid"), str):
                raise ValueError("each step needs a nodeid")
            mode = raw.get("mode", "seeded")
            if mode not in MODES:
                raise ValueError(f"unknown step mode {mode!r}")
            steps.append(
                ReproStep(
                    nodeid=raw["nodeid"],
                    seed=opt_int(raw.get("seed")),
                    now=opt_float(raw.get("now")),
                    mode=mode,
                    attempt_id=opt_int(raw.get("attempt_id")),
                )
            )
        signature = data.get("signature") or {}
        if not isinstance(signature, dict):
            raise ValueError("signature must be an object")
        texts = [signature.get(k, "") for k in ("exc_type", "location", "message")]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("signature fields must be text")
        hash_seed = opt_int(data.get("hash_seed"))
        problem = hash_seed_problem(hash_seed)
        if problem:
            raise ValueError(problem)
        return cls(
            steps=tuple(steps),
            hash_seed=hash_seed,
            exc_type=texts[0],
            location=texts[1],
            message=texts[2],
            run_id=opt_int(data.get("run_id")),
        )
