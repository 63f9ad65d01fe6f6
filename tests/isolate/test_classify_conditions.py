"""Timing conditions in phase 1: a noisy clock, a tiny switch interval, CPU stress.

The same simulated world as ``test_classify`` (a fake prober), with tests
whose outcome depends on the step's timing conditions.
"""

from __future__ import annotations

from dataclasses import replace

from test_classify import (
    BEHAVIOURS,
    History,
    World,
    boom,
    check_evidence,
    classify,
    ok,
    simulated_hunt,
)

from hermetic_hunt.findings import Finding
from hermetic_hunt.models import Attempt, Step


def _ttl(state: dict, step: Step, hs: int, world: World) -> Attempt:
    # fails when the noisy clock stretched its sleep (decided by the seed's draws)
    noisy = step.profile in ("jitter", "slow") and step.seed is not None and step.seed % 2 == 0
    return boom(step.nodeid) if noisy else ok(step.nodeid)


def _lazy(state: dict, step: Step, hs: int, world: World) -> Attempt:
    return boom(step.nodeid) if step.switch_interval is not None else ok(step.nodeid)


def _lazy_sometimes(state: dict, step: Step, hs: int, world: World) -> Attempt:
    world.counter += 1
    if step.switch_interval is not None and world.counter % 3:
        return boom(step.nodeid)
    return ok(step.nodeid)


def _lazy_busy(state: dict, step: Step, hs: int, world: World) -> Attempt:
    # a busy machine: the race shows at the interpreter's interval too, one run in two
    world.counter += 1
    if step.switch_interval is not None or world.counter % 2:
        return boom(step.nodeid)
    return ok(step.nodeid)


def _lazy_late(state: dict, step: Step, hs: int, world: World) -> Attempt:
    # A race the interpreter's interval shows only now and then: here it shows in the
    # condition's own three checks (the recorded attempt without its interval) and
    # not in the calm runs after them (no attempt to replay, no condition).
    failing = step.switch_interval is not None or step.attempt_id is not None
    return boom(step.nodeid) if failing else ok(step.nodeid)


def _ttl_busy(state: dict, step: Step, hs: int, world: World) -> Attempt:
    # fails under the noisy clock; with the exact one, one run in two (a thread it starts)
    world.counter += 1
    if step.profile in ("jitter", "slow") or world.counter % 2:
        return boom(step.nodeid)
    return ok(step.nodeid)


def _loaded(state: dict, step: Step, hs: int, world: World) -> Attempt:
    return boom(step.nodeid) if step.stress else ok(step.nodeid)


BEHAVIOURS.update(
    ttl=_ttl,
    lazy=_lazy,
    lazy_sometimes=_lazy_sometimes,
    lazy_busy=_lazy_busy,
    lazy_late=_lazy_late,
    ttl_busy=_ttl_busy,
    loaded=_loaded,
)


def with_conditions(history: History, nodeid: str, **changes: object) -> History:
    """The hunt's attempts of ``nodeid`` re-run under ``changes`` (the rest as they were)."""
    world = World()
    attempts = []
    for a in history.attempts:
        if a.nodeid == nodeid and a.position % 2 == 0:
            a = replace(a, **changes)  # type: ignore[arg-type]
            step = Step.of(a)
            result = world.execute([step], a.hash_seed or 0)[0]
            a = replace(a, outcome=result.outcome, failure=result.failure)
        attempts.append(a)
    return History(attempts)


def runs(nodeid: str, count: int) -> list[tuple[str, int, float]]:
    return [(nodeid, 2 * i + 2, 1e9 + i) for i in range(count)]


def conditioned(nodeid: str, **changes: object) -> Finding:
    """The verdict on ``nodeid`` from a simulated hunt of six runs, every other one
    under ``changes`` (a clock profile, a switch interval, CPU stress)."""
    world = World()
    history = with_conditions(
        simulated_hunt(world, {"gw0": (5, runs(nodeid, 6))}), nodeid, **changes
    )
    return classify(world, history, nodeid)


def test_a_failure_under_a_noisy_clock_that_the_exact_clock_fixes_is_time() -> None:
    verdict = conditioned("ttl", profile="jitter")
    assert verdict.kinds == ["time"]
    (claim,) = verdict.evidence["verdicts"]
    assert "under the jitter clock profile" in claim["why"]
    assert "passes twice with the exact clock, same seed and start time" in claim["why"]
    assert [p.purpose for p, _ in verdict.probes][-2:] == ["exact clock", "exact clock"]
    assert verdict.reproducer is not None
    assert [s.profile for s in verdict.reproducer.steps] == ["jitter"]  # replays by seed
    assert not any(p.purpose == "vary seed" for p, _ in verdict.probes)
    check_evidence(verdict)


