"""Causes that cross workers: one path that tests on several workers use at once.

Under xdist running at the same time proves nothing (every attempt overlaps
the other workers'); the hunt's record says *where*: the paths each attempt
wrote and the paths its failure names. Before each test is isolated on its
own, three steps (docs/isolation.md, "Causes that cross workers", says each
in full): the crossings, from the record (pure, :func:`crossings`; paths
inside one another are one resource, :func:`resources`); one probe of each
resource, two sides in two fresh processes and each side alone
(:func:`confirm`); which failures a shared resource explains
(:func:`explained`). The rest of each test's failures is isolated as any
failure is, so a victim hidden among the collisions is still found. With
``-n 0`` nothing crosses: nothing here runs.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate.case import Case
from hermetic_hunt.isolate.collision import overlap, shared_path
from hermetic_hunt.models import Attempt, Step, is_plain

#: Most tests in a resource's probe sample.
SAMPLE = 12
#: Seconds of the hunt's attempts a probe side may hold (the sample is cut to fit).
SIDE_SECONDS = 5.0
#: Runs of the two sides at the same time (each shows more of the ways they collide).
TOGETHER_RUNS = 3
#: A failure signature: (nodeid, exception type, location).
Shown = tuple[str, str, str]

_PATH = re.compile(r"(/[^\s'\"`:,;()\[\]{}<>]+)")


def message_paths(message: str) -> list[str]:
    """The absolute paths a failure's message names (``FileExistsError: [Errno 17]
    File exists: '/ci/tests/test_dir'`` -> ``/ci/tests/test_dir``)."""
    return [os.path.normpath(p.rstrip(".")) for p in _PATH.findall(message) if len(p) > 1]


def touched(attempt: Attempt) -> list[str]:
    """The paths an attempt wrote, and those its failure names."""
    return [*attempt.writes, *message_paths(attempt.message)]


def ran_beside(attempt: Attempt, other: Attempt) -> bool:
    """``other`` ran on another worker at the same real time as ``attempt``."""
    return other.worker != attempt.worker and overlap(attempt, other) > 0


def solo(attempt: Attempt, round_attempts: Sequence[Attempt]) -> bool:
    """No other worker ran anything while ``attempt`` ran (a default or packed round,
    ``-n 0``): what it did was its own process's doing."""
    return not any(ran_beside(attempt, other) for other in round_attempts)


@dataclass(frozen=True)
class Crossing:
    """A failing attempt and an attempt of another worker that ran beside it and
    touched ``path`` too."""

    failed: Attempt
    partner: Attempt
    path: str


def crossings(failed: Attempt, round_attempts: Sequence[Attempt]) -> list[Crossing]:
    """Where ``failed`` crossed the attempts of other workers of its round."""
    mine = touched(failed)
    if not mine:
        return []
    return [
        Crossing(failed, other, path)
        for other in round_attempts
        if other.writes and ran_beside(failed, other)
        and (path := shared_path(mine, other.writes)) is not None
    ]  # fmt: skip


@dataclass
class Resource:
    """A path (the outermost of those inside one another) failures crossed over."""

    path: str
    crossings: list[Crossing] = field(default_factory=list)

    def failures(self) -> dict[str, list[Attempt]]:
        """``{nodeid: its failing attempts that crossed here}`` (each attempt once)."""
        out: dict[str, dict[int, Attempt]] = {}
        for c in self.crossings:
            out.setdefault(c.failed.nodeid, {})[id(c.failed)] = c.failed
        return {nodeid: list(found.values()) for nodeid, found in out.items()}

    def partners(self, nodeid: str) -> Counter[str]:
        """How often each test of another worker crossed ``nodeid``'s failures here."""
        return Counter(c.partner.nodeid for c in self.crossings if c.failed.nodeid == nodeid)

    def tests(self) -> list[str]:
        """Every test that touched it in a crossing: the failing ones first, most
        failures first, then their partners, most crossings first."""
        failing = Counter(c.failed.nodeid for c in self.crossings)
        partners = Counter(c.partner.nodeid for c in self.crossings)
        ranked = sorted(failing, key=lambda n: (-failing[n], n))
        ranked += sorted((n for n in partners if n not in failing), key=lambda n: (-partners[n], n))
        return ranked


def resources(
    failing: Mapping[str, Sequence[Attempt]],
    round_of: Callable[[Attempt], Sequence[Attempt]],
) -> list[Resource]:
    """The resources the failures of ``failing`` crossed (a twice round's second runs
    too: another worker can break those as well), most failing tests first."""
    found = [c for nodeid in sorted(failing) for attempt in failing[nodeid] if attempt.failed
             for c in crossings(attempt, round_of(attempt))]  # fmt: skip
    by_path: dict[str, Resource] = {}
    # Shortest first: a path inside one already seen joins it.
    for crossing in sorted(found, key=lambda c: (len(c.path), c.path)):
        home = next((r for r in by_path.values() if _inside(crossing.path, r.path)), None)
        if home is None:
            home = by_path[crossing.path] = Resource(crossing.path)
        home.crossings.append(crossing)
    return sorted(by_path.values(), key=lambda r: (-len(r.failures()), r.path))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


