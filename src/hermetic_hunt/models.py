"""The shared vocabulary: plain values passed between the stages (pure).

No pytest, click, SQLite or hermetic imports. Every idea that more than one
stage needs is defined here once: the modes, orders, outcomes and exposures (as
``Literal`` types with their tuples of values; the flake kinds are the table
of :mod:`hermetic_hunt.kinds`), the defaults of the options,
one :class:`Settings` object (resolved once on the controller, stored in the
run row and read back by isolation and replay), one :class:`Step` (a test
with the seed and start time it runs with, from a reproducer to the
sandbox), one :class:`Attempt` (what one execution of a test did, written by
the engine and read back by every stage), and one parser of the ids users
type (:func:`parse_ref`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import math
import operator
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from hermetic_hunt.kinds import info as kind_info
from hermetic_hunt.seeds import DEFAULT_HORIZON_DAYS, Dates
from hermetic_hunt.timing import (
    DEFAULT_TIME_MIX,
    Profile,
    TimeMix,
    as_profile,
    step_conditions,
)
from hermetic_hunt.untrusted import is_number, is_whole, items, number, text, whole

# -- modes, orders, outcomes, exposures -----------------------------------------

Mode = Literal["seeded", "record", "off"]
#: Sandbox modes of a hunt (``--hermetic-hunt-mode``).
MODES: tuple[Mode, ...] = get_args(Mode)

Order = Literal["auto", "shuffle", "grouped", "reversed", "twice"]
#: Round orders (``--hermetic-hunt-order``); see :mod:`hermetic_hunt.hunt.schedule`.
ORDERS: tuple[Order, ...] = get_args(Order)

Outcome = Literal["passed", "failed", "skipped", "xfailed", "xpassed", "crashed"]
#: Every outcome an attempt can have.
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
#: Outcomes that count as a failure: the test did not do what it promised.
FAILING: frozenset[str] = frozenset({"failed", "crashed", "xpassed"})
#: Outcomes that count as a pass.
PASSING: frozenset[str] = frozenset({"passed", "xfailed"})

Exposure = Literal["normal", "order", "repeat", "dates", "sandbox", "past"]
#: What a CI run will see of a finding, most exposed first (see :func:`exposure`).
EXPOSURES: tuple[Exposure, ...] = get_args(Exposure)
#: ``flakes.evidence["found_by"]`` of a victim no round failed, found by
#: isolation's polluter probe (:mod:`hermetic_hunt.isolate.blast`).
FOUND_BY = "polluter probe"
#: How each exposure reads in reports and summaries (a ``dates`` finding
#: names its date: :func:`exposure_words`).
EXPOSURE_TEXT: dict[str, str] = {
    "normal": "fails in normal runs",
    "order": "fails under shuffling or xdist",
    "dates": "fails on a coming date",
    "repeat": "fails only when rerun in one process (pytest-rerunfailures, --count)",
    "sandbox": "fails only under the sandbox",
    "past": "past dates only",
}
#: Exposures a CI run will see, on some day, in some order: "what CI will
#: see" counts them, they are quarantined and they fail the hunt (exit 1).
#: ``past``: failed only at dates before today -- shown apart, never
#: quarantined, never an exit status.
CI_EXPOSURES: frozenset[str] = frozenset(EXPOSURES) - {"past"}

#: The largest PYTHONHASHSEED Python accepts (it refuses to start above it).
MAX_HASH_SEED = 4_294_967_295

# -- defaults (the one place they are written down) ------------------------------

DEFAULT_DB = "flakes.db"


def database_path(path: str | os.PathLike[str], base: str | os.PathLike[str] | None = None) -> Path:
    """A database argument as the absolute path every command uses: ``~`` expanded,
    relative to ``base`` (default: the working directory), symlinks resolved. Resolved
    once, before any sandbox or test can change the working directory."""
    return Path(base or os.getcwd(), os.path.expanduser(os.fspath(path))).resolve()


DEFAULT_MODE: Mode = "seeded"
DEFAULT_ORDER: Order = "auto"
DEFAULT_ISOLATE_BUDGET = 200
#: The least time an ``auto`` isolation time budget allows (seconds): a tiny
#: suite's rounds take less than starting one probe server.
MIN_ISOLATE_SECONDS = 60.0
DEFAULT_PROBE_TIMEOUT = 120.0
#: Seconds one attempt of a test may run before the hunt stops it (a test that
#: hangs -- plain pytest would wait forever -- fails as ``Timeout`` instead).
DEFAULT_TEST_TIMEOUT = 60.0
DEFAULT_INTEGRATION_MARKER = "integration"
#: The farthest ``--hermetic-hunt-horizon`` reaches (100 years).
MAX_HORIZON_DAYS = 36525


def exposure(
    kinds: Sequence[str],
    *,
    status: str = "flaky",
    default_order: bool | None = None,
    fails_now: bool | None = None,
    past_only: bool = False,
) -> Exposure:
    """What CI will see of a finding (the one place it is decided).

    ``status`` is the report's (``flaky``, ``broken``, ``not-idempotent``,
    ``sandbox-incompatible``...); ``default_order``: the reproducer's tests
    run in that order in pytest's default (collection) order, so a plain
    ``pytest`` run fails; ``fails_now``: a time flake replayed at the coming
    dates fails at today's (None: not a calendar-decided flake, or not checked);
    ``past_only``: it failed only at instants before today, and at none of
    the coming dates (``past``: no CI run will see it).
    Each kind's rule is its row's ``exposure`` (:mod:`hermetic_hunt.kinds`);
    what each level means is in docs/isolation.md, 'What CI will see:
    exposure'. A kind shown alone in fresh processes (random, concurrency...)
    outranks how the hunt happened to see the test fail.
    """
    if status == "broken":
        return "normal"
    if status == "sandbox-incompatible":
        return "sandbox"
    rules = {row.exposure for row in map(kind_info, kinds) if row is not None}
    if "any-run" in rules:
        return "normal"  # whatever the hunt saw: a fresh process alone shows it
    if status == "not-idempotent":
        return "repeat"
    if "default-order" in rules:
        return "normal" if default_order else "order"
    if "calendar" in rules:
        # Only a flake the calendar decides (checked at the coming dates) can
        # wait for its date; a clock that runs slow or jumps fails any day.
        if past_only:
            return "past"
        return "dates" if fails_now is False else "normal"
    if rules == {"repeat"} and status != "flaky":
        return "repeat"
    return "order"


def exposure_words(level: str, dates: Any = None) -> str:
    """How a finding's exposure reads: ``fails on 2026-12-31 (in 28 days)`` for a
    ``dates`` finding whose coming dates were checked (``dates``: its
    ``dates`` fact, untrusted), else :data:`EXPOSURE_TEXT`."""
    text = EXPOSURE_TEXT.get(level, level)
    if level != "dates" or not isinstance(dates, dict):
        return text
    when, since = dates.get("next_failure"), dates.get("checked_from")
    if not isinstance(when, str) or not isinstance(since, str):
        return text
    try:
        day = datetime.fromisoformat(when)
        days = (day.date() - datetime.fromisoformat(since).date()).days
    except ValueError:
        return text
    ahead = "today" if days <= 0 else f"in {days} day{'s' if days != 1 else ''}"
    return f"fails on {day.date().isoformat()} ({ahead})"


def function_of(nodeid: str) -> str:
    """``test_x.py::test_y[3-a]`` -> ``test_x.py::test_y`` (other nodeids as they are):
    the test function whose parametrizations a report may show as one finding."""
    return nodeid[: nodeid.index("[")] if nodeid.endswith("]") and "[" in nodeid else nodeid


def hash_seed_problem(value: int | None) -> str | None:
    """Why ``value`` cannot be a PYTHONHASHSEED (None: it can, or there is none)."""
    if value is None or 0 <= value <= MAX_HASH_SEED:
        return None
    return f"hash seed {value} is outside PYTHONHASHSEED's range 0..{MAX_HASH_SEED}"


def as_mode(value: object, default: Mode = DEFAULT_MODE) -> Mode:
    """``value`` as a :data:`Mode` (``default`` when it is none of them)."""
    return next((mode for mode in MODES if mode == value), default)


#: ``Attempt.repeat`` of a ``twice`` round's second run of a test: the one
#: *repeated* run. Every other attempt is *plain* -- an ordinary attempt
#: (``repeat`` 0) and a twice round's first run (1), which is the test's first
#: run in a fresh process like any other -- and counts in rates and verdicts.
REPEATED_RUN = 2
#: The SQL condition on an ``attempts`` row (alias ``a``) of a plain attempt.
PLAIN_SQL = f"a.repeat != {REPEATED_RUN}"


def is_plain(repeat: int) -> bool:
    """An attempt with this ``repeat`` counts as a plain run (see :data:`REPEATED_RUN`)."""
    return repeat != REPEATED_RUN


def sql_set(values: frozenset[str] | tuple[str, ...]) -> str:
    """``('a', 'b')`` for an SQL ``IN``: constants of this module only, never data."""
    return "(" + ", ".join(f"'{v}'" for v in sorted(values)) + ")"


# -- ids ----------------------------------------------------------------------------

_REF = re.compile(r"([FfAa])0*([1-9][0-9]{0,17})")


@dataclass(frozen=True)
class Ref:
    """A parsed id: ``F3`` (a flake) or ``A1207`` (an attempt)."""

    kind: Literal["flake", "attempt"]
    number: int

    def __str__(self) -> str:
        return f"{'F' if self.kind == 'flake' else 'A'}{self.number}"


def parse_ref(text: str) -> Ref | None:
    """``F3``, ``f3``, ``F03`` -> flake 3; ``A12``, ``a012`` -> attempt 12; else None.

    The one parser of the ids a user types, everywhere (replay, show,
    isolate, report): anything else is a nodeid or an error for the caller
    to word.
    """
    match = _REF.fullmatch(text)
    if match is None:
        return None
    kind: Literal["flake", "attempt"] = "flake" if match.group(1) in "Ff" else "attempt"
    return Ref(kind, int(match.group(2)))


def looks_like_ref(text: str) -> bool:
    """``F``/``A`` followed by digits only (a malformed id rather than a nodeid)."""
    return re.fullmatch(r"[FfAa][0-9]*", text) is not None


# -- settings -------------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count`` machines hunting one suite."""

    index: int = 1
    count: int = 1

    def global_round(self, local_round: int) -> int:
        return local_round * self.count + (self.index - 1)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Settings:
    """A hunt's configuration, resolved once on the controller.

    Exactly one of ``rounds`` / ``budget_seconds`` is set. Stored as JSON in
    ``runs.settings`` (:meth:`to_json`); isolation (``hermetic-hunt
    isolate``) and replays read it back (:meth:`from_json`) instead of
    parsing the hunt's command line again.
    """

    rounds: int | None
    budget_seconds: float | None
    base_seed: int
    mode: Mode = DEFAULT_MODE
    order: Order = DEFAULT_ORDER
    db_path: Path = Path(DEFAULT_DB)
    isolate: bool = True
    isolate_budget: int = DEFAULT_ISOLATE_BUDGET
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    #: Seconds one attempt may run before it is stopped (a ``Timeout`` failure).
    test_timeout: float = DEFAULT_TEST_TIMEOUT
    integration_marker: str = DEFAULT_INTEGRATION_MARKER
    shard: Shard = field(default_factory=Shard)
    #: Isolation's overall time budget in seconds; None: ``auto`` (as long
    #: as the rounds took, at least :data:`MIN_ISOLATE_SECONDS`).
    isolate_seconds: float | None = None
    time: TimeMix = DEFAULT_TIME_MIX
    #: The run's today (real UTC epoch seconds, whole), fixed when the run
    #: starts and stored: start times, the coming dates a ``time`` flake is
    #: replayed at and "past dates only" are all measured from it, so a
    #: stored run re-derives the same instants. None: an old run (the real
    #: clock's now is used).
    today: float | None = None
    #: Where start times begin, when not ``today`` (``--hermetic-hunt-today``:
    #: a commit's date or a given day, for an old checkout).
    dates_from: float | None = None
    #: How many days ahead of ``dates_from`` (or ``today``) start times reach
    #: (``--hermetic-hunt-horizon``).
    horizon_days: int = DEFAULT_HORIZON_DAYS
    #: Round 0 is the default round (collection order, one process: a plain
    #: ``pytest`` run; :mod:`hermetic_hunt.hunt.schedule`). False: a run from
    #: before the default round, whose round 0 was shuffled like the others.
    default_round: bool = True

    @property
    def dates(self) -> Dates:
        """Where round start times are drawn (see :class:`~hermetic_hunt.seeds.Dates`)."""
        if self.dates_from is None:
            return self.today_window
        return Dates(self.dates_from, self.horizon_days)

    @property
    def today_window(self) -> Dates:
        """From the run's today over the horizon: where CI will run the tests."""
        if self.today is None:
            return Dates.from_now(self.horizon_days)
        return Dates(self.today, self.horizon_days)

    @property
    def describe_length(self) -> str:
        if self.rounds is not None:
            return f"{self.rounds} round{'s' if self.rounds != 1 else ''}"
        return f"a {format_seconds(self.budget_seconds or 0)} budget"

    def to_json(self) -> dict[str, Any]:
        """Every field by its name, in their order (the path, shard and time mix as JSON)."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "db_path": str(self.db_path),
            "shard": [self.shard.index, self.shard.count],
            "time": self.time.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any, *, base_seed: int = 0) -> Settings:
        """Stored settings (untrusted): what is malformed falls back to the default."""
        raw = data if isinstance(data, dict) else {}

        def pick(key: str, ok: Any, default: Any) -> Any:
            value = raw.get(key, default)
            return value if ok(value) else default

        def seconds(value: Any) -> bool:
            return is_number(value) and value > 0

        shard = raw.get("shard")
        parts: list[int] = shard if isinstance(shard, list) else []
        ok_shard = len(parts) == 2 and all(map(is_whole, parts)) and 1 <= parts[0] <= parts[1]
        marker = pick(
            "integration_marker",
            lambda v: isinstance(v, str) and v.isidentifier(),
            DEFAULT_INTEGRATION_MARKER,
        )
        rounds = pick("rounds", lambda v: v is None or (is_whole(v) and v > 0), None)
        budget = pick("budget_seconds", lambda v: v is None or seconds(v), None)
        if rounds is None and budget is None:
            rounds = 1
        return cls(
            rounds=rounds,
            budget_seconds=budget if rounds is None else None,
            base_seed=pick("base_seed", lambda v: is_whole(v) and 0 <= v < 2**63, base_seed),
            mode=as_mode(raw.get("mode")),
            order=next((o for o in ORDERS if o == raw.get("order")), DEFAULT_ORDER),
            db_path=Path(pick("db_path", lambda v: isinstance(v, str), DEFAULT_DB)),
            isolate=pick("isolate", lambda v: isinstance(v, bool), True),
            isolate_budget=pick(
                "isolate_budget", lambda v: is_whole(v) and v > 0, DEFAULT_ISOLATE_BUDGET
            ),
            probe_timeout=float(pick("probe_timeout", seconds, DEFAULT_PROBE_TIMEOUT)),
            test_timeout=float(pick("test_timeout", seconds, DEFAULT_TEST_TIMEOUT)),
            integration_marker=marker,
            shard=Shard(parts[0], parts[1]) if ok_shard else Shard(),
            isolate_seconds=pick("isolate_seconds", lambda v: v is None or seconds(v), None),
            time=TimeMix.from_json(raw.get("time")),
            today=pick("today", lambda v: v is None or seconds(v), None),
            dates_from=pick("dates_from", lambda v: v is None or seconds(v), None),
            horizon_days=pick(
                "horizon_days",
                lambda v: is_whole(v) and 0 < v <= MAX_HORIZON_DAYS,
                DEFAULT_HORIZON_DAYS,
            ),
            default_round=pick("default_round", lambda v: isinstance(v, bool), False),
        )


# -- what runs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One test to run, with what its attempt runs with.

    The one step type on the way from a flake id to the sandbox: a
    reproducer's steps, an isolation probe's steps and a replay's steps are
    all :class:`Step` objects. ``seed``/``now`` None means "derive them"
    (a hunt's round: from the base seed and the round's timeline);
    ``attempt_id`` names the stored attempt the step re-runs (its journal is
    replayed when ``mode`` is ``record``).

    The timing conditions the attempt ran under: ``profile`` (the clock
    profile of a seeded step; its readings are re-derived from the seed;
    None: ``exact``, or the round's when a hunt derives it),
    ``switch_interval`` (``sys.setswitchinterval`` for the attempt; None:
    the interpreter's) and ``stress`` (busy processes competing for the CPU
    while it runs; 0: none).
    """

    nodeid: str
    seed: int | None = None
    now: float | None = None
    mode: Mode = "seeded"
    attempt_id: int | None = None
    profile: Profile | None = None
    switch_interval: float | None = None
    stress: int = 0

    def to_json(self) -> dict[str, Any]:
        """Its five plain fields by name, then those of its timing conditions that are set."""
        plain = {key: getattr(self, key) for key in ("nodeid", "seed", "now", "mode", "attempt_id")}
        conditions = {"profile": self.profile, "switch_interval": self.switch_interval}
        conditions["stress"] = self.stress or None
        return plain | {key: value for key, value in conditions.items() if value is not None}

    @classmethod
    def from_json(cls, raw: Any) -> Step:
        """A step from :meth:`to_json`'s form (untrusted): ValueError when malformed."""
        if not isinstance(raw, dict) or not isinstance(raw.get("nodeid"), str):
            raise ValueError("each step needs a nodeid")
        mode = as_mode(raw.get("mode", "seeded"), default="off")
        if mode != raw.get("mode", "seeded"):
            raise ValueError(f"unknown step mode {raw.get('mode')!r}")
        return cls(
            nodeid=raw["nodeid"],
            seed=whole(raw.get("seed"), "a step's seed", optional=True),
            now=number(raw.get("now"), "a step's start time", optional=True),
            mode=mode,
            attempt_id=whole(raw.get("attempt_id"), "a step's attempt id", optional=True),
            **step_conditions(raw),
        )

    @classmethod
    def of(cls, attempt: Attempt, **changes: Any) -> Step:
        """The step that runs ``attempt`` again (each field the attempt's), with ``changes``."""
        same = {f.name: getattr(attempt, f.name) for f in fields(cls)}
        checked = {"mode": as_mode(attempt.mode), "profile": as_profile(attempt.profile)}
        return cls(**same | checked | changes)


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
    excerpt: str = ""

    @property
    def signature(self) -> str:
        return f"{self.exc_type} at {self.location}" if self.location else self.exc_type

    def to_json(self) -> list[str]:
        return [self.exc_type, self.message, self.location, self.excerpt]

    @classmethod
    def from_json(cls, raw: Any) -> Failure:
        """ValueError unless ``raw`` is :meth:`to_json`'s four texts."""
        return cls(*(text(part, "a failure's field") for part in items(raw, "a failure", 4)))

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

    def to_json(self) -> list[Any]:
        return [self.op, self.host, self.port, self.detail]

    @classmethod
    def from_json(cls, raw: Any) -> Violation:
        op, host, port, detail = items(raw, "a violation", 4)
        return cls(
            text(op, "a violation's op"),
            text(host, "a violation's host"),
            whole(port, "a violation's port", optional=True),
            text(detail, "a violation's detail"),
        )


