"""The decision procedure, driven by a fake prober: a tiny simulated test world.

Each probe is a fresh "process" (a state dict); behaviours decide a test's
outcome from that state, the step's seed and start time, and the hash seed.
A simulated hunt produces the attempts, so the classifier sees realistic
histories without starting a single process.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from hermetic_hunt.findings import Finding, Probe, ProbeResult
from hermetic_hunt.isolate.case import ClassifySettings, choose_target, dedupe
from hermetic_hunt.isolate.classifier import Classifier
from hermetic_hunt.kinds import KINDS
from hermetic_hunt.models import Attempt, Failure, Leak, Step, Violation

DAY = 86400.0
Behaviour = Callable[[dict, Step, int, "World"], Attempt]


def ok(nodeid: str, *violations: Violation) -> Attempt:
    return Attempt(nodeid, "passed", violations=list(violations))


def boom(nodeid: str, exc: str = "AssertionError", *violations: Violation) -> Attempt:
    return Attempt(
        nodeid,
        "failed",
        failure=Failure(exc, "boom", f"{nodeid}.py:1"),
        violations=list(violations),
    )


BLOCKED = Violation("connect", "metrics.example.invalid", 80)


def sets(key: str, value: object = True) -> Behaviour:
    def run(state: dict, step: Step, hs: int, world: World) -> Attempt:
        state[key] = value
        return ok(step.nodeid)

    return run


def fails_if(condition: Callable[[dict, Step, int, World], bool], exc: str = "AssertionError"):
    def run(state: dict, step: Step, hs: int, world: World) -> Attempt:
        return boom(step.nodeid, exc) if condition(state, step, hs, world) else ok(step.nodeid)

    return run


def self_polluting(state: dict, step: Step, hs: int, world: World) -> Attempt:
    state["runs"] = state.get("runs", 0) + 1
    return boom(step.nodeid) if state["runs"] > 1 else ok(step.nodeid)


def racy(state: dict, step: Step, hs: int, world: World) -> Attempt:
    world.counter += 1  # shared by every process, like the example's counter file
    return boom(step.nodeid) if world.counter % 2 else ok(step.nodeid)


def networked(state: dict, step: Step, hs: int, world: World) -> Attempt:
    if step.seed is not None and step.seed % 4 == 0:
        return boom(step.nodeid, "URLError", BLOCKED)
    return ok(step.nodeid)


def swallows_network(state: dict, step: Step, hs: int, world: World) -> Attempt:
    return ok(step.nodeid, BLOCKED)


BEHAVIOURS: dict[str, Behaviour] = {
    "polluter": sets("polluted"),
    "cleaner": sets("polluted", False),
    "victim": fails_if(lambda s, *_: s.get("polluted", False)),
    "region": sets("region"),
    "beta": sets("beta"),
    "vat": fails_if(lambda s, *_: s.get("region") and s.get("beta")),
    "setter": sets("rates"),
    "brittle": fails_if(lambda s, *_: not s.get("rates"), "KeyError"),
    "self": self_polluting,
    "random": fails_if(lambda s, step, *_: step.seed % 4 == 0),
    "time": fails_if(lambda s, step, *_: step.now % DAY == DAY - 1),
    "hash": fails_if(lambda s, step, hs, w: hs % 2 == 1),
    "race": racy,
    "net": networked,
    "net-ok": swallows_network,
    "ghost": fails_if(lambda s, *_: s.get("hunting", False)),
    "hunting": sets("hunting"),
    "hangs": fails_if(lambda s, *_: s.get("polluted", False)),
    **{f"stable{i}": sets(f"noise{i}") for i in range(12)},
    **{f"filler{i}": sets(f"filled{i}") for i in range(80)},
}


def coin(state: dict, step: Step, hs: int, world: World) -> Attempt:
    return boom(step.nodeid) if world.rng.random() < 0.25 else ok(step.nodeid)


def late(state: dict, step: Step, hs: int, world: World) -> Attempt:
    """Fails when a leaked thread got to run first: some of the time."""
    raced = state.get("thread") and world.rng.random() < 0.3
    return boom(step.nodeid) if raced else ok(step.nodeid)


BEHAVIOURS["coin"] = coin
BEHAVIOURS["late"] = late
BEHAVIOURS["threader"] = sets("thread")


class World:
    """A fake :class:`~hermetic_hunt.isolate.classifier.Prober`."""

    def __init__(
        self, collected: Sequence[str] | None = None, hang: str | None = None, seed: int = 0
    ) -> None:
        self.rng = random.Random(seed)
        self.counter = 0
        self.probes: list[Probe] = []
        self.hang = hang
        #: Tests of the probe pair running now (a collision's partners see each other).
        self.together: frozenset[str] = frozenset()
        self._collected = frozenset(collected if collected is not None else BEHAVIOURS)

    def execute(self, steps: Sequence[Step], hash_seed: int) -> list[Attempt]:
        state: dict = {}
        return [BEHAVIOURS[step.nodeid](state, step, hash_seed, self) for step in steps]

    def run(self, probe: Probe) -> ProbeResult:
        self.probes.append(probe)
        if self.hang is not None and len(probe.steps) > 1 and probe.steps[-1].nodeid == self.hang:
            return ProbeResult("timeout", duration=1.0, detail="stopped after 1s")
        return ProbeResult("completed", tuple(self.execute(probe.steps, probe.hash_seed)), 0.01)

    def run_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        return [self.run(p) for p in probes]

    def run_together(self, probes: Sequence[Probe], after: str = "") -> list[ProbeResult]:
        self.together = frozenset(s.nodeid for p in probes for s in p.steps)
        try:
            return [self.run(p) for p in probes]
        finally:
            self.together = frozenset()

    def collected(self, hash_seed: int | None) -> frozenset[str] | None:
        return self._collected


class History:
    """A fake :class:`~hermetic_hunt.isolate.classifier.History` over a simulated hunt.

    ``default``: the worker whose sequence was the hunt's default round (a
    plain run in collection order); None: the hunt had none.
    """

    def __init__(
        self,
        attempts: list[Attempt],
        leaks: dict[str, list[Leak]] | None = None,
        default: str | None = None,
    ) -> None:
        self.attempts = attempts
        self.left = leaks or {}
        self.default = default

    def round_attempts(self, attempt: Attempt) -> list[Attempt]:
        return [a for a in self.attempts if a.round_no == attempt.round_no]

    def in_default_round(self, nodeid: str) -> Attempt | None:
        found = [a for a in self.attempts if a.worker == self.default and a.nodeid == nodeid]
        return found[0] if found else None

    def leaks(self) -> dict[str, list[Leak]]:
        return self.left

    def preceding(self, attempt: Attempt) -> list[Attempt]:
        return [
            a for a in self.attempts if a.worker == attempt.worker and a.position < attempt.position
        ]

    def tests(self) -> list[str]:
        return list(dict.fromkeys(a.nodeid for a in self.attempts))

    def representative(self, nodeid: str) -> Attempt | None:
        mine = [a for a in self.attempts if a.nodeid == nodeid]
        return min(mine, key=lambda a: (a.failed, a.attempt_id)) if mine else None

    def writers(self) -> frozenset[str]:
        return frozenset(a.nodeid for a in self.attempts if a.writes)


Run = tuple[str, int, float]  # nodeid, seed, now


def simulated_hunt(world: World, workers: dict[str, tuple[int, list[Run]]]) -> History:
    """Run each worker's sequence in one simulated process; record attempts."""
    attempts: list[Attempt] = []
    for worker, (hash_seed, runs) in workers.items():
        steps = [Step(n, seed, now) for n, seed, now in runs]
        results = world.execute(steps, hash_seed)
        for position, (step, result) in enumerate(zip(steps, results, strict=True)):
            attempts.append(
                Attempt(
                    attempt_id=len(attempts) + 1,
                    run_id=1,
                    worker=worker,
                    position=position,
                    execution=1,
                    nodeid=step.nodeid,
                    outcome=result.outcome,
                    seed=step.seed,
                    now=step.now,
                    mode="seeded",
                    hash_seed=hash_seed,
                    failure=result.failure,
                    violations=result.violations,
                )
            )
    return History(attempts)


