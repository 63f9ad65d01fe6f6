"""Collisions: a test that fails only while another worker runs a particular test.

Two tests use one fixed resource (a folder, a database file, a port) and
break each other when two workers run them at the same time; ``-n 0`` never
shows it. The procedure is in docs/isolation.md, "The procedure, one factor
at a time" (*Collision*): suspects from the hunt's record (:func:`suspects`,
pure), the partner alone, then a probe pair
(:meth:`hermetic_hunt.isolate.probes.ProbeRunner.run_together`) up to
:data:`PAIR_RUNS` times. Said only here: the pair counts towards
:data:`PAIR_FAILS` only when it failed the flaky test as it failed in the
hunt (the same exception at the same line as one of its failing attempts:
beside the partner it may fail some other way too -- a real collision, but
not what broke this attempt: a polluted victim that also shares a folder);
the partner is started first and the flaky test as soon as the partner
holds the resource (the path exists, at most 2 s later). The pair is the
reproducer (``Reproducer.together``): a replay runs it the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from hermetic_hunt.findings import ProbeResult
from hermetic_hunt.isolate.case import Case
from hermetic_hunt.models import Attempt, Step

#: Most suspects probed per flaky test (the best ranked first).
MAX_SUSPECTS = 2
#: Runs of a probe pair, and how many must fail one of the two: each side
#: passed alone every time, so two failures together are the partner's doing
#: (one run may miss: a process the machine starts late may not overlap).
PAIR_RUNS, PAIR_FAILS = 5, 2


@dataclass(frozen=True)
class Suspect:
    """An attempt on another worker that ran with the failing one and touched ``resource``."""

    partner: Attempt
    resource: str
    overlap: float  # seconds both ran


def shared_path(mine: Sequence[str], theirs: Sequence[str]) -> str | None:
    """The path both touched: the same path, or the folder one of them is inside
    (the shortest such path; None: nothing in common)."""
    common: set[str] = set()
    for path in mine:
        for other in theirs:
            if path == other or other.startswith(path + os.sep):
                common.add(path)
            elif path.startswith(other + os.sep):
                common.add(other)
    return min(common, key=lambda p: (p.count(os.sep), p)) if common else None


def overlap(one: Attempt, other: Attempt) -> float:
    """Seconds of real time both attempts were running (0: none, or unknown)."""
    if one.started is None or other.started is None:
        return 0.0
    start = max(one.started, other.started)
    end = min(one.started + one.duration, other.started + other.duration)
    return max(0.0, end - start)


def suspects(target: Attempt, others: Sequence[Attempt]) -> list[Suspect]:
    """Attempts on other workers that overlapped ``target`` and touched a path it
    touched, one per test: the resource its failure names first, then the
    longest overlap."""
    best: dict[str, Suspect] = {}
    for other in others:
        if other.worker == target.worker or other.nodeid == target.nodeid:
            continue
        seconds = overlap(target, other)
        resource = shared_path(target.writes, other.writes)
        if seconds <= 0 or resource is None:
            continue
        found = Suspect(other, resource, seconds)
        if other.nodeid not in best or _rank(target, found) < _rank(target, best[other.nodeid]):
            best[other.nodeid] = found
    return sorted(best.values(), key=lambda s: _rank(target, s))


def _rank(target: Attempt, suspect: Suspect) -> tuple[bool, float, float]:
    named = suspect.resource in target.message or os.path.basename(suspect.resource) in (
        target.message
    )
    return (not named, -suspect.overlap, suspect.partner.started or 0.0)


def check(case: Case) -> bool:
    """Probe the suspects of ``case``'s target; True when a collision was claimed."""
    target = case.target
    if target is None:
        return False
    # Earliest first: of suspects that rank alike, the first seen is kept.
    ran = sorted(
        case.history.round_attempts(target), key=lambda a: (a.started or 0.0, a.attempt_id or 0)
    )
    found = suspects(target, ran)
    if found:
        case.facts["collision_suspects"] = [
            {"partner": s.partner.nodeid, "attempt": s.partner.attempt_id, "resource": s.resource}
            for s in found[:MAX_SUSPECTS]
        ]
    return any(_confirm(case, target, suspect) for suspect in found[:MAX_SUSPECTS])


def _confirm(case: Case, target: Attempt, suspect: Suspect) -> bool:
    hash_seed = case.hash_seed_of(target)
    mine, theirs = Step.of(target), Step.of(suspect.partner)
    partner = suspect.partner.nodeid
    alone = case.probe(f"collision: {partner} alone", [theirs], hash_seed)
    if alone.status != "completed" or any(a.failed for a in alone.steps):
        return False
    shown = [case.step_no()]
    # Only a failure as in the hunt counts (the module docstring says why).
    ways = {attempt.signature for attempt in case.failing}
    failed = 0
    for run in range(PAIR_RUNS):
        if failed + PAIR_RUNS - run < PAIR_FAILS:
            return False  # too few runs left to show it
        results = case.probe_together(
            f"collision: with {partner} at the same time",
            [[mine], [theirs]],
            hash_seed,
            after=suspect.resource,
        )
        if any(a.failed and a.signature in ways for a in results[0].steps):
            failed += 1
            shown += [case.step_no() - 1, case.step_no()]
            if failed == PAIR_FAILS:
                break
    else:
        return False
    resource = relative(_resource(results, suspect.resource), case.settings.rootdir)
    case.claim(
        "collision",
        f"fails while {partner} runs at the same time in another process: both use {resource}; "
        f"each passes alone, the pair started together failed {failed} times in {run + 1}",
        [*case.alone_numbers, *shown],
    )
    case.facts["collision"] = {
        "partner": partner,
        "resource": resource,
        "partner_attempt": suspect.partner.attempt_id,
        "overlap": round(suspect.overlap, 3),
    }
    case.reproduce([mine], hash_seed, confirmed=True, together=[theirs], resource=resource)
    return True


def relative(path: str, rootdir: str) -> str:
    """``path`` relative to the rootdir when it is inside it."""
    root = os.path.join(rootdir, "") if rootdir else ""
    return path[len(root) :] if root and path.startswith(root) else path


def _resource(results: Sequence[ProbeResult], recorded: str) -> str:
    """The path the pair shared in the probe (the hunt's when the probe's differ)."""
    writes = [[p for a in result.steps for p in a.writes] for result in results]
    return shared_path(*writes) or recorded if len(writes) == 2 else recorded
