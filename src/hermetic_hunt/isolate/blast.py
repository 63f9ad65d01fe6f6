"""Blast radius: every victim of a polluter, from one probe.

Why and how (one polluter probe, each test that fails there checked alone
and three times after the polluters alone, the order-dependent claim's
rule of :mod:`hermetic_hunt.isolate.order`) are in docs/isolation.md,
"Blast radius: every victim of a polluter".

Pure over a prober (:class:`~hermetic_hunt.isolate.case.Prober`) and a
function that gives each test the step to run it with; probes stop when
the deadline passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hermetic_hunt.findings import Finding, Probe, ProbeResult
from hermetic_hunt.isolate.alone import CONFIRM
from hermetic_hunt.isolate.case import Deadline, Prober
from hermetic_hunt.models import FAILING, FOUND_BY, Attempt, Reproducer, Step


@dataclass(frozen=True)
class Polluters:
    """A polluter set isolation found: its steps (recorded seeds), the hash seed,
    the flake that showed it, and the tests already known to flake."""

    steps: tuple[Step, ...]
    hash_seed: int
    shown_by: str  # the flake id whose isolation found the set
    run_id: int | None

    @property
    def nodeids(self) -> tuple[str, ...]:
        return tuple(s.nodeid for s in self.steps)


def victims_of(
    polluters: Polluters,
    tests: Sequence[str],
    known: set[str],
    step_for: Callable[[str], Step],
    prober: Prober,
    deadline: Deadline | None = None,
) -> list[Finding]:
    """The victims of ``polluters`` among ``tests`` (collection order) that are not ``known``."""
    names = [n for n in tests if n not in known and n not in polluters.nodeids]
    if not names or (deadline is not None and deadline.passed):
        return []
    steps = {n: step_for(n) for n in names}
    sweep = Probe(FOUND_BY, (*polluters.steps, *(steps[n] for n in names)), polluters.hash_seed)
    swept = prober.run(sweep)
    out = []
    for attempt in (a for a in swept.steps[len(polluters.steps) :] if a.outcome in FAILING):
        if deadline is not None and deadline.passed:
            break
        finding = _confirm(polluters, steps[attempt.nodeid], attempt, prober, (sweep, swept))
        if finding is not None:
            out.append(finding)
    return out


def _confirm(
    polluters: Polluters,
    step: Step,
    seen: Attempt,
    prober: Prober,
    sweep: tuple[Probe, ProbeResult],
) -> Finding | None:
    """A victim when it passes alone and fails after the polluters alone, every time."""
    hash_seed = polluters.hash_seed
    probes: list[tuple[Probe, ProbeResult]] = [sweep]
    alone = Probe("alone", (step,), hash_seed)
    result = prober.run(alone)
    probes.append((alone, result))
    if result.outcome != "passed":
        return None
    signature = seen.signature
    reproducer = Probe("confirm reproducer", (*polluters.steps, step), hash_seed)
    for _ in range(CONFIRM):
        result = prober.run(reproducer)
        probes.append((reproducer, result))
        last = result.last
        if last is None or last.outcome not in FAILING or last.signature != signature:
            return None
    who = " + ".join(polluters.nodeids)
    finding = Finding(
        nodeid=step.nodeid,
        kinds=["victim"],
        polluters=[list(polluters.nodeids)],
        reproducer=Reproducer(
            steps=(*polluters.steps, step),
            hash_seed=hash_seed,
            exc_type=seen.exc_type,
            location=seen.location,
            message=seen.message,
            run_id=polluters.run_id,
        ),
        confirmed=True,
        probes=probes,
        notes=[
            f"found by the polluter probe of {polluters.shown_by} (not observed in rounds: the "
            f"hunt's order never failed it): fails after {who}, passes alone"
        ],
    )
    finding.evidence = {
        "found_by": FOUND_BY,
        "shown_by": polluters.shown_by,
        "signature": f"{seen.exc_type} at {seen.location}" if seen.failure else None,
        "verdicts": [
            {
                "kind": "victim",
                "why": f"fails after {who} in the polluter probe and {CONFIRM} times in a "
                "row after it alone; passes alone",
                "probes": list(range(1, len(probes) + 1)),
            }
        ],
        "exposure": "order",
    }
    return finding
