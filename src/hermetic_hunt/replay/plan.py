"""Replaying a flake or an attempt from the database: the plain core.

No pytest, SQL or hermetic here. The plugin (:mod:`hermetic_hunt.replay.session`)
turns ``--hermetic-replay-db=PATH::ID`` into a :class:`Target`
(:func:`parse_target`) and asks :func:`resolve` for a :class:`Plan`: which
tests run, in which order, with which seed, start time, journal and hash
seed, and what the recorded failure looked like.

Everything read from the database is untrusted: the store validates what it
reads (a flake's reproducer, its kinds), journals go through
:func:`journal.decode`, and nodeids only ever select among the tests pytest
collected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hermetic_hunt import journal as journal_format
from hermetic_hunt.errors import BadDatabase, BadJournal, BadOption, UnknownId
from hermetic_hunt.findings import Flake
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import (
    FAILING,
    MODES,
    Attempt,
    Failure,
    Step,
    looks_like_ref,
    parse_ref,
)

#: Environment variable marking a process that hermetic-hunt re-executed
#: under the hash seed a replay needs (so it never loops).
REEXEC_ENV = "HERMETIC_HUNT_REPLAY_REEXEC"
_USAGE = (
    "--hermetic-replay-db: expected PATH::ID, e.g. flakes.db::F3 (a flake), "
    "flakes.db::A1207 (an attempt) or flakes.db::tests/test_x.py::test_y (a test's newest flake)"
)


# -- what to replay ----------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A parsed ``PATH::ID``: ``kind`` is ``flake``, ``attempt`` or ``nodeid``."""

    path: str
    ref: str
    kind: str
    number: int | None = None


def parse_target(value: str) -> Target:
    """``"flakes.db::F3"`` -> ``Target("flakes.db", "F3", "flake", 3)``.

    The path ends at the first ``::`` (a nodeid after it may hold more).
    """
    path, sep, ref = value.partition("::")
    if not sep or not path.strip() or not ref.strip():
        raise BadOption(f"{_USAGE}; got {value!r}")
    return target_of(path, ref, shown=value)


def target_of(path: str, ref: str, *, shown: str | None = None) -> Target:
    """The target ``ref`` (``F3``, ``A1207`` or a nodeid) in the database at ``path``."""
    shown = shown if shown is not None else ref
    if not ref.strip():
        raise BadOption(f"{_USAGE}; got an empty ID")
    if ref != ref.strip() or "\x00" in ref or "\n" in ref:
        raise BadOption(f"{_USAGE}; got {shown!r} (the ID has stray whitespace)")
    parsed = parse_ref(ref)
    if parsed is not None:
        return Target(path, str(parsed), parsed.kind, parsed.number)
    if looks_like_ref(ref):
        raise BadOption(f"{_USAGE}; got {shown!r} ({ref!r} is not a valid id)")
    return Target(path, ref, "nodeid")


class Source(Protocol):
    """Read access to a database (:class:`hermetic_hunt.store.replay.ReplaySource`)."""

    def attempt(self, attempt_id: int) -> Attempt | None: ...
    def newest_failing_attempt(self, nodeid: str) -> Attempt | None: ...
    def test_known(self, nodeid: str) -> bool: ...
    def flake(self, flake_id: str) -> Flake | None: ...
    def flake_of(self, nodeid: str) -> Flake | None: ...
    def journal(self, attempt_id: int) -> bytes | None: ...


@dataclass(frozen=True)
class Expected:
    """What the recording did: ``outcome`` is ``failed`` or ``passed``.

    A failure is recognised by its signature, ``(exc_type, location)``; an
    empty ``exc_type`` accepts any failure. ``violations``: the recording's
    blocked network calls are what a passing replay must show again.
    """

    outcome: str
    exc_type: str = ""
    location: str = ""
    message: str = ""
    violations: bool = False

    def describe(self) -> str:
        return Failure(self.exc_type, self.message, self.location).describe() or "a failure"


