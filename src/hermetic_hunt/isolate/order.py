"""The probes of phase 2: the order (driven by :mod:`hermetic_hunt.isolate.classifier`).

Self-polluting, victim (polluters, then cleaners), brittle (state-setters)
and the last resorts for a flake that reproduced neither alone nor in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate.alone import (
    CONFIRM,
    alternative_hash_seeds,
    consistent,
    names,
    numbers,
    reruns_of,
    shows_pass,
    uncontrolled,
)
from hermetic_hunt.isolate.case import EVIDENCE_IDS, Case, ClassifySettings, History, dedupe
from hermetic_hunt.isolate.collision import relative, shared_path
from hermetic_hunt.isolate.search import (
    BudgetExceeded,
    Search,
    find_cleaners,
    find_culprits,
    repeats_for,
)
from hermetic_hunt.isolate.shared import touched
from hermetic_hunt.models import REPEATED_RUN, Attempt, Step
from hermetic_hunt.seeds import attempt_now, attempt_seed

#: Sequences this long are replayed half by half before they are replayed whole.
HALVES_FROM = 64
#: Longest collection-order prefix replayed to check a test's default order.
DEFAULT_ORDER_LIMIT = 5000


def sequence_before(
    case: Case, attempt: Attempt, *, exclude_self: bool
) -> tuple[list[Step], list[Step]]:
    """``(deduplicated, as run)`` steps before ``attempt`` on its worker."""
    as_run = [Step.of(a) for a in case.history.preceding(attempt)]
    kept = [s for s in as_run if s.nodeid in case.collected]
    if len(kept) < len(as_run):
        gone = sorted({s.nodeid for s in as_run} - {s.nodeid for s in kept})
        case.finding.notes.append(f"not collected any more, left out: {', '.join(gone[:5])}")
    if exclude_self:
        kept = [s for s in kept if s.nodeid != attempt.nodeid]
    return dedupe(kept), kept


def _second_failure(result: ProbeResult) -> Attempt | None:
    """The last run's failure when the first run passed (twice in one process)."""
    last, steps = result.last, result.steps
    first_passed = result.status == "completed" and len(steps) >= 2 and steps[0].outcome == "passed"
    return last if first_passed and last is not None and last.failed else None


def order_dependent(case: Case) -> None:
    """Passes alone: self-polluting? a victim? else the last resorts."""
    target = case.target
    assert target is not None
    step, hash_seed = Step.of(target), case.hash_seed_of(target)
    purposes = ("twice in one process", *["twice in one process (again)"] * (CONFIRM - 1))
    runs = (case.probe(purpose, [step, step], hash_seed) for purpose in purposes)
    self_polluting = all(
        _second_failure(result) is not None and case.same(result) for result in runs
    )
    if self_polluting:
        case.claim(
            "self-polluting",
            "passes on its first run in a fresh process and fails when run again in it "
            f"({CONFIRM} out of {CONFIRM})",
            numbers(case, CONFIRM),
        )
        case.reproduce([step, step], hash_seed, confirmed=True)
        if case.repeated_only:
            # It failed only as a twice round's second run, and that is
            # explained: no plain run ever failed, so nothing to search.
            return
    preceding, as_run = sequence_before(case, target, exclude_self=self_polluting)
    if preceding:
        victim(case, preceding, as_run, step, hash_seed)
    elif not self_polluting:
        case.finding.notes.append("nothing ran before the failing attempt on its worker")
    if "victim" not in case.finding.kinds:
        crossed_victim(case, step, hash_seed)
    if "victim" not in case.finding.kinds:
        earlier_victim(case, step, hash_seed)
    if not case.finding.kinds:
        last_resorts(case, step, hash_seed)


