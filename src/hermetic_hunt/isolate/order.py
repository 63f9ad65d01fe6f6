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
from hermetic_hunt.isolate.case import EVIDENCE_IDS, Case, History, dedupe
from hermetic_hunt.isolate.search import (
    BudgetExceeded,
    find_cleaners,
    find_culprits,
    repeats_for,
)
from hermetic_hunt.models import Attempt, Step
from hermetic_hunt.seeds import Dates, attempt_now, attempt_seed

#: Sequences this long are replayed half by half before they are replayed whole.
HALVES_FROM = 64
#: Longest collection-order prefix replayed to check a brittle test's default order.
DEFAULT_ORDER_LIMIT = 5000


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
        if c.repeated_only:
            # It failed only as a twice round's second run, and that is
            # explained: no plain run ever failed, so nothing to search.
            return
    seq, raw = sequence_before(c, target, exclude_self=self_polluting)
    if seq:
        victim(c, seq, raw, step, hs)
    elif not self_polluting:
        c.finding.notes.append("nothing ran before the failing attempt on its worker")
    if not c.finding.kinds:
        last_resorts(c, step, hs)


def suspects(c: Case, seq: list[Step], shown: Sequence[Attempt],
             not_shown: Sequence[Attempt]) -> list[Step]:  # fmt: skip
    """The tests of ``seq`` that ran before every attempt in ``shown`` and
    before none in ``not_shown`` (in the same process): where a single
    deterministic culprit must be. A few attempts of each are enough."""
    common: set[str] | None = None
    for attempt in shown[:EVIDENCE_IDS]:
        before = {a.nodeid for a in c.history.preceding(attempt)}
        common = before if common is None else common & before
    ruled_out: set[str] = set()
    for attempt in not_shown[:EVIDENCE_IDS]:
        ruled_out |= {a.nodeid for a in c.history.preceding(attempt)}
    return [s for s in seq if (common is None or s.nodeid in common) and s.nodeid not in ruled_out]


def _tries(c: Case, purpose: str, seq: list[Step], raw: list[Step],
           narrowed: list[tuple[str, list[Step]]]) -> list[tuple[str, list[Step]]]:  # fmt: skip
    """Subsets of the preceding sequence to replay, cheapest first: the
    narrowed ones (when smaller), the halves of a long sequence, the
    sequence, then the sequence as it ran."""
    out: list[tuple[str, list[Step]]] = []
    if len(seq) >= HALVES_FROM:
        # A long sequence is bisected before it is replayed whole: a single
        # culprit is in one half, and the search goes on from there.
        half = len(seq) // 2
        narrowed = [*narrowed, ("its first half", seq[:half]), ("its second half", seq[half:])]
    for label, subset in narrowed:
        if 0 < len(subset) < len(seq) and all(subset != other for _, other in out):
            out.append((f"{purpose} ({label})", subset))
    out.append((purpose, seq))
    if len(seq) < len(raw) <= c.settings.max_raw_sequence:
        out.append((f"{purpose} (not deduplicated)", raw))
    return out


def _reproducing_sequence(
    c: Case, tries: list[tuple[str, list[Step]]], last: Step, hs: int,
    check: Callable[[ProbeResult], bool],
) -> list[Step] | None:  # fmt: skip
    """The first of ``tries`` that shows the signal before ``last``."""
    for purpose, subset in tries:
        if check(c.probe(purpose, [*subset, last], hs)):
            return subset
    return None


def _thread_leakers(c: Case, seq: list[Step]) -> list[Step]:
    return [s for s in seq if any(leak.resource == "thread" for leak in c.leaks_of(s.nodeid))]