@dataclass
class Plan:
    """Everything a replay session runs and checks, resolved from the database."""

    label: str
    target: Target
    steps: tuple[Step, ...]
    hash_seed: int | None
    expected: Expected
    #: Journals of the steps' attempts, by attempt id: replayed by a
    #: ``record`` step; a ``seeded`` step's journal only explains the recording.
    journals: dict[int, Journal] = field(default_factory=dict)
    run_id: int | None = None
    flake_row: int | None = None
    attempt_id: int | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    kinds: tuple[str, ...] = ()
    #: A collision's partner: run in a second process at the same moment as
    #: ``steps``; ``resource`` is the path the two share.
    together: tuple[Step, ...] = ()
    resource: str = ""

    @property
    def test(self) -> str:
        return self.steps[-1].nodeid

    def journal_of(self, step: Step) -> Journal | None:
        return self.journals.get(step.attempt_id) if step.attempt_id is not None else None

    def replayed(self) -> dict[int, Journal]:
        """The journals a replay feeds back (those of record-mode steps)."""
        recorded = {step.attempt_id for step in self.steps if step.mode == "record"}
        return {key: journal for key, journal in self.journals.items() if key in recorded}


def resolve(target: Target, source: Source) -> Plan:
    """The plan of ``target`` (UnknownId, BadJournal, BadDatabase on bad input)."""
    if target.kind in ("attempt", "flake"):
        is_attempt = target.kind == "attempt"
        found = source.attempt(target.number or 0) if is_attempt else source.flake(target.ref)
        if found is None:
            raise UnknownId(
                f"{target.path} has no {target.kind} {target.ref}: see 'hermetic-hunt list' "
                f"for the {'ids' if is_attempt else 'flakes'} it holds"
            )
        if isinstance(found, Attempt):
            return _attempt_plan(target, found, source)
        return _flake_plan(target, found, source)
    flake = source.flake_of(target.ref)
    if flake is not None:
        return _flake_plan(target, flake, source)
    attempt = source.newest_failing_attempt(target.ref)
    if attempt is not None:
        plan = _attempt_plan(target, attempt, source)
        plan.notes.append(
            f"{target.ref} has no flake in the database yet: replaying its newest failing "
            f"attempt, A{attempt.attempt_id}"
        )
        return plan
    if source.test_known(target.ref):
        raise UnknownId(
            f"{target.ref!r} never failed in {target.path}: nothing to replay (pass a flake "
            "id like F3 or an attempt id like A1207)"
        )
    raise UnknownId(
        f"{target.path} knows no test {target.ref!r}: pass a flake id (F3), an attempt id "
        "(A1207) or the nodeid of a test the hunt ran"
    )


def _keep_journal(source: Source, step: Step, journals: dict[int, Journal]) -> None:
    """Add the stored journal of ``step``'s attempt to ``journals``, validated (if one is stored).

    A ``record`` step replays it (a bad one is refused: BadJournal); a ``seeded``
    step's only explains (threads, network): the seed reproduces, so a bad one
    is left out. Journals are kept for failing attempts only: a passing
    record-mode step (a polluter, say) runs live, as it did in isolation, with
    a warning.
    """
    if step.attempt_id is None or step.mode == "off":
        return
    data = source.journal(step.attempt_id)
    where = f"the journal of A{step.attempt_id}"
    if data is None:
        return
    try:
        journals[step.attempt_id] = journal_format.decode(
            data, where=where, expect_test=step.nodeid
        )
    except RecursionError:
        if step.mode == "record":
            raise BadJournal(f"{where}: journal is nested too deeply") from None
    except BadJournal:
        if step.mode == "record":
            raise


def _attempt_plan(target: Target, attempt: Attempt, source: Source) -> Plan:
    if not attempt.nodeid:
        raise BadDatabase(f"A{attempt.attempt_id} names no test: the database is damaged")
    journals: dict[int, Journal] = {}
    step = Step.of(attempt, mode=attempt.mode if attempt.mode in MODES else "seeded")
    if attempt.has_journal:
        _keep_journal(source, step, journals)
    if step.mode != "off" and step.seed is None:
        raise BadDatabase(
            f"A{attempt.attempt_id} has no seed stored although it ran in {step.mode} mode: "
            "the database is damaged; run a new hunt"
        )
    a, violations = attempt, bool(attempt.violations)
    expected = Expected("passed", violations=violations)
    if a.outcome in FAILING:
        expected = Expected("failed", a.exc_type, a.location, a.message, violations)
    return Plan(
        label=f"A{attempt.attempt_id}",
        target=target,
        steps=(step,),
        journals=journals,
        hash_seed=attempt.hash_seed,
        expected=expected,
        run_id=attempt.run_id,
        attempt_id=attempt.attempt_id,
        counts=dict(attempt.counts or {}),
    )