def not_idempotent(case: Case) -> None:
    """Is the test also not idempotent, when that is not what its target failure was?
    A finding is whole: a victim (or a collision) can also be self-polluting.

    From the hunt: a twice round's second run that failed its own way -- twice in
    one process with that round's inputs (its inputs alone must pass). Else from
    the probes: the target's own "twice in one process" passed first and failed
    second, another way than the target.
    """
    if "self-polluting" in case.finding.kinds or case.target is None:
        return
    target = case.target
    firsts = {(a.round_no, a.worker): a for a in case.attempts if a.repeat == 1 and a.passed}
    seconds = [
        a
        for a in case.attempts
        if a.repeat == REPEATED_RUN and a.failed and (a.round_no, a.worker) in firsts
        and a.signature != target.signature
    ]  # fmt: skip
    if seconds:
        second = seconds[0]
        steps = [Step.of(firsts[(second.round_no, second.worker)]), Step.of(second)]
        hash_seed = case.hash_seed_of(second)
        alone = case.probe("its second run's inputs alone", steps[1:], hash_seed)
        if alone.status != "completed" or (alone.last is not None and alone.last.failed):
            return  # its inputs (a seed, a start time) decide, not the run before it
        _twice_confirmed(case, steps, hash_seed, f"as in round {second.round_no}'s twice run")
        return
    twice = (r for p, r in case.finding.probes if p.purpose == "twice in one process")
    result = next(twice, None)
    last = _second_failure(result) if result is not None else None
    if last is not None:
        step = Step.of(target)
        _twice_confirmed(case, [step, step], case.hash_seed_of(target), "with its inputs",
                         first=last)  # fmt: skip


def twice_hidden(case: Case) -> None:
    """Every failure of the test is explained by what other workers did: is it also
    not idempotent, which those failures may have hidden? Twice in one process with
    a passing attempt's inputs."""
    passing = min(case.passing, key=lambda a: (a.round_no, a.position), default=None)
    if passing is not None:
        step = Step.of(passing)
        why = "with a passing attempt's inputs; what other workers did hid it in the hunt"
        _twice_confirmed(case, [step, step], case.hash_seed_of(passing), why)


def _twice_confirmed(
    case: Case, steps: list[Step], hash_seed: int, how: str, first: Attempt | None = None
) -> bool:
    """Run a test's two runs in one process until ``CONFIRM`` runs (``first``: the last
    step of one already run) passed first and failed second the same way; then claim
    ``self-polluting``."""
    signature = first.signature if first is not None else None
    done = 1 if first is not None else 0
    for purpose in ["twice in one process (again)"] * (CONFIRM - done):
        result = case.probe(purpose, steps, hash_seed)
        last = _second_failure(result)
        if last is None:
            return False
        if signature is not None and last.signature != signature:
            return False
        signature = last.signature
    exc_type, location = signature or ("", "")
    case.claim(
        "self-polluting",
        f"passes on its first run in a fresh process and fails when run again in it "
        f"({exc_type} at {location}; {how}), {CONFIRM} out of {CONFIRM}",
        numbers(case, CONFIRM - done),
    )
    current = case.finding.reproducer
    if current is None or current.together:  # deterministic: it beats a collision's pair
        if case.target is None:
            case.target = last  # what the reproducer shows
        case.reproduce(steps, hash_seed, confirmed=True)
    return True


#: Most tests of other workers tried as a victim's polluters that ran elsewhere.
MAX_CROSSED = 50


def crossed_before(case: Case, attempt: Attempt) -> list[Step]:
    """What other workers started before ``attempt`` ended in its round and that
    wrote a file (state that outlives its process: a database, a folder), in the
    order they started: a polluter (or a state-setter) that ran on another worker
    left its state there."""
    if attempt.started is None:
        return []
    end = attempt.started + attempt.duration
    others = [
        a
        for a in case.history.round_attempts(attempt)
        if a.worker != attempt.worker
        and a.writes
        and a.execution == 1
        and a.started is not None
        and a.started < end
        and a.nodeid in case.collected
    ]
    others.sort(key=lambda a: (a.started or 0.0, a.position))
    return dedupe([Step.of(a) for a in others])[-MAX_CROSSED:]


def crossed_victim(case: Case, step: Step, hash_seed: int) -> None:
    """Passes alone and after what its own worker ran: what other workers ran before
    it left state in a file (a database, a folder) that it then read. The same
    search as for a victim, over those tests, in one process: the state crosses
    there as it crossed between the workers."""
    target = case.target
    if target is None:
        return
    candidates = crossed_before(case, target)
    if not candidates:
        return
    before = len(case.finding.kinds)
    victim(case, candidates, candidates, step, hash_seed, label="tests other workers ran before it")
    if len(case.finding.kinds) == before or not case.finding.polluters:
        return
    _crossed_facts(case, target, case.finding.polluters[0], "its polluter")


