"""The probes of each classification step (driven by :mod:`hermetic_hunt.classify`).

Every function takes the :class:`~hermetic_hunt.classify.Classifier` of one
test, runs probes through it (which counts them against the budget and keeps
them as evidence) and claims a kind only after a probe showed it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from hermetic_hunt import stats
from hermetic_hunt.classify import (
    Attempt,
    Classifier,
    Probe,
    ProbeResult,
    ProbeStep,
    dedupe,
)
from hermetic_hunt.isolate import BudgetExceeded, find_cleaners, find_culprits, repeats_for
from hermetic_hunt.seeds import (
    MAX_SEED,
    attempt_now,
    attempt_seed,
    digest_int,
    iso,
    probe_hash_seed,
)

#: Runs a reproducer of an order-dependent kind must fail in, in a row (a
#: test that fails at random now and then must not pass for a victim).
CONFIRM = 3


def numbers(c: Classifier, count: int) -> list[int]:
    """Step numbers of the latest ``count`` probes."""
    return list(range(c.step_no() - count + 1, c.step_no() + 1))


def names(steps: Sequence[ProbeStep]) -> str:
    return ", ".join(step.nodeid for step in steps)


# -- phase 1 -------------------------------------------------------------------


def alone(c: Classifier) -> None:
    """The failing attempt alone, repeated, with everything it was given.

    Three runs; when they agree, more, until the other outcome would have
    shown (at the hunt's own rate of it, the low end of its 95% interval)
    with the stated confidence, at most 12 runs: a test that failed in 10%
    of the hunt's attempts is not "passing alone" after three clean runs.
    """
    target = c.target
    assert target is not None
    step, hs = ProbeStep.of(target), c.hash_seed_of(target)
    results = [c.probe("alone", [step], hs) for _ in range(c.settings.alone_runs)]
    total = len(c.failing) + len(c.passing)
    for agree, other in ((c.same, len(c.passing)), (_passed, len(c.failing))):
        if all(agree(r) for r in results):
            # The hunt's rate of the other outcome, conservatively (the low
            # end of its 95% interval: a few attempts say little).
            rate = stats.wilson(other, total)[0]
            wanted = repeats_for(rate, c.settings.confidence)
            while len(results) < wanted and agree(results[-1]):
                results.append(c.probe("alone", [step], hs))
    c.alone_numbers = numbers(c, len(results))
    same = [c.same(r) for r in results]
    passed = [r.outcome == "passed" for r in results]
    if all(same):
        # Found by the first run, confirmed by the others.
        c.reproduce([step], hs, confirmed=True)
        sandbox_factors(c, step, hs)
    elif any(same) and any(passed):
        concurrency(c, step, hs, results)
    else:
        if not any(passed):
            c.verdict.notes.append(
                f"alone it fails differently from the hunt: {describe(results[0])}"
            )
        c.needs.add("order")


def describe(result: ProbeResult) -> str:
    last = result.last
    if last is None:
        return f"{result.status} {result.detail}".strip()
    text = f"{last.exc_type} at {last.location}" if last.exc_type else last.outcome
    return text


def sandbox_factors(c: Classifier, step: ProbeStep, hs: int) -> None:
    """Fails alone every time: which single input decides it?"""
    target = c.target
    assert target is not None
    varied = replace(step, mode="seeded", attempt_id=None)
    found = False
    if target.seed is None or target.now is None or target.mode == "off":
        c.verdict.notes.append(
            "the attempt ran with the sandbox off: its seed and start time cannot be varied"
        )
    else:
        seeds = alternative_seeds(c, c.settings.variations)
        probes = [Probe("vary seed", (replace(varied, seed=s),), hs) for s in seeds]
        found |= _varied(c, "random", "seed", probes, [str(s) for s in seeds])
        nows = alternative_nows(c, c.settings.variations)
        probes = [Probe("vary start time", (replace(varied, now=t),), hs) for t in nows]
        found |= _varied(c, "time", "start time", probes, [iso(t) for t in nows])
    if not found:
        hash_seeds = alternative_hash_seeds(c, c.settings.variations)
        probes = [Probe("vary hash seed", (step,), h) for h in hash_seeds]
        found = _varied(c, "hash-order", "PYTHONHASHSEED", probes, [str(h) for h in hash_seeds])
    if not found:
        c.needs.add("brittle")


def _varied(c: Classifier, kind: str, label: str, probes: list[Probe], shown: list[str]) -> bool:
    """Run the variations; a variation that passes twice decides ``kind``."""
    results = c.probe_many(probes)
    first = c.step_no() - len(results) + 1
    for offset, (probe, result, value) in enumerate(zip(probes, results, shown, strict=True)):
        if result.outcome != "passed":
            continue
        again = c.probe(f"{probe.purpose} (again)", probe.steps, probe.hash_seed)
        if again.outcome == "passed":
            runs = len(c.alone_numbers)
            c.claim(
                kind,
                f"fails alone in {runs} of {runs} runs; passes twice with {label} {value}, "
                "everything else the same",
                [*c.alone_numbers, first + offset, c.step_no()],
            )
            return True
        c.verdict.notes.append(f"{label} {value} passed once, then failed: not decisive")
    return False


def concurrency(c: Classifier, step: ProbeStep, hs: int, results: list[ProbeResult]) -> None:
    """Identical inputs, different outcomes: rerun more, also in record mode."""
    reruns = [c.probe("rerun", [step], hs) for _ in range(c.settings.reruns)]
    rerun_numbers = numbers(c, len(reruns))
    record = replace(step, mode="record", attempt_id=None)
    recorded = [c.probe("rerun (record)", [record], hs) for _ in range(c.settings.record_reruns)]
    record_numbers = numbers(c, len(recorded))
    seeded = results + reruns
    failed = sum(c.same(r) for r in seeded)
    journals = [
        n for n, r in zip(record_numbers, recorded, strict=True) if r.last and r.last.journal
    ]
    why = (
        f"identical seed, start time and hash seed: failed {failed} of {len(seeded)} runs "
        f"alone; record mode: failed {sum(c.same(r) for r in recorded)} of {len(recorded)}"
    )
    if journals:
        why += f" (journals in steps {', '.join(map(str, journals))})"
    if not uncontrolled(c, f"it failed in {failed} of {len(seeded)} identical runs alone"):
        c.claim("concurrency", why, [*c.alone_numbers, *rerun_numbers, *record_numbers])
    c.reproduce([step], hs, confirmed=any(c.same(r) for r in reruns))
    c.verdict.notes.append(f"the reproducer fails in about {failed / len(seeded):.0%} of runs")


def uncontrolled(c: Classifier, what: str) -> bool:
    """With the sandbox off, identical inputs are not identical: say so."""
    target = c.target
    if target is not None and target.mode != "off":
        return False
    c.verdict.notes.append(
        f"{what}, but the sandbox was off: randomness and the clock were not controlled, "
        "so random, time and concurrency cannot be told apart (hunt with "
        "--hermetic-hunt-mode=seeded)"
    )
    return True


# -- phase 2 -------------------------------------------------------------------


def sequence_before(
    c: Classifier, attempt: Attempt, *, exclude_self: bool
) -> tuple[list[ProbeStep], list[ProbeStep]]:
    """``(deduplicated, as run)`` steps before ``attempt`` on its worker."""
    raw = [ProbeStep.of(a) for a in c.history.preceding(attempt)]
    kept = [s for s in raw if s.nodeid in c.collected]
    if len(kept) < len(raw):
        gone = sorted({s.nodeid for s in raw} - {s.nodeid for s in kept})
        c.verdict.notes.append(f"not collected any more, left out: {', '.join(gone[:5])}")
    if exclude_self:
        kept = [s for s in kept if s.nodeid != attempt.nodeid]
    return dedupe(kept), kept


def _first_passed(result: ProbeResult) -> bool:
    return (
        result.status == "completed"
        and len(result.steps) >= 2
        and (result.steps[0].outcome == "passed")
    )


def order_dependent(c: Classifier) -> None:
    """Passes alone: self-polluting? a victim? else the last resorts."""
    target = c.target
    assert target is not None
    step, hs = ProbeStep.of(target), c.hash_seed_of(target)
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
        c.verdict.notes.append("nothing ran before the failing attempt on its worker")
    if not c.verdict.kinds:
        last_resorts(c, step, hs)


def _reproducing_sequence(
    c: Classifier, seq: list[ProbeStep], raw: list[ProbeStep], last: ProbeStep, hs: int,
    purpose: str, check: Callable[[ProbeResult], bool],
) -> list[ProbeStep] | None:  # fmt: skip
    """``seq`` (or, failing that, ``raw``) if it shows the signal before ``last``."""
    if check(c.probe(purpose, [*seq, last], hs)):
        return seq
    if len(seq) < len(raw) <= c.settings.max_raw_sequence and check(
        c.probe(f"{purpose} (not deduplicated)", [*raw, last], hs)
    ):
        return raw
    return None


def victim(
    c: Classifier, seq: list[ProbeStep], raw: list[ProbeStep], step: ProbeStep, hs: int
) -> None:
    """The preceding sequence fails: shrink it to minimal polluter sets."""
    cands = _reproducing_sequence(c, seq, raw, step, hs, "preceding sequence", c.same)
    if cands is None:
        c.verdict.notes.append("the sequence that preceded the failure passes when replayed")
        return
    full_no = c.step_no()

    def signal(subset: Sequence[int]) -> bool:
        return c.same(c.probe("polluter search", [*(cands[i] for i in subset), step], hs))

    search = find_culprits(range(len(cands)), signal, confidence=c.settings.confidence)
    sets = [[cands[i] for i in found] for found in search.sets]
    _search_notes(c, search.notes, search.partial, "polluter")
    if search.confirmed and search.repeats == 1:
        sets = _consistent_sets(c, sets, step, hs, c.same, "polluter set")
        search.partial = c.verdict.status == "partial"
    search_numbers = list(range(full_no, c.step_no() + 1))
    own = [s for s in sets if [x.nodeid for x in s] == [step.nodeid]]
    others = [s for s in sets if s not in own]
    if own and "self-polluting" not in c.verdict.kinds:
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
    c.verdict.polluters = [[x.nodeid for x in s] for s in others]
    c.reproduce([*others[0], step], hs, confirmed=search.confirmed)
    if not search.partial:
        cleaners(c, others, step, hs, search.repeats)


def consistent(
    c: Classifier, steps: list[ProbeStep], hs: int, check: Callable[[ProbeResult], bool],
    what: str,
) -> bool:  # fmt: skip
    """A deterministic cause shows in every run: ``CONFIRM - 1`` more runs."""
    for _ in range(CONFIRM - 1):
        if not check(c.probe("confirm again", steps, hs)):
            c.verdict.notes.append(
                f"{what} showed once, not {CONFIRM} times in a row: not claimed "
                "(the test may fail at random)"
            )
            return False
    return True


def _consistent_sets(
    c: Classifier, sets: list[list[ProbeStep]], step: ProbeStep, hs: int,
    check: Callable[[ProbeResult], bool], what: str,
) -> list[list[ProbeStep]]:  # fmt: skip
    """The sets that show every time (all of them, unchecked, if the budget runs out)."""
    kept = []
    for index, members in enumerate(sets):
        try:
            if consistent(c, [*members, step], hs, check, f"{what} {names(members)}"):
                kept.append(members)
        except BudgetExceeded as exc:
            c.verdict.status = "partial"
            c.verdict.notes.append(
                f"{exc} while confirming the {what}s (--hermetic-hunt-isolate-budget): "
                "partial result, not confirmed"
            )
            return kept + sets[index:]
    return kept


def _search_notes(c: Classifier, notes: list[str], partial: bool, what: str) -> None:
    c.verdict.notes.extend(f"{what} search: {n}" for n in notes if "budget" not in n)
    if partial:
        c.verdict.status = "partial"
        c.verdict.notes.append(
            f"probe budget of {c.budget.limit} exhausted during the {what} search "
            "(--hermetic-hunt-isolate-budget): partial result, the set is not minimal yet"
        )


def cleaners(
    c: Classifier, polluters: list[list[ProbeStep]], step: ProbeStep, hs: int, repeats: int
) -> None:
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
        c.verdict.status = "partial"
        c.verdict.notes.append("cleaner search: probe budget exhausted")
    c.verdict.cleaners = found
    if found:
        c.verdict.notes.append(
            f"cleaners (each makes it pass between polluters and victim): {', '.join(found)}"
        )
        c.record("cleaners", found, list(range(first, c.step_no() + 1)))


def _step_for(c: Classifier, nodeid: str) -> ProbeStep:
    """A recorded attempt of ``nodeid`` to run it with (derived if none)."""
    attempt = c.history.representative(nodeid)
    if attempt is not None:
        return ProbeStep.of(attempt)
    seed = attempt_seed(c.settings.base_seed, nodeid, 0)
    return ProbeStep(nodeid, seed, attempt_now(seed))


def _passed(result: ProbeResult) -> bool:
    return result.outcome == "passed"


def brittle(c: Classifier) -> None:
    """Fails alone whatever the inputs: what made it pass in the hunt?"""
    if not c.passing:
        return
    passing = min(c.passing, key=lambda a: (a.position, a.attempt_id))
    step, hs = ProbeStep.of(passing), c.hash_seed_of(passing)
    if c.probe("alone (a passing attempt)", [step], hs).outcome == "passed":
        c.verdict.notes.append(
            f"alone with the inputs of passing attempt A{passing.attempt_id} it passes: "
            "no single input decides it"
        )
        return
    seq, raw = sequence_before(c, passing, exclude_self=False)
    cands = (
        _reproducing_sequence(c, seq, raw, step, hs, "sequence before a pass", _passed)
        if seq
        else None
    )
    if cands is None:
        c.verdict.notes.append(
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
        found_sets = _consistent_sets(c, found_sets, step, hs, _passed, "state-setter set")
    sets = [[x.nodeid for x in s] for s in found_sets]
    if not sets:
        return
    c.verdict.state_setters = sets
    c.claim(
        "brittle",
        f"fails alone every time; passes after {', '.join(sets[0])} (minimal state-setter "
        f"set among {len(cands)} tests before passing attempt A{passing.attempt_id})",
        [*c.alone_numbers, *range(full_no, c.step_no() + 1)],
    )


def last_resorts(c: Classifier, step: ProbeStep, hs: int) -> None:
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


# -- variations ----------------------------------------------------------------


def alternative_seeds(classifier: Classifier, count: int) -> list[int]:
    """Seeds of passing attempts first (they passed), then derived ones."""
    target = classifier.target
    assert target is not None
    seen = {target.seed}
    out: list[int] = []
    for a in classifier.passing:
        if a.seed is not None and a.seed not in seen:
            seen.add(a.seed)
            out.append(a.seed)
    index = 0
    while len(out) < count:
        seed = digest_int("probe-seed", classifier.settings.base_seed, target.nodeid, index)
        index += 1
        if seed & MAX_SEED not in seen:
            out.append(seed & MAX_SEED)
    return out[:count]


def alternative_nows(classifier: Classifier, count: int) -> list[float]:
    """Start times of passing attempts first, then drawn ones."""
    target = classifier.target
    assert target is not None
    seen = {target.now}
    out: list[float] = []
    for a in classifier.passing:
        if a.now is not None and a.now not in seen:
            seen.add(a.now)
            out.append(a.now)
    for seed in alternative_seeds(classifier, count + len(out)):
        if len(out) >= count:
            break
        now = attempt_now(seed)
        if now not in seen:
            seen.add(now)
            out.append(now)
    return out[:count]


def alternative_hash_seeds(classifier: Classifier, count: int) -> list[int]:
    """Hash seeds of passing attempts' processes first, then derived ones."""
    target = classifier.target
    assert target is not None
    own = classifier.hash_seed_of(target)
    seen = {own}
    out: list[int] = []
    for a in classifier.passing:
        if a.hash_seed is not None and a.hash_seed not in seen:
            seen.add(a.hash_seed)
            out.append(a.hash_seed)
    index = 1
    while len(out) < count:
        value = probe_hash_seed(classifier.settings.base_seed, index)
        index += 1
        if value not in seen:
            seen.add(value)
            out.append(value)
    return out[:count]
