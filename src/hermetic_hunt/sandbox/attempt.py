"""The per-attempt sandbox -- the only module that imports hermetic.

Every attempt of a hunt runs inside one sandbox keyed to its own seed and
virtual start time. The engine is ours, and keeps hermetic-sandbox's public
contract for the code under test: the marker's keyword arguments, a real
``hermetic.SandboxHandle`` from the ``hermetic_sandbox`` fixture and
``hermetic.current()``, ``hermetic.NetworkBlockedError`` and
``hermetic.ReplayExhausted`` (``docs/sandbox.md`` says how it works and the
contract, ``docs/limitations.md`` what it cannot do; it closes the
hermetic-sandbox 0.1 gaps listed in ``../shared/HERMETIC-SANDBOX-NOTES.md``).

Entering and leaving costs a fixed number of dict updates, whatever the
number of modules loaded: nothing here scans ``sys.modules``.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hermetic

from hermetic_hunt import _compat
from hermetic_hunt.environment import platform_name, process_facts
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import Violation
from hermetic_hunt.sandbox import aio, datetimes, entropy, filetimes, netguard, state
from hermetic_hunt.sandbox import clock as clock_patch
from hermetic_hunt.sandbox.clock import (
    ClockSource,
    RecordClock,
    ReplayClock,
    SeededClock,
    Trace,
)
from hermetic_hunt.sandbox.patches import Patches
from hermetic_hunt.sandbox.profiles import noise_for
from hermetic_hunt.sandbox.spec import CHOICES, SCRUB_KEEP, SandboxSpec, start_time

HERMETIC_VERSION: str = getattr(hermetic, "__version__", "unknown")
_OS_NAMESPACE = vars(os)


class NetworkBlocked(hermetic.NetworkBlockedError):
    """A blocked network call during a hunt (a ``hermetic.NetworkBlockedError``)."""

    def __init__(self, address: object, reason: str) -> None:
        super().__init__(address, reason)
        op, _, why = reason.partition(": ")
        self.args = (
            f"hermetic-hunt: blocked {op} to {address!r} ({why}). Mark the test with the "
            "integration marker (or @pytest.mark.hermetic(network=[...])) if it really "
            "needs the network.",
        )


def _spin_error(reads: int) -> Exception:
    return hermetic.SandboxError(
        f"hermetic-hunt: the virtual clock was read {reads:,} times without a sleep or "
        "advance: a poll loop is spinning against frozen time. Call time.sleep() in the "
        "loop, or pass @pytest.mark.hermetic(spin_limit=0) / clock='off'."
    )


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
        self._require().set_wall(start_time(when))

    move_to = set


@dataclass
class FsPaths:
    """``sb.fs`` with ``fs='isolate'``: a fresh tree removed after the attempt."""

    root: Path
    cwd: Path
    home: Path
    tmp: Path


@dataclass
class AttemptFacts:
    """What one attempt did, gathered when its sandbox closes.

    ``counts`` maps each source to how often the attempt read it (stored
    for every attempt), plus ``threads`` when more than one thread read a
    source. ``warnings`` say how a replay was less than faithful. ``end``
    is where a virtual clock stood when the sandbox closed, ``(wall,
    elapsed)``: the next attempt of the round starts there (None: real time).
    ``profile`` is the clock profile the attempt ran with (None: not a
    seeded virtual clock); under a noisy one ``counts["stretch"]`` holds the
    largest factor a sleep lasted, in thousandths (1250: 1.25x).
    """

    counts: dict[str, Any] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    journal: Journal | None = None
    end: tuple[float, float] | None = None
    profile: str | None = None


_STATIC_FINGERPRINT: dict[str, Any] = {}


def guard_between_attempts() -> None:
    """The network guard stays on between this process's attempts (a job's child):
    see :func:`hermetic_hunt.sandbox.netguard.guard_between_attempts`."""
    netguard.guard_between_attempts(NetworkBlocked)


def fingerprint() -> dict[str, Any]:
    """Facts a replay compares to judge its faithfulness."""
    import platform
    import sys

    if not _STATIC_FINGERPRINT:
        _STATIC_FINGERPRINT.update(
            python=platform.python_version(),
            implementation=platform.python_implementation(),
            platform=platform_name(),
            hermetic=HERMETIC_VERSION,
            executable=sys.executable,
        )
    return {**_STATIC_FINGERPRINT, **process_facts()}


@dataclass(slots=True, eq=False)
class _Active:
    """The attempt in progress (one at a time per process)."""

    spec: SandboxSpec
    saved: state.Saved = field(default_factory=state.Saved)
    patches: Patches = field(default_factory=Patches)
    trace: Trace = field(default_factory=lambda: Trace(keep=True))
    random_seed: int | None = None
    stream_start: tuple[int, ...] | None = None
    clock: ClockSource | None = None
    entropy: entropy.Entropy | None = None
    policy: netguard.Policy | None = None
    fs: FsPaths | None = None
    cwd: str | None = None


def _replayed(spec: SandboxSpec) -> SandboxSpec:
    """A record journal's configuration wins over the local one (queues line up)."""
    journal = spec.replay
    if journal is None or journal.mode != "record":
        return spec
    recorded = ((key, journal.config.get(key)) for key in ("clock", "rng"))
    changes = {key: value for key, value in recorded if value in CHOICES[key]}
    return replace(spec, **changes) if changes else spec