def classify(world: World, history: History, nodeid: str, **settings: object) -> Finding:
    attempts = [a for a in history.attempts if a.nodeid == nodeid]
    classifier = Classifier(nodeid, attempts, history, world, ClassifySettings(**settings))
    classifier.environment()
    classifier.order()
    classifier.extras()
    return classifier.result()


def steps_of(verdict: Finding) -> list[str]:
    assert verdict.reproducer is not None
    return [s.nodeid for s in verdict.reproducer.steps]


def noise(count: int, seed: int = 100) -> list[Run]:
    return [(f"stable{i}", seed + i, 1e9 + i) for i in range(count)]


def check_evidence(verdict: Finding) -> None:
    """Every claimed kind names probes that ran; kinds are in KINDS order."""
    assert verdict.kinds == [k for k in KINDS if k in verdict.kinds]
    claims = [v for v in verdict.evidence["verdicts"] if "kind" in v]
    assert sorted({v["kind"] for v in claims}) == sorted(verdict.kinds)
    for claim in claims:
        assert all(1 <= n <= len(verdict.probes) for n in claim["probes"]), claim
        if claim["kind"] != "unexplained":
            assert claim["probes"], claim


# -- order dependence ------------------------------------------------------------


def test_a_victim_gets_its_polluter_and_its_cleaner() -> None:
    world = World()
    history = simulated_hunt(
        world,
        {
            "gw0": (11, [*noise(6), ("polluter", 1, 1e9), *noise(4, 200), ("victim", 2, 2e9)]),
            "gw1": (12, [("victim", 3, 3e9), ("cleaner", 4, 1e9), *noise(3, 300)]),
        },
    )
    verdict = classify(world, history, "victim")
    assert verdict.kinds == ["victim"]
    assert verdict.polluters == [["polluter"]]
    assert verdict.cleaners == ["cleaner"]
    assert steps_of(verdict) == ["polluter", "victim"]
    assert verdict.reproducer is not None
    assert [(s.seed, s.now) for s in verdict.reproducer.steps] == [(1, 1e9), (2, 2e9)]
    assert verdict.reproducer.hash_seed == 11
    assert verdict.confirmed is True
    assert verdict.status == "isolated"
    check_evidence(verdict)


