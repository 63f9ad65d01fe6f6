"""What isolation works with and concludes (pure data).

A :class:`Probe` is a short sequence of :class:`~hermetic_hunt.models.Step`
objects to run in one fresh process under one ``PYTHONHASHSEED``; its
:class:`ProbeResult` holds the :class:`~hermetic_hunt.models.Attempt` of
each step. A :class:`Finding` is what isolation concluded about one test --
one ``flakes`` row, read back as a :class:`Flake`. The store reads and
writes these; the isolation stage makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hermetic_hunt.models import FAILING, Attempt, Leak, Reproducer, Step, Violation

ProbeStatus = Literal["completed", "timeout", "error"]
#: ``flakes.status`` values (see docs/isolation.md).
FlakeStatus = Literal["pending", "isolated", "partial", "not-collected", "error"]


@dataclass(frozen=True)
class Probe:
    """``collect_at``: the probe's process runs on that instant (epoch seconds)
    from its first import on, collection included (None: collected at the real time).
    ``unforked``: the steps run in the process that collected the suite, not in a
    child forked from it -- as a plain ``pytest`` run does (a pid or a value taken
    at collection is then the running process's own)."""

    purpose: str
    steps: tuple[Step, ...]
    hash_seed: int
    collect_at: float | None = None
    unforked: bool = False


@dataclass(frozen=True)
class ProbeResult:
    """``status``: ``completed`` (every step ran), ``timeout`` or ``error``.

    ``steps`` holds the first execution of every step that ran, in order.
    """

    status: ProbeStatus
    steps: tuple[Attempt, ...] = ()
    duration: float = 0.0
    detail: str = ""

    @property
    def last(self) -> Attempt | None:
        return self.steps[-1] if self.status == "completed" and self.steps else None

    @property
    def outcome(self) -> str:
        """Of the probe's last step: passed | failed | timeout | error."""
        last = self.last
        if last is None:
            return self.status if self.status != "completed" else "error"
        return "failed" if last.outcome in FAILING else last.outcome


@dataclass
class Finding:
    """What isolation concluded about one test (one ``flakes`` row)."""

    nodeid: str
    kinds: list[str] = field(default_factory=list)
    status: FlakeStatus = "isolated"
    reproducer: Reproducer | None = None
    polluters: list[list[str]] = field(default_factory=list)
    cleaners: list[str] = field(default_factory=list)
    state_setters: list[list[str]] = field(default_factory=list)
    confirmed: bool | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    probes: list[tuple[Probe, ProbeResult]] = field(default_factory=list)

    @property
    def probe_seconds(self) -> float:
        return sum(result.duration for _, result in self.probes)


@dataclass(frozen=True)
class Flake:
    """A stored flake (a ``flakes`` row), as :mod:`hermetic_hunt.store.flakes` validates it:
    known kinds, real lists of nodeids, a :class:`~hermetic_hunt.models.Reproducer`.
    ``row_id`` is its row's id (what replays and verified fixes refer to)."""

    flake_id: str
    nodeid: str
    kinds: tuple[str, ...]
    status: str
    confirmed: bool | None
    polluters: tuple[tuple[str, ...], ...]
    cleaners: tuple[str, ...]
    state_setters: tuple[tuple[str, ...], ...]
    reproducer: Reproducer | None
    evidence: Any
    probes: int
    probe_seconds: float
    note: str
    first_run_id: int | None
    last_run_id: int | None
    row_id: int = 0


@dataclass
class IsolationReport:
    """What one isolation run did (:mod:`hermetic_hunt.report.isolation` words it).

    ``flakes`` holds every test isolated, grouped instances too; ``members``
    maps a group's representative (its flake id) to the flake ids of the
    instances that took its verdict; ``collide`` groups the tests that only
    collide over one path.
    """

    run_id: int
    rootdir: str
    database: str = ""
    flakes: list[tuple[str, Finding]] = field(default_factory=list)
    checks: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    fork: bool = True
    parallel: int = 1
    interrupted: bool = False
    pending: int = 0
    time_budget: float = 0.0
    members: dict[str, list[str]] = field(default_factory=dict)
    #: Tests that only collide over one path, by the flake id that leads them:
    #: ``(the path, the other flake ids)`` (one finding, as in the reports).
    collide: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    sampled: dict[str, set[str]] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)

    @property
    def out_of_time(self) -> int:
        """Tests left pending or partial by the time budget."""
        return sum(
            v.status in ("pending", "partial") and any("time budget" in n for n in v.notes)
            for _, v in self.flakes
        )


@dataclass(frozen=True)
class FixFacts:
    """What a fix suggestion for one flake is made from (read from the store).

    ``leaks`` holds what the tests involved (the flake's own test, its
    polluters and state-setters) left behind in the hunt, by nodeid;
    ``blocked`` the distinct network calls the guard blocked in its
    attempts; ``failed``/``attempts`` its plain attempts over every run (its
    fail rate decides how many clean runs a verification needs).
    """

    flake_id: str
    nodeid: str
    kinds: tuple[str, ...]
    polluters: tuple[tuple[str, ...], ...] = ()
    cleaners: tuple[str, ...] = ()
    state_setters: tuple[tuple[str, ...], ...] = ()
    reproducer: Reproducer | None = None
    confirmed: bool | None = None
    failed: int = 0
    attempts: int = 0
    leaks: dict[str, tuple[Leak, ...]] = field(default_factory=dict)
    blocked: tuple[Violation, ...] = ()
    rootdir: str = ""
    integration_marker: str = "integration"
    #: A ``time`` flake decided by sleeps that last longer than asked: the
    #: least stretch it failed at (1.23: sleeps lasted 1.23x); None: not that.
    stretch: float | None = None

    @property
    def rate(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0


@dataclass(frozen=True)
class StoredFix:
    """One verification of a suggested patch (a ``fixes`` row).

    ``outcome``: ``verified`` (the reproducer passed every run with the
    patch), ``not-verified`` (it failed at least once with it),
    ``no-control`` (it did not fail without the patch either: nothing to
    verify against) or ``error`` (the copy or the probes did not work).
    """

    flake_id: str
    created_at: str
    kind: str
    patch_sha: str
    outcome: str
    runs: int
    passed: int
    control: str = ""
    detail: str = ""
    git_sha: str | None = None
    applied: bool = False

    def describe(self) -> str:
        if self.outcome == "verified":
            return f"verified: the reproducer passes {self.passed}/{self.runs} with the patch"
        if self.outcome == "not-verified":
            return f"not verified: the reproducer passed {self.passed}/{self.runs} with the patch"
        if self.outcome == "no-control":
            return f"not verified: {self.detail or 'the reproducer passes without the patch too'}"
        return f"not verified: {self.detail or 'the verification did not run'}"
