"""Blast radius: one probe after a polluter finds the victims the rounds never showed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing

import pytest
from click.testing import CliRunner
from helpers import Rows

from hermetic_hunt.cli import main
from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate.blast import Polluters, victims_of
from hermetic_hunt.models import FOUND_BY, Attempt, Failure, Step

SUITE = """
STATE = []


def test_polluter():
    STATE.append("dirty")


def test_victim_one():
    assert not STATE, "one"


def test_stable():
    pass


def test_victim_two():
    assert len(STATE) == 0, "two"


def test_always_fails():
    assert False, "broken"
"""
POLLUTER = "test_p.py::test_polluter"
ONE = "test_p.py::test_victim_one"
TWO = "test_p.py::test_victim_two"


def _hunted(pytester: pytest.Pytester) -> None:
    """A hunt's database that saw test_victim_one fail after the polluter, never test_victim_two."""
    rows = Rows(pytester.path / "flakes.db")
    run = rows.run(rounds=4)
    rows.attempts(run, POLLUTER, "PPPP")
    text = (pytester.path / "test_p.py").read_text().splitlines()
    line = 1 + text.index('    assert not STATE, "one"')
    rows.attempts(run, ONE, "PFPF",
                  failure=Failure("AssertionError", "one", f"test_p.py:{line}", "E one"))  # fmt: skip
    rows.attempts(run, "test_p.py::test_stable", "PPPP")
    rows.attempts(run, TWO, "PPPP")
    rows.store.conn.commit()
    rows.close()


def _flakes(pytester: pytest.Pytester) -> dict[str, dict]:
    with closing(sqlite3.connect(pytester.path / "flakes.db")) as conn:
        conn.row_factory = sqlite3.Row
        found = conn.execute(
            "SELECT t.nodeid, fl.* FROM flakes fl JOIN tests t ON t.id = fl.test_id"
        ).fetchall()
    return {row["nodeid"]: dict(row) for row in found}


@pytest.mark.slow
def test_two_victims_of_one_polluter_are_found_from_a_hunt_that_saw_one(pytester, monkeypatch):
    pytester.makepyfile(test_p=SUITE)
    _hunted(pytester)
    monkeypatch.chdir(pytester.path)
    result = CliRunner().invoke(main, ["isolate"])
    assert result.exit_code == 0, result.output
    flakes = _flakes(pytester)
    assert set(flakes) == {ONE, TWO}
    two = flakes[TWO]
    assert json.loads(two["kinds"]) == ["victim"]
    assert json.loads(two["polluters"]) == [[POLLUTER]]
    assert two["confirmed"] == 1 and two["status"] == "isolated"
    assert json.loads(two["evidence"])["found_by"] == FOUND_BY
    assert [s["nodeid"] for s in json.loads(two["reproducer"])["steps"]] == [POLLUTER, TWO]
    flake_id = two["flake_id"]
    assert f"  {flake_id} {TWO}  victim · fails under shuffling or xdist" in result.output
    assert (
        f"found by the polluter probe of {flakes[ONE]['flake_id']} (not observed in rounds"
        in result.output
    )
    report = CliRunner().invoke(main, ["report"])
    assert "found by the polluter probe (not observed in rounds)" in report.output
    assert f"polluters: {POLLUTER}" in report.output.split(TWO, 1)[1]
    # Its own replay: the polluter, then it.
    replay = pytester.runpytest_subprocess(
        "-p", "no:randomly", f"--hermetic-replay-db=flakes.db::{flake_id}"
    )
    assert replay.ret == pytest.ExitCode.TESTS_FAILED
    replay.stdout.fnmatch_lines(
        [f"reproduced {flake_id}: {TWO} failed with the recorded signature*"]
    )


class _Fake:
    """Tests fail after ``polluter`` when they are in ``victims`` (``flaky``: at random)."""

    def __init__(self, victims: set[str], alone_fails: set[str] = frozenset()) -> None:
        self.victims = victims
        self.alone_fails = alone_fails
        self.probes: list[Probe] = []

    def run(self, probe: Probe) -> ProbeResult:
        self.probes.append(probe)
        polluted = False
        out = []
        for step in probe.steps:
            bad = (polluted and step.nodeid in self.victims) or step.nodeid in self.alone_fails
            failure = Failure("AssertionError", "x", f"{step.nodeid}:1", "") if bad else None
            out.append(Attempt(nodeid=step.nodeid, outcome="failed" if bad else "passed",
                               failure=failure))  # fmt: skip
            polluted = polluted or step.nodeid == "p"
        return ProbeResult("completed", tuple(out))

    def run_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        return [self.run(p) for p in probes]

    def collected(self, hash_seed: int | None) -> frozenset[str] | None:
        return None


def test_the_polluter_probe_claims_only_tests_that_pass_alone_and_fail_after_it():
    fake = _Fake({"a", "c", "known"}, alone_fails={"broken"})
    polluters = Polluters((Step("p", 1, 0.0),), 0, "F1", 1)
    found = victims_of(polluters, ["p", "a", "b", "known", "broken", "c"], {"known"},
                       lambda n: Step(n, 2, 0.0), fake)  # fmt: skip
    assert [f.nodeid for f in found] == ["a", "c"]
    assert found[0].polluters == [["p"]] and found[0].confirmed is True
    assert [s.nodeid for s in found[0].reproducer.steps] == ["p", "a"]
    # one sweep, then per candidate: alone once, the reproducer three times
    assert [p.purpose for p in fake.probes][:1] == [FOUND_BY]
    assert len(fake.probes) == 1 + 4 + 1 + 4
    assert [s.nodeid for s in fake.probes[0].steps] == ["p", "a", "b", "broken", "c"]