class Sandbox:
    """Enters and leaves attempt sandboxes in this process.

    Sandboxes do not nest; :meth:`exit` must follow every :meth:`enter`.
    """

    def __init__(self) -> None:
        self._active: _Active | None = None
        netguard.ensure_audit_hook()

    @property
    def active(self) -> bool:
        return self._active is not None

    def enter(self, spec: SandboxSpec) -> hermetic.SandboxHandle:
        if self._active is not None:
            raise hermetic.SandboxActiveError("hermetic-hunt: an attempt sandbox is already open")
        active = self._active = _Active(_replayed(spec))
        try:
            return self._enter(active)
        except BaseException:
            self._active = None
            self._restore(active)
            raise

    def _enter(self, active: _Active) -> hermetic.SandboxHandle:
        spec = active.spec
        if spec.fs == "isolate":
            active.cwd = _cwd()
            active.fs = _isolate_fs(spec.chdir, active.saved)
        if spec.scrub_env:
            for key in list(os.environ):
                if key not in SCRUB_KEEP and not key.startswith(("PYTEST_", "HERMETIC")):
                    active.saved.set_env(key, None)
        for key, value in spec.env:
            active.saved.set_env(key, value)
        if spec.rng != "off":
            _enter_rng(active)
        if spec.clock == "virtual":
            _enter_clock(active)
        if spec.network != "off":
            allowlist = spec.network if isinstance(spec.network, tuple) else ()
            active.policy = netguard.Policy(
                allowlist, spec.allow_loopback, spec.allow_unix, NetworkBlocked
            )
            netguard.install(active.patches, active.policy, spec.test_id)
        else:
            netguard.suspend()
        # Our clock, paths and policy have hermetic's interface (duck-typed).
        handle = hermetic.SandboxHandle(
            seed=spec.seed,
            mode={"seeded": "deterministic"}.get(spec.mode, spec.mode),
            clock=ClockControl(active.clock),  # type: ignore[arg-type]
            fs=active.fs,  # type: ignore[arg-type]
            policy=active.policy,  # type: ignore[arg-type]
            journal_path=None,
            replay_warnings=[],
        )
        _compat.set_hermetic_handle(handle)
        return handle

    def exit(self, *, keep_journal: bool = False) -> AttemptFacts:
        """Close the attempt's sandbox; ``keep_journal`` builds its journal."""
        active = self._active
        if active is None:
            return AttemptFacts()
        self._active = None
        trace = active.trace
        facts = AttemptFacts(counts=dict(trace.counts), warnings=_replay_warnings(active))
        if active.policy is not None:
            facts.violations = list(active.policy.violations)
            if active.policy.processes:
                facts.counts["processes"] = active.policy.processes
        if len(trace.threads) > 1:
            facts.counts["threads"] = len(trace.threads)
        if active.stream_start is not None:
            words = state.words_between(active.stream_start, state.random_state())
            if words != 0:
                facts.counts["random-stream"] = -1 if words is None else words
        end_state = (
            state.random_state() if keep_journal and active.random_seed is not None else None
        )
        clock = active.clock
        if isinstance(clock, SeededClock):
            facts.end = clock.end()
            if active.spec.mode == "seeded":
                facts.profile = active.spec.profile
            if clock.stretched > 1.0:
                facts.counts["stretch"] = round(clock.stretched * 1000)
        self._restore(active)
        if keep_journal and active.spec.mode in ("seeded", "record"):
            facts.journal = _journal(active, end_state)
        return facts

    def _restore(self, active: _Active) -> None:
        _compat.set_hermetic_handle(None)
        netguard.uninstall()
        clock_patch.activate(None)
        aio.deactivate()
        entropy.activate(None)
        active.patches.undo()
        fs = active.fs
        moved = fs is not None and active.spec.chdir and _cwd() == str(fs.cwd)
        state.restore(
            active.saved, cwd=active.cwd if moved else None, tempdir=fs is not None,
            stream=active.stream_start is not None,
        )  # fmt: skip
        if fs is not None:
            shutil.rmtree(fs.root, ignore_errors=True)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _enter_rng(active: _Active) -> None:
    spec, trace, replay = active.spec, active.trace, active.spec.replay
    if spec.stream:
        # Seeded at import: the stream flows through the tests as in a plain
        # run; only how far this attempt moved it is noted.
        active.stream_start = state.random_state()
    elif spec.mode == "record":
        # Fresh real entropy: every record-mode attempt explores its own stream.
        active.random_seed = int.from_bytes(entropy.REAL_URANDOM(16), "big")
    elif replay is not None and replay.random_seed is not None:
        active.random_seed = int(replay.random_seed, 16)
    else:
        active.random_seed = spec.seed
    if active.random_seed is not None:
        state.seed_random(active.random_seed)
    if spec.rng != "all":
        return
    seeded = entropy.SeededEntropy(spec.seed, trace)
    source: entropy.Entropy = seeded
    if spec.mode == "record":
        source = entropy.RecordEntropy(trace)
    elif replay is not None and replay.mode == "record":
        strict = spec.strict_replay and "urandom" not in replay.overflow
        draws = list(replay.events.get("urandom", []))
        source = entropy.ReplayEntropy(
            draws, seeded, strict, hermetic.ReplayExhausted, hermetic.ReplayMismatch, trace
        )
    active.entropy = source
    entropy.activate(source)
    active.patches.update(_OS_NAMESPACE, entropy.OS_PATCH)
    active.patches.update(vars(random), entropy.RANDOM_PATCH)