@dataclass(frozen=True)
class Leak:
    """State an attempt left behind (see :mod:`hermetic_hunt.engine.leaks`).

    ``resource`` names the kind of state (``env``, ``cwd``, ``thread``,
    ``file``...), ``name`` which one, ``change`` how (``added``, ``changed``,
    ``removed``, ``deleted``), ``detail`` a bounded description of the value.
    """

    resource: str
    name: str
    change: str
    detail: str = ""

    def describe(self) -> str:
        return describe_leak(self.resource, self.name, self.change, self.detail)

    def to_json(self) -> list[str]:
        return [self.resource, self.name, self.change, self.detail]

    @classmethod
    def from_json(cls, raw: Any) -> Leak:
        return cls(*(text(part, "a leak's field") for part in items(raw, "a leak", 4)))


def describe_leak(resource: str, name: str, change: str, detail: str = "") -> str:
    """One phrase for a leak: ``left os.environ['X'] set``, ``left 1 thread running: t``."""
    text = {
        ("env", "added"): f"left os.environ[{name!r}] set",
        ("env", "changed"): f"left os.environ[{name!r}] changed",
        ("env", "removed"): f"left os.environ[{name!r}] removed",
        ("cwd", "deleted"): "left the cwd in a deleted directory",
        ("cwd", "changed"): "left the cwd changed",
        ("thread", "added"): f"left 1 thread running: {name}",
        ("process", "added"): f"left a child process running: {name}",
        ("file", "added"): f"left file {name} in the checkout",
        ("file", "changed"): f"changed file {name} in the checkout",
        ("file", "removed"): f"removed file {name} from the checkout",
        ("tempfile", "added"): f"left {name} in the temporary directory",
        ("module", "added"): f"imported {name} (it stays in sys.modules)",
        ("tz", "changed"): "left the timezone changed",
        ("locale", "changed"): "left the locale changed",
        ("sys.path", "added"): f"left {name} on sys.path",
        ("sys.path", "removed"): f"removed {name} from sys.path",
        ("sys.path", "changed"): "left sys.path reordered",
        ("warnings", "changed"): "left the warnings filters changed",
        ("logging", "changed"): "left the root logger's level changed",
        ("logging", "added"): f"left a {name} on the root logger",
        ("logging", "removed"): f"removed a {name} from the root logger",
        ("signal", "changed"): f"left the {name} handler changed",
        ("fd", "added"): f"left {name} open",
        ("socket-timeout", "changed"): "left the default socket timeout changed",
        ("recursion-limit", "changed"): "left the recursion limit changed",
        ("switch-interval", "changed"): "left the thread switch interval changed",
        ("tempfile.tempdir", "changed"): "left tempfile.tempdir changed",
        ("asyncio-policy", "changed"): "left another asyncio event loop policy installed",
        ("random", "changed"): "moved the global random stream on",
    }.get((resource, change))
    if text is None:  # a resource this version does not know (a newer database)
        text = f"left {resource} {name} {change}".replace("  ", " ").strip()
    return f"{text} ({detail})" if detail and detail != "daemon" else text