def test_a_failure_under_a_tiny_switch_interval_is_concurrency() -> None:
    verdict = conditioned("lazy", switch_interval=2e-6)
    assert verdict.kinds == ["concurrency"]
    (claim,) = verdict.evidence["verdicts"]
    assert "with sys.setswitchinterval(2e-06)" in claim["why"]
    assert "passes in 3 of 3 with the interpreter's" in claim["why"]
    alone = [p for p, _ in verdict.probes if p.purpose == "alone"]
    assert {s.switch_interval for p in alone for s in p.steps} == {2e-6}
    assert verdict.reproducer is not None and verdict.reproducer.steps[0].switch_interval == 2e-6
    check_evidence(verdict)


def test_a_race_that_shows_sometimes_under_its_switch_interval_is_concurrency() -> None:
    verdict = conditioned("lazy_sometimes", switch_interval=1e-5)
    assert verdict.kinds == ["concurrency"]
    (claim,) = verdict.evidence["verdicts"]
    assert "(sys.setswitchinterval(1e-05))" in claim["why"]
    reruns = [p for p, _ in verdict.probes if p.purpose.startswith("rerun")]
    assert reruns and {s.switch_interval for p in reruns for s in p.steps} == {1e-5}


def test_a_race_that_also_shows_at_the_interpreters_interval_is_concurrency_not_the_seed() -> None:
    # Without its tiny interval it passes and fails, everything else the same:
    # varying the seed next (with no interval) would pass and blame the seed.
    verdict = conditioned("lazy_busy", switch_interval=2e-6)
    assert verdict.kinds == ["concurrency"]
    (claim,) = verdict.evidence["verdicts"]
    assert "with sys.setswitchinterval(2e-06); with the interpreter's" in claim["why"]
    assert "identical inputs, different outcomes" in claim["why"]
    assert not any(p.purpose.startswith("vary") for p, _ in verdict.probes)
    assert verdict.reproducer is not None and verdict.reproducer.steps[0].switch_interval == 2e-6
    check_evidence(verdict)


def test_before_the_seed_is_varied_without_the_condition_the_same_inputs_must_fail_every_time() -> (
    None
):
    # The interpreter's interval failed three times: not decided by the interval.
    # Varying the seed with no interval would pass; the same seed with no interval
    # passes too, so it is a race, not the seed.
    verdict = conditioned("lazy_late", switch_interval=2e-6)
    assert verdict.kinds == ["concurrency"]
    (claim,) = verdict.evidence["verdicts"]
    assert "with sys.setswitchinterval(2e-06); with no timing condition" in claim["why"]
    purposes = [p.purpose for p, _ in verdict.probes]
    assert purposes.count("default switch interval") == 3
    assert purposes.count("no timing condition") == 3
    assert not any(p.startswith("vary") for p in purposes)
    check_evidence(verdict)


def test_a_noisy_clock_failure_that_the_exact_clock_only_sometimes_fixes_is_concurrency() -> None:
    verdict = conditioned("ttl_busy", profile="slow")
    assert verdict.kinds == ["concurrency"]
    (claim,) = verdict.evidence["verdicts"]
    assert "under the slow clock profile; with the exact clock" in claim["why"]
    assert "passes in 1 of 2, not in the other 1" in claim["why"]
    check_evidence(verdict)


def test_a_calm_failure_that_passes_alone_is_retried_under_its_other_failures_conditions() -> None:
    world = World()
    history = with_conditions(
        simulated_hunt(world, {"gw0": (5, runs("lazy", 6))}), "lazy", switch_interval=3e-6
    )
    # its first failure came in a calm round (a rare real race)
    first = replace(history.attempts[1], outcome="failed", failure=history.attempts[0].failure)
    history.attempts[1] = replace(first, position=-1)
    verdict = classify(world, history, "lazy")
    assert verdict.kinds == ["concurrency"]
    purposes = [p.purpose for p, _ in verdict.probes]
    assert purposes[:6] == ["alone"] * 3 + ["alone (its conditions)"] * 3


def test_a_record_mode_failure_under_cpu_stress_only_is_time_with_its_evidence() -> None:
    world = World()
    history = simulated_hunt(world, {"gw0": (5, runs("loaded", 6))})
    history.attempts = [
        replace(a, mode="record", has_journal=True) if a.nodeid == "loaded" else a
        for a in history.attempts
    ]
    history = with_conditions(history, "loaded", stress=2)
    verdict = classify(world, history, "loaded")
    assert verdict.kinds == ["time"]
    (claim,) = verdict.evidence["verdicts"]
    assert claim["why"] == "fails under CPU stress 5/5 (2 busy processes), 0/5 calm"
    stressed = [p for p, _ in verdict.probes if p.purpose == "cpu stress"]
    calm = [p for p, _ in verdict.probes if p.purpose == "calm"]
    assert len(stressed) == len(calm) == 5
    assert {(s.mode, s.attempt_id, s.stress) for p in stressed for s in p.steps} == {
        ("record", None, 2)
    }
    assert {s.stress for p in calm for s in p.steps} == {0}
    shown = {n for n in claim["probes"]}
    assert all(verdict.probes[n - 1][0].purpose in ("cpu stress", "calm") for n in shown)
    check_evidence(verdict)