def careless(state: dict, step: Step, hs: int, world: World) -> Attempt:
    """Pollutes, and puts things back only when it succeeds: with ``prep`` run first."""
    if state.get("prepared"):
        return ok(step.nodeid)
    state["polluted"] = True
    return boom(step.nodeid, "KeyError")


BEHAVIOURS["prep"] = sets("prepared")
BEHAVIOURS["careless"] = careless


@pytest.mark.parametrize("default_round", [False, True], ids=["probed", "default-round"])
def test_a_victim_fails_in_normal_runs_only_when_the_default_order_really_fails_it(
    default_round: bool,
) -> None:
    """Issue 29: the default order is every test before the victim, in collection
    order -- not the tests from its first polluter on (here, without ``prep``
    first, ``careless`` pollutes and the victim fails: a plain run never does)."""
    world = World()
    plain = [("prep", 1, 1e9), ("careless", 2, 1e9), ("victim", 3, 1e9)]
    history = simulated_hunt(
        world,
        {
            "gw0": (5, plain),  # collection order: the first appearances
            "gw1": (5, [("careless", 4, 1e9), ("victim", 5, 1e9)]),
        },
    )
    if default_round:
        history.default = "gw0"
    verdict = classify(world, history, "victim")
    assert verdict.kinds == ["victim"]
    assert verdict.polluters == [["careless"]]
    assert verdict.evidence["default_order"] is False
    assert verdict.evidence["exposure"] == "order"
    probes = [p.purpose for p, _ in verdict.probes]
    if default_round:  # read from the record: no probe
        assert "in pytest's default order" not in probes
        assert verdict.evidence["default_order_attempt"] == 3
    else:
        default = [p for p, _ in verdict.probes if p.purpose == "in pytest's default order"]
        assert [[s.nodeid for s in p.steps] for p in default] == [["prep", "careless", "victim"]]


def test_a_victim_that_a_plain_run_fails_fails_in_normal_runs() -> None:
    world = World()
    history = simulated_hunt(
        world,
        {"gw0": (5, [("careless", 2, 1e9), ("victim", 3, 1e9)]), "gw1": (5, [("victim", 5, 1e9)])},
    )
    history.default = "gw0"
    verdict = classify(world, history, "victim")
    assert verdict.evidence["default_order"] is True
    assert verdict.evidence["exposure"] == "normal"


class Disk(World):
    """A world whose suite creates a file outside the checkout when it is imported.

    The file outlives every process; a probe that imports the suite again
    (``unforked``) creates it again, a fork of the collected session does not.
    """

    def __init__(self) -> None:
        super().__init__()
        self.file = True  # the hunt's collection created it

    def run(self, probe: Probe) -> ProbeResult:
        if probe.unforked:
            self.file = True
        return super().run(probe)


def removes_file(state: dict, step: Step, hs: int, world: World) -> Attempt:
    assert isinstance(world, Disk)
    world.file = False
    return ok(step.nodeid)


BEHAVIOURS["reads-file"] = fails_if(lambda s, step, hs, w: not w.file, "FileNotFoundError")
BEHAVIOURS["removes-file"] = removes_file
HOME_FILE = ("/home/ci/.app/state.txt",)