@dataclass(frozen=True)
class Attempt:
    """One execution of one test: written by the engine, read back by every stage.

    Built once -- by the engine when the execution ends, by a codec, or from a
    stored row -- and never changed after (``dataclasses.replace`` makes another).

    ``execution`` is 1 for the scheduled run and 2, 3... for reruns made by
    pytest-rerunfailures inside the same attempt slot. ``repeat`` is 0 for
    an ordinary attempt and 1/2 for the first/second run of a test that a
    ``twice`` round runs twice in a row; only the second is *repeated*, the
    first counts as a plain run (:func:`is_plain`).
    ``started`` is the real (not virtual) time it began, epoch seconds.
    ``attempt_id`` is set once stored; ``has_journal`` when read back says a
    journal is stored (``journal`` holds its bytes only on the write path).
    """

    nodeid: str
    outcome: str
    run_id: int = 0
    round_no: int = 0
    worker: str = "main"
    position: int = 0
    execution: int = 1
    phase: str | None = None
    duration: float = 0.0
    seed: int | None = None
    now: float | None = None
    mode: str = DEFAULT_MODE
    hash_seed: int | None = None
    counts: dict[str, Any] | None = None
    violations: tuple[Violation, ...] = ()
    failure: Failure | None = None
    leaks: tuple[Leak, ...] = ()
    repeat: int = 0
    profile: str | None = None
    switch_interval: float | None = None
    stress: int = 0
    started: float | None = None
    #: Paths the attempt wrote (from Python) in the rootdir or the temp dir: what
    #: attributes a file a round left behind.
    writes: tuple[str, ...] = ()
    #: How a replayed attempt was less than faithful (in flight only, not stored).
    warnings: tuple[str, ...] = ()
    journal: bytes | None = None
    journal_format: str | None = None
    journal_size: int | None = None
    attempt_id: int | None = None
    has_journal: bool = False

    @property
    def failed(self) -> bool:
        return self.outcome in FAILING

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING

    @property
    def exc_type(self) -> str:
        return self.failure.exc_type if self.failure else ""

    @property
    def location(self) -> str:
        return self.failure.location if self.failure else ""

    @property
    def message(self) -> str:
        return self.failure.message if self.failure else ""

    @property
    def signature(self) -> tuple[str, str]:
        return (self.exc_type, self.location)

    # -- the codec: what crosses a process boundary (one key per field: _KEYS) --------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, row in _KEYS.items():
            value = getattr(self, row.field)
            if key in _ALWAYS or value != row.default:
                value = value if row.write is None else row.write(value)
                if value is not None:
                    out[key] = value
        return out

    @classmethod
    def from_json(cls, raw: Any, *, run_id: int = 0, worker: str = "main") -> Attempt:
        """An attempt from :meth:`to_json`'s form (untrusted): ValueError when malformed.

        ``run_id`` and ``worker`` are the receiver's (they are not sent).
        """
        if not isinstance(raw, dict):
            raise ValueError("an attempt must be an object")
        values = {
            row.field: row.read(raw[key]) if key in raw
            else row.read(None) if row.default is _REQUIRED else row.default
            for key, row in _KEYS.items()
        }  # fmt: skip
        return cls(**values, run_id=run_id, worker=worker)

    @classmethod
    def many_from_json(
        cls, raws: Sequence[Any], *, run_id: int = 0, worker: str = "main"
    ) -> tuple[list[Attempt | Columns], int]:
        """Many attempts at once (a batch of a hunt's lines), in order: ``(decoded, rejected)``.

        Consecutive attempts that hold only the plain values of :data:`PLAIN_KEYS`
        -- most of a hunt's -- are checked a column at a time (each column's
        types in one pass, in C) and come back as :class:`Columns`, never as
        objects; an attempt among them that carries more (a failure...) stays a
        row of its run and is read whole on the side (:attr:`Columns.aside`).
        The others (a run whose column fails its check, an attempt that fits no
        run) go one at a time through :meth:`from_json`; ``rejected`` counts the
        malformed ones. What either way accepts is the same, and the order is
        the batch's.
        """
        out: list[Attempt | Columns] = []
        if set(map(type, raws)) != {dict}:  # (a line no hunt writes): each alone
            return out, cls._decode_runs(raws, out, run_id, worker, alone=True)
        # The usual batch: runs of attempts with the keys of their first (and more
        # for a few: a failure...), found by their sizes (in C) and read with one
        # itemgetter; the rest of the batch as below.
        rejected, done, start, sizes = 0, 0, 0, list(map(len, raws))
        while start < len(sizes):
            size, end = sizes[start], len(sizes)
            if min(itertools.islice(sizes, start, None)) < size:  # (else: the rest is one run)
                smaller = map(size.__gt__, itertools.islice(sizes, start + 1, None))
                end = next(itertools.compress(itertools.count(start + 1), smaller))
            run = raws[start:end]
            found = _uniform(run, sizes[start:end], run_id, worker) if len(run) >= 4 else None
            if found is not None:
                rejected += cls._decode_runs(raws[done:start], out, run_id, worker)
                out.append(found)
                done = end
            start = end
        return out, rejected + cls._decode_runs(raws[done:], out, run_id, worker)

    @classmethod
    def _decode_runs(
        cls,
        raws: Sequence[Any],
        out: list[Attempt | Columns],
        run_id: int,
        worker: str,
        *,
        alone: bool = False,
    ) -> int:
        """:meth:`many_from_json` of ``raws`` (dicts unless ``alone``) added to ``out``:
        how many were rejected."""
        if not raws:
            return 0
        runs: list[tuple[set[str] | None, Sequence[Any]]] = []  # (keys if plain, attempts)
        if alone:
            runs.extend((None, [raw]) for raw in raws)
        else:  # runs of attempts with plain keys only, and each other attempt alone
            start, plain = 0, map(_PLAIN_SET.issuperset, raws)
            for end in [*itertools.compress(range(len(raws)), map(operator.not_, plain)), None]:
                run = raws[start:end]
                if run:  # (keys None: one lacks a key every attempt has, so each goes alone)
                    always = all(map(operator.ge, map(dict.keys, run), itertools.repeat(_ALWAYS)))
                    runs.append((set().union(*run) if always else None, run))
                if end is not None:
                    runs.append((None, raws[end : end + 1]))
                    start = end + 1
        rejected = 0
        for keys, run in runs:
            found = _columns(run, keys, run_id, worker) if keys is not None else None
            if found is not None:
                out.append(found)
                continue
            for raw in run:
                try:
                    out.append(cls.from_json(raw, run_id=run_id, worker=worker))
                except ValueError:
                    rejected += 1
        return rejected


