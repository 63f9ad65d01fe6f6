"""Parametrizations of one test function that flake the same way: one finding.

A suite that parametrizes a flaky test over 76 values flakes 76 times for
one reason. :func:`group` puts the instances that flaked alike into one
:class:`Group`; its representative is isolated and its reproducer replayed
with a few other instances in its place (:func:`sample`). What counts as
alike and what each instance's ``flakes`` row holds are in
docs/isolation.md, "Parametrizations are one finding".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hermetic_hunt.findings import Finding
from hermetic_hunt.isolate.case import Case, choose_target, to_explain
from hermetic_hunt.models import Attempt, Step, function_of

#: Instances of a group, besides its representative, probed to confirm it.
SAMPLE = 3


@dataclass(frozen=True)
class Group:
    """Instances of one test function that flake alike; ``members[0]`` represents them."""

    members: tuple[str, ...]

    @property
    def lead(self) -> str:
        return self.members[0]

    @property
    def others(self) -> tuple[str, ...]:
        return self.members[1:]


def _key(nodeid: str, attempts: Sequence[Attempt]) -> tuple[str, str, str, bool]:
    failing, repeated_only = to_explain(attempts)
    exc_type, location = choose_target(failing).signature if failing else ("", "")
    return function_of(nodeid), exc_type, location, repeated_only


def group(tests: Mapping[str, Sequence[Attempt]]) -> list[Group]:
    """The groups of ``tests`` (single tests are groups of one), in nodeid order.

    The representative of a group is the instance that failed most often
    (then the first by nodeid).
    """
    by_key: dict[tuple[str, str, str, bool], list[str]] = {}
    for nodeid in sorted(tests):
        by_key.setdefault(_key(nodeid, tests[nodeid]), []).append(nodeid)
    out = []
    for members in by_key.values():
        lead = min(members, key=lambda n: (-sum(a.failed for a in tests[n]), n))
        out.append(Group((lead, *(n for n in members if n != lead))))
    return sorted(out, key=lambda g: g.lead)


def sample(others: Sequence[str], size: int = SAMPLE) -> list[str]:
    """Up to ``size`` instances spread over ``others`` (first, middle, last...)."""
    if len(others) <= size:
        return list(others)
    picks = sorted({round(i * (len(others) - 1) / (size - 1)) for i in range(size)})
    return [others[i] for i in picks]


def substitute(steps: Sequence[Step], lead: str, member: str) -> list[Step]:
    """The representative's reproducer with ``member`` in the representative's place."""
    return [replace(s, nodeid=member, attempt_id=None) if s.nodeid == lead else s for s in steps]


def adopt(case: Case, lead: Finding, lead_id: str, *, probe: bool) -> bool:
    """Give ``case`` the verdict of its group's representative ``lead``.

    With ``probe``: first replay the representative's reproducer with this
    test in its place; False (nothing adopted) when it does not fail the
    way this test failed in the hunt.
    """
    repro = lead.reproducer
    if repro is None and probe:
        return False
    steps = substitute(repro.steps, lead.nodeid, case.nodeid) if repro is not None else []
    hash_seed = repro.hash_seed if repro is not None and repro.hash_seed is not None else 0
    if probe:
        result = case.probe("as its group's representative", steps, hash_seed)
        shown = (
            case.same(result)
            if case.target is not None
            else bool(result.last and result.last.violations)
        )
        if not shown:
            case.finding.notes.append(
                f"{lead_id}'s reproducer with this test in its place did not fail the same "
                "way: isolated on its own"
            )
            return False
    v = case.finding
    v.polluters = [list(s) for s in lead.polluters]
    v.state_setters = [list(s) for s in lead.state_setters]
    v.cleaners = list(lead.cleaners)
    if steps:
        case.reproduce(steps, hash_seed, confirmed=True if probe else None)
    how = (
        "its reproducer, with this test in its place, fails the same way"
        if probe
        else "not probed itself"
    )
    for kind in lead.kinds:
        case.claim(
            kind,
            f"as {lead_id}, the representative of the parametrizations of "
            f"{function_of(case.nodeid)} that fail the same way ({how})",
            [case.step_no()] if probe else [],
        )
    case.facts["group"] = {"representative": lead_id, "sampled": probe}
    evidence = lead.evidence if isinstance(lead.evidence, dict) else {}
    for fact in ("default_order", "dates", "polluter_leaks", "state_setter_leaks"):
        if evidence.get(fact) is not None:
            case.facts[fact] = evidence[fact]
    return True