def rounds_over_a_file(world: Disk) -> History:
    """Round 0 in collection order passes and removes the file; in round 1 the reader
    runs before the remover, and fails: the file is gone since round 0."""
    plain = [("reads-file", 1, 1e9), ("removes-file", 2, 1e9), *noise(2)]
    history = simulated_hunt(world, {"r0": (5, plain), "r1": (5, [*noise(2, 300), *plain[:2]])})
    history.attempts = [
        replace(a, writes=HOME_FILE) if a.nodeid == "removes-file" else a for a in history.attempts
    ]
    history.default = "r0"
    return history


@pytest.mark.parametrize("file_now", [True, False], ids=["imported-again", "removed-by-a-probe"])
def test_a_victim_of_a_polluter_from_an_earlier_round_gets_it(file_now: bool) -> None:
    """Rounds fork from one collected session: a file the suite creates at import is
    created once per hunt, and its remover breaks every later round, whatever
    ran before the reader there. The polluter is searched among the tests that
    wrote a file. When the file is gone for the forks too (a probe removed it),
    the reader fails alone there and passes in a process that imports the suite
    again: its probes do that from then on."""
    world = Disk()
    history = rounds_over_a_file(world)
    world.file = file_now
    verdict = classify(world, history, "reads-file")
    assert verdict.kinds == ["victim"]
    assert verdict.polluters == [["removes-file"]]
    assert steps_of(verdict) == ["removes-file", "reads-file"]
    assert verdict.evidence["exposure"] == "order"
    probes = [p for p, _ in verdict.probes]
    assert "tests of earlier rounds that wrote a file" in [p.purpose for p in probes]
    first = next((i for i, p in enumerate(probes) if p.unforked), None)
    if file_now:
        assert first is None
    else:  # from the check on, every probe imports the suite again
        assert first is not None
        assert probes[first].purpose == "alone, the suite imported again"
        assert all(p.unforked for p in probes[first:])
    check_evidence(verdict)


class Drifting(Disk):
    """From the search among the tests that wrote a file on, another probe has
    broken the file for good (as probes of other tests append to it)."""

    def run(self, probe: Probe) -> ProbeResult:
        if probe.purpose.startswith("tests of earlier rounds"):
            self.broken = True
        if getattr(self, "broken", False):
            self.file = False
            return World.run(self, probe)
        return super().run(probe)


def test_a_set_is_not_claimed_when_the_test_alone_fails_too_right_after_it() -> None:
    """The file is gone from the moment the search starts, whatever imports it again:
    the set shows the failure every time, and so does the test alone right after --
    what other probes left decides it, not the set."""
    world = Drifting()
    history = rounds_over_a_file(world)
    world.file = False
    verdict = classify(world, history, "reads-file")
    assert "victim" not in verdict.kinds
    assert verdict.polluters == []
    assert any("and so did the test alone right after" in note for note in verdict.notes)
    purposes = [p.purpose for p, _ in verdict.probes]
    assert purposes[purposes.index("confirm again") + 1] == "confirm: it alone"


def removes_once(state: dict, step: Step, hs: int, world: World) -> Attempt:
    """Removes the file; fails when it is gone (``os.remove``)."""
    assert isinstance(world, Disk)
    if not world.file:
        return boom(step.nodeid, "FileNotFoundError")
    world.file = False
    return ok(step.nodeid)


BEHAVIOURS["removes-once"] = removes_once


def test_a_test_that_removes_what_the_import_created_is_self_polluting_not_concurrency() -> None:
    """Forks of the collected session share the file it removes: alone it passes
    once, then fails (the outcomes of a race). In processes that import the suite
    again it passes every time, and twice in one such process it fails: what a
    plain run shows."""
    world = Disk()
    history = simulated_hunt(world, {"r0": (5, [("removes-once", 1, 1e9)]),
                                     "r1": (5, [("removes-once", 1, 1e9)])})  # fmt: skip
    history.attempts = [replace(a, writes=HOME_FILE) for a in history.attempts]
    history.default = "r0"
    world.file = True  # the probe server's collection created it again
    verdict = classify(world, history, "removes-once")
    assert verdict.kinds == ["self-polluting"]
    assert steps_of(verdict) == ["removes-once", "removes-once"]
    fresh = [p for p, _ in verdict.probes if p.purpose == "alone, the suite imported again"]
    assert len(fresh) >= 2
    check_evidence(verdict)
    # nothing wrote a file in the hunt: the forks' outcomes are a race, as they look
    world = Disk()
    history.attempts = [replace(a, writes=()) for a in history.attempts]
    verdict = classify(world, history, "removes-once")
    assert verdict.kinds == ["concurrency"]
    assert "alone, the suite imported again" not in [p.purpose for p, _ in verdict.probes]