@dataclass(frozen=True)
class Columns:
    """Attempts of one batch that have the same plain keys, as columns.

    ``fields`` names each column after the :class:`Attempt` field it holds
    (``nodeid``, ``outcome``...); a field not named has its default in every
    row. ``run_id`` and ``worker`` are the receiver's, the same for every row.
    ``aside``: the rows that carry more than their run's plain values (a
    failure, a phase...), each as its index and the whole attempt
    (:meth:`Attempt.from_json`; its plain values are the row's). Made by
    :meth:`Attempt.many_from_json`; stored by the store as rows.
    """

    fields: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    run_id: int
    worker: str
    aside: tuple[tuple[int, Attempt], ...] = ()

    def __len__(self) -> int:
        return len(self.values[0])

    @property
    def nodeids(self) -> tuple[str, ...]:
        return self.values[self.fields.index("nodeid")]

    @property
    def outcomes(self) -> tuple[str, ...]:
        return self.values[self.fields.index("outcome")]

    def column(self, name: str) -> tuple[Any, ...] | None:
        """The values of field ``name`` (None: its default in every row)."""
        return self.values[self.fields.index(name)] if name in self.fields else None


_OUTCOME_SET = frozenset(OUTCOMES)
_MODE_SET = frozenset(MODES)


Check = Callable[[Sequence[Any]], bool]