def _thread_candidates(c: Case, seq: list[Step], step: Step, hs: int) -> tuple[list[Step], int]:
    """Re-probe the tests that left a thread running, with the victim: a thread
    acts when it gets to run, so one pass proves nothing. Up to the runs that
    would show a failure of the hunt's rate, with the stated confidence."""
    threads = _thread_leakers(c, seq)
    if not threads:
        return [], 1
    runs = repeats_for(c.fail_rate, c.settings.confidence, cap=c.settings.thread_repeats)
    for index in range(runs):
        if c.same(c.probe("tests that left a thread running", [*threads, step], hs)):
            c.finding.notes.append(
                f"the tests that left a thread running made it fail in run {index + 1} of "
                f"up to {runs}: a probabilistic polluter, every 'no' rests on {runs} runs"
            )
            return threads, runs
    c.finding.notes.append(
        f"the tests that left a thread running ({names(threads)}) did not make it fail "
        f"in {runs} runs"
    )
    return [], 1


def polluter_leaks(c: Case, sets: Sequence[Sequence[Step]]) -> dict[str, list[str]]:
    """What each polluter left behind in the hunt (``{nodeid: [phrase, ...]}``)."""
    out: dict[str, list[str]] = {}
    for members in sets:
        for s in members:
            found = c.leaks_of(s.nodeid)
            if found and s.nodeid not in out:
                out[s.nodeid] = [leak.describe() for leak in found]
    return out


def victim(c: Case, seq: list[Step], raw: list[Step], step: Step, hs: int) -> None:
    """The preceding sequence fails: shrink it to minimal polluter sets.

    Cheapest first: tests that left a thread running (repeated probes: a
    thread acts when it gets to run), the tests that leaked something, the
    tests that ran before every failure and before no pass (a single
    deterministic polluter is among them), then the whole sequence, then as
    it ran.
    """
    # A thread acts when it gets to run: its test is a probabilistic polluter,
    # tried first, in repeated probes (few tests, cheap).
    cands, repeats = _thread_candidates(c, seq, step, hs)
    if not cands:
        leakers = [s for s in seq if c.leaks_of(s.nodeid)]
        narrowed = [
            ("tests that leaked state", leakers),
            ("tests before every failure, before no pass", suspects(c, seq, c.failing, c.passing)),
        ]
        tries = _tries(c, "preceding sequence", seq, raw, narrowed)
        cands, repeats = _reproducing_sequence(c, tries, step, hs, c.same) or [], 1
    if not cands:
        c.finding.notes.append("the sequence that preceded the failure passes when replayed")
        return
    full_no = c.step_no()

    def signal(subset: Sequence[int]) -> bool:
        return c.same(c.probe("polluter search", [*(cands[i] for i in subset), step], hs))

    search = find_culprits(
        range(len(cands)), signal, confidence=c.settings.confidence, repeats=repeats
    )
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
    chance = f", fails in about {search.rate:.0%} of runs" if search.repeats > 1 else ""
    c.claim(
        "victim",
        f"passes alone, fails after {names(others[0])} ({minimal} among {len(cands)} "
        f"candidates of {len(seq)} preceding tests, {search.probes + 1} probes{chance})",
        [*c.alone_numbers, *search_numbers],
    )
    c.finding.polluters = [[x.nodeid for x in s] for s in others]
    leaked = polluter_leaks(c, others)
    if leaked:
        c.facts["polluter_leaks"] = leaked
    c.reproduce([*others[0], step], hs, confirmed=search.confirmed)
    if not search.partial:
        c.cleaner_work = (others, step, hs, search.repeats)
        c.needs.add("cleaners")


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
            f"{c.stop_reason or 'budget reached'} during the {what} search "
            "(--hermetic-hunt-isolate-budget): partial result, the set is not minimal yet"
        )