def earlier_victim(case: Case, step: Step, hash_seed: int) -> None:
    """Passes alone and after what ran before it, in its round and on the other
    workers: a test of an earlier round left state that outlives its process (a
    file in the home or the temporary folder). Every round forks from one
    collected session, so what the suite sets up when its modules are imported
    (a file it creates at import) is set up once per hunt, where each plain
    ``pytest`` run sets it up again: a test that removes it breaks the later
    rounds, and breaks a plain run only when it runs first. The same search as
    for a victim, over the tests that wrote a file, in a process whose
    collection imported the suite again."""
    target = case.target
    if target is None:
        return
    wrote = case.history.writers()
    writers = [
        recorded_step(case.history, case.settings, nodeid)
        for nodeid in case.history.tests()
        if nodeid in wrote and nodeid != target.nodeid and nodeid in case.collected
    ]
    if not writers:
        return
    label = "tests of earlier rounds that wrote a file"
    victim(case, writers, writers, step, hash_seed, label=label)
    if "victim" in case.finding.kinds:
        case.finding.notes.append(
            "its polluter did not run before it in its round: what the polluter changed "
            "outlives the process (a file the suite sets up when it is imported, say)"
        )


def suspects(case: Case, preceding: list[Step], shown: Sequence[Attempt],
             not_shown: Sequence[Attempt]) -> list[Step]:  # fmt: skip
    """The tests of ``preceding`` that ran before every attempt in ``shown`` and
    before none in ``not_shown`` (in the same process): where a single
    deterministic culprit must be. A few attempts of each are enough."""

    def before(attempts: Sequence[Attempt]) -> list[set[str]]:
        return [{a.nodeid for a in case.history.preceding(x)} for x in attempts[:EVIDENCE_IDS]]

    common = set.intersection(*before(shown)) if shown else None
    ruled_out = set().union(*before(not_shown))
    return [
        s for s in preceding if (common is None or s.nodeid in common) and s.nodeid not in ruled_out
    ]


def _tries(case: Case, purpose: str, preceding: list[Step], as_run: list[Step],
           narrowed: list[tuple[str, list[Step]]]) -> list[tuple[str, list[Step]]]:  # fmt: skip
    """Subsets of the preceding sequence to replay, cheapest first: the
    narrowed ones (when smaller), the halves of a long sequence, the
    sequence, then the sequence as it ran."""
    out: list[tuple[str, list[Step]]] = []
    if len(preceding) >= HALVES_FROM:
        # A long sequence is bisected before it is replayed whole: a single
        # culprit is in one half, and the search goes on from there.
        half = len(preceding) // 2
        narrowed = [
            *narrowed,
            ("its first half", preceding[:half]),
            ("its second half", preceding[half:]),
        ]
    for label, subset in narrowed:
        if 0 < len(subset) < len(preceding) and all(subset != other for _, other in out):
            out.append((f"{purpose} ({label})", subset))
    out.append((purpose, preceding))
    if len(preceding) < len(as_run) <= case.settings.max_raw_sequence:
        out.append((f"{purpose} (not deduplicated)", as_run))
    return out


def _reproducing_sequence(
    case: Case, tries: list[tuple[str, list[Step]]], last: Step, hash_seed: int,
    check: Callable[[ProbeResult], bool],
) -> list[Step] | None:  # fmt: skip
    """The first of ``tries`` that shows the signal before ``last``."""
    for purpose, subset in tries:
        if check(case.probe(purpose, [*subset, last], hash_seed)):
            return subset
    return None


def _thread_candidates(
    case: Case, preceding: list[Step], step: Step, hash_seed: int
) -> tuple[list[Step], int]:
    """Re-probe the tests that left a thread running, with the victim: a thread
    acts when it gets to run, so one pass proves nothing. Up to the runs that
    would show a failure of the hunt's rate, with the stated confidence."""
    threads = [
        s for s in preceding if any(leak.resource == "thread" for leak in case.leaks_of(s.nodeid))
    ]
    if not threads:
        return [], 1
    runs = repeats_for(case.fail_rate, case.settings.confidence, cap=case.settings.thread_repeats)
    for index in range(runs):
        if case.same(case.probe("tests that left a thread running", [*threads, step], hash_seed)):
            case.finding.notes.append(
                f"the tests that left a thread running made it fail in run {index + 1} of "
                f"up to {runs}: a probabilistic polluter, every 'no' rests on {runs} runs"
            )
            return threads, runs
    case.finding.notes.append(
        f"the tests that left a thread running ({names(threads)}) did not make it fail "
        f"in {runs} runs"
    )
    return [], 1


