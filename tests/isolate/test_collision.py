"""Tests for hermetic_hunt.isolate.collision: who ran at the same time, and what they shared.

In process: the pure attribution (overlap, shared path, ranking) and the
classifier's collision phase over the fake prober of test_classify (whose
probe pairs let the two tests see each other).
"""

from __future__ import annotations

from dataclasses import replace

from test_classify import BEHAVIOURS, History, World, check_evidence, classify, ok

from hermetic_hunt.isolate.collision import overlap, shared_path, suspects
from hermetic_hunt.models import Attempt, Failure, Step

ROOT = "/r"
FOLDER = "/r/tests/_archive"
EXISTS = Failure("FileExistsError", f"[Errno 17] File exists: '{FOLDER}'", "tests/t.py:20")


def attempt(
    nodeid: str,
    worker: str,
    started: float,
    duration: float,
    *writes: str,
    failure: Failure | None = None,
    round_no: int = 1,
    attempt_id: int = 0,
) -> Attempt:
    return Attempt(
        nodeid, "failed" if failure else "passed", run_id=1, round_no=round_no, worker=worker,
        started=started, duration=duration, writes=list(writes), failure=failure,
        attempt_id=attempt_id or None, seed=1, now=1e9, hash_seed=5,
    )  # fmt: skip


# -- attribution (pure) -------------------------------------------------------------


def test_a_path_is_shared_when_equal_or_inside_the_other():
    assert shared_path([FOLDER], [f"{FOLDER}/orders.json", FOLDER]) == FOLDER
    assert shared_path([f"{FOLDER}/a.json"], [FOLDER]) == FOLDER
    assert shared_path([f"{FOLDER}/a.json"], [f"{FOLDER}/b.json"]) is None
    assert shared_path(["/r/tests/_archive2"], [FOLDER]) is None  # a prefix is not a folder


def test_overlap_is_the_real_time_both_ran():
    one = attempt("a", "gw0", 100.0, 0.5)
    assert round(overlap(one, attempt("b", "gw1", 100.2, 0.01)), 6) == 0.01
    assert round(overlap(one, attempt("b", "gw1", 100.4, 1.0)), 6) == 0.1
    assert overlap(one, attempt("b", "gw1", 100.6, 1.0)) == 0.0
    assert overlap(one, replace_started(attempt("b", "gw1", 0, 1.0))) == 0.0


def replace_started(a: Attempt) -> Attempt:
    return replace(a, started=None)


def test_suspects_are_overlapping_attempts_of_other_workers_that_touched_the_same_path():
    target = attempt("backup", "gw1", 100.1, 0.001, FOLDER, failure=EXISTS)
    others = [
        attempt("logger", "gw0", 100.0, 1.0, "/r/shop.log"),  # overlaps, shares nothing
        attempt("archive", "gw0", 100.05, 0.5, FOLDER, f"{FOLDER}/orders.json"),
        attempt("backup", "gw0", 100.0, 1.0, FOLDER),  # the same test is no partner
        attempt("cleaner", "gw1", 100.0, 1.0, FOLDER),  # its own worker: not at the same time
    ]
    found = suspects(target, others)
    assert [(s.partner.nodeid, s.resource) for s in found] == [("archive", FOLDER)]


def test_the_path_the_failure_names_ranks_first():
    target = attempt("backup", "gw1", 100.0, 0.1, FOLDER, "/r/tests/log.txt", failure=EXISTS)
    others = [
        attempt("logger", "gw0", 99.0, 5.0, "/r/tests/log.txt"),  # overlaps longer
        attempt("archive", "gw0", 100.05, 0.01, FOLDER),
    ]
    assert [s.partner.nodeid for s in suspects(target, others)] == ["archive", "logger"]


# -- the collision phase (fake prober) ----------------------------------------------------


def _holder(state: dict, step: Step, hs: int, world: World) -> Attempt:
    return ok(step.nodeid)


