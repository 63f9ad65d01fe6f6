"""A hunt of 1,000 fake workers: a real controller and store, every attempt stored, and
nothing kept per round once its barrier passed (bench_controller.py prints the RSS)."""

from __future__ import annotations

import uuid

import pytest
from helpers import one

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.controller import HuntController
from hermetic_hunt.models import Attempt, Failure, Leak, RunInfo, Settings
from hermetic_hunt.store import Store, runs

WORKERS = 1000
TESTS = [f"t{i // 20}.py::test_{i}" for i in range(2 * WORKERS)]
FAILING = set(TESTS[::97])


def run_round(hunt: HuntController, round_no: int) -> None:
    """Every worker sends its slice of ``round_no``: one batch of lines, its end last."""
    plan = hunt.rounds.plan(round_no, WORKERS)
    for slot, indices in enumerate(plan.slices):
        if not indices:
            continue
        job = hunt.rounds.job(plan, slot)
        lines = []
        for index, step in enumerate(job.steps):
            failed = step.nodeid in FAILING
            attempt = Attempt(step.nodeid, "failed" if failed else "passed", round_no=round_no,
                              position=index, seed=index, now=1.7e9, started=1.7e9,
                              failure=Failure("E", "m", "t.py:1") if failed else None,
                              leaks=(Leak("env", "X", "added"),) if index == 1 else ())  # fmt: skip
            lines.append(wire.step_line(index, [attempt], []))
        lines.append(wire.end_line("completed"))
        hunt.ingest(lines, f"gw{slot}", round_no)


def kept(hunt: HuntController) -> list[object]:
    """What the controller holds for rounds: pending attempts and leaks, plans, counts."""
    rounds = hunt.rounds
    return [hunt.intake.pending, hunt.intake.leaks, rounds.plans, rounds._slices_left,
            rounds._planned, rounds._received, rounds._cut_short]  # fmt: skip


def test_a_thousand_workers_hunt_stores_every_attempt_and_keeps_nothing_per_round(
    pytester: pytest.Pytester,
) -> None:
    db = pytester.path / "flakes.db"
    settings = Settings(rounds=4, budget_seconds=None, base_seed=2, order="shuffle", db_path=db)
    spec = [f"popen-{i}" for i in range(WORKERS)]
    hunt = HuntController(pytester.parseconfig(), settings, Store.open(db), WORKERS, spec)
    info = RunInfo(uuid.uuid4().hex, [], str(pytester.path), str(pytester.path), settings,
                   WORKERS, spec, {})  # fmt: skip
    hunt.run_id = runs.start_run(hunt.store, info)
    hunt.set_tests(TESTS)
    for round_no in range(4):
        run_round(hunt, round_no)
        assert hunt.rounds.completed == round_no + 1
        assert all(not held for held in kept(hunt)), kept(hunt)
    assert hunt.rounds.incomplete == [] and hunt.intake.rejected == 0
    assert one(db, "SELECT count(*) FROM attempts") == 4 * len(TESTS) == hunt.intake.stored
    tallies = hunt.intake.tallies
    assert tallies.flaky == 0 and tallies.failed_attempts == 4 * len(FAILING)
    # every worker's second test left a variable set: a leak of that attempt, in each round
    assert one(db, "SELECT count(*) FROM leaks WHERE attempt_id IS NOT NULL") == 3 * WORKERS + 1
    # a database without attempts: their indexes wait for the hunt's end
    assert hunt.store.indexes_deferred