def _leaks_fact(case: Case, fact: str, sets: Sequence[Sequence[Step]]) -> None:
    """The ``fact`` of what each member of ``sets`` left behind in the hunt
    (``{nodeid: [phrase, ...]}``; none when none left anything)."""
    out = {
        s.nodeid: [leak.describe() for leak in case.leaks_of(s.nodeid)]
        for members in sets
        for s in members
        if case.leaks_of(s.nodeid)
    }
    if out:
        case.facts[fact] = out


def victim(
    case: Case, preceding: list[Step], as_run: list[Step], step: Step, hash_seed: int,
    label: str = "preceding sequence",
) -> None:  # fmt: skip
    """The preceding sequence fails: shrink it to minimal polluter sets.

    The sequence is shortened cheapest first, as docs/isolation.md, "The
    procedure" (*Victim*), lists.
    """
    # A thread acts when it gets to run: its test is a probabilistic polluter,
    # tried first, in repeated probes (few tests, cheap).
    candidates, repeats = _thread_candidates(case, preceding, step, hash_seed)
    if not candidates:
        leakers = [s for s in preceding if case.leaks_of(s.nodeid)]
        before = suspects(case, preceding, case.failing, case.passing)
        narrowed = [
            ("tests that leaked state", leakers),
            ("tests before every failure, before no pass", before),
        ]
        tries = _tries(case, label, preceding, as_run, narrowed)
        candidates = _reproducing_sequence(case, tries, step, hash_seed, case.same) or []
    if not candidates:
        case.finding.notes.append(
            "the sequence that preceded the failure passes when replayed"
            if label == "preceding sequence"
            else f"the {label} do not make it fail"
        )
        return
    search, sets, search_numbers = _culprits(
        case, candidates, step, hash_seed, "polluter", case.same, repeats
    )
    own = [s for s in sets if [x.nodeid for x in s] == [step.nodeid]]
    others = [s for s in sets if s not in own]
    if own and "self-polluting" not in case.finding.kinds:
        case.claim(
            "self-polluting",
            "fails right after its own earlier run in the same process (minimal set: itself)",
            search_numbers,
        )
        case.reproduce([*own[0], step], hash_seed, confirmed=search.confirmed)
    if not others:
        return
    minimal = "smallest failing sequence found" if search.partial else "minimal polluter set"
    chance = f", fails in about {search.rate:.0%} of runs" if search.repeats > 1 else ""
    case.claim(
        "victim",
        f"passes alone, fails after {names(others[0])} ({minimal} among {len(candidates)} "
        f"candidates of {len(preceding)} preceding tests, {search.probes + 1} probes{chance})",
        [*case.alone_numbers, *search_numbers],
    )
    case.finding.polluters = [[x.nodeid for x in s] for s in others]
    _leaks_fact(case, "polluter_leaks", others)
    case.reproduce([*others[0], step], hash_seed, confirmed=search.confirmed)
    if not search.partial:
        case.cleaner_work = (others, step, hash_seed, search.repeats)
        case.needs.add("cleaners")


def _culprits(
    case: Case, candidates: list[Step], step: Step, hash_seed: int, what: str,
    check: Callable[[ProbeResult], bool], repeats: int = 1,
) -> tuple[Search[int], list[list[Step]], list[int]]:  # fmt: skip
    """Minimal ``what`` sets among ``candidates`` (``check``: the probe of a subset
    before ``step`` shows the signal), each shown ``CONFIRM`` times in a row when the
    search found them deterministic: the search, the sets and its probes' numbers
    (from the caller's probe of every candidate on)."""
    full_no = case.step_no()

    def signal(subset: Sequence[int]) -> bool:
        run = [*(candidates[i] for i in subset), step]
        return check(case.probe(f"{what} search", run, hash_seed))

    search = find_culprits(
        range(len(candidates)), signal, confidence=case.settings.confidence, repeats=repeats
    )
    sets = [[candidates[i] for i in found] for found in search.sets]
    case.finding.notes.extend(f"{what} search: {n}" for n in search.notes if "budget" not in n)
    if search.partial:
        case.finding.status = "partial"
        case.finding.notes.append(
            f"{case.stop_reason or 'budget reached'} during the {what} search "
            "(--hermetic-hunt-isolate-budget): partial result, the set is not minimal yet"
        )
    if search.confirmed and search.repeats == 1:
        # The sets that show every time (all of them, unchecked, if the budget runs out).
        kept = []
        for index, members in enumerate(sets):
            try:
                shown_as = f"{what} set {names(members)}"
                if consistent(case, [*members, step], hash_seed, check, shown_as):
                    kept.append(members)
            except BudgetExceeded as exc:
                case.finding.status = "partial"
                case.finding.notes.append(
                    f"{exc} while confirming the {what} sets (--hermetic-hunt-isolate-budget): "
                    "partial result, not confirmed"
                )
                kept += sets[index:]
                break
        sets = kept
        search.partial = case.finding.status == "partial"
    return search, sets, list(range(full_no, case.step_no() + 1))