def _second(state: dict, step: Step, hs: int, world: World) -> Attempt:
    """Fails only while ``archive`` runs at the same time in another process."""
    if "archive" in world.together:
        return Attempt(step.nodeid, "failed", failure=EXISTS, writes=[FOLDER])
    return Attempt(step.nodeid, "passed", writes=[FOLDER])


BEHAVIOURS["archive"] = _holder
BEHAVIOURS["backup"] = _second
BEHAVIOURS["lonely"] = _holder


def _hunt(partner: str) -> History:
    return History(
        [
            attempt("backup", "gw1", 100.1, 0.001, FOLDER, failure=EXISTS, attempt_id=1),
            attempt(partner, "gw0", 100.0, 0.5, FOLDER, f"{FOLDER}/o.json", attempt_id=2),
            attempt("backup", "gw0", 200.0, 0.5, FOLDER, round_no=2, attempt_id=3),
            attempt(partner, "gw0", 201.0, 0.5, FOLDER, round_no=2, attempt_id=4),
        ]
    )


def test_a_test_failing_beside_another_workers_test_is_a_collision_with_its_partner():
    world = World()
    verdict = classify(world, _hunt("archive"), "backup", rootdir=ROOT)
    check_evidence(verdict)
    assert verdict.kinds == ["collision"]
    assert verdict.evidence["collision"]["partner"] == "archive"
    assert verdict.evidence["collision"]["resource"] == "tests/_archive"
    reproducer = verdict.reproducer
    assert reproducer is not None and verdict.confirmed is True
    assert [s.nodeid for s in reproducer.steps] == ["backup"]
    assert [s.nodeid for s in reproducer.together] == ["archive"]
    assert reproducer.resource == "tests/_archive"
    pairs = [p for p, _ in verdict.probes if p.purpose.startswith("collision: with")]
    assert len(pairs) == 4  # 2 runs of the pair (both failed), one probe per process
    assert any(p.purpose == "collision: archive alone" for p, _ in verdict.probes)


def test_a_suspect_that_does_not_break_it_at_the_same_time_is_no_partner():
    world = World()
    verdict = classify(world, _hunt("lonely"), "backup", rootdir=ROOT)
    assert "collision" not in verdict.kinds
    assert verdict.evidence["collision_suspects"][0]["partner"] == "lonely"


GONE = Failure("FileNotFoundError", f"[Errno 2] No such file: '{FOLDER}/o.json'", "tests/t.py:31")


def _otherwise(state: dict, step: Step, hs: int, world: World) -> Attempt:
    """Beside ``archive`` it fails another way than it failed in the hunt (EXISTS)."""
    if "archive" in world.together:
        return Attempt(step.nodeid, "failed", failure=GONE, writes=[FOLDER])
    return Attempt(step.nodeid, "passed", writes=[FOLDER])


BEHAVIOURS["otherwise"] = _otherwise


def test_a_pair_that_breaks_it_another_way_explains_none_of_its_failures():
    # A polluted victim that also shares a folder: it collides (in its folder step),
    # but what broke it in the hunt came first -- the collision is not its cause.
    hunt = History(
        [
            attempt("otherwise", "gw1", 100.1, 0.001, FOLDER, failure=EXISTS, attempt_id=1),
            attempt("archive", "gw0", 100.0, 0.5, FOLDER, f"{FOLDER}/o.json", attempt_id=2),
            attempt("otherwise", "gw0", 200.0, 0.5, FOLDER, round_no=2, attempt_id=3),
        ]
    )
    verdict = classify(World(), hunt, "otherwise", rootdir=ROOT)
    assert "collision" not in verdict.kinds
    assert verdict.evidence["collision_suspects"][0]["partner"] == "archive"
    pairs = [p for p, _ in verdict.probes if p.purpose.startswith("collision: with")]
    assert len(pairs) == 2 * 4  # four runs: fewer than two left that could show it
