"""The hunt's xdist scheduler with fake nodes, as pytest-xdist tests its own schedulers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from hermetic_hunt.engine import wire
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.hunt.rounds import make_job
from hermetic_hunt.hunt.schedule import RoundPlan, plan_round
from hermetic_hunt.hunt.xdist import COMMAND, HuntScheduling
from hermetic_hunt.models import Attempt, Settings

TESTS = [f"t.py::test_{i}" for i in range(7)]


class FakeGateway:
    def __init__(self, gid: str) -> None:
        self.id = gid


class FakeNode:
    """A worker as the scheduler sees it: it records the commands it is sent."""

    def __init__(self, gid: str) -> None:
        self.gateway = FakeGateway(gid)
        self.sent: list[dict[str, Any]] = []

    def sendcommand(self, name: str, **kwargs: Any) -> None:
        assert name == COMMAND
        self.sent.append(kwargs)

    def jobs(self) -> list[Job]:
        """The jobs it was sent, read with the job's own codec."""
        return [Job.from_json(command["job"]) for command in self.sent]


def nodeids_of(job: Job) -> list[str]:
    return [step.nodeid for step in job.steps]

    def shutdown(self) -> None:
        raise AssertionError("xdist's DSession shuts nodes down, not the scheduler")


class FakeHunt:
    """The part of HuntController the scheduler uses."""

    def __init__(self, rounds: int = 3, order: str = "shuffle", first: int = 1) -> None:
        # ``first``: the first round (round 0 is the default round: gw0 runs it alone)
        self.first = first
        self.settings = Settings(rounds=rounds, budget_seconds=None, base_seed=9, order=order)  # type: ignore[arg-type]
        self.tests: list[str] = []
        self.error: str | None = None
        self.ingested: list[tuple[str, int, list[bytes]]] = []
        self.crashes: list[Attempt] = []
        self.began = False
        self.uncollectable = False
        self.rounds = self

    def numbers(self) -> Iterator[int]:
        yield from range(self.first, self.first + (self.settings.rounds or 0))

    def set_tests(self, nodeids: Sequence[str]) -> None:
        self.tests = list(nodeids)

    def begin(self) -> None:
        self.began = True

    def plan(self, round_no: int, workers: int) -> RoundPlan:
        return plan_round(9, round_no, self.tests, workers, self.settings.order)

    def job(self, plan: RoundPlan, slot: int) -> Any:
        names = [self.tests[i] for i in plan.slices[slot]]
        return make_job(self.settings, plan.round_no, slot, names, plan.twice)

    def ingest(self, lines: Sequence[bytes], worker: str, round_no: int) -> None:
        self.ingested.append((worker, round_no, list(lines)))

    def crashed(self, worker: str, round_no: int, attempt: Attempt) -> None:
        self.crashes.append(attempt)

    def stopping(self) -> bool:
        return False

    def collection_stops(self) -> bool:
        return self.uncollectable


def finish(sched: HuntScheduling, node: FakeNode, *, steps: int | None = None) -> None:
    """The node reports its current job's steps and its end, in one batch."""
    part = sched.running[node]
    assert part is not None
    count = len(part.job.steps) if steps is None else steps
    lines = [wire.step_line(i, [], []) for i in range(count)] + [wire.end_line("completed")]
    sched.mark_test_complete(node, b"".join(lines), 0.0)


def started(hunt: FakeHunt, nodes: list[FakeNode], collections: list[list[str]] | None = None):
    sched = HuntScheduling(pytest.Config.__new__(pytest.Config), hunt, len(nodes))  # type: ignore[arg-type]
    for node in nodes:
        sched.add_node(node)
    for node, collection in zip(nodes, collections or [TESTS] * len(nodes), strict=True):
        sched.add_node_collection(node, collection)
    assert sched.collection_is_completed
    sched.schedule()
    return sched


def test_a_collection_error_ends_the_schedule_before_anything_is_sent() -> None:
    hunt = FakeHunt(rounds=3)
    hunt.uncollectable = True
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = started(hunt, [gw0, gw1])
    assert gw0.sent == gw1.sent == []
    assert not hunt.began and sched.tests_finished


