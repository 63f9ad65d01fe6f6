"""The probes of phase 1 -- the test alone -- and what both phases share.

Phase 2 (the order: victims, self-polluting, brittle, last resorts) is in
:mod:`hermetic_hunt.isolate.order`; both are driven by
:mod:`hermetic_hunt.isolate.classifier`.

Every function takes the :class:`~hermetic_hunt.isolate.case.Case` of one
test, runs probes through it (which counts them against the budget and keeps
them as evidence) and claims a kind only after a probe showed it.

Timing conditions come first (:func:`conditions`): a failure that shows
alone under the attempt's noisy clock profile, tiny switch interval or CPU
stress, and goes away without it, is ``time`` (profile, stress) or
``concurrency`` (switch interval) -- before the seed or the start time are
varied, since a new seed also draws new clock noise.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TypeVar

from hermetic_hunt import stats
from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate.case import Case
from hermetic_hunt.isolate.search import repeats_for
from hermetic_hunt.models import Attempt, Step
from hermetic_hunt.seeds import (
    MAX_SEED,
    attempt_now,
    digest_int,
    iso,
    probe_hash_seed,
)
from hermetic_hunt.untrusted import is_whole

_T = TypeVar("_T", int, float)

#: Runs a reproducer of an order-dependent kind must fail in, in a row (a
#: test that fails at random now and then must not pass for a victim).
CONFIRM = 3


def numbers(case: Case, count: int) -> list[int]:
    """Step numbers of the latest ``count`` probes."""
    return list(range(case.step_no() - count + 1, case.step_no() + 1))


def names(steps: Sequence[Step]) -> str:
    return ", ".join(step.nodeid for step in steps)


# -- phase 1 -------------------------------------------------------------------


def alone(case: Case) -> None:
    """The failing attempt alone, repeated, with everything it was given.

    How many runs: docs/isolation.md, "The procedure" (Phase 1), at most 12.
    """
    target = case.target
    assert target is not None
    step, hash_seed = Step.of(target), case.hash_seed_of(target)
    results = [case.probe("alone", [step], hash_seed) for _ in range(case.settings.alone_runs)]
    first = numbers(case, len(results))[0]
    if not any(case.same(r) for r in results):
        # It failed in a calm round and passes alone; it may fail alone
        # under the conditions another of its failures ran with.
        conditioned = _under_conditions(case, target)
        if conditioned is not None:
            tried, its_hs = Step.of(conditioned), case.hash_seed_of(conditioned)
            runs = [case.probe("alone (its conditions)", [tried], its_hs) for _ in results]
            if any(case.same(r) for r in runs):
                case.target, step, hash_seed, results = conditioned, tried, its_hs, runs
                first = numbers(case, len(runs))[0]
    total = len(case.failing) + len(case.passing)
    for agree, other in ((case.same, len(case.passing)), (shows_pass, len(case.failing))):
        if all(agree(r) for r in results):
            # The hunt's rate of the other outcome, conservatively (the low
            # end of its 95% interval: a few attempts say little).
            rate = stats.wilson(other, total)[0]
            wanted = repeats_for(rate, case.settings.confidence)
            while len(results) < wanted and agree(results[-1]):
                results.append(case.probe("alone", [step], hash_seed))
    extra = len(results) - case.settings.alone_runs
    case.alone_numbers = [*range(first, first + case.settings.alone_runs), *numbers(case, extra)]
    same = [case.same(r) for r in results]
    passed = [r.outcome == "passed" for r in results]
    if any(same) and stale(case, step, hash_seed, sum(same) / len(same)):
        case.needs.add("order")
    elif all(same):
        # Found by the first run, confirmed by the others.
        case.reproduce([step], hash_seed, confirmed=True)
        sandbox_factors(case, step, hash_seed)
    elif any(same) and any(passed):
        concurrency(case, step, hash_seed, results)
    else:
        if not any(passed):
            case.finding.notes.append(
                f"alone it fails differently from the hunt: {describe(results[0])}"
            )
        case.needs.add("order")


#: Most runs alone in a process that imports the suite again (:func:`stale`).
MAX_FRESH = 12


def stale(case: Case, step: Step, hash_seed: int, rate: float) -> bool:
    """It failed alone (at ``rate``) in a fork of the collected session: does it pass in
    processes that import the suite again, as a plain ``pytest`` run does?

    What the suite sets up outside the process when it is imported (a file in the
    home folder) is set up once for every fork, and a round or a probe since may
    have removed it. As many runs as would show a failure at ``rate`` with the
    stated confidence (one when it failed every time; none past
    :data:`MAX_FRESH`). All pass -> the case's probes import the suite again
    (:attr:`.Case.fresh`) and the order decides (a victim: a test that removes
    it); a real race still shows in the last resorts' reruns. Not for a case
    whose probes import it again already, nor in a run where no test wrote a file
    (nothing changed what the import set up)."""
    runs = repeats_for(rate, case.settings.confidence, cap=MAX_FRESH + 1)
    if case.fresh or runs > MAX_FRESH or not case.history.writers():
        return False
    for _ in range(runs):
        result = case.probe("alone, the suite imported again", [step], hash_seed, unforked=True)
        if result.outcome != "passed":
            return False
    case.fresh = True
    case.alone_numbers = numbers(case, runs)
    case.finding.notes.append(
        "fails alone in a fork of the collected session, passes in a process that imports "
        "the suite again: what it set up at import was changed since; its probes import it again"
    )
    return True


def describe(result: ProbeResult) -> str:
    last = result.last
    if last is None:
        return f"{result.status} {result.detail}".strip()
    return f"{last.exc_type} at {last.location}" if last.exc_type else last.outcome


def _under_conditions(case: Case, target: Attempt) -> Attempt | None:
    """Another failure like ``target``'s that ran under timing conditions (None: none)."""
    if _conditioned(target):
        return None
    return next(
        (a for a in case.failing if a.signature == target.signature and _conditioned(a)), None
    )