def cleaners(c: Case) -> None:
    """Tests that, placed between the polluters and the victim, make it pass.

    Extra evidence, searched after every flake has its verdict (phase 3):
    first among the tests of the victim's and the polluters' files (where
    state is usually reset), then among all the others; running out of
    budget leaves the verdict as it is, with a note.
    """
    if c.cleaner_work is None:
        return
    polluters, step, hs, repeats = c.cleaner_work
    excluded = {step.nodeid} | {x.nodeid for s in polluters for x in s}
    names_ = [n for n in c.history.tests() if n not in excluded and n in c.collected]
    steps = {n: _step_for(c, n) for n in names_}
    first = c.step_no() + 1
    files = {_file_of(n) for n in excluded}
    near = [n for n in names_ if _file_of(n) in files]
    far = [n for n in names_ if _file_of(n) not in files]

    def cleans(group: Sequence[str]) -> bool:
        run = [*polluters[0], *(steps[n] for n in group), step]
        return c.probe("cleaner search", run, hs).outcome == "passed"

    found: list[str] = []
    for stage, where in ((near, "in the same files"), (far, "elsewhere")):
        more, _, partial = find_cleaners(stage, cleans, repeats=repeats)
        found += more
        if partial:
            c.finding.notes.append(
                f"cleaner search {where} unfinished ({c.stop_reason or 'budget reached'}): "
                f"{len(found)} cleaner(s) found so far"
            )
            break
    c.finding.cleaners = [n for n in names_ if n in set(found)]
    if found:
        c.record("cleaners", c.finding.cleaners, list(range(first, c.step_no() + 1)))


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _step_for(c: Case, nodeid: str) -> Step:
    return recorded_step(c.history, c.settings.base_seed, nodeid, c.settings.dates)


def recorded_step(
    history: History, base_seed: int, nodeid: str, dates: Dates | None = None
) -> Step:
    """A recorded attempt of ``nodeid`` to run it with (derived if none; its start
    time drawn from ``dates``, the hunt's)."""
    attempt = history.representative(nodeid)
    if attempt is not None:
        return Step.of(attempt)
    seed = attempt_seed(base_seed, nodeid, 0)
    return Step(nodeid, seed, attempt_now(seed, dates))


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
    before_passes = suspects(c, seq, c.passing, c.failing)
    narrowed = [("tests before every pass, before no failure", before_passes)]
    tries = _tries(c, "sequence before a pass", seq, raw, narrowed)
    cands = _reproducing_sequence(c, tries, step, hs, shows_pass) if seq else None
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
    leaked = polluter_leaks(c, found_sets)
    if leaked:
        c.facts["state_setter_leaks"] = leaked
    c.claim(
        "brittle",
        f"fails alone every time; passes after {', '.join(sets[0])} (minimal state-setter "
        f"set among {len(cands)} tests before passing attempt A{passing.attempt_id})",
        [*c.alone_numbers, *range(full_no, c.step_no() + 1)],
    )


def default_order(c: Case) -> None:
    """Does a plain ``pytest`` run -- the collection order -- fail it? The
    ``default_order`` fact, shown by a probe: the tests from its first
    polluter to it, in collection order (a victim); every test before it (a
    brittle test, when no state-setter set comes first). What CI sees."""
    v, target = c.finding, c.target
    if target is None or not (v.polluters or v.state_setters):
        return
    tests = [n for n in c.history.tests() if n in c.collected]
    where = {nodeid: i for i, nodeid in enumerate(tests)}
    me = where.get(c.nodeid)
    if me is None:
        return

    def before(members: Sequence[str]) -> bool:
        return all(where.get(m, me) < me for m in members)

    if v.polluters:
        firsts = [min(where[m] for m in s) for s in v.polluters if before(s)]
        if not firsts:
            c.facts["default_order"] = False  # no polluter set runs before it
            return
        run = tests[max(firsts) : me]
    else:
        if any(before(s) for s in v.state_setters):
            c.facts["default_order"] = False  # a state-setter runs before it
            return
        if me > DEFAULT_ORDER_LIMIT:
            return
        run = tests[:me]
    steps = [_step_for(c, n) for n in run]
    result = c.probe("in pytest's default order", [*steps, Step.of(target)], c.hash_seed_of(target))
    c.facts["default_order"] = c.same(result)
    c.facts["default_order_probe"] = c.step_no()


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