def test_a_victim_of_two_polluters_gets_them_as_one_set() -> None:
    world = World()
    runs = [*noise(5), ("region", 1, 1e9), *noise(5, 200), ("beta", 2, 1e9), ("vat", 3, 1e9)]
    history = simulated_hunt(world, {"gw0": (5, runs), "gw1": (6, [("vat", 4, 1e9)])})
    verdict = classify(world, history, "vat")
    assert verdict.kinds == ["victim"]
    assert verdict.polluters == [["region", "beta"]]
    assert steps_of(verdict) == ["region", "beta", "vat"]
    assert verdict.cleaners == []
    check_evidence(verdict)


def test_a_brittle_test_gets_its_state_setter() -> None:
    world = World()
    history = simulated_hunt(
        world,
        {
            "gw0": (5, [("brittle", 4, 1e9), *noise(3)]),
            "gw1": (5, [*noise(4, 200), ("setter", 1, 1e9), *noise(4, 300), ("brittle", 2, 1e9)]),
        },
    )
    verdict = classify(world, history, "brittle")
    assert verdict.kinds == ["brittle"]
    assert verdict.state_setters == [["setter"]]
    assert steps_of(verdict) == ["brittle"]  # fails alone: that is the reproducer
    assert verdict.polluters == []
    check_evidence(verdict)


def test_a_self_polluting_test_is_not_called_its_own_victim() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("self", 1, 1e9), *noise(3), ("self", 2, 1e9)])})
    verdict = classify(world, history, "self")
    assert verdict.kinds == ["self-polluting"]
    assert verdict.polluters == []
    assert steps_of(verdict) == ["self", "self"]
    assert verdict.confirmed is True
    check_evidence(verdict)


# -- decided by the sandbox's inputs -----------------------------------------------


def test_a_test_decided_by_its_seed_is_random() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("random", 8, 1e9), ("random", 9, 1e9 + 5)])})
    verdict = classify(world, history, "random")
    assert verdict.kinds == ["random"]
    assert steps_of(verdict) == ["random"]
    assert verdict.reproducer is not None and verdict.reproducer.steps[0].seed == 8
    purposes = [p.purpose for p, _ in verdict.probes]
    assert purposes[:3] == ["alone"] * 3
    assert "vary seed" in purposes and "vary start time" in purposes
    check_evidence(verdict)


def test_a_test_decided_by_its_start_time_is_time() -> None:
    world = World()
    history = simulated_hunt(
        world, {"gw0": (5, [("time", 1, 40 * DAY - 1), ("time", 2, 40 * DAY + 7)])}
    )
    verdict = classify(world, history, "time")
    assert verdict.kinds == ["time"]
    assert verdict.reproducer is not None and verdict.reproducer.steps[0].now == 40 * DAY - 1
    check_evidence(verdict)


def test_a_test_decided_by_the_hash_seed_is_hash_order() -> None:
    world = World()
    history = simulated_hunt(
        world, {"gw0": (7, [("hash", 1, 1e9)]), "gw1": (8, [("hash", 2, 1e9)])}
    )
    verdict = classify(world, history, "hash")
    assert verdict.kinds == ["hash-order"]
    assert verdict.reproducer is not None and verdict.reproducer.hash_seed == 7
    varied = [p for p, _ in verdict.probes if p.purpose.startswith("vary hash seed")]
    assert varied[0].hash_seed == 8  # the passing worker's hash seed is tried first
    check_evidence(verdict)


# -- network, concurrency, unexplained ---------------------------------------------------


def test_a_test_failing_on_a_blocked_call_for_some_seeds_is_random_and_network() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("net", 4, 1e9), ("net", 5, 1e9)])})
    verdict = classify(world, history, "net")
    assert verdict.kinds == ["random", "network"]
    why = [v["why"] for v in verdict.evidence["verdicts"] if v.get("kind") == "network"]
    assert why == ["the network guard blocked connect metrics.example.invalid:80"]
    assert verdict.evidence["blocked_calls"] == ["connect metrics.example.invalid:80"]


def test_a_test_that_swallows_a_blocked_call_is_network_with_a_passing_reproducer() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("net-ok", 1, 1e9), ("net-ok", 2, 1e9)])})
    verdict = classify(world, history, "net-ok")
    assert verdict.kinds == ["network"]
    assert verdict.reproducer is not None and verdict.reproducer.exc_type == ""
    assert verdict.confirmed is True
    assert len(verdict.probes) == 2