def _conditioned(attempt: Attempt | Step) -> bool:
    """Did it run under a timing condition (a noisy clock, a switch interval, CPU stress)?"""
    noisy = attempt.profile is not None and attempt.profile != "exact"
    return noisy or attempt.switch_interval is not None or attempt.stress > 0


def sandbox_factors(case: Case, step: Step, hash_seed: int) -> None:
    """Fails alone every time: which single input decides it?"""
    target = case.target
    assert target is not None
    if conditions(case, step, hash_seed):
        return
    # From here on one input at a time, with no timing condition at all.
    varied = replace(
        step, mode="seeded", attempt_id=None, profile=None, switch_interval=None, stress=0
    )
    found = False
    if target.seed is None or target.now is None or target.mode == "off":
        case.finding.notes.append(
            "the attempt ran with the sandbox off: its seed and start time cannot be varied"
        )
    elif _conditioned(step) and _races_calm(case, step, varied, hash_seed):
        return
    else:
        seeds = alternative_seeds(case, case.settings.variations)
        probes = [Probe("vary seed", (replace(varied, seed=s),), hash_seed) for s in seeds]
        found |= _varied(case, "random", "seed", probes, [str(s) for s in seeds])
        nows = alternative_nows(case, case.settings.variations)
        probes = [Probe("vary start time", (replace(varied, now=t),), hash_seed) for t in nows]
        found |= _varied(case, "time", "start time", probes, [iso(t) for t in nows])
    if not found:
        hash_seeds = alternative_hash_seeds(case, case.settings.variations)
        probes = [Probe("vary hash seed", (step,), h) for h in hash_seeds]
        found = _varied(case, "hash-order", "PYTHONHASHSEED", probes, [str(h) for h in hash_seeds])
    if not found:
        case.needs.add("brittle")


