"""The per-attempt sandbox -- the only module that imports hermetic.

Every attempt of a hunt runs inside one sandbox keyed to its own seed and
virtual start time. The engine is ours (see ``docs/limitations.md`` and
``../shared/HERMETIC-SANDBOX-NOTES.md`` for the hermetic-sandbox 0.1 gaps it
closes) and keeps hermetic-sandbox's public contract for the code under test:

* ``@pytest.mark.hermetic(**kwargs)`` configures the attempt's sandbox with
  hermetic's own keyword arguments;
* the ``hermetic_sandbox`` fixture and ``hermetic.current()`` return a real
  ``hermetic.SandboxHandle`` (``.seed``, ``.clock.advance()``, ``.real``,
  ``.allow_network()``);
* blocked network calls raise ``hermetic.NetworkBlockedError`` (a
  ``ConnectionRefusedError``), replay divergence ``hermetic.ReplayExhausted``.

Entering and leaving costs a fixed number of attribute swaps: nothing here
scans ``sys.modules`` per attempt (see :class:`ReferenceIndex`).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import hermetic
import hermetic._sandbox as _hermetic_internal  # only for hermetic.current()

from hermetic_hunt._sandbox import datetimes, entropy, netguard
from hermetic_hunt._sandbox.clock import (
    REAL_TIME,
    ClockSource,
    RecordClock,
    ReplayClock,
    SeededClock,
    Trace,
    install_time,
)
from hermetic_hunt._sandbox.patches import Patches
from hermetic_hunt.errors import BadOption
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import Violation

__all__ = [
    "HERMETIC_VERSION",
    "AttemptFacts",
    "Engine",
    "NetworkBlocked",
    "SandboxSpec",
    "spec_from_marker",
]

HERMETIC_VERSION: str = getattr(hermetic, "__version__", "unknown")
DEFAULT_TICK = 1e-6
DEFAULT_SPIN_LIMIT = 1_000_000


class NetworkBlocked(hermetic.NetworkBlockedError):
    """A blocked network call during a hunt (a ``hermetic.NetworkBlockedError``)."""

    def __init__(self, address: object, reason: str) -> None:
        super().__init__(address, reason)
        self.args = (
            f"hermetic-hunt: blocked {reason.split(':', 1)[0]} to {address!r} "
            f"({reason.split(': ', 1)[-1]}). Mark the test with the integration marker "
            "(or @pytest.mark.hermetic(network=[...])) if it really needs the network.",
        )

    def __str__(self) -> str:
        return str(self.args[0])


def _spin_error(reads: int) -> Exception:
    return hermetic.SandboxError(
        f"hermetic-hunt: the virtual clock was read {reads:,} times without a sleep or "
        "advance: a poll loop is spinning against frozen time. Call time.sleep() in the "
        "loop, or pass @pytest.mark.hermetic(spin_limit=0) / clock='off'."
    )


def _exhausted(source: str, used: int) -> Exception:
    return hermetic.ReplayExhausted(source, used)


def _mismatch(message: str) -> Exception:
    return hermetic.ReplayMismatch(message)


@dataclass(frozen=True)
class SandboxSpec:
    """How one attempt is sandboxed (hermetic's keyword arguments + ours)."""

    seed: int
    now: float
    mode: str = "seeded"  # seeded | record | replay
    test_id: str = ""
    tick: float = DEFAULT_TICK
    clock: str = "virtual"
    rng: str = "all"
    network: str | tuple[str, ...] = "block"
    allow_loopback: bool = True
    allow_unix: bool = True
    fs: str = "off"
    chdir: bool = True
    env: tuple[tuple[str, str | None], ...] = ()
    scrub_env: bool = False
    deep_datetime: bool = True
    spin_limit: int = DEFAULT_SPIN_LIMIT
    strict_replay: bool = True
    replay: Journal | None = None


_MARKER_KEYS = {
    "off", "seed", "now", "tick", "clock", "rng", "network", "allow_loopback", "allow_unix",
    "fs", "chdir", "env", "scrub_env", "strict_replay", "deep_datetime", "spin_limit",
}  # fmt: skip
_SCRUB_KEEP = frozenset(
    {"PATH", "HOME", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
     "SHELL", "USER", "PYTHONHASHSEED", "VIRTUAL_ENV", "PYTHONPATH"}
)  # fmt: skip


def _start_time(value: Any) -> float:
    if isinstance(value, bool):
        raise BadOption(f"@pytest.mark.hermetic(now=...): cannot use {value!r} as a start time")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return aware.timestamp()
    if isinstance(value, str):
        try:
            return _start_time(datetime.fromisoformat(value))
        except ValueError:
            pass
    raise BadOption(
        f"@pytest.mark.hermetic(now=...): expected an ISO date, datetime or epoch seconds, "
        f"got {value!r}"
    )


def spec_from_marker(base: SandboxSpec, kwargs: Mapping[str, Any]) -> SandboxSpec | None:
    """Apply ``@pytest.mark.hermetic(**kwargs)`` to ``base``; None means ``off=True``."""
    unknown = sorted(set(kwargs) - _MARKER_KEYS)
    if unknown:
        if any(key in ("record", "replay", "test_id") for key in unknown):
            raise BadOption(
                f"@pytest.mark.hermetic({unknown[0]}=...) is not allowed during a hunt: "
                "use --hermetic-hunt-mode=record or --hermetic-replay-db"
            )
        raise BadOption(
            f"@pytest.mark.hermetic got unknown argument(s) {', '.join(unknown)}; "
            f"expected some of: {', '.join(sorted(_MARKER_KEYS))}"
        )
    if kwargs.get("off"):
        return None
    changes: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key == "off":
            continue
        if key == "seed":
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadOption(f"@pytest.mark.hermetic(seed=...): expected an int, got {value!r}")
            changes["seed"] = value & ((1 << 63) - 1)
        elif key == "now":
            changes["now"] = _start_time(value)
        elif key == "network":
            if isinstance(value, str):
                if value not in ("block", "off", "allow"):
                    raise BadOption(
                        "@pytest.mark.hermetic(network=...): expected 'block', 'off' or a "
                        f"list of 'host[:port]', got {value!r}"
                    )
                changes["network"] = "off" if value == "allow" else value
            else:
                changes["network"] = tuple(str(entry) for entry in value)
        elif key == "env":
            if not isinstance(value, Mapping):
                raise BadOption(f"@pytest.mark.hermetic(env=...): expected a dict, got {value!r}")
            changes["env"] = tuple(
                (str(k), None if v is None else str(v)) for k, v in value.items()
            )
        else:
            changes[key] = value
    for key, allowed in (("clock", ("virtual", "off")), ("rng", ("all", "seed", "off")),
                         ("fs", ("off", "isolate"))):  # fmt: skip
        if key in changes and changes[key] not in allowed:
            raise BadOption(
                f"@pytest.mark.hermetic({key}=...): expected one of {', '.join(allowed)}, "
                f"got {changes[key]!r}"
            )
    return replace(base, **changes)


class ClockControl:
    """``sb.clock``: the handle's view of the attempt's clock (hermetic's API)."""

    def __init__(self, source: ClockSource | None) -> None:
        self._source = source

    def _require(self) -> ClockSource:
        if self._source is None:
            raise hermetic.SandboxError(
                "sb.clock is unavailable with clock='off': this attempt's clock is real"
            )
        return self._source

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._require().peek_wall(), timezone.utc)

    def advance(self, seconds: float) -> None:
        self._require().advance(seconds)

    def set(self, when: Any) -> None:
        self._require().set_wall(_start_time(when))

    move_to = set