def test_identical_inputs_with_different_outcomes_are_concurrency() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("race", 1, 1e9), ("race", 2, 1e9)])})
    verdict = classify(world, history, "race")
    assert verdict.kinds == ["concurrency"]
    record = [p for p, _ in verdict.probes if p.steps[0].mode == "record"]
    assert len(record) == 3
    # 5 of the 9 seeded runs failed (the counter alternates)
    assert "the reproducer fails in about 56% of runs" in verdict.notes
    assert verdict.confirmed is True
    check_evidence(verdict)


def test_a_flake_that_never_reproduces_is_unexplained_with_what_was_tried() -> None:
    world = World()
    history = simulated_hunt(
        world,
        {"gw0": (5, [("hunting", 1, 1e9), ("ghost", 2, 1e9)]), "gw1": (6, [("ghost", 3, 1e9)])},
    )
    # "hunting" is not collected any more: the failure cannot come back.
    world._collected = frozenset(BEHAVIOURS) - {"hunting"}
    verdict = classify(world, history, "ghost")
    assert verdict.kinds == ["unexplained"]
    (claim,) = verdict.evidence["verdicts"]
    assert "no probe reproduced a cause" in claim["why"]
    assert "twice in one process" in claim["why"] and "rerun (record)" in claim["why"]
    assert any("left out: hunting" in note for note in verdict.notes)
    assert verdict.reproducer is None


@pytest.mark.parametrize("seed", range(25))
def test_a_test_that_fails_at_random_is_never_blamed_on_the_order(seed: int) -> None:
    world = World(seed=seed)
    runs = [*noise(6), ("polluter", 1, 1e9), *noise(6, 200), ("coin", 2, 1e9)]
    for rounds in range(1, 40):  # until the coin fails in the hunt (deterministic per seed)
        history = simulated_hunt(world, {"gw0": (5, runs * rounds)})
        if any(a.nodeid == "coin" and a.failed for a in history.attempts):
            break
    verdict = classify(world, history, "coin")
    assert not {"victim", "self-polluting", "brittle"} & set(verdict.kinds), verdict.notes
    assert verdict.kinds in (["concurrency"], ["unexplained"])


def test_with_the_sandbox_off_nondeterminism_is_not_called_concurrency() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("race", 1, 1e9), ("race", 2, 1e9)])})
    history.attempts = [replace(a, mode="off", seed=None, now=None) for a in history.attempts]
    verdict = classify(world, history, "race")
    assert verdict.kinds == ["unexplained"]
    assert any("the sandbox was off" in note for note in verdict.notes)
    assert not any(p.purpose == "vary seed" for p, _ in verdict.probes)


# -- leaks and narrowing ----------------------------------------------------------------

ENV_LEAK = Leak("env", "SHOP_CURRENCY", "added", "'GBP'")


def recorded(workers: dict[str, tuple[int, list[Run], dict[str, str]]]) -> list[Attempt]:
    """A hunt's attempts as recorded, each outcome given (``{nodeid: outcome}``
    per worker; every other test passed)."""
    attempts: list[Attempt] = []
    for worker, (hash_seed, runs, outcomes) in workers.items():
        for position, (nodeid, seed, now) in enumerate(runs):
            failed = outcomes.get(nodeid) == "failed"
            attempts.append(
                Attempt(
                    nodeid, "failed" if failed else "passed", attempt_id=len(attempts) + 1,
                    run_id=1, worker=worker, position=position, seed=seed, now=now,
                    hash_seed=hash_seed, failure=boom(nodeid).failure if failed else None,
                )
            )  # fmt: skip
    return attempts


def purposes(verdict: Finding) -> list[str]:
    return [probe.purpose for probe, _ in verdict.probes]


def test_a_polluter_that_leaked_state_is_replayed_first_and_named_with_what_it_left() -> None:
    world = World()
    runs = [*noise(8), ("polluter", 1, 1e9), *noise(4, 200), ("victim", 2, 1e9)]
    attempts = simulated_hunt(world, {"gw0": (5, runs), "gw1": (6, [("victim", 3, 1e9)])}).attempts
    history = History(attempts, leaks={"polluter": [ENV_LEAK]})
    verdict = classify(world, history, "victim")
    assert verdict.kinds == ["victim"] and verdict.polluters == [["polluter"]]
    sequences = [p for p in purposes(verdict) if p.startswith("preceding sequence")]
    assert sequences == ["preceding sequence (tests that leaked state)"]
    assert verdict.evidence["polluter_leaks"] == {
        "polluter": ["left os.environ['SHOP_CURRENCY'] set ('GBP')"]
    }
    check_evidence(verdict)