def _races_calm(case: Case, step: Step, calm: Step, hash_seed: int) -> bool:
    """The attempt ran under a timing condition that did not decide it: before one
    input at a time is varied without it, the same inputs without it must fail
    every time (else threads race: :func:`_races`). For a seeded attempt these
    repeat the inputs of :func:`conditions`' calm runs (the interpreter's interval,
    the exact clock): three more runs in which a race on a busy machine can show."""
    results = [case.probe("no timing condition", [calm], hash_seed) for _ in range(CONFIRM)]
    if all(not shows_pass(r) for r in results):
        return False
    _races(case, _condition_text(step), "no timing condition", results)
    return True


def _under_profile(step: Step) -> str:
    return f"under the {step.profile} clock profile"


def _with_interval(step: Step) -> str:
    return f"with sys.setswitchinterval({step.switch_interval:g})"


def _condition_text(step: Step) -> str:
    parts = []
    if step.profile is not None and step.profile != "exact":
        parts.append(_under_profile(step))
    if step.switch_interval is not None:
        parts.append(_with_interval(step))
    if step.stress:
        parts.append(f"under CPU stress ({step.stress} busy processes)")
    return " and ".join(parts)


def _varied(case: Case, kind: str, label: str, probes: list[Probe], shown: list[str]) -> bool:
    """Run the variations; a variation that passes twice decides ``kind``."""
    results = case.probe_many(probes)
    first = case.step_no() - len(results) + 1
    for offset, (probe, result, value) in enumerate(zip(probes, results, shown, strict=True)):
        if result.outcome != "passed":
            continue
        again = case.probe(f"{probe.purpose} (again)", probe.steps, probe.hash_seed)
        if again.outcome == "passed":
            runs = len(case.alone_numbers)
            case.claim(
                kind,
                f"fails alone in {runs} of {runs} runs; passes twice with {label} {value}, "
                "everything else the same",
                [*case.alone_numbers, first + offset, case.step_no()],
            )
            return True
        case.finding.notes.append(f"{label} {value} passed once, then failed: not decisive")
    return False


# -- timing conditions -----------------------------------------------------------


#: Runs under CPU stress, and calm, that a stress failure is checked with.
STRESS_RUNS = 5


def conditions(case: Case, step: Step, hash_seed: int) -> bool:
    """Does the attempt's timing condition decide it? (It fails alone every time.)"""
    runs = len(case.alone_numbers)
    if step.profile in ("jitter", "slow"):
        exact = replace(step, profile="exact")
        calm = [case.probe("exact clock", [exact], hash_seed) for _ in range(2)]
        if all(shows_pass(r) for r in calm):
            case.claim(
                "time",
                f"fails alone in {runs} of {runs} runs {_under_profile(step)}"
                f"{_stretch_text(case, case.alone_numbers)}; passes twice with the exact clock, "
                "same seed and start time",
                [*case.alone_numbers, *numbers(case, 2)],
            )
            return True
        if _races(case, _under_profile(step), "the exact clock", calm):
            return True
    if step.switch_interval is not None:
        default = replace(step, switch_interval=None)
        tries = [
            case.probe("default switch interval", [default], hash_seed) for _ in range(CONFIRM)
        ]
        if all(shows_pass(r) for r in tries):
            case.claim(
                "concurrency",
                f"fails alone in {runs} of {runs} runs {_with_interval(step)}; passes in "
                f"{CONFIRM} of {CONFIRM} with the "
                "interpreter's, everything else the same: threads race",
                [*case.alone_numbers, *numbers(case, CONFIRM)],
            )
            return True
        if _races(case, _with_interval(step), "the interpreter's", tries):
            return True
    if step.stress and step.mode == "record":
        return _stress(case, step, hash_seed)
    return False