def test_each_slot_gets_its_share_of_one_round_at_a_time() -> None:
    hunt = FakeHunt(rounds=3)
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = started(hunt, [gw1, gw0])  # ready in another order: slots follow gw numbers
    assert hunt.began and hunt.tests == TESTS
    first = plan_round(9, 1, TESTS, 2, "shuffle")
    assert [nodeids_of(job) for job in gw0.jobs()] == [[TESTS[i] for i in first.slices[0]]]
    assert [nodeids_of(job) for job in gw1.jobs()] == [[TESTS[i] for i in first.slices[1]]]
    assert sched.has_pending and not sched.tests_finished
    finish(sched, gw0)
    assert len(gw0.sent) == 1  # the next round waits for every worker (the barrier)
    finish(sched, gw1)
    assert [j.round_no for j in gw0.jobs()] == [1, 2] == [j.round_no for j in gw1.jobs()]
    for _ in range(2):
        finish(sched, gw0)
        finish(sched, gw1)
    assert sched.tests_finished and not sched.has_pending
    assert {(w, r) for w, r, _ in hunt.ingested} == {
        (w, r) for w in ("gw0", "gw1") for r in range(1, 4)
    }


def test_the_default_round_runs_on_one_worker_and_ends_when_it_is_done() -> None:
    hunt = FakeHunt(rounds=2, first=0)
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = started(hunt, [gw0, gw1])
    assert [nodeids_of(job) for job in gw0.jobs()] == [TESTS]
    assert gw1.sent == []  # nothing to do in round 0
    finish(sched, gw0)
    assert [j.round_no for j in gw0.jobs()] == [0, 1] and [j.round_no for j in gw1.jobs()] == [1]


def test_the_same_tests_collected_in_another_order_are_sent_by_nodeid_in_the_planned_order() -> (
    None
):
    hunt = FakeHunt(rounds=1)
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    started(hunt, [gw0, gw1], [TESTS, TESTS[::-1]])
    plan = plan_round(9, 1, TESTS, 2, "shuffle")
    assert nodeids_of(gw0.jobs()[0]) == [TESTS[i] for i in plan.slices[0]]
    assert nodeids_of(gw1.jobs()[0]) == [TESTS[i] for i in plan.slices[1]]


def test_the_test_list_is_slot_zeros_collection_order_whichever_worker_collected_first() -> None:
    hunt = FakeHunt(rounds=1, first=0)
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = HuntScheduling(pytest.Config.__new__(pytest.Config), hunt, 2)  # type: ignore[arg-type]
    sched.add_node(gw0)
    sched.add_node(gw1)
    sched.add_node_collection(gw1, TESTS[::-1])  # (another hash seed, another order)
    sched.add_node_collection(gw0, TESTS)
    sched.schedule()
    assert hunt.tests == TESTS
    assert [nodeids_of(job) for job in gw0.jobs()] == [TESTS] and gw1.sent == []


def test_truly_different_collections_stop_the_hunt_with_one_line_naming_the_cause() -> None:
    hunt = FakeHunt(rounds=5)
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = started(hunt, [gw0, gw1], [TESTS, [*TESTS[:-1], "t.py::test_other"]])
    assert sched.tests_finished and not gw0.sent and not gw1.sent
    assert hunt.error is not None and "\n" not in hunt.error
    assert "PYTHONHASHSEED" in hunt.error and "test_" in hunt.error


def test_a_dead_worker_costs_its_current_step_and_its_replacement_runs_the_rest() -> None:
    hunt = FakeHunt(rounds=2, first=2)  # round 2: gw0 has four of the seven tests
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = started(hunt, [gw0, gw1])
    part = sched.running[gw0]
    assert part is not None and len(part.job.steps) >= 4
    planned = nodeids_of(part.job)
    # two steps reported, then the worker process dies in the third
    sched.mark_test_complete(gw0, b"".join(wire.step_line(i, [], []) for i in range(2)), 0.0)
    crashed = sched.remove_node(gw0)
    assert crashed == planned[2]
    assert [a.nodeid for a in hunt.crashes] == [planned[2]]
    assert hunt.crashes[0].outcome == "crashed" and hunt.crashes[0].position == 2
    gw2 = FakeNode("gw2")
    sched.add_node(gw2)
    assert sched.node2slot[gw2] == 0  # the slot whose work is waiting
    sched.add_node_collection(gw2, TESTS)
    rest = gw2.jobs()[0]
    assert rest.round_no == 2 and rest.first_position == 3
    assert nodeids_of(rest) == planned[3:]
    finish(sched, gw2)
    finish(sched, gw1)
    assert {j.round_no for j in gw2.jobs()} == {2, 3}  # the hunt goes on


def test_a_twice_round_sends_every_test_twice_in_a_row_with_its_repeat_numbers() -> None:
    hunt = FakeHunt(rounds=3, order="auto")
    gw0, gw1 = FakeNode("gw0"), FakeNode("gw1")
    sched = started(hunt, [gw0, gw1])
    for _ in range(2):
        finish(sched, gw0)
        finish(sched, gw1)
    twice = gw0.jobs()[2]
    assert twice.round_no == 3
    tests, repeats = nodeids_of(twice), list(twice.repeats)
    assert tests[0::2] == tests[1::2] and repeats == [1, 2] * (len(tests) // 2)