# -- the probe ------------------------------------------------------------------------


@dataclass(frozen=True)
class Shared:
    """A resource the probe showed shared: what failed only with both sides running.

    ``shown``: ``(nodeid, exception type, location)`` of those failures;
    ``sides``: the two sides (a collision's reproducer); ``probes``: the lead
    case's probe numbers that showed it.
    """

    shown: frozenset[Shown]
    sides: tuple[tuple[Step, ...], tuple[Step, ...]]
    hash_seed: int
    probes: tuple[int, ...]
    failed_runs: int

    @property
    def locations(self) -> frozenset[str]:
        return frozenset(location for _, _, location in self.shown if location)


def sample(resource: Resource, duration: Callable[[str], float]) -> list[str]:
    """The tests a resource's probe runs: first one that failed each way (most
    common way first), then the other failing tests and the partners, up to
    :data:`SAMPLE` tests and :data:`SIDE_SECONDS` of the hunt's durations."""
    ways: dict[tuple[str, str], list[str]] = {}
    for nodeid, attempts in resource.failures().items():
        for attempt in attempts:
            ways.setdefault(attempt.signature, []).append(nodeid)
    first = [
        Counter(nodeids).most_common(1)[0][0]
        for _, nodeids in sorted(ways.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    chosen: list[str] = []
    seconds = 0.0
    for nodeid in dict.fromkeys([*first, *resource.tests()]):
        cost = duration(nodeid)
        if len(chosen) >= SAMPLE or (chosen and seconds + cost > SIDE_SECONDS):
            break
        chosen.append(nodeid)
        seconds += cost
    return chosen


def _following(step: Step) -> Step:
    """``step`` on the timeline of the step before it (no start time of its own)."""
    return Step(step.nodeid, step.seed, None, step.mode)


def _failures(result: ProbeResult) -> set[Shown]:
    return {(a.nodeid, a.exc_type, a.location) for a in result.steps if a.failed}


def confirm(
    case: Case,
    resource: Resource,
    tests: Sequence[str],
    step_for: Callable[[str], Step],
    hash_seed: int,
    shown_as: str,
) -> Shared | None:
    """Probe ``resource`` through ``case`` (its lead: the probes count against its
    budget and are stored with it): each side alone, then both at once,
    :data:`TOGETHER_RUNS` times. None: no failure came from running both.

    ``tests`` is the sample in collection order; ``shown_as`` names the resource
    in the probes' purposes (relative to the rootdir). The lead runs last on the
    first side (first on the other): the sides are its reproducer, which ends
    with its own test.
    """
    ordered = [n for n in tests if n != case.nodeid] + [case.nodeid]
    steps = [step_for(nodeid) for nodeid in ordered]
    # A side's first step starts where its attempt started; the rest follow on its timeline.
    side_a, side_b = ((side[0], *map(_following, side[1:])) for side in (steps, steps[::-1]))
    first = case.step_no() + 1
    purpose = f"{shown_as}: one side alone"
    alone = [case.probe(purpose, list(side), hash_seed) for side in (side_a, side_b)]
    if any(result.status != "completed" for result in alone):
        return None
    baseline = [_failures(result) for result in alone]
    purpose = f"{shown_as}: both sides at the same time"
    runs = [case.probe_together(purpose, [list(side_a), list(side_b)], hash_seed)
            for _ in range(TOGETHER_RUNS)]  # fmt: skip
    new = [set().union(*(_failures(r) - base for r, base in zip(results, baseline, strict=True)))
           for results in runs]  # fmt: skip
    shown: set[Shown] = set().union(*new)
    if not shown:
        return None
    return Shared(
        shown=frozenset(shown),
        sides=(side_a, side_b),
        hash_seed=hash_seed,
        probes=tuple(range(first, case.step_no() + 1)),
        failed_runs=sum(1 for found in new if found),
    )


#: Runs of a member's own probe with the other side (see :func:`confirm_member`).
MEMBER_RUNS = 2


def confirm_member(
    case: Case, shared: Shared, step_for: Callable[[str], Step], shown_as: str
) -> frozenset[Shown]:
    """How ``case``'s test fails beside the resource's sample, and only then: the
    test first on one side, the rest of the sample after it; the other side as in
    :func:`confirm` (for a test that failed its own way over a shared resource,
    which the sample's probe did not show)."""
    others = [s for s in shared.sides[1] if s.nodeid != case.nodeid]
    rest = [_following(s) for s in shared.sides[0] if s.nodeid != case.nodeid]
    side_a = [step_for(case.nodeid), *rest]
    alone = case.probe(f"{shown_as}: its side alone", side_a, shared.hash_seed)
    if alone.status != "completed" or not others:
        return frozenset()
    base = _failures(alone)
    purpose = f"{shown_as}: beside the other side"
    runs = [case.probe_together(purpose, [side_a, others], shared.hash_seed)
            for _ in range(MEMBER_RUNS)]  # fmt: skip
    return frozenset(f for r in runs for f in _failures(r[0]) - base if f[0] == case.nodeid)


def explained(
    nodeid: str,
    attempts: Sequence[Attempt],
    resource: Resource,
    shared: Shared,
    round_of: Callable[[Attempt], Sequence[Attempt]],
    also: frozenset[Shown] = frozenset(),
) -> list[Attempt]:
    """The failures of ``nodeid`` (its ``attempts``) that are ``shared``'s doing
    (``also``: how its own probe showed it fail beside the others)."""
    shown = shared.shown | also
    locations = shared.locations | {where for _, _, where in also if where}
    own = own_ways(attempts, round_of)  # ways it fails with no other worker running
    return [
        a
        for a in resource.failures().get(nodeid, [])
        if a.signature not in own and ((nodeid, *a.signature) in shown or a.location in locations)
    ]


@dataclass
class Members:
    """What a shared resource explains, test by test: ``explained`` (set aside),
    ``left`` (failures that crossed it and are not explained: :func:`crossed_only`),
    and the probes a test got of its own (:func:`confirm_member`)."""

    explained: dict[str, list[Attempt]] = field(default_factory=dict)
    left: dict[str, list[Attempt]] = field(default_factory=dict)
    probes: dict[str, list[tuple[Probe, ProbeResult]]] = field(default_factory=dict)

    def facts(self, shown_as: str, lead: str, representative: str | None) -> dict[str, Any]:
        """The group's facts every member's evidence carries (``shared``)."""
        members = [nodeid for nodeid, found in self.explained.items() if found]
        where = Counter(a.location for n in members for a in self.explained[n] if a.location)
        return {
            "resource": shown_as,
            "tests": len(members),
            "files": len({nodeid.split("::", 1)[0] for nodeid in members}),
            "locations": [location for location, _ in where.most_common(3)],
            "lead": lead,
            "representative": representative,
        }


def members(
    resource: Resource,
    verdict: Shared,
    failing: Mapping[str, Sequence[Attempt]],
    round_of: Callable[[Attempt], Sequence[Attempt]],
    probe_member: Callable[[str], tuple[frozenset[Shown], list[tuple[Probe, ProbeResult]]]] | None,
    taken: dict[str, set[int]],
) -> Members:
    """Attribute ``resource``'s crossings, test by test. A test that failed its own way
    over it gets its own probe (``probe_member``; None: no time left). ``taken``:
    the failures earlier resources explained (each is explained once)."""
    out = Members()
    for nodeid, crossing in resource.failures().items():
        if nodeid not in failing:
            continue
        attempts = failing[nodeid]
        found = explained(nodeid, attempts, resource, verdict, round_of)
        own = own_ways(attempts, round_of)
        if probe_member is not None and any(a not in found and a.signature not in own
                                            for a in crossing):  # fmt: skip
            also, probes = probe_member(nodeid)
            out.probes[nodeid] = probes
            found = explained(nodeid, attempts, resource, verdict, round_of, also)
        earlier = taken.setdefault(nodeid, set())
        out.explained[nodeid] = [a for a in found if id(a) not in earlier]
        earlier.update(id(a) for a in out.explained[nodeid])
        out.left[nodeid] = [a for a in crossing if a not in found and a.signature not in own]
    return out


def own_ways(
    attempts: Sequence[Attempt], round_of: Callable[[Attempt], Sequence[Attempt]]
) -> set[tuple[str, str]]:
    """The signatures a test failed with while no other worker ran: its own doing."""
    return {
        a.signature for a in attempts if a.failed and is_plain(a.repeat) and solo(a, round_of(a))
    }


# -- what a test's case starts with -----------------------------------------------------


@dataclass
class Crossed:
    """What the shared-resource phase found for one test, applied to each case of it.

    ``explained``: its failures the resource explains (set aside, claimed as
    ``collision``); ``left``: its other failures that crossed the resource (one
    whose message names a path inside it is claimed when nothing else explains
    it: :func:`named`); ``probes``: probes run for it (the lead's probe of the
    resource, or its own beside the others); ``lead_id``: the flake id of the
    resource's lead when that is another test.
    """

    resource: Resource | None
    verdict: Shared | None
    explained: list[Attempt]
    shown_as: str
    group: dict[str, Any]
    probes: list[tuple[Probe, ProbeResult]]
    lead_id: str
    left: list[Attempt] = field(default_factory=list)

    @classmethod
    def probes_only(cls, probes: list[tuple[Probe, ProbeResult]]) -> Crossed:
        return cls(None, None, [], "", {}, probes, "")

    def partner(self, nodeid: str, attempt: Attempt | None = None) -> str:
        """The test of another worker that crossed ``nodeid`` here most (at ``attempt``)."""
        if self.resource is None:
            return ""
        at = Counter(c.partner.nodeid for c in self.resource.crossings if c.failed is attempt)
        partners = at or self.resource.partners(nodeid)
        return partners.most_common(1)[0][0] if partners else ""

    def apply(self, case: Case) -> None:
        first = case.step_no() + 1
        case.finding.probes.extend(self.probes)
        case.budget.used += len(self.probes)
        if self.verdict is None or self.resource is None:
            return
        case.crossings.append(self)
        if not self.explained:
            return
        case.set_aside(self.explained)
        nodeid, v = case.nodeid, self.verdict
        partner = self.partner(nodeid)
        shown = sorted({f"{exc} at {where}" for n, exc, where in v.shown if n == nodeid})
        numbers = list(range(first, first + len(self.probes)))
        if self.lead_id:
            how = (
                f"as {self.lead_id}, whose probe of {self.shown_as} showed failures only with two "
                f"processes using it at once: {len(self.explained)} of its failures crossed it "
                f"while {partner} ran on another worker"
            )
            if self.probes:
                how += f"; run beside the others itself, it failed that way ({'; '.join(shown)})"
        else:
            what = "; ".join(shown[:3]) or "failures at the same code"
            how = (
                f"fails while another worker uses {self.shown_as} at the same time ({what}): "
                f"{len(v.sides[0])} of the tests that use it, run by two processes at once, "
                f"failed in {v.failed_runs} of {TOGETHER_RUNS} runs, and each process alone passed"
            )
        case.claim("collision", how, numbers)
        self._facts(case, partner, len(self.explained))
        if len(v.sides[0]) <= 2:  # the probe's sides are this pair
            self._pair(case, self.explained[0], confirmed=not self.lead_id or None)
        else:
            # The reproducer: the sides the probe ran, this test last on the first (a narrow
            # race a single pair seldom shows; the sides do), confirmed when they are its own.
            mine = [s for s in v.sides[0] if s.nodeid != nodeid]  # never empty: over 2 steps
            case.reproduce([*mine, Step.of(self.explained[0], now=None)], v.hash_seed,
                           confirmed=not self.lead_id or None, together=list(v.sides[1]),
                           resource=self.shown_as)  # fmt: skip

    def _facts(self, case: Case, partner: str, explained: int) -> None:
        case.facts["collision"] = {
            "partner": partner,
            "resource": self.shown_as,
            "partner_attempt": None,
            "shared": True,
        }
        case.facts["shared"] = {**self.group, "explained": explained}

    def _pair(self, case: Case, attempt: Attempt, confirmed: bool | None) -> None:
        """The reproducer: the test at ``attempt`` beside the partner that crossed it."""
        partner = self.partner(case.nodeid, attempt)
        theirs = next(
            (Step.of(c.partner) for c in self.resource.crossings
             if c.failed is attempt and c.partner.nodeid == partner),
            Step(partner),
        ) if self.resource is not None else Step(partner)  # fmt: skip
        case.reproduce([Step.of(attempt)], case.hash_seed_of(attempt), confirmed=confirmed,
                       together=[theirs], resource=self.shown_as)  # fmt: skip


def crossed_only(case: Case) -> bool:
    """Nothing in one process explains ``case``'s target -- alone, after its worker's
    tests, after other workers' earlier tests, identical reruns, other hash seeds
    all passed -- and it failed while a test of another worker wrote inside a
    resource its probe showed shared, a resource the target itself used (a
    crossing). Claim the collision on that evidence, saying it was not reproduced
    itself (its reproducer is the pair, unconfirmed). True when claimed."""
    target = case.target
    if target is None:
        return False
    for crossed in case.crossings:
        if crossed.resource is None or all(a is not target for a in crossed.left):
            continue
        partner = crossed.partner(case.nodeid, target)
        where = [c.path for c in crossed.resource.crossings if c.failed is target]
        case.claim(
            "collision",
            f"it failed using {crossed.shown_as} while {partner} wrote there on another "
            f"worker ({where[0] if where else crossed.shown_as}); the probe of "
            f"{crossed.shown_as} showed it shared (failures only with two processes at "
            "once); every probe of this test in one process passed; its own failure was "
            "not reproduced beside the others",
            [],
        )
        crossed._facts(case, partner, 0)
        crossed._pair(case, target, confirmed=None)
        return True
    return False