def cleaners(case: Case) -> None:
    """Tests that, placed between the polluters and the victim, make it pass.

    Extra evidence, searched after every flake has its verdict (phase 3;
    where first: docs/isolation.md, "Polluter, cleaner and state-setter
    search"); running out of budget leaves the verdict as it is, with a note.
    """
    if case.cleaner_work is None:
        return
    polluters, step, hash_seed, repeats = case.cleaner_work
    excluded = {step.nodeid} | {x.nodeid for s in polluters for x in s}
    names_ = [n for n in case.history.tests() if n not in excluded and n in case.collected]
    steps = {n: recorded_step(case.history, case.settings, n) for n in names_}
    first = case.step_no() + 1
    files = {_file_of(n) for n in excluded}
    near = [n for n in names_ if _file_of(n) in files]
    far = [n for n in names_ if _file_of(n) not in files]

    def cleans(group: Sequence[str]) -> bool:
        run = [*polluters[0], *(steps[n] for n in group), step]
        return case.probe("cleaner search", run, hash_seed).outcome == "passed"

    found: list[str] = []
    for stage, where in ((near, "in the same files"), (far, "elsewhere")):
        more, _, partial = find_cleaners(stage, cleans, repeats=repeats)
        found += more
        if partial:
            case.finding.notes.append(
                f"cleaner search {where} unfinished ({case.stop_reason or 'budget reached'}): "
                f"{len(found)} cleaner(s) found so far"
            )
            break
    case.finding.cleaners = [n for n in names_ if n in set(found)]
    if found:
        case.record("cleaners", case.finding.cleaners, list(range(first, case.step_no() + 1)))


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded_step(history: History, settings: ClassifySettings, nodeid: str) -> Step:
    """A recorded attempt of ``nodeid`` to run it with (derived if none; its start
    time drawn from the hunt's dates)."""
    attempt = history.representative(nodeid)
    if attempt is not None:
        return Step.of(attempt)
    seed = attempt_seed(settings.base_seed, nodeid, 0)
    return Step(nodeid, seed, attempt_now(seed, settings.dates))


def brittle(case: Case) -> None:
    """Fails alone whatever the inputs: what made it pass in the hunt?"""
    if not case.passing:
        return
    passing = min(case.passing, key=lambda a: (a.position, a.attempt_id))
    step, hash_seed = Step.of(passing), case.hash_seed_of(passing)
    if case.probe("alone (a passing attempt)", [step], hash_seed).outcome == "passed":
        case.finding.notes.append(
            f"alone with the inputs of passing attempt A{passing.attempt_id} it passes: "
            "no single input decides it"
        )
        return
    preceding, as_run = sequence_before(case, passing, exclude_self=False)
    before_passes = suspects(case, preceding, case.passing, case.failing)
    narrowed = [("tests before every pass, before no failure", before_passes)]
    tries = _tries(case, "sequence before a pass", preceding, as_run, narrowed)
    candidates = (
        _reproducing_sequence(case, tries, step, hash_seed, shows_pass) if preceding else None
    )
    crossed = crossed_before(case, passing) if candidates is None else []
    if crossed:
        # What set the state up ran on another worker (and left it in a file).
        label = "tests other workers ran before a pass"
        candidates = _reproducing_sequence(case, [(label, crossed)], step, hash_seed, shows_pass)
    if candidates is None:
        case.finding.notes.append(
            f"the sequence before passing attempt A{passing.attempt_id} does not make it pass"
            + (", nor what other workers ran before it" if crossed else "")
        )
        return
    _, found_sets, search_numbers = _culprits(
        case, candidates, step, hash_seed, "state-setter", shows_pass
    )
    sets = [[x.nodeid for x in s] for s in found_sets]
    if not sets:
        return
    case.finding.state_setters = sets
    _leaks_fact(case, "state_setter_leaks", found_sets)
    elsewhere = " (on another worker)" if crossed else ""
    case.claim(
        "brittle",
        f"fails alone every time; passes after {', '.join(sets[0])} (minimal state-setter "
        f"set among {len(candidates)} tests before passing attempt A{passing.attempt_id}"
        f"{elsewhere})",
        [*case.alone_numbers, *search_numbers],
    )
    if crossed:
        _crossed_facts(case, passing, sets[0], "its state-setter")


