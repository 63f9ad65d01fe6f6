"""Tests for hermetic_hunt.isolate.shared: causes that cross workers, in process.

A fake prober plays the processes: each probe is a fresh process with a disk
of its own (what a probe writes is gone after it, as the runner tidies the
checkout), and two probes run together share one disk for as long as they
run -- where a folder two workers use at once breaks one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate import shared
from hermetic_hunt.isolate.case import ClassifySettings
from hermetic_hunt.isolate.classifier import Classifier
from hermetic_hunt.models import REPEATED_RUN, Attempt, Failure, Step

ROOT = "/ci/project"
FOLDER = f"{ROOT}/tests/test_dir"
SETUP = "tests/setup.py:27"


def failed(nodeid: str, where: str = SETUP, exc: str = "FileExistsError", **fields) -> Attempt:
    return Attempt(nodeid, "failed", failure=Failure(exc, "boom", where), **fields)


def ran(nodeid: str, worker: str, started: float, duration: float = 1.0, *, outcome: str = "passed",
        writes: Sequence[str] = (FOLDER,), round_no: int = 1, where: str = SETUP,
        exc: str = "FileExistsError", repeat: int = 0, attempt_id: int = 0) -> Attempt:  # fmt: skip
    failure = Failure(exc, "boom", where) if outcome == "failed" else None
    return Attempt(nodeid, outcome, worker=worker, started=started, duration=duration,
                   writes=list(writes), round_no=round_no, failure=failure, repeat=repeat,
                   attempt_id=attempt_id, run_id=1, seed=attempt_id, now=1e9)  # fmt: skip


# -- crossings and resources, from the hunt's record -----------------------------------


def test_a_failure_crosses_another_workers_attempt_that_ran_beside_it_over_a_shared_path():
    mine = ran("t.py::a", "gw0", 10.0, outcome="failed", writes=[f"{FOLDER}/a.txt"])
    beside = ran("t.py::b", "gw1", 10.5, writes=[FOLDER])
    before = ran("t.py::c", "gw1", 5.0, writes=[FOLDER])  # ended before it started
    elsewhere = ran("t.py::d", "gw1", 10.2, writes=[f"{ROOT}/other"])
    same_worker = ran("t.py::e", "gw0", 10.1, writes=[FOLDER])
    found = shared.crossings(mine, [mine, beside, before, elsewhere, same_worker])
    assert [(c.partner.nodeid, c.path) for c in found] == [("t.py::b", FOLDER)]


def test_a_path_the_failure_names_counts_as_touched():
    named = replace(
        failed("t.py::a", worker="gw0", started=10.0, duration=1.0),
        failure=Failure("FileNotFoundError", f"No such file: '{FOLDER}/x.txt'", SETUP),
    )
    assert shared.touched(named) == [f"{FOLDER}/x.txt"]
    beside = ran("t.py::b", "gw1", 10.2, writes=[FOLDER])
    assert [c.path for c in shared.crossings(named, [beside])] == [FOLDER]


def test_paths_inside_one_another_are_one_resource_the_outermost():
    round_attempts = [
        ran("t.py::a", "gw0", 0.0, outcome="failed", writes=[f"{FOLDER}/f.txt"]),
        ran("t.py::b", "gw1", 0.1, writes=[f"{FOLDER}/f.txt"]),
        ran("t.py::c", "gw0", 2.0, outcome="failed", writes=[FOLDER]),
        ran("t.py::d", "gw1", 2.1, writes=[f"{FOLDER}/g.txt"]),
        ran("t.py::e", "gw0", 4.0, outcome="failed", writes=[f"{ROOT}/codes.sqlite"]),
        ran("t.py::f", "gw1", 4.1, writes=[f"{ROOT}/codes.sqlite"]),
    ]
    failing = {a.nodeid: [a] for a in round_attempts if a.failed}
    found = shared.resources(failing, lambda attempt: round_attempts)
    assert [(r.path, sorted(r.failures())) for r in found] == [
        (FOLDER, ["t.py::a", "t.py::c"]),
        (f"{ROOT}/codes.sqlite", ["t.py::e"]),
    ]
    assert found[0].tests() == ["t.py::a", "t.py::c", "t.py::b", "t.py::d"]
    assert found[0].partners("t.py::c") == {"t.py::d": 1}


def test_the_sample_takes_one_test_of_each_way_of_failing_first_then_the_partners():
    round_attempts = [
        ran("t.py::a", "gw0", 0.0, outcome="failed"),
        ran("t.py::b", "gw0", 1.0, outcome="failed"),
        ran("t.py::c", "gw0", 2.0, outcome="failed", where="tests/test_c.py:9", exc="OSError"),
        *(ran(f"t.py::p{i}", "gw1", i * 0.3) for i in range(10)),
    ]
    failing = {a.nodeid: [a] for a in round_attempts if a.failed}
    (resource,) = shared.resources(failing, lambda attempt: round_attempts)
    chosen = shared.sample(resource, lambda nodeid: 0.1)
    assert chosen[:2] in (["t.py::a", "t.py::c"], ["t.py::b", "t.py::c"])
    assert len(chosen) == shared.SAMPLE
    assert len(shared.sample(resource, lambda nodeid: 2.0)) == 2  # five seconds a side at most


# -- the probe -------------------------------------------------------------------------


class Disk:
    """A fake prober: a user of the folder fails when another process uses it at once
    (the second side's first user); a ``writer`` leaves rows a ``reader`` then sees
    in the same process (a file that outlives nothing: the probe's disk is fresh)."""

    def __init__(self, *, collide: bool = True) -> None:
        self.collide = collide
        self.probes: list[Probe] = []

    def _run(self, probe: Probe, beside: Probe | None = None) -> ProbeResult:
        self.probes.append(probe)
        rows = False
        out = []
        hit = False
        for step in probe.steps:
            name = step.nodeid
            if beside is not None and self.collide and "user" in name and not hit:
                hit = True
                out.append(failed(name))
            elif name.endswith("writer"):
                rows = True
                out.append(Attempt(name, "passed"))
            elif name.endswith("reader") and rows:
                out.append(failed(name, where="tests/test_codes.py:12", exc="AssertionError"))
            else:
                out.append(Attempt(name, "passed"))
        return ProbeResult("completed", tuple(out), 0.01)

    def run(self, probe: Probe) -> ProbeResult:
        return self._run(probe)

    def run_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        return [self._run(p) for p in probes]

    def run_together(self, probes: Sequence[Probe], after: str = "") -> list[ProbeResult]:
        first, second = probes
        return [self._run(first), self._run(second, beside=first)]

    def collected(self, hash_seed: int | None) -> frozenset[str]:
        return frozenset({"t.py::user_a", "t.py::user_b", "t.py::user_c", "t.py::writer",
                          "t.py::reader", "t.py::bystander"})  # fmt: skip


class Record:
    """A fake History over a list of attempts (one run, several workers)."""

    def __init__(self, attempts: list[Attempt], default: bool = False) -> None:
        self.attempts = attempts

    def preceding(self, attempt: Attempt) -> list[Attempt]:
        return [a for a in self.attempts if a.worker == attempt.worker
                and a.round_no == attempt.round_no and (a.started or 0) < (attempt.started or 0)]  # fmt: skip

    def tests(self) -> list[str]:
        return list(dict.fromkeys(a.nodeid for a in self.attempts))

    def representative(self, nodeid: str) -> Attempt | None:
        return next((a for a in self.attempts if a.nodeid == nodeid), None)

    def leaks(self) -> dict:
        return {}

    def round_attempts(self, attempt: Attempt) -> list[Attempt]:
        return [a for a in self.attempts if a.round_no == attempt.round_no]

    def in_default_round(self, nodeid: str) -> Attempt | None:
        return None

    def writers(self) -> frozenset[str]:
        return frozenset(a.nodeid for a in self.attempts if a.writes)


def step_for(nodeid: str) -> Step:
    return Step(nodeid, 1, 1e9)


def hunt_of_users() -> list[Attempt]:
    """Two workers, three tests that use one folder; user_a failed twice beside user_b."""
    return [
        ran("t.py::user_a", "gw0", 0.0, outcome="failed", attempt_id=1),
        ran("t.py::user_b", "gw1", 0.2, attempt_id=2),
        ran("t.py::user_a", "gw0", 10.0, outcome="failed", round_no=2, attempt_id=3),
        ran("t.py::user_b", "gw1", 10.3, round_no=2, attempt_id=4),
        ran("t.py::user_c", "gw1", 20.0, round_no=3, attempt_id=5),
        ran("t.py::user_a", "gw0", 20.1, round_no=3, attempt_id=6),
    ]


def test_a_resource_two_processes_break_when_they_use_it_at_once_is_confirmed():
    attempts = hunt_of_users()
    record = Record(attempts)
    mine = [a for a in attempts if a.nodeid == "t.py::user_a"]
    (resource,) = shared.resources({"t.py::user_a": mine}, record.round_attempts)
    case = Classifier("t.py::user_a", mine, record, Disk(), ClassifySettings())
    verdict = shared.confirm(case, resource, ["t.py::user_a", "t.py::user_b"], step_for, 7,
                             "shared tests/test_dir")  # fmt: skip
    assert verdict is not None
    assert ("t.py::user_a", "FileExistsError", SETUP) in verdict.shown
    assert verdict.locations == {SETUP}
    assert verdict.failed_runs == shared.TOGETHER_RUNS
    # each side alone, then both at once, stored as the lead's probes
    assert [p.purpose for p, _ in case.finding.probes][:2] == [
        "shared tests/test_dir: one side alone"
    ] * 2
    assert verdict.probes == tuple(range(1, 3 + shared.TOGETHER_RUNS * 2))
    # and what it explains: user_a's two failures beside user_b (not its own: never solo)
    explained = shared.explained("t.py::user_a", mine, resource, verdict, record.round_attempts)
    assert [a.attempt_id for a in explained] == [1, 3]


def test_a_resource_that_two_processes_do_not_break_is_not_shared():
    attempts = hunt_of_users()
    record = Record(attempts)
    mine = [a for a in attempts if a.nodeid == "t.py::user_a"]
    (resource,) = shared.resources({"t.py::user_a": mine}, record.round_attempts)
    case = Classifier("t.py::user_a", mine, record, Disk(collide=False), ClassifySettings())
    verdict = shared.confirm(case, resource, ["t.py::user_a", "t.py::user_b"], step_for, 7, "x")
    assert verdict is None


def test_a_way_of_failing_seen_while_no_other_worker_ran_is_the_tests_own():
    attempts = hunt_of_users()
    # round 0 (the default round): user_a failed the same way, alone in the hunt
    solo = ran("t.py::user_a", "gw0", -10.0, outcome="failed", round_no=0, attempt_id=9)
    record = Record([*attempts, solo])
    mine = [a for a in record.attempts if a.nodeid == "t.py::user_a"]
    (resource,) = shared.resources({"t.py::user_a": mine}, record.round_attempts)
    case = Classifier("t.py::user_a", mine, record, Disk(), ClassifySettings())
    verdict = shared.confirm(case, resource, ["t.py::user_a", "t.py::user_b"], step_for, 7, "x")
    assert verdict is not None
    assert shared.explained("t.py::user_a", mine, resource, verdict, record.round_attempts) == []


# -- a case that starts with what a shared resource explained ------------------------


def crossed_case(extra: Sequence[Attempt] = ()) -> tuple[Classifier, Record]:
    attempts = [*hunt_of_users(), *extra]
    record = Record(attempts)
    mine = [a for a in attempts if a.nodeid == "t.py::user_a"]
    (resource,) = shared.resources({"t.py::user_a": mine}, record.round_attempts)
    probe_case = Classifier("t.py::user_a", mine, record, Disk(), ClassifySettings())
    verdict = shared.confirm(probe_case, resource, ["t.py::user_a", "t.py::user_b"], step_for, 7,
                             "tests/test_dir")  # fmt: skip
    assert verdict is not None
    explained = shared.explained("t.py::user_a", mine, resource, verdict, record.round_attempts)
    crossed = shared.Crossed(resource, verdict, explained, "tests/test_dir",
                             {"resource": "tests/test_dir", "tests": 1}, probe_case.finding.probes,
                             "")  # fmt: skip
    case = Classifier("t.py::user_a", mine, record, Disk(), ClassifySettings())
    crossed.apply(case)
    return case, record


def test_a_test_whose_failures_a_shared_resource_explains_is_a_collision_with_its_evidence():
    case, _ = crossed_case()
    assert case.target is None and [a.attempt_id for a in case.explained] == [1, 3]
    case.environment()
    case.order()
    verdict = case.result()
    assert verdict.kinds == ["collision"]
    assert verdict.status == "isolated"
    assert verdict.evidence["shared"]["resource"] == "tests/test_dir"
    assert verdict.evidence["collision"]["partner"] == "t.py::user_b"
    assert verdict.evidence["exposure"] == "order"
    assert verdict.evidence["failed"] == 2
    repro = verdict.reproducer
    assert repro is not None and repro.resource == "tests/test_dir" and verdict.confirmed
    assert [s.nodeid for s in repro.steps] == ["t.py::user_a"]
    assert [s.nodeid for s in repro.together] == ["t.py::user_b"]
    claim = next(v for v in verdict.evidence["verdicts"] if v.get("kind") == "collision")
    assert claim["probes"] and "two processes at once" in claim["why"]


def test_a_not_idempotent_test_hidden_among_collisions_is_still_found():
    first = ran("t.py::user_a", "gw0", 30.0, round_no=4, repeat=1, attempt_id=20)
    second = ran("t.py::user_a", "gw0", 31.0, outcome="failed", round_no=4,
                 repeat=REPEATED_RUN, attempt_id=21, where="t.py:40", exc="ValueError")  # fmt: skip

    class Twice(Disk):
        def _run(self, probe: Probe, beside: Probe | None = None) -> ProbeResult:
            result = super()._run(probe, beside)
            runs = [s for s in probe.steps if s.nodeid == "t.py::user_a"]
            if beside is None and len(runs) == 2:  # its second run in one process
                steps = (result.steps[0], failed("t.py::user_a", "t.py:40", "ValueError"))
                return ProbeResult("completed", steps, 0.01)
            return result

    case, _ = crossed_case([first, second])
    case.prober = Twice()
    case.environment()
    case.order()
    verdict = case.result()
    assert verdict.kinds == ["self-polluting", "collision"]
    repro = verdict.reproducer
    assert repro is not None and not repro.together
    assert [s.seed for s in repro.steps] == [21, 21]  # its twice run, as the hunt ran it


# -- a victim whose polluter ran on another worker ------------------------------------


def test_a_victim_whose_polluter_ran_on_another_worker_is_found_and_the_file_named():
    codes = f"{ROOT}/tests/codes.sqlite"
    attempts = [
        ran("t.py::writer", "gw1", 0.0, writes=[codes], attempt_id=1),
        ran("t.py::bystander", "gw1", 1.5, writes=[], attempt_id=2),
        ran("t.py::reader", "gw0", 3.0, outcome="failed", writes=[codes],
            where="tests/test_codes.py:12", exc="AssertionError", attempt_id=3),
        ran("t.py::reader", "gw0", 10.0, round_no=2, writes=[codes], attempt_id=4),
    ]  # fmt: skip
    record = Record(attempts)
    mine = [a for a in attempts if a.nodeid == "t.py::reader"]
    case = Classifier("t.py::reader", mine, record, Disk(), ClassifySettings())
    case.environment()
    case.order()
    verdict = case.result()
    assert verdict.kinds == ["victim"]
    assert verdict.polluters == [["t.py::writer"]]
    assert verdict.evidence["crossed_workers"] == [
        {"polluter": "t.py::writer", "worker": "gw1", "path": codes}
    ]
    assert any("ran on another worker" in note for note in verdict.notes)
    assert [s.nodeid for s in verdict.reproducer.steps] == ["t.py::writer", "t.py::reader"]


@pytest.mark.parametrize("where", ["/elsewhere/x", f"{FOLDER}/deep/inside"])
def test_message_paths_are_absolute_paths_of_a_failure(where: str) -> None:
    assert shared.message_paths(f"[Errno 2] No such file or directory: '{where}'") == [where]
    assert shared.message_paths("assert 0 > 0") == []