def test_tests_that_ran_before_a_pass_are_left_out_of_the_first_replay() -> None:
    world = World()
    before = noise(10)
    runs = {
        "gw0": (5, [*before, ("polluter", 1, 1e9), ("victim", 2, 1e9)], {"victim": "failed"}),
        "gw1": (6, [*before, ("victim", 3, 1e9)], {}),
    }
    history = History(recorded(runs))
    verdict = classify(world, history, "victim")
    assert verdict.kinds == ["victim"] and verdict.polluters == [["polluter"]]
    first = next(p for p, _ in verdict.probes if p.purpose.startswith("preceding sequence"))
    assert first.purpose == "preceding sequence (tests before every failure, before no pass)"
    assert [s.nodeid for s in first.steps] == ["polluter", "victim"]


def test_a_long_preceding_sequence_is_bisected_before_it_is_replayed_whole() -> None:
    world = World()
    runs: list[Run] = [(f"filler{i}", 100 + i, 1e9) for i in range(70)]
    runs += [("polluter", 1, 1e9), *noise(2, 700), ("victim", 2, 1e9)]
    history = simulated_hunt(world, {"gw0": (5, runs), "gw1": (6, [("victim", 3, 1e9)])})
    verdict = classify(world, history, "victim")
    assert verdict.polluters == [["polluter"]]
    sequences = [p for p in purposes(verdict) if p.startswith("preceding sequence")]
    assert sequences == [
        "preceding sequence (its first half)",
        "preceding sequence (its second half)",
    ]
    check_evidence(verdict)


@pytest.mark.parametrize("seed", range(10))
def test_a_polluter_that_leaves_a_thread_running_is_confirmed_by_repeated_probes(
    seed: int,
) -> None:
    world = World(seed=seed)
    runs = {
        "gw0": (5, [*noise(6), ("threader", 1, 1e9), *noise(3, 200), ("late", 2, 1e9)],
                {"late": "failed"}),
        "gw1": (6, [("late", 3, 1e9)], {}),
        "gw2": (7, [("late", 4, 1e9)], {}),
    }  # fmt: skip
    thread = Leak("thread", "rate-refresher", "added")
    history = History(recorded(runs), leaks={"threader": [thread]})
    verdict = classify(world, history, "late")
    assert verdict.kinds == ["victim"], verdict.notes
    assert verdict.polluters == [["threader"]]
    assert verdict.evidence["polluter_leaks"] == {
        "threader": ["left 1 thread running: rate-refresher"]
    }


def test_a_flake_the_time_budget_never_reached_stays_pending_and_says_why() -> None:
    import time

    from hermetic_hunt.isolate.case import Deadline

    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("polluter", 1, 1e9), ("victim", 2, 1e9)]),
                           "gw1": (6, [("victim", 3, 1e9)])})  # fmt: skip
    verdict = classify(world, history, "victim", deadline=Deadline(time.perf_counter(), 60.0))
    assert (verdict.status, verdict.kinds, verdict.probes) == ("pending", [], [])
    assert verdict.notes == [
        "not isolated: the isolation time budget of 1m reached before it started "
        "(--hermetic-hunt-isolate-budget); finish with: hermetic-hunt isolate"
    ]


def test_a_test_that_fails_only_as_a_second_run_is_self_polluting_and_nothing_more() -> None:
    world = World()
    first = Attempt("self", "passed", attempt_id=1, run_id=1, worker="gw0", position=0,
                    seed=1, now=1e9, hash_seed=5, repeat=1)  # fmt: skip
    second = Attempt("self", "failed", attempt_id=2, run_id=1, worker="gw0", position=1,
                     seed=1, now=1e9, hash_seed=5, repeat=2, failure=boom("self").failure)  # fmt: skip
    plain = [
        Attempt("self", "passed", attempt_id=3 + i, run_id=1, worker="gw1", position=i,
                seed=2 + i, now=1e9, hash_seed=6)
        for i in range(3)
    ]  # fmt: skip
    history = History([first, second, *plain])
    verdict = classify(world, history, "self")
    assert verdict.kinds == ["self-polluting"]
    assert verdict.evidence["repeated_only"] is True
    assert verdict.evidence["exposure"] == "repeat"
    assert not any(p.startswith("preceding sequence") for p in purposes(verdict))


# -- bad cases ---------------------------------------------------------------------------


def test_a_search_over_budget_stores_a_partial_result_and_says_so() -> None:
    world = World()
    runs = [*noise(12), ("polluter", 1, 1e9), *noise(12, 200), ("victim", 2, 1e9)]
    history = simulated_hunt(world, {"gw0": (5, runs), "gw1": (6, [("victim", 3, 1e9)])})
    # 12 alone runs (it failed in 1 of 2 attempts), twice, the sequence: 14
    verdict = classify(world, history, "victim", budget=16)
    assert verdict.status == "partial"
    assert len(verdict.probes) == 16
    assert any("probe budget of 16 exhausted" in note for note in verdict.notes)
    assert verdict.kinds == ["victim"]  # alone passes, the sequence fails: both probed
    (best,) = verdict.polluters
    assert "polluter" in best and len(best) < 13
    assert verdict.confirmed is False