def _enter_clock(active: _Active) -> None:
    spec, trace, replay = active.spec, active.trace, active.spec.replay
    # A clock profile belongs to a seeded attempt (a record journal's replay
    # reads the recorded readings; its fallback stays exact).
    noise = noise_for(spec.profile, spec.seed) if spec.mode == "seeded" else None
    seeded = SeededClock(
        spec.now, spec.tick, spec.spin_limit, trace, _spin_error, spec.elapsed, noise
    )
    source: ClockSource = seeded
    if spec.mode == "record":
        source = RecordClock(0.0, trace=trace)
    elif replay is not None and replay.mode == "record":
        queues = {k: v for k, v in replay.events.items() if k in clock_patch.CLOCK_SOURCES}
        source = ReplayClock(
            queues, seeded, spec.strict_replay, hermetic.ReplayExhausted, trace, replay.overflow
        )
    active.clock = source
    clock_patch.activate(source)
    active.patches.update(clock_patch.TIME_NAMESPACE, clock_patch.TIME_PATCH)
    datetimes.install(active.patches)
    if source is seeded:
        aio.install(active.patches, seeded, noisy=noise is not None)
        # files get their times from the real clock: shown on the virtual one
        seeded.note_file_times()
        active.patches.update(_OS_NAMESPACE, filetimes.OS_PATCH)


def _isolate_fs(chdir: bool, saved: state.Saved) -> FsPaths:
    kept = tempfile.tempdir
    root = Path(tempfile.mkdtemp(prefix="hermetic-hunt-")).resolve()
    tempfile.tempdir = kept
    paths = FsPaths(root, root / "cwd", root / "home", root / "tmp")
    for path in (paths.cwd, paths.home, paths.tmp):
        path.mkdir()
    for var in ("TMPDIR", "TEMP", "TMP", "HOME"):
        saved.set_env(var, str(paths.home if var == "HOME" else paths.tmp))
    tempfile.tempdir = str(paths.tmp)
    if chdir:
        os.chdir(paths.cwd)
    return paths


def _replay_warnings(active: _Active) -> list[str]:
    short: list[tuple[str, str, int, int]] = []
    if isinstance(active.clock, ReplayClock):
        short = [("read", name, *used) for name, used in sorted(active.clock.unconsumed().items())]
    if isinstance(active.entropy, entropy.ReplayEntropy) and (left := active.entropy.unconsumed()):
        short.append(("drew", "urandom", *left))
    return [
        f"replay {verb} {name} {used} of {recorded} recorded time(s): the code path "
        "consumed less than the recording"
        for verb, name, used, recorded in short
    ]


def _journal(active: _Active, end_state: tuple[int, ...] | None) -> Journal:
    spec, trace, seed = active.spec, active.trace, active.random_seed
    counts = dict(trace.counts)
    if end_state is not None and seed is not None:
        words = state.words_consumed(seed, end_state)
        if words is not None:
            counts["random"] = words
    return Journal(
        test=spec.test_id,
        mode="record" if spec.mode == "record" else "seeded",
        seed=spec.seed,
        now=spec.now,
        random_seed=f"{seed:x}" if spec.mode == "record" and seed is not None else None,
        config={
            "clock": spec.clock,
            "rng": spec.rng,
            "tick": spec.tick,
            "network": "off" if spec.network == "off" else "block",
            **({"profile": spec.profile} if spec.mode == "seeded" else {}),
        },
        events={k: list(v) for k, v in trace.values.items()},
        counts=counts,
        overflow=tuple(sorted(trace.overflow)),
        threads=len(trace.threads),
        fingerprint=fingerprint(),
    )