@dataclass
class FsPaths:
    """``sb.fs`` with ``fs='isolate'``: a fresh tree removed after the attempt."""

    root: str
    cwd: str
    home: str
    tmp: str


@dataclass
class AttemptFacts:
    """What one attempt did, gathered when its sandbox closes."""

    counts: dict[str, Any] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    journal: Journal | None = None


def fingerprint() -> dict[str, Any]:
    """Facts a replay compares to judge its faithfulness."""
    import locale
    import platform
    import sys

    try:
        current_locale = locale.setlocale(locale.LC_ALL)
    except locale.Error:
        current_locale = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "tz": os.environ.get("TZ"),
        "tzname": list(time.tzname),
        "locale": current_locale,
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
        "hermetic": HERMETIC_VERSION,
        "executable": sys.executable,
    }


class _Active:
    """State of the attempt in progress (one at a time per process)."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.patches = Patches()
        self.trace = Trace(keep=True)
        self.env = _environ_snapshot()
        self.cwd = os.getcwd()
        self.tz = _tz_state()
        self.random_state = random.getstate()
        self.random_seed: str | None = None
        self.clock: ClockSource | None = None
        self.entropy: entropy.Entropy | None = None
        self.policy: netguard.Policy | None = None
        self.fs: FsPaths | None = None
        self.tempdir = tempfile.tempdir


def _environ_snapshot() -> dict[Any, Any]:
    data = getattr(os.environ, "_data", None)
    return dict(data) if data is not None else dict(os.environ)


def _tz_state() -> tuple[Any, ...]:
    return (time.tzname, time.timezone, time.altzone, time.daylight)


class Engine:
    """Enters and leaves attempt sandboxes in this process.

    Sandboxes do not nest; :meth:`exit` must follow every :meth:`enter`.
    """

    def __init__(self) -> None:
        # Modules imported *during* an attempt bind the frozen classes (their
        # `from datetime import datetime` runs while it is swapped). sqlite3
        # keys its adapters by class, so import it now, with the real ones.
        import sqlite3  # noqa: F401

        self._refs = datetimes.ReferenceIndex()
        self._active: _Active | None = None
        netguard.ensure_audit_hook()

    @property
    def active(self) -> bool:
        return self._active is not None

    def enter(self, spec: SandboxSpec) -> hermetic.SandboxHandle:
        if self._active is not None:
            raise hermetic.SandboxActiveError("hermetic-hunt: an attempt sandbox is already open")
        state = _Active(spec)
        self._active = state
        try:
            handle = self._enter(state)
        except BaseException:
            self._restore(state)
            self._active = None
            raise
        return handle

    def _enter(self, state: _Active) -> hermetic.SandboxHandle:
        spec = state.spec
        patches = state.patches
        if spec.fs == "isolate":
            state.fs = _isolate_fs(spec.chdir)
        if spec.scrub_env:
            for key in list(os.environ):
                if key not in _SCRUB_KEEP and not key.startswith(("PYTEST_", "HERMETIC")):
                    del os.environ[key]
        for key, value in spec.env:
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

        trace = state.trace
        replay = spec.replay
        if spec.rng != "off":
            if spec.mode == "record":
                state.random_seed = entropy.REAL_URANDOM(16).hex()
                random.seed(int(state.random_seed, 16))
            elif replay is not None and replay.random_seed is not None:
                state.random_seed = replay.random_seed
                random.seed(int(replay.random_seed, 16))
            else:
                random.seed(spec.seed)
            if spec.rng == "all":
                seeded = entropy.SeededEntropy(spec.seed, trace)
                if spec.mode == "record":
                    state.entropy = entropy.RecordEntropy(trace)
                elif replay is not None and replay.mode == "record":
                    state.entropy = entropy.ReplayEntropy(
                        list(replay.events.get("urandom", [])), seeded, spec.strict_replay,
                        _exhausted, _mismatch, trace,
                    )  # fmt: skip
                else:
                    state.entropy = seeded
                entropy.install(patches, state.entropy)

        if spec.clock == "virtual":
            seeded_clock = SeededClock(spec.now, spec.tick, spec.spin_limit, trace, _spin_error)
            if spec.mode == "record":
                state.clock = RecordClock(trace)
            elif replay is not None and replay.mode == "record":
                queues = {k: v for k, v in replay.events.items() if k in ("time", "monotonic",
                                                                             "perf_counter")}
                state.clock = ReplayClock(queues, seeded_clock, spec.strict_replay, _exhausted,
                                          trace)  # fmt: skip
            else:
                state.clock = seeded_clock
            install_time(patches, state.clock)
            self._refs.install(patches, spec.deep_datetime)
            datetimes.set_clock(state.clock)

        if spec.network != "off":
            allowlist = spec.network if isinstance(spec.network, tuple) else ()
            state.policy = netguard.Policy(
                allowlist, spec.allow_loopback, spec.allow_unix, NetworkBlocked
            )
            netguard.install(patches, state.policy)

        handle = hermetic.SandboxHandle(
            seed=spec.seed,
            mode={"seeded": "deterministic"}.get(spec.mode, spec.mode),
            clock=ClockControl(state.clock),
            fs=state.fs,
            policy=state.policy,
            journal_path=None,
            replay_warnings=[],
        )
        _hermetic_internal._active_handle = handle
        return handle

    def exit(self, *, keep_journal: bool = False) -> AttemptFacts:
        """Close the attempt's sandbox; ``keep_journal`` builds its journal."""
        state = self._active
        if state is None:
            return AttemptFacts()
        self._active = None
        facts = AttemptFacts()
        facts.counts = dict(state.trace.counts)
        if state.policy is not None:
            facts.violations = list(state.policy.violations)
        if len(state.trace.threads) > 1:
            facts.counts["threads"] = len(state.trace.threads)
        facts.warnings = _replay_warnings(state)
        facts.leaks = self._restore(state)
        if facts.leaks:
            facts.counts["leaks"] = facts.leaks
        if keep_journal and state.spec.mode in ("seeded", "record"):
            facts.journal = _journal(state)
        return facts

    def _restore(self, state: _Active) -> list[str]:
        _hermetic_internal._active_handle = None
        netguard.uninstall()
        datetimes.set_clock(None)
        state.patches.undo()
        random.setstate(state.random_state)
        leaks: list[str] = []
        current_env = _environ_snapshot()
        if current_env != state.env:
            changed = sorted(
                os.fsdecode(key) if isinstance(key, bytes) else str(key)
                for key in set(current_env) ^ set(state.env)
                | {k for k in current_env.keys() & state.env.keys() if current_env[k] != state.env[k]}
            )
            expected = {k for k, _ in state.spec.env} | (
                {"HOME", "TMPDIR", "TEMP", "TMP"} if state.fs else set()
            )
            leaks.extend(f"env:{name}" for name in changed if name not in expected
                         and not state.spec.scrub_env)  # fmt: skip
            _restore_environ(state.env)
        if _tz_state() != state.tz and hasattr(time, "tzset"):
            time.tzset()
            leaks.append("tz")
        try:
            moved = os.getcwd() != state.cwd
        except OSError:
            moved = True
        if moved:
            try:
                os.chdir(state.cwd)
            except OSError:
                os.chdir(os.path.expanduser("~"))
            if not (state.fs and state.spec.chdir):
                leaks.append("cwd")
        tempfile.tempdir = state.tempdir
        if state.fs is not None:
            shutil.rmtree(state.fs.root, ignore_errors=True)
        return leaks


