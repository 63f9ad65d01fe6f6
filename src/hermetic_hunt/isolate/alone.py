"""The probes of phase 1 -- the test alone -- and what both phases share.

Phase 2 (the order: victims, self-polluting, brittle, last resorts) is in
:mod:`hermetic_hunt.isolate.order`; both are driven by
:mod:`hermetic_hunt.isolate.classifier`.

Every function takes the :class:`~hermetic_hunt.isolate.case.Case` of one
test, runs probes through it (which counts them against the budget and keeps
them as evidence) and claims a kind only after a probe showed it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from hermetic_hunt import stats
from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate.case import Case
from hermetic_hunt.isolate.search import repeats_for
from hermetic_hunt.models import Step
from hermetic_hunt.seeds import (
    MAX_SEED,
    attempt_now,
    digest_int,
    iso,
    probe_hash_seed,
)

#: Runs a reproducer of an order-dependent kind must fail in, in a row (a
#: test that fails at random now and then must not pass for a victim).
CONFIRM = 3


def numbers(c: Case, count: int) -> list[int]:
    """Step numbers of the latest ``count`` probes."""
    return list(range(c.step_no() - count + 1, c.step_no() + 1))


def names(steps: Sequence[Step]) -> str:
    return ", ".join(step.nodeid for step in steps)


# -- phase 1 -------------------------------------------------------------------


def alone(c: Case) -> None:
    """The failing attempt alone, repeated, with everything it was given.

    Three runs; when they agree, more, until the other outcome would have
    shown (at the hunt's own rate of it, the low end of its 95% interval)
    with the stated confidence, at most 12 runs: a test that failed in 10%
    of the hunt's attempts is not "passing alone" after three clean runs.
    """
    target = c.target
    assert target is not None
    step, hs = Step.of(target), c.hash_seed_of(target)
    results = [c.probe("alone", [step], hs) for _ in range(c.settings.alone_runs)]
    total = len(c.failing) + len(c.passing)
    for agree, other in ((c.same, len(c.passing)), (shows_pass, len(c.failing))):
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
            c.finding.notes.append(
                f"alone it fails differently from the hunt: {describe(results[0])}"
            )
        c.needs.add("order")


def describe(result: ProbeResult) -> str:
    last = result.last
    if last is None:
        return f"{result.status} {result.detail}".strip()
    text = f"{last.exc_type} at {last.location}" if last.exc_type else last.outcome
    return text


def sandbox_factors(c: Case, step: Step, hs: int) -> None:
    """Fails alone every time: which single input decides it?"""
    target = c.target
    assert target is not None
    varied = replace(step, mode="seeded", attempt_id=None)
    found = False
    if target.seed is None or target.now is None or target.mode == "off":
        c.finding.notes.append(
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


def _varied(c: Case, kind: str, label: str, probes: list[Probe], shown: list[str]) -> bool:
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
        c.finding.notes.append(f"{label} {value} passed once, then failed: not decisive")
    return False


def concurrency(c: Case, step: Step, hs: int, results: list[ProbeResult]) -> None:
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
    c.finding.notes.append(f"the reproducer fails in about {failed / len(seeded):.0%} of runs")


def uncontrolled(c: Case, what: str) -> bool:
    """With the sandbox off, identical inputs are not identical: say so."""
    target = c.target
    if target is not None and target.mode != "off":
        return False
    c.finding.notes.append(
        f"{what}, but the sandbox was off: randomness and the clock were not controlled, "
        "so random, time and concurrency cannot be told apart (hunt with "
        "--hermetic-hunt-mode=seeded)"
    )
    return True


def consistent(
    c: Case, steps: list[Step], hs: int, check: Callable[[ProbeResult], bool],
    what: str,
) -> bool:  # fmt: skip
    """A deterministic cause shows in every run: ``CONFIRM - 1`` more runs."""
    for _ in range(CONFIRM - 1):
        if not check(c.probe("confirm again", steps, hs)):
            c.finding.notes.append(
                f"{what} showed once, not {CONFIRM} times in a row: not claimed "
                "(the test may fail at random)"
            )
            return False
    return True


def shows_pass(result: ProbeResult) -> bool:
    return result.outcome == "passed"


# -- variations ----------------------------------------------------------------


def alternative_seeds(case: Case, count: int) -> list[int]:
    """Seeds of passing attempts first (they passed), then derived ones."""
    target = case.target
    assert target is not None
    seen = {target.seed}
    out: list[int] = []
    for a in case.passing:
        if a.seed is not None and a.seed not in seen:
            seen.add(a.seed)
            out.append(a.seed)
    index = 0
    while len(out) < count:
        seed = digest_int("probe-seed", case.settings.base_seed, target.nodeid, index)
        index += 1
        if seed & MAX_SEED not in seen:
            out.append(seed & MAX_SEED)
    return out[:count]


def alternative_nows(case: Case, count: int) -> list[float]:
    """Start times of passing attempts first, then drawn ones."""
    target = case.target
    assert target is not None
    seen = {target.now}
    out: list[float] = []
    for a in case.passing:
        if a.now is not None and a.now not in seen:
            seen.add(a.now)
            out.append(a.now)
    for seed in alternative_seeds(case, count + len(out)):
        if len(out) >= count:
            break
        now = attempt_now(seed)
        if now not in seen:
            seen.add(now)
            out.append(now)
    return out[:count]


def alternative_hash_seeds(case: Case, count: int) -> list[int]:
    """Hash seeds of passing attempts' processes first, then derived ones."""
    target = case.target
    assert target is not None
    own = case.hash_seed_of(target)
    seen = {own}
    out: list[int] = []
    for a in case.passing:
        if a.hash_seed is not None and a.hash_seed not in seen:
            seen.add(a.hash_seed)
            out.append(a.hash_seed)
    index = 1
    while len(out) < count:
        value = probe_hash_seed(case.settings.base_seed, index)
        index += 1
        if value not in seen:
            seen.add(value)
            out.append(value)
    return out[:count]