def _races(case: Case, condition: str, calm: str, results: list[ProbeResult]) -> bool:
    """Without its condition the test both passed and failed, everything else the
    same: identical inputs, different outcomes -- ``concurrency`` (a busy machine
    lets threads race at the interpreter's own switch interval too). Varying the
    seed or the start time next would change two things at once. False when it
    never passed, and (with a note) when the sandbox was off: then the inputs were
    not identical."""
    runs = len(case.alone_numbers)
    passed = sum(shows_pass(r) for r in results)
    if not passed or uncontrolled(case, f"with {calm} it passed {passed} of {len(results)} runs"):
        return False
    case.claim(
        "concurrency",
        f"fails alone in {runs} of {runs} runs {condition}; with {calm}, "
        f"everything else the same, passes in {passed} of {len(results)}, not in the other "
        f"{len(results) - passed}: identical inputs, different outcomes",
        [*case.alone_numbers, *numbers(case, len(results))],
    )
    return True


def _stretch_text(case: Case, probes: Sequence[int]) -> str:
    """`` (sleeps lasted up to 1.23x their duration)`` from the probes' read counts
    (and the ``stretch`` fact: a fix suggestion names the sleep and the deadline)."""
    lasts = [case.finding.probes[number - 1][1].last for number in probes]
    values = [(last.counts or {}).get("stretch") for last in lasts if last is not None]
    stretched = [value for value in values if is_whole(value) and value > 1000]
    if not stretched:
        return ""
    case.facts["stretch"] = min(stretched) / 1000
    return f" (sleeps lasted up to {min(stretched) / 1000:.2f}x their duration)"


def _stress(case: Case, step: Step, hash_seed: int) -> bool:
    """Record mode: live runs under the attempt's CPU stress, then calm ones."""
    live = replace(step, attempt_id=None)
    stressed = [case.probe("cpu stress", [live], hash_seed) for _ in range(STRESS_RUNS)]
    stressed_numbers = numbers(case, STRESS_RUNS)
    calm = [case.probe("calm", [replace(live, stress=0)], hash_seed) for _ in range(STRESS_RUNS)]
    failed = sum(case.same(r) for r in stressed)
    calm_failed = sum(not shows_pass(r) for r in calm)
    if failed and not calm_failed:
        case.claim(
            "time",
            f"fails under CPU stress {failed}/{STRESS_RUNS} ({step.stress} busy "
            f"process{'es' if step.stress != 1 else ''}), 0/{STRESS_RUNS} calm",
            [*(n for n, r in zip(stressed_numbers, stressed, strict=True) if case.same(r)),
             *numbers(case, STRESS_RUNS)],
        )  # fmt: skip
        return True
    case.finding.notes.append(
        f"under CPU stress it failed {failed}/{STRESS_RUNS}, calm {calm_failed}/{STRESS_RUNS}: "
        "stress does not decide it"
    )
    return False


def concurrency(case: Case, step: Step, hash_seed: int, results: list[ProbeResult]) -> None:
    """Identical inputs, different outcomes: rerun more, also in record mode."""
    reruns, recorded = reruns_of(case, step, hash_seed)
    numbered = numbers(case, len(reruns) + len(recorded))
    rerun_numbers, record_numbers = numbered[: len(reruns)], numbered[len(reruns) :]
    seeded = results + reruns
    failed = sum(case.same(r) for r in seeded)
    journals = [
        n for n, r in zip(record_numbers, recorded, strict=True) if r.last and r.last.journal
    ]
    same = "identical seed, start time and hash seed"
    if step.switch_interval is not None:
        same += f" (sys.setswitchinterval({step.switch_interval:g}))"
    why = (
        f"{same}: failed {failed} of {len(seeded)} runs "
        f"alone; record mode: failed {sum(case.same(r) for r in recorded)} of {len(recorded)}"
    )
    if journals:
        why += f" (journals in steps {', '.join(map(str, journals))})"
    if not uncontrolled(case, f"it failed in {failed} of {len(seeded)} identical runs alone"):
        case.claim("concurrency", why, [*case.alone_numbers, *rerun_numbers, *record_numbers])
    case.reproduce([step], hash_seed, confirmed=any(case.same(r) for r in reruns))
    case.finding.notes.append(f"the reproducer fails in about {failed / len(seeded):.0%} of runs")


