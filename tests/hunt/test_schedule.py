"""The schedule is a pure, balanced function of (seed, tests, workers, round)."""

from __future__ import annotations

import pytest

from hermetic_hunt.hunt.schedule import (
    AUTO_CYCLE,
    grouped,
    plan_round,
    round_order,
    shuffled,
    split,
    strategy_for,
)
from hermetic_hunt.models import Shard

TESTS = [
    f"tests/test_{m}.py::{c}test_{f}[{p}]"
    for m in "abc"
    for c in ("", "TestK::")
    for f in "xyz"
    for p in (1, 2)
]


def test_a_round_runs_every_test_exactly_once():
    for round_no in range(6):
        plan = plan_round(42, round_no, TESTS, 3, "auto")
        assert sorted(plan.order) == list(range(len(TESTS)))
        flat = [i for piece in plan.slices for i in piece]
        assert sorted(flat) == list(range(len(TESTS)))


def test_slices_are_balanced_within_one_test():
    for workers in (1, 2, 3, 5, 7):
        sizes = [len(s) for s in split(list(range(len(TESTS))), workers)]
        assert max(sizes) - min(sizes) <= 1
        assert sum(sizes) == len(TESTS)


def test_the_same_seed_gives_the_same_plan_and_another_seed_another():
    assert plan_round(7, 3, TESTS, 2, "shuffle") == plan_round(7, 3, TESTS, 2, "shuffle")
    assert (
        plan_round(7, 3, TESTS, 2, "shuffle").order != plan_round(8, 3, TESTS, 2, "shuffle").order
    )


def test_rounds_differ_in_order():
    orders = {tuple(round_order(1, r, TESTS, "shuffle")) for r in range(10)}
    assert len(orders) == 10


def test_auto_cycles_shuffle_reversed_grouped_with_one_twice_round():
    assert [strategy_for("auto", r) for r in range(7)] == [
        "default", "reversed", "grouped", "twice", "reversed", "grouped", "shuffle",
    ]  # fmt: skip
    assert [strategy_for("auto", r) for r in range(30)].count("twice") == 1
    assert set(AUTO_CYCLE) == {"shuffle", "reversed", "grouped"}


def test_a_twice_round_is_a_shuffle_whose_plan_says_twice():
    plan = plan_round(5, 3, TESTS, 2, "auto")
    assert plan.twice and plan.strategy == "twice"
    assert list(plan.order) == round_order(5, 3, TESTS, "shuffle")


def test_a_reversed_round_is_the_exact_reverse_of_the_round_before():
    first = round_order(5, 0, TESTS, "auto")
    assert round_order(5, 1, TESTS, "auto") == first[::-1]


def test_reversed_order_alternates_collection_order_and_its_reverse():
    collection = list(range(len(TESTS)))
    assert [round_order(5, r, TESTS, "reversed") for r in range(4)] == [
        collection,
        collection[::-1],
        collection,
        collection[::-1],
    ]


@pytest.mark.parametrize("order", ["auto", "shuffle", "grouped", "reversed", "twice"])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_round_0_of_every_hunt_is_a_plain_run_in_collection_order_in_one_process(
    order: str, workers: int
) -> None:
    plan = plan_round(5, 0, TESTS, workers, order)
    assert plan.strategy == "default" and not plan.twice
    assert plan.order == tuple(range(len(TESTS)))
    assert plan.slices[0] == plan.order and all(not part for part in plan.slices[1:])
    assert plan.condition == "exact"
    # only round 0: of the other rounds none is a default round
    assert all(plan_round(5, r, TESTS, workers, order).strategy != "default" for r in range(1, 9))


def test_only_the_first_shard_runs_the_default_round():
    assert [Shard(k, 3).global_round(0) for k in (1, 2, 3)] == [0, 1, 2]


def test_a_suite_with_fewer_than_two_tests_per_worker_runs_its_odd_rounds_on_one_worker():
    small = TESTS[:3]
    packed = [plan_round(5, r, small, 2, "auto") for r in range(1, 9, 2)]
    assert all(p.packed and sorted(p.order) == [0, 1, 2] for p in packed)
    # each worker gets packed rounds in turn; the even rounds spread the tests
    assert {next(w for w, part in enumerate(p.slices) if part) for p in packed} == {0, 1}
    spread = [plan_round(5, r, small, 2, "auto") for r in range(2, 10, 2)]
    assert all(not p.packed for p in spread)
    # a suite with two tests per worker is always spread (but for round 0)
    assert not any(plan_round(5, r, TESTS[:4], 2, "auto").packed for r in range(1, 9))


def test_a_grouped_round_keeps_modules_and_classes_together():
    order = [TESTS[i] for i in grouped(3, 0, TESTS)]
    modules = [nodeid.split("::")[0] for nodeid in order]
    # each module appears as one contiguous run
    runs = [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
    assert len(runs) == len(set(modules))
    classes = [nodeid.rsplit("::", 1)[0] for nodeid in order]
    class_runs = [c for i, c in enumerate(classes) if i == 0 or classes[i - 1] != c]
    assert len(class_runs) == len(set(classes))


def test_a_shuffle_keeps_the_relative_order_of_any_subset():
    subset = TESTS[::3]
    full = [TESTS[i] for i in shuffled(11, 2, TESTS)]
    assert [t for t in full if t in subset] == [subset[i] for i in shuffled(11, 2, subset)]


def test_shards_run_distinct_rounds():
    rounds = {s: [Shard(s, 3).global_round(local) for local in range(4)] for s in (1, 2, 3)}
    flat = [r for rs in rounds.values() for r in rs]
    assert len(flat) == len(set(flat)) == 12
    assert rounds[1] == [0, 3, 6, 9]


def test_workers_get_a_different_part_of_the_order_each_round():
    firsts = {plan_round(9, r, TESTS, 2, "grouped").slices[0][0] for r in range(6)}
    assert len(firsts) > 1


def test_zero_workers_is_refused():
    with pytest.raises(ValueError, match="workers"):
        plan_round(1, 0, TESTS, 0, "auto")
