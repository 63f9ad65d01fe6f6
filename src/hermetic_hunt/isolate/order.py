"""The probes of phase 2: the order (driven by :mod:`hermetic_hunt.isolate.classifier`).

Self-polluting, victim (polluters, then cleaners), brittle (state-setters)
and the last resorts for a flake that reproduced neither alone nor in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate.alone import (
    CONFIRM,
    alternative_hash_seeds,
    consistent,
    names,
    numbers,
    shows_pass,
    uncontrolled,
)
from hermetic_hunt.isolate.case import Case, dedupe
from hermetic_hunt.isolate.search import BudgetExceeded, find_cleaners, find_culprits
from hermetic_hunt.models import Attempt, Step
from hermetic_hunt.seeds import attempt_now, attempt_seed


def sequence_before(
    c: Case, attempt: Attempt, *, exclude_self: bool
) -> tuple[list[Step], list[Step]]:
    """``(deduplicated, as run)`` steps before ``attempt`` on its worker."""
    raw = [Step.of(a) for a in c.history.preceding(attempt)]
    kept = [s for s in raw if s.nodeid in c.collected]
    if len(kept) < len(raw):
        gone = sorted({s.nodeid for s in raw} - {s.nodeid for s in kept})
        c.finding.notes.append(f"not collected any more, left out: {', '.join(gone[:5])}")
    if exclude_self:
        kept = [s for s in kept if s.nodeid != attempt.nodeid]
    return dedupe(kept), kept


def _first_passed(result: ProbeResult) -> bool:
    return (
        result.status == "completed"
        and len(result.steps) >= 2
        and (result.steps[0].outcome == "passed")
    )


def order_dependent(c: Case) -> None:
    """Passes alone: self-polluting? a victim? else the last resorts."""
    target = c.target
    assert target is not None
    step, hs = Step.of(target), c.hash_seed_of(target)
    self_polluting = True
    for purpose in ("twice in one process", *["twice in one process (again)"] * (CONFIRM - 1)):
        result = c.probe(purpose, [step, step], hs)
        if not (_first_passed(result) and c.same(result)):
            self_polluting = False
            break
    if self_polluting:
        c.claim(
            "self-polluting",
            "passes on its first run in a fresh process and fails when run again in it "
            f"({CONFIRM} out of {CONFIRM})",
            numbers(c, CONFIRM),
        )
        c.reproduce([step, step], hs, confirmed=True)
    seq, raw = sequence_before(c, target, exclude_self=self_polluting)
    if seq:
        victim(c, seq, raw, step, hs)
    elif not self_polluting:
        c.finding.notes.append("nothing ran before the failing attempt on its worker")
    if not c.finding.kinds:
        last_resorts(c, step, hs)


def _reproducing_sequence(
    c: Case, seq: list[Step], raw: list[Step], last: Step, hs: int,
    purpose: str, check: Callable[[ProbeResult], bool],
) -> list[Step] | None:  # fmt: skip
    """``seq`` (or, failing that, ``raw``) if it shows the signal before ``last``."""
    if check(c.probe(purpose, [*seq, last], hs)):
        return seq
    if len(seq) < len(raw) <= c.settings.max_raw_sequence and check(
        c.probe(f"{purpose} (not deduplicated)", [*raw, last], hs)
    ):
        return raw
    return None


def victim(c: Case, seq: list[Step], raw: list[Step], step: Step, hs: int) -> None:
    """The preceding sequence fails: shrink it to minimal polluter sets."""
    cands = _reproducing_sequence(c, seq, raw, step, hs, "preceding sequence", c.same)
    if cands is None:
        c.finding.notes.append("the sequence that preceded the failure passes when replayed")
        return
    full_no = c.step_no()

    def signal(subset: Sequence[int]) -> bool:
        return c.same(c.probe("polluter search", [*(cands[i] for i in subset), step], hs))

    search = find_culprits(range(len(cands)), signal, confidence=c.settings.confidence)
    sets = [[cands[i] for i in found] for found in search.sets]
    _search_notes(c, search.notes, search.partial, "polluter")
    if search.confirmed and search.repeats == 1:
        sets = _consistent_sets(c, sets, step, hs, c.same, "polluter set")
        search.partial = c.finding.status == "partial"
    search_numbers = list(range(full_no, c.step_no() + 1))
    own = [s for s in sets if [x.nodeid for x in s] == [step.nodeid]]
    others = [s for s in sets if s not in own]
    if own and "self-polluting" not in c.finding.kinds:
        c.claim(
            "self-polluting",
            "fails right after its own earlier run in the same process (minimal set: itself)",
            search_numbers,
        )
        c.reproduce([*own[0], step], hs, confirmed=search.confirmed)
    if not others:
        return
    minimal = "smallest failing sequence found" if search.partial else "minimal polluter set"
    c.claim(
        "victim",
        f"passes alone, fails after {names(others[0])} ({minimal} among {len(cands)} "
        f"preceding tests, {search.probes + 1} probes)",
        [*c.alone_numbers, *search_numbers],
    )
    c.finding.polluters = [[x.nodeid for x in s] for s in others]
    c.reproduce([*others[0], step], hs, confirmed=search.confirmed)
    if not search.partial:
        cleaners(c, others, step, hs, search.repeats)


def _consistent_sets(
    c: Case, sets: list[list[Step]], step: Step, hs: int,
    check: Callable[[ProbeResult], bool], what: str,
) -> list[list[Step]]:  # fmt: skip
    """The sets that show every time (all of them, unchecked, if the budget runs out)."""
    kept = []
    for index, members in enumerate(sets):
        try:
            if consistent(c, [*members, step], hs, check, f"{what} {names(members)}"):
                kept.append(members)
        except BudgetExceeded as exc:
            c.finding.status = "partial"
            c.finding.notes.append(
                f"{exc} while confirming the {what}s (--hermetic-hunt-isolate-budget): "
                "partial result, not confirmed"
            )
            return kept + sets[index:]
    return kept


def _search_notes(c: Case, notes: list[str], partial: bool, what: str) -> None:
    c.finding.notes.extend(f"{what} search: {n}" for n in notes if "budget" not in n)
    if partial:
        c.finding.status = "partial"
        c.finding.notes.append(
            f"probe budget of {c.budget.limit} exhausted during the {what} search "
            "(--hermetic-hunt-isolate-budget): partial result, the set is not minimal yet"
        )


def cleaners(c: Case, polluters: list[list[Step]], step: Step, hs: int, repeats: int) -> None:
    """Tests that, placed between the polluters and the victim, make it pass."""
    excluded = {step.nodeid} | {x.nodeid for s in polluters for x in s}
    names_ = [n for n in c.history.tests() if n not in excluded and n in c.collected]
    steps = {n: _step_for(c, n) for n in names_}
    first = c.step_no() + 1

    def cleans(group: Sequence[str]) -> bool:
        run = [*polluters[0], *(steps[n] for n in group), step]
        return c.probe("cleaner search", run, hs).outcome == "passed"

    found, _, partial = find_cleaners(names_, cleans, repeats=repeats)
    if partial:
        c.finding.status = "partial"
        c.finding.notes.append("cleaner search: probe budget exhausted")
    c.finding.cleaners = found
    if found:
        c.finding.notes.append(
            f"cleaners (each makes it pass between polluters and victim): {', '.join(found)}"
        )
        c.record("cleaners", found, list(range(first, c.step_no() + 1)))


def _step_for(c: Case, nodeid: str) -> Step:
    """A recorded attempt of ``nodeid`` to run it with (derived if none)."""
    attempt = c.history.representative(nodeid)
    if attempt is not None:
        return Step.of(attempt)
    seed = attempt_seed(c.settings.base_seed, nodeid, 0)
    return Step(nodeid, seed, attempt_now(seed))


def brittle(c: Case) -> None:
    """Fails alone whatever the inputs: what made it pass in the hunt?"""
    if not c.passing:
        return
    passing = min(c.passing, key=lambda a: (a.position, a.attempt_id))
    step, hs = Step.of(passing), c.hash_seed_of(passing)
    if c.probe("alone (a passing attempt)", [step], hs).outcome == "passed":
        c.finding.notes.append(
            f"alone with the inputs of passing attempt A{passing.attempt_id} it passes: "
            "no single input decides it"
        )
        return
    seq, raw = sequence_before(c, passing, exclude_self=False)
    cands = (
        _reproducing_sequence(c, seq, raw, step, hs, "sequence before a pass", shows_pass)
        if seq
        else None
    )
    if cands is None:
        c.finding.notes.append(
            f"the sequence before passing attempt A{passing.attempt_id} does not make it pass"
        )
        return
    full_no = c.step_no()

    def signal(subset: Sequence[int]) -> bool:
        run = [*(cands[i] for i in subset), step]
        return c.probe("state-setter search", run, hs).outcome == "passed"

    search = find_culprits(range(len(cands)), signal, confidence=c.settings.confidence)
    _search_notes(c, search.notes, search.partial, "state-setter")
    found_sets = [[cands[i] for i in found] for found in search.sets]
    if search.confirmed and search.repeats == 1:
        found_sets = _consistent_sets(c, found_sets, step, hs, shows_pass, "state-setter set")
    sets = [[x.nodeid for x in s] for s in found_sets]
    if not sets:
        return
    c.finding.state_setters = sets
    c.claim(
        "brittle",
        f"fails alone every time; passes after {', '.join(sets[0])} (minimal state-setter "
        f"set among {len(cands)} tests before passing attempt A{passing.attempt_id})",
        [*c.alone_numbers, *range(full_no, c.step_no() + 1)],
    )


def last_resorts(c: Case, step: Step, hs: int) -> None:
    """Reproduced neither alone nor in order: many identical reruns, then hash seeds.

    Reruns come first: a test that fails at random under identical inputs
    could otherwise pass for hash-order after a few lucky runs.
    """
    reruns = [c.probe("rerun", [step], hs) for _ in range(c.settings.reruns)]
    record = replace(step, mode="record", attempt_id=None)
    reruns += [c.probe("rerun (record)", [record], hs) for _ in range(c.settings.record_reruns)]
    rerun_numbers = numbers(c, len(reruns))
    failed = [n for n, r in zip(rerun_numbers, reruns, strict=True) if c.same(r)]
    if failed:
        total = len(reruns) + len(c.alone_numbers)
        what = f"it failed in {len(failed)} of {total} identical runs alone"
        if not uncontrolled(c, what):
            c.claim("concurrency", f"identical inputs: {what}", [*c.alone_numbers, *rerun_numbers])
        c.reproduce([step], hs, confirmed=len(failed) >= 2)
        return
    hash_seeds = alternative_hash_seeds(c, c.settings.variations)
    results = c.probe_many([Probe("vary hash seed", (step,), h) for h in hash_seeds])
    for h, result in zip(hash_seeds, results, strict=True):
        if c.same(result) and consistent(c, [step], h, c.same, f"PYTHONHASHSEED={h}"):
            c.claim(
                "hash-order",
                f"passes alone with PYTHONHASHSEED={hs} in {len(c.alone_numbers) + len(reruns)} "
                f"runs, fails with {h} in {CONFIRM} of {CONFIRM}",
                [*c.alone_numbers, *numbers(c, CONFIRM)],
            )
            c.reproduce([step], h, confirmed=True)
            return
