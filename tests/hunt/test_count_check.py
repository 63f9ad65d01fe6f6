"""The per-round count check: a round whose step lines do not add up makes the run incomplete.

In-process: a real controller and store, fed the lines of fake workers.
"""

from __future__ import annotations

import uuid

import pytest
from helpers import one

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.controller import HuntController
from hermetic_hunt.models import Attempt, RunInfo, Settings
from hermetic_hunt.store import Store

TESTS = [f"t.py::test_{i}" for i in range(4)]


@pytest.fixture
def hunt(pytester: pytest.Pytester) -> HuntController:
    db = pytester.path / "flakes.db"
    store = Store.open(db)
    settings = Settings(rounds=1, budget_seconds=None, base_seed=5, order="shuffle", db_path=db)
    spec = ["popen", "popen"]
    controller = HuntController(pytester.parseconfig(), settings, store, 2, spec)
    controller.run_id = store.start_run(
        RunInfo(uuid.uuid4().hex, [], str(pytester.path), str(pytester.path), settings, 2, spec, {})
    )
    controller.set_tests(TESTS)
    return controller


def lines(hunt: HuntController, slot: int, *, drop: int = 0, extra: int = 0,
          status: str = "completed") -> list[bytes]:  # fmt: skip
    plan = hunt._plans[0]
    job = hunt.job(plan, slot)
    steps = [
        wire.step_line(i, [Attempt(s.nodeid, "passed", position=i)], [])
        for i, s in enumerate(job.steps)
    ]
    steps = steps[: len(steps) - drop] + steps[:extra]
    return [*steps, wire.end_line(status)]


def feed(hunt: HuntController, **changes: int) -> None:
    hunt.plan(0, 2)
    hunt.ingest(lines(hunt, 0, **changes), "gw0", 0)
    hunt.ingest(lines(hunt, 1), "gw1", 0)


def test_a_round_that_adds_up_is_complete(hunt: HuntController) -> None:
    feed(hunt)
    assert hunt.incomplete == [] and hunt.incomplete_text() == ""
    assert hunt.rounds_completed == 1


def test_a_lost_step_makes_the_run_incomplete_and_says_which_round(hunt: HuntController) -> None:
    feed(hunt, drop=1)
    assert hunt.incomplete == [(0, 4, 3)]
    assert hunt.incomplete_text() == "round 0 ran 3 of 4 planned steps"
    assert one(hunt.store.path, "SELECT incomplete FROM runs") == hunt.incomplete_text()


def test_an_extra_step_is_as_wrong_as_a_lost_one(hunt: HuntController) -> None:
    feed(hunt, extra=1)
    assert hunt.incomplete == [(0, 4, 5)]


def test_a_round_cut_short_is_not_counted(hunt: HuntController) -> None:
    hunt.plan(0, 2)
    hunt.ingest(lines(hunt, 0, drop=1, status="stopped"), "gw0", 0)
    hunt.ingest(lines(hunt, 1), "gw1", 0)
    assert hunt.incomplete == []


def test_lines_that_are_no_json_object_are_rejected_and_counted(hunt: HuntController) -> None:
    hunt.plan(0, 2)
    hunt.ingest([b"not json\n", b"[1]\n", *lines(hunt, 0)], "gw0", 0)
    hunt.ingest(lines(hunt, 1), "gw1", 0)
    assert hunt.incomplete == [] and hunt.rejected == 2
    assert "2 line(s) written to a round's channel by another process" in hunt.rejected_text()