def reruns_of(
    case: Case, step: Step, hash_seed: int
) -> tuple[list[ProbeResult], list[ProbeResult]]:
    """Identical reruns of ``step`` alone: seeded, then in record mode (journals kept)."""
    reruns = [case.probe("rerun", [step], hash_seed) for _ in range(case.settings.reruns)]
    record = replace(step, mode="record", attempt_id=None)
    runs = range(case.settings.record_reruns)
    return reruns, [case.probe("rerun (record)", [record], hash_seed) for _ in runs]


def uncontrolled(case: Case, what: str) -> bool:
    """With the sandbox off, identical inputs are not identical: say so."""
    target = case.target
    if target is not None and target.mode != "off":
        return False
    case.finding.notes.append(
        f"{what}, but the sandbox was off: randomness and the clock were not controlled, "
        "so random, time and concurrency cannot be told apart (hunt with "
        "--hermetic-hunt-mode=seeded)"
    )
    return True


def consistent(
    case: Case, steps: list[Step], hash_seed: int, check: Callable[[ProbeResult], bool],
    what: str,
) -> bool:  # fmt: skip
    """A deterministic cause shows in every run: ``CONFIRM - 1`` more runs.

    For a case whose probes import the suite again (:attr:`.Case.fresh`: state
    outside the process decides it), each run of a sequence is followed by the
    test alone, which must not show it: what earlier probes left there must
    not be what shows."""
    for _ in range(CONFIRM - 1):
        if not check(case.probe("confirm again", steps, hash_seed)):
            case.finding.notes.append(
                f"{what} showed once, not {CONFIRM} times in a row: not claimed "
                "(the test may fail at random)"
            )
            return False
        if (
            case.fresh
            and len(steps) > 1
            and check(case.probe("confirm: it alone", steps[-1:], hash_seed))
        ):
            case.finding.notes.append(
                f"{what} showed, and so did the test alone right after: what earlier probes "
                "left outside the process decides it, not the set: not claimed"
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
    nodeid, base = target.nodeid, case.settings.base_seed
    derived = (digest_int("probe-seed", base, nodeid, i) & MAX_SEED for i in itertools.count())
    return _passing_first(count, target.seed, (a.seed for a in case.passing), lambda _: derived)


def alternative_nows(case: Case, count: int) -> list[float]:
    """Start times of passing attempts first, then those of the alternative seeds."""
    target = case.target
    assert target is not None

    def drawn(found: int) -> Iterator[float]:
        for seed in alternative_seeds(case, count + found):
            yield attempt_now(seed, case.settings.dates)

    return _passing_first(count, target.now, (a.now for a in case.passing), drawn)


def alternative_hash_seeds(case: Case, count: int) -> list[int]:
    """Hash seeds of passing attempts' processes first, then derived ones."""
    target = case.target
    assert target is not None
    derived = (probe_hash_seed(case.settings.base_seed, i) for i in itertools.count(1))
    passing = (a.hash_seed for a in case.passing)
    return _passing_first(count, case.hash_seed_of(target), passing, lambda _: derived)


def _passing_first(
    count: int,
    own: _T | None,
    passing: Iterable[_T | None],
    more: Callable[[int], Iterable[_T]],
) -> list[_T]:
    """``count`` values to vary one input with: the passing attempts' (they passed),
    in order, then ``more(found so far)``; never the target's ``own``, none twice."""
    seen = {own}

    def fresh(values: Iterable[_T | None]) -> Iterator[_T]:
        for value in values:
            if value is not None and value not in seen:
                seen.add(value)
                yield value

    out = list(itertools.islice(fresh(passing), count))
    return out + list(itertools.islice(fresh(more(len(out))), count - len(out)))
