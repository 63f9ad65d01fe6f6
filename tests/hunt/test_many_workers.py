"""A hunt of 1,000 fake workers: a real controller and store, every attempt stored, and
no memory kept per round (the rounds of a long hunt cost nothing once their barrier passed)."""

from __future__ import annotations

import tracemalloc
import uuid

import pytest
from helpers import one

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.controller import HuntController
from hermetic_hunt.models import Attempt, Failure, RunInfo, Settings
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
                              failure=Failure("E", "m", "t.py:1") if failed else None)  # fmt: skip
            lines.append(wire.step_line(index, [attempt], []))
        lines.append(wire.end_line("completed"))
        hunt.ingest(lines, f"gw{slot}", round_no)


def test_a_thousand_workers_hunt_stores_every_attempt_and_keeps_nothing_per_round(
    pytester: pytest.Pytester,
) -> None:
    db = pytester.path / "flakes.db"
    settings = Settings(rounds=6, budget_seconds=None, base_seed=2, order="shuffle", db_path=db)
    spec = [f"popen-{i}" for i in range(WORKERS)]
    hunt = HuntController(pytester.parseconfig(), settings, Store.open(db), WORKERS, spec)
    info = RunInfo(uuid.uuid4().hex, [], str(pytester.path), str(pytester.path), settings,
                   WORKERS, spec, {})  # fmt: skip
    hunt.run_id = runs.start_run(hunt.store, info)
    hunt.set_tests(TESTS)
    tracemalloc.start()
    try:
        for round_no in range(2):
            run_round(hunt, round_no)
        after_two = tracemalloc.get_traced_memory()[0]
        for round_no in range(2, 6):
            run_round(hunt, round_no)
        after_six = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert hunt.rounds.completed == 6 and hunt.rounds.incomplete == []
    assert one(db, "SELECT count(*) FROM attempts") == 6 * len(TESTS) == hunt.intake.stored
    assert hunt.intake.tallies.flaky == 0 and hunt.intake.tallies.failed_attempts == 6 * len(
        FAILING
    )
    # four more rounds of 2,000 attempts: the controller holds no more than it did
    assert after_six - after_two < 16 * 1024, (after_two, after_six)
