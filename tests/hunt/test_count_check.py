"""The per-round count check: a round whose step lines do not add up makes the run incomplete.

In-process: a real controller and store, fed the lines of fake workers.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from helpers import one

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.controller import HuntController
from hermetic_hunt.hunt.schedule import RoundPlan
from hermetic_hunt.models import Attempt, RunInfo, Settings
from hermetic_hunt.store import Store, runs

TESTS = [f"t.py::test_{i}" for i in range(4)]


@pytest.fixture
def controller(pytester: pytest.Pytester) -> HuntController:
    db = pytester.path / "flakes.db"
    store = Store.open(db)
    settings = Settings(rounds=1, budget_seconds=None, base_seed=5, order="shuffle", db_path=db)
    spec = ["popen", "popen"]
    controller = HuntController(pytester.parseconfig(), settings, store, 2, spec)
    controller.run_id = runs.start_run(
        store,
        RunInfo(
            uuid.uuid4().hex, [], str(pytester.path), str(pytester.path), settings, 2, spec, {}
        ),
    )
    controller.set_tests(TESTS)
    return controller


def lines(plan: RoundPlan, controller: HuntController, slot: int, *, drop: int = 0,
          extra: int = 0, status: str = "completed") -> list[bytes]:  # fmt: skip
    job = controller.rounds.job(plan, slot)
    steps = [
        wire.step_line(i, [Attempt(s.nodeid, "passed", position=i)], [])
        for i, s in enumerate(job.steps)
    ]
    steps = steps[: len(steps) - drop] + steps[:extra]
    return [*steps, wire.end_line(status)]


def feed(controller: HuntController, **changes: Any) -> None:
    """Round 1 (a shuffled one: two slices of two tests), as two workers send it."""
    plan = controller.rounds.plan(1, 2)
    controller.ingest(lines(plan, controller, 0, **changes), "gw0", 1)
    controller.ingest(lines(plan, controller, 1), "gw1", 1)


def test_a_round_that_adds_up_is_complete(controller: HuntController) -> None:
    feed(controller)
    assert controller.rounds.incomplete == [] and controller.rounds.incomplete_text() == ""
    assert controller.rounds.completed == 1


def test_a_lost_step_makes_the_run_incomplete_and_says_which_round(
    controller: HuntController,
) -> None:
    feed(controller, drop=1)
    assert controller.rounds.incomplete == [(1, 4, 3)]
    assert controller.rounds.incomplete_text() == "round 1 ran 3 of 4 planned steps"
    assert (
        one(controller.store.path, "SELECT incomplete FROM runs")
        == controller.rounds.incomplete_text()
    )


def test_an_extra_step_is_as_wrong_as_a_lost_one(controller: HuntController) -> None:
    feed(controller, extra=1)
    assert controller.rounds.incomplete == [(1, 4, 5)]


def test_a_round_cut_short_is_not_counted(controller: HuntController) -> None:
    feed(controller, drop=1, status="stopped")
    assert controller.rounds.incomplete == []


def test_lines_that_are_no_json_object_are_rejected_and_counted(controller: HuntController) -> None:
    plan = controller.rounds.plan(1, 2)
    controller.ingest([b"not json\n", b"[1]\n", *lines(plan, controller, 0)], "gw0", 1)
    controller.ingest(lines(plan, controller, 1), "gw1", 1)
    assert controller.rounds.incomplete == [] and controller.intake.rejected == 2
    assert (
        "2 line(s) written to a round's channel by another process"
        in controller.intake.rejected_text()
    )