def test_a_budget_that_runs_out_while_confirming_keeps_the_sets_unconfirmed() -> None:
    world = World()
    runs = [*noise(12), ("polluter", 1, 1e9), *noise(12, 200), ("victim", 2, 1e9)]
    history = simulated_hunt(world, {"gw0": (5, runs), "gw1": (6, [("victim", 3, 1e9)])})
    verdict = classify(world, history, "victim", budget=20)  # the search takes 19
    assert verdict.status == "partial"
    assert verdict.kinds == ["victim"]
    assert verdict.polluters == [["polluter"]]
    assert any("while confirming the polluter sets" in note for note in verdict.notes)


def test_a_test_no_longer_collected_is_not_probed() -> None:
    world = World(collected=["polluter"])
    history = simulated_hunt(world, {"gw0": (5, [("polluter", 1, 1e9), ("victim", 2, 1e9)])})
    verdict = classify(world, history, "victim")
    assert verdict.status == "not-collected"
    assert verdict.kinds == []
    assert world.probes == []


def test_a_probe_that_hangs_is_a_timeout_not_a_failure() -> None:
    world = World(hang="hangs")
    history = simulated_hunt(world, {"gw0": (5, [("polluter", 1, 1e9), ("hangs", 2, 1e9)])})
    verdict = classify(world, history, "hangs")
    assert "victim" not in verdict.kinds
    outcomes = {result.outcome for _, result in verdict.probes}
    assert "timeout" in outcomes
    assert any("passes when replayed" in note for note in verdict.notes)


def test_the_target_is_the_most_common_failure_with_the_shortest_history() -> None:
    def attempt(i: int, position: int, exc: str) -> Attempt:
        return Attempt(
            "t", "failed", run_id=1, worker="gw0", position=position, seed=i, now=0.0,
            hash_seed=1, failure=Failure(exc, "", "x:1"), attempt_id=i,
        )  # fmt: skip

    failing = [attempt(1, 9, "KeyError"), attempt(2, 7, "ValueError"), attempt(3, 8, "ValueError")]
    assert choose_target(failing).attempt_id == 2


def test_dedupe_keeps_each_tests_last_run_in_order() -> None:
    steps = [Step(n, i, 0.0) for i, n in enumerate("abcab")]
    assert [(s.nodeid, s.seed) for s in dedupe(steps)] == [("c", 2), ("a", 3), ("b", 4)]


@pytest.mark.parametrize("nodeid", ["victim", "vat", "brittle", "self", "random", "time", "hash"])
def test_every_kind_rests_on_probes_that_showed_it(nodeid: str) -> None:
    world = World()
    history = simulated_hunt(
        world,
        {
            "gw0": (7, [("polluter", 1, 1e9), ("region", 1, 1e9), ("beta", 1, 1e9),
                        ("self", 8, 40 * DAY - 1), (nodeid, 8, 40 * DAY - 1)]),
            "gw1": (8, [("setter", 2, 1e9), ("self", 9, 1e9), (nodeid, 9, 1e9 + 3)]),
        },
    )  # fmt: skip
    verdict = classify(world, history, nodeid)
    check_evidence(verdict)
    for claim in verdict.evidence["verdicts"]:
        shown = [verdict.probes[n - 1][1] for n in claim.get("probes", [])]
        assert any(r.outcome == "failed" for r in shown), claim
    if verdict.reproducer is not None and verdict.confirmed:
        result = world.run(
            Probe(
                "check",
                tuple(Step(s.nodeid, s.seed, s.now) for s in verdict.reproducer.steps),
                verdict.reproducer.hash_seed or 0,
            )
        )
        assert result.outcome == "failed"


def test_a_record_mode_target_replays_its_journal_then_varies_in_seeded_mode() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, [("random", 8, 1e9), ("random", 9, 1e9)])})
    history.attempts = [replace(a, mode="record", has_journal=a.failed) for a in history.attempts]
    verdict = classify(world, history, "random")
    alone = [p for p, _ in verdict.probes if p.purpose == "alone"]
    assert {(s.mode, s.attempt_id) for p in alone for s in p.steps} == {("record", 1)}
    varied = [p for p, _ in verdict.probes if p.purpose == "vary seed"]
    assert {s.mode for p in varied for s in p.steps} == {"seeded"}