def _flake_plan(target: Target, flake: Flake, source: Source) -> Plan:
    if flake.reproducer is None:
        attempt = source.newest_failing_attempt(flake.nodeid)
        if attempt is None:
            raise UnknownId(
                f"{flake.flake_id} has no reproducer (isolation {flake.status or 'not run'}) "
                "and no failing attempt: run a new hunt with --hermetic-hunt"
            )
        plan = _attempt_plan(target, attempt, source)
        plan.label, plan.flake_row, plan.kinds = flake.flake_id, flake.row_id, flake.kinds
        plan.notes.append(
            f"{flake.flake_id} has no minimal reproducer (isolation "
            f"{flake.status or 'not run'}): replaying its newest failing attempt, "
            f"A{attempt.attempt_id}"
        )
        return plan
    repro = flake.reproducer
    if not repro.steps or repro.steps[-1].nodeid != flake.nodeid:
        last_test = repro.steps[-1].nodeid if repro.steps else "nothing"
        raise BadDatabase(
            f"the reproducer of {flake.flake_id} ends with {last_test!r}, not with the "
            f"flake's own test {flake.nodeid!r}: the database is damaged or was edited; "
            "run a new hunt"
        )
    steps = repro.steps
    journals: dict[int, Journal] = {}
    for index, step in enumerate(steps, start=1):
        # A record step with its attempt replays that attempt's journal, not a seed.
        from_journal = step.mode == "record" and step.attempt_id is not None
        if step.mode != "off" and step.seed is None and not from_journal:
            raise BadDatabase(
                f"step {index} of {flake.flake_id}'s reproducer ({step.nodeid}) has no seed: "
                "the database is damaged; run a new hunt"
            )
        _keep_journal(source, step, journals)
    if repro.exc_type:
        expected = Expected("failed", repro.exc_type, repro.location, repro.message)
    elif "network" in flake.kinds:
        expected = Expected("passed", violations=True)
    else:
        expected = Expected("failed")
    last = source.attempt(steps[-1].attempt_id) if steps[-1].attempt_id is not None else None
    return Plan(
        label=flake.flake_id,
        target=target,
        steps=steps,
        hash_seed=repro.hash_seed,
        expected=expected,
        journals=journals,
        run_id=repro.run_id if repro.run_id is not None else flake.last_run_id,
        flake_row=flake.row_id,
        attempt_id=steps[-1].attempt_id,
        counts=dict(last.counts or {}) if last is not None else {},
        kinds=flake.kinds,
        together=repro.together,
        resource=repro.resource,
    )


# -- how it runs -------------------------------------------------------------


def needs_reexec(needed: int | None, environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether this process's PYTHONHASHSEED differs from the one ``needed``."""
    current = environ.get("PYTHONHASHSEED", "")
    return needed is not None and not (current.isdigit() and int(current) == needed)


# -- where the printed command runs ------------------------------------------


def location_arg(rootdir: str, invocation_dir: str, cwd: str) -> str | None:
    """The directory argument a replay command needs to collect from the hunt's rootdir.

    Nodeids are relative to the rootdir the hunt ran with. Run from another
    directory, pytest needs that rootdir as an argument. Only a directory
    strictly inside ``cwd`` is ever suggested (the database may come from
    elsewhere: it must not point a command at arbitrary places).
    """
    here = Path(cwd).resolve()
    root = Path(rootdir)
    candidates = [root]
    relative = root.relative_to(invocation_dir) if root.is_relative_to(invocation_dir) else None
    if relative is not None and relative.parts and ".." not in relative.parts:
        candidates.append(here / relative)
    for candidate in candidates:
        if not candidate.is_absolute() or not candidate.is_dir():
            continue
        resolved = candidate.resolve()
        if resolved == here:
            return None
        if here in resolved.parents:
            return str(resolved.relative_to(here))
    return None