def _restore_environ(snapshot: dict[Any, Any]) -> None:
    decode = os.fsdecode
    current = _environ_snapshot()
    for key in list(current):
        if key not in snapshot:
            os.environ.pop(decode(key) if isinstance(key, bytes) else key, None)
    for key, value in snapshot.items():
        if current.get(key) != value:
            os.environ[decode(key) if isinstance(key, bytes) else key] = (
                decode(value) if isinstance(value, bytes) else value
            )


def _isolate_fs(chdir: bool) -> FsPaths:
    saved = tempfile.tempdir
    root = os.path.realpath(tempfile.mkdtemp(prefix="hermetic-hunt-"))
    tempfile.tempdir = saved
    paths = FsPaths(root, os.path.join(root, "cwd"), os.path.join(root, "home"),
                    os.path.join(root, "tmp"))  # fmt: skip
    for path in (paths.cwd, paths.home, paths.tmp):
        os.mkdir(path)
    for var in ("TMPDIR", "TEMP", "TMP"):
        os.environ[var] = paths.tmp
    os.environ["HOME"] = paths.home
    tempfile.tempdir = paths.tmp
    if chdir:
        os.chdir(paths.cwd)
    return paths


def _replay_warnings(state: _Active) -> list[str]:
    warnings = []
    clock = state.clock
    if isinstance(clock, ReplayClock):
        for source, (used, recorded) in sorted(clock.unconsumed().items()):
            warnings.append(
                f"replay read {source} {used} of {recorded} recorded time(s): the code path "
                "consumed less than the recording"
            )
    source = state.entropy
    if isinstance(source, entropy.ReplayEntropy):
        left = source.unconsumed()
        if left:
            warnings.append(
                f"replay drew urandom {left[0]} of {left[1]} recorded time(s): the code path "
                "consumed less than the recording"
            )
    return warnings


def _journal(state: _Active) -> Journal:
    spec = state.spec
    trace = state.trace
    return Journal(
        test=spec.test_id,
        mode="record" if spec.mode == "record" else "seeded",
        seed=spec.seed,
        now=spec.now,
        random_seed=state.random_seed,
        config={"clock": spec.clock, "rng": spec.rng, "tick": spec.tick,
                "network": "off" if spec.network == "off" else "block"},  # fmt: skip
        events={k: list(v) for k, v in trace.values.items()},
        counts=dict(trace.counts),
        overflow=tuple(sorted(trace.overflow)),
        threads=len(trace.threads),
        fingerprint=fingerprint(),
    )


def real_time() -> float:
    """Wall-clock time that no sandbox patches (for durations and timestamps)."""
    return REAL_TIME()