def _crossed_facts(case: Case, attempt: Attempt, culprits: Sequence[str], role: str) -> None:
    """Name the workers and the files through which ``culprits`` (of another worker)
    reached ``attempt``: the ``crossed_workers`` fact and a note."""
    ran = {a.nodeid: a for a in case.history.round_attempts(attempt) if a.worker != attempt.worker}
    mine = touched(attempt)
    crossed = [
        {"polluter": nodeid, "worker": other.worker,
         "path": shared_path(mine, other.writes) or (other.writes[0] if other.writes else "")}
        for nodeid in culprits
        if (other := ran.get(nodeid)) is not None
    ]  # fmt: skip
    if not crossed:
        return
    case.facts["crossed_workers"] = crossed
    where = ", ".join(
        f"{c['polluter']} ({c['worker']}, {relative(c['path'], case.settings.rootdir)})"
        for c in crossed
    )
    case.finding.notes.append(
        f"{role} ran on another worker in the hunt, and the state it left crossed through "
        f"a file: {where}"
    )


def default_order(case: Case) -> None:
    """Does a plain ``pytest`` run -- the collection order -- fail it? What CI sees.

    The ``default_order`` fact: from the hunt's default round, else a probe of
    every test before it (docs/isolation.md, "What CI will see: exposure").
    """
    v, target = case.finding, case.target
    if target is None or not (v.polluters or v.state_setters):
        return
    plain = case.history.in_default_round(case.nodeid)
    if plain is not None:
        case.facts["default_order"] = case.same_attempt(plain)
        case.facts["default_order_attempt"] = plain.attempt_id
        return
    tests = [n for n in case.history.tests() if n in case.collected]
    where = {nodeid: i for i, nodeid in enumerate(tests)}
    me = where.get(case.nodeid)
    if me is None:
        return

    def before(members: Sequence[str]) -> bool:
        return all(where.get(m, me) < me for m in members)

    # No polluter set runs before it (a victim), or a state-setter does (brittle).
    if any(before(s) for s in v.polluters or v.state_setters) != bool(v.polluters):
        case.facts["default_order"] = False
        return
    if me > DEFAULT_ORDER_LIMIT:
        return
    run = tests[:me]
    steps = [recorded_step(case.history, case.settings, n) for n in run]
    result = case.probe(
        "in pytest's default order", [*steps, Step.of(target)], case.hash_seed_of(target)
    )
    case.facts["default_order"] = case.same(result)
    case.facts["default_order_probe"] = case.step_no()


def last_resorts(case: Case, step: Step, hash_seed: int) -> None:
    """Reproduced neither alone nor in order: many identical reruns, then hash seeds.

    Reruns come first: a test that fails at random under identical inputs
    could otherwise pass for hash-order after a few lucky runs.
    """
    seeded, recorded = reruns_of(case, step, hash_seed)
    reruns = seeded + recorded
    rerun_numbers = numbers(case, len(reruns))
    failed = [n for n, r in zip(rerun_numbers, reruns, strict=True) if case.same(r)]
    if failed:
        total = len(reruns) + len(case.alone_numbers)
        what = f"it failed in {len(failed)} of {total} identical runs alone"
        if not uncontrolled(case, what):
            case.claim(
                "concurrency", f"identical inputs: {what}", [*case.alone_numbers, *rerun_numbers]
            )
        case.reproduce([step], hash_seed, confirmed=len(failed) >= 2)
        return
    hash_seeds = alternative_hash_seeds(case, case.settings.variations)
    results = case.probe_many([Probe("vary hash seed", (step,), h) for h in hash_seeds])
    for h, result in zip(hash_seeds, results, strict=True):
        if case.same(result) and consistent(case, [step], h, case.same, f"PYTHONHASHSEED={h}"):
            case.claim(
                "hash-order",
                f"passes alone with PYTHONHASHSEED={hash_seed} in "
                f"{len(case.alone_numbers) + len(reruns)} "
                f"runs, fails with {h} in {CONFIRM} of {CONFIRM}",
                [*case.alone_numbers, *numbers(case, CONFIRM)],
            )
            case.reproduce([step], h, confirmed=True)
            return