def _of(*types: type | None) -> Check:
    """A check: every value is of one of ``types`` (None: may be null)."""
    allowed = frozenset(type(None) if t is None else t for t in types)
    return lambda values: allowed.issuperset(map(type, values))


def _counts(least: int = 0) -> Check:
    ints = _of(int)
    return lambda values: ints(values) and min(values) >= least


def _finite(*types: None) -> Check:
    # The sum of finite floats is finite unless it overflows (then: one by one).
    floats = _of(float, *types)
    return lambda values: floats(values) and math.isfinite(sum(filter(None, values)))


def _among(allowed: frozenset[str]) -> Check:
    def check(values: Sequence[Any]) -> bool:
        try:  # (no other value JSON has equals a text)
            return allowed.issuperset(values)
        except TypeError:  # (an array or an object)
            return False

    return check


def _one_of(allowed: frozenset[str], what: str) -> Callable[[Any], str]:
    def read(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"unknown {what} {str(value)[:40]!r}")
        return value

    return read


def _counts_read(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise ValueError("an attempt's counts must be an object")
    return value or None


def _journal_read(value: Any) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(text(value, "a journal"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a journal must be base64 text") from None


class _Key(NamedTuple):
    """One key of the attempt codec: the field it carries, the field's default (the key
    is left out when it has it), how a value is read (ValueError) and written (None: as
    it is; written None: left out), and the check of a whole column of it when it is a
    plain value (a batch decodes those a column at a time)."""

    field: str
    default: Any
    read: Callable[[Any], Any]
    write: Callable[[Any], Any] | None = None
    check: Check | None = None


_REQUIRED = object()
#: The attempt codec: short keys (a hunt sends one per attempt), in the order they are
#: written. Not sent: ``run_id``, ``worker`` (the receiver knows them), ``attempt_id``,
#: ``journal_size``, ``has_journal`` (the store's). A new field is a key here (and a
#: column with a migration, when it is stored).
_KEYS: dict[str, _Key] = {
    "n": _Key("nodeid", _REQUIRED, lambda v: text(v, "an attempt's nodeid"), check=_of(str)),
    "o": _Key("outcome", _REQUIRED, _one_of(_OUTCOME_SET, "outcome"), check=_among(_OUTCOME_SET)),
    "r": _Key("round_no", 0, lambda v: whole(v, "a round", least=0), check=_counts()),
    "p": _Key("position", 0, lambda v: whole(v, "a position", least=0), check=_counts()),
    "x": _Key("execution", 1, lambda v: whole(v, "an execution", least=1), check=_counts(1)),
    "ph": _Key("phase", None, lambda v: text(v, "a phase", optional=True),
               check=_of(str, None)),
    "d": _Key("duration", 0.0, lambda v: number(v, "a duration"), lambda d: round(d, 6),
              _finite()),
    "s": _Key("seed", None, lambda v: whole(v, "an attempt's seed", optional=True),
              check=_of(int, None)),
    "t": _Key("now", None, lambda v: number(v, "an attempt's now", optional=True),
              check=_finite(None)),
    "m": _Key("mode", DEFAULT_MODE, _one_of(_MODE_SET, "mode"), check=_among(_MODE_SET)),
    "h": _Key("hash_seed", None, lambda v: whole(v, "an attempt's hash_seed", optional=True),
              check=_of(int, None)),
    "c": _Key("counts", None, _counts_read, lambda c: c or None,
              lambda values: _of(dict, None)(values) and {} not in values),
    "v": _Key("violations", (), lambda v: tuple(map(Violation.from_json, items(v, "violations"))),
              lambda found: [x.to_json() for x in found]),
    "f": _Key("failure", None, lambda v: None if v is None else Failure.from_json(v),
              lambda failure: failure.to_json()),
    "l": _Key("leaks", (), lambda v: tuple(map(Leak.from_json, items(v, "leaks"))),
              lambda found: [x.to_json() for x in found]),
    "rp": _Key("repeat", 0, lambda v: whole(v, "a repeat", least=0), check=_counts()),
    "pf": _Key("profile", None, lambda v: text(v, "a profile", optional=True),
               check=_of(str, None)),
    "si": _Key("switch_interval", None, lambda v: number(v, "a switch interval", optional=True),
               check=_finite(None)),
    "st": _Key("stress", 0, lambda v: whole(v, "a stress", least=0), check=_counts()),
    "j": _Key("journal", None, _journal_read, lambda j: base64.b64encode(j).decode("ascii")),
    "jf": _Key("journal_format", None, lambda v: text(v, "a journal format", optional=True)),
    "b": _Key("started", None, lambda v: number(v, "an attempt's started", optional=True),
              check=_finite(None)),
    "w": _Key("writes", (), lambda v: tuple(text(w, "a written path") for w in items(v, "writes")),
              list),
    "wn": _Key("warnings", (), lambda v: tuple(text(w, "a warning") for w in items(v, "warnings")),
               list),
}  # fmt: skip
#: The keys of one plain value each (a run of attempts with these only -- most of a hunt's
#: -- is decoded a batch at a time): key -> (field, its default, the check of a column).
PLAIN_KEYS: dict[str, tuple[str, Any, Check]] = {
    key: (row.field, row.default, row.check) for key, row in _KEYS.items() if row.check
}
_PLAIN_SET = frozenset(PLAIN_KEYS)
#: The keys :meth:`Attempt.to_json` always writes.
_ALWAYS = frozenset(("n", "o", "r", "p", "d", "m"))


class _Shape(NamedTuple):
    """How attempts with the same plain keys are read: those keys, in one order."""

    get: Callable[[dict[str, Any]], tuple[Any, ...]]
    fields: tuple[str, ...]
    checks: tuple[Check, ...]

    def read(self, values: tuple[tuple[Any, ...], ...], run_id: int, worker: str) -> Columns | None:
        """The columns ``values`` (one per key) when each passes its check, else None."""
        ok = all(check(column) for check, column in zip(self.checks, values, strict=True))
        return Columns(self.fields, values, run_id, worker) if ok else None


@functools.lru_cache(maxsize=64)
def _shape(keys: tuple[str, ...]) -> _Shape:
    return _Shape(
        operator.itemgetter(*keys),
        tuple(PLAIN_KEYS[key][0] for key in keys),
        tuple(PLAIN_KEYS[key][2] for key in keys),
    )


def _uniform(
    run: Sequence[dict[str, Any]], sizes: Sequence[int], run_id: int, worker: str
) -> Columns | None:
    """``run`` (dicts, ``sizes``: their sizes, none smaller than the first's) as
    :class:`Columns` when each has the plain keys of the first, which has every key
    :meth:`Attempt.to_json` always writes, each column passes its check and each
    larger attempt is read whole (:attr:`Columns.aside`); else None."""
    sent = tuple(run[0])
    if not (_PLAIN_SET.issuperset(sent) and _ALWAYS.issubset(sent)):  # (only those cached)
        return None
    shape = _shape(sent)
    try:  # (a dict of the same size that has each of the keys has no other)
        values = tuple(zip(*map(shape.get, run), strict=True))
    except KeyError:
        return None
    columns = shape.read(values, run_id, worker)
    if columns is None or max(sizes) == len(sent):
        return columns
    larger = [index for index, size in enumerate(sizes) if size != len(sent)]
    try:
        aside = tuple((i, Attempt.from_json(run[i], run_id=run_id, worker=worker)) for i in larger)
    except ValueError:
        return None
    return replace(columns, aside=aside)


def _columns(
    run: Sequence[dict[str, Any]], present: set[str], run_id: int, worker: str
) -> Columns | None:
    """``run`` (plain attempts, ``present``: their keys) as :class:`Columns`; None when a
    column fails its check (the caller decodes them one by one)."""
    shape = _shape(tuple(key for key in PLAIN_KEYS if key in present))
    if set(map(len, run)) == {len(shape.fields)}:  # every attempt has every key (the usual run)
        values = tuple(zip(*map(shape.get, run), strict=True))
    else:
        values = tuple(
            tuple(map(dict.get, run, itertools.repeat(key), itertools.repeat(PLAIN_KEYS[key][1])))
            for key in PLAIN_KEYS
            if key in present
        )
    return shape.read(values, run_id, worker)


#: Most paths an attempt's ``writes`` keep.
MAX_WRITES = 50


@dataclass(frozen=True)
class RunInfo:
    """Facts about a hunt stored in ``runs`` when it starts."""

    uuid: str
    argv: list[str]
    invocation_dir: str
    rootdir: str
    settings: Settings
    workers: int
    worker_spec: list[str]
    environment: dict[str, Any]


def attempts_text(attempts: int, repeated: int = 0) -> str:
    """How many attempts, the twice rounds' repeated runs named apart: ``1,890 plain
    attempts + 63 repeated`` (``attempts``: all of them), or ``1,953 attempts``.
    The one wording of the count in the progress lines, summaries and reports."""
    if not repeated:
        return f"{attempts:,} attempts"
    return f"{attempts - repeated:,} plain attempts + {repeated:,} repeated"


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3600`` -> ``1h``; ``0.5`` -> ``0.5s``."""
    if seconds < 60:
        return f"{seconds:g}s"
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)


# -- reproducers ----------------------------------------------------------------------------

#: The keys of a reproducer's ``signature``: what its last step is expected to fail with.
_SIGNATURE = ("exc_type", "location", "message")


@dataclass(frozen=True)
class Reproducer:
    """The smallest sequence that reproduces a flake, and what it should do.

    ``steps`` run in order in one fresh process: polluters or state-setters
    first, the flaky test last (twice for a self-polluting test). The last
    step is expected to fail with ``exc_type`` at ``location``.
    ``together`` (a collision): steps run at the same moment in a second fresh
    process, and ``resource`` the path both use; then one of the two sides is
    expected to fail (whichever comes second).
    Stored as JSON in ``flakes.reproducer`` (see ``docs/database.md``).
    """

    steps: tuple[Step, ...]
    hash_seed: int | None
    exc_type: str
    location: str
    message: str = ""
    run_id: int | None = None
    together: tuple[Step, ...] = ()
    resource: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "steps": [s.to_json() for s in self.steps],
            "hash_seed": self.hash_seed,
            "signature": {key: getattr(self, key) for key in _SIGNATURE},
            "run_id": self.run_id,
        }
        if self.together:
            out["together"] = [s.to_json() for s in self.together]
            out["resource"] = self.resource
        return out

    @classmethod
    def from_json(cls, data: Any) -> Reproducer:
        """Parse stored JSON (untrusted): ValueError on anything malformed."""

        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ValueError("reproducer must be an object with a list of steps")
        if not data["steps"] or len(data["steps"]) > 10_000:
            raise ValueError("reproducer must have between 1 and 10,000 steps")
        steps = [Step.from_json(raw) for raw in data["steps"]]
        together_raw = data.get("together") or []
        if not isinstance(together_raw, list) or len(together_raw) > 10_000:
            raise ValueError("together must be a list of at most 10,000 steps")
        together = [Step.from_json(raw) for raw in together_raw]
        resource = data.get("resource") or ""
        if not isinstance(resource, str):
            raise ValueError("resource must be text")
        signature = data.get("signature") or {}
        if not isinstance(signature, dict):
            raise ValueError("signature must be an object")
        texts = {key: signature.get(key, "") for key in _SIGNATURE}
        if not all(isinstance(t, str) for t in texts.values()):
            raise ValueError("signature fields must be text")
        hash_seed = whole(data.get("hash_seed"), "a hash seed", optional=True)
        if problem := hash_seed_problem(hash_seed):
            raise ValueError(problem)
        return cls(
            steps=tuple(steps),
            hash_seed=hash_seed,
            **texts,
            run_id=whole(data.get("run_id"), "a run id", optional=True),
            together=tuple(together),
            resource=resource,
        )
