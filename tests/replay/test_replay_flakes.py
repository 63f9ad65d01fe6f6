"""Replaying flakes: reproducers (polluters, repeats, hash seeds, journals) run in order.

The flakes here are rows inserted into the database of a real hunt, the way
isolation stores them (``models.Reproducer.to_json``), so every kind of
reproducer is covered whatever isolation finds on a given suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import clean_env
from test_replay import (
    RECORDED,
    copy_db,
    hunt_output,
    message,
    output,
    query,
    replays,
    run_pytest,
)
from test_replay_errors import insert_flake
from test_replay_nodeids import EXAMPLE_CONFTEST

from hermetic_hunt.models import Reproducer, Step

#: Every test here reads a hunt of a module-scoped fixture (a pytest process).
#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = [pytest.mark.process, pytest.mark.slow]

SUITE = """
import random
import socket

STATE = []
RUNS = []


def test_pollute():
    STATE.append("dirty")


def test_clean():
    STATE.clear()


def test_victim():
    assert STATE == [], "polluted"


def test_once():
    RUNS.append(1)
    assert len(RUNS) == 1, "ran twice"


def test_lucky():
    assert random.random() < 0.5, "unlucky draw"


def test_hash_parity():
    assert hash("hermetic-hunt") % 2 == 0, "odd hash"


def test_health():
    try:
        socket.create_connection(("metrics.example.invalid", 80), timeout=1)
    except OSError:
        pass
"""


def node(name: str) -> str:
    return f"test_suite.py::{name}"


def line_of(text: str, source: str = SUITE) -> str:
    """``test_suite.py:N`` of the line of ``source`` holding ``text``."""
    number = next(i for i, line in enumerate(source.splitlines(), start=1) if text in line)
    return f"test_suite.py:{number}"


def attempt(db: Path, name: str, outcome: str | None) -> tuple[int, int, float]:
    """(id, seed, now) of the first ``outcome`` (None: any) attempt of test ``name``."""
    rows = query(
        db,
        "SELECT a.id, a.seed, a.now FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ? AND coalesce(?, a.outcome) = a.outcome ORDER BY a.id LIMIT 1",
        node(name),
        outcome,
    )
    assert rows, (name, outcome)
    return rows[0]


def step(db: Path, name: str, outcome: str | None = "passed", **changes: Any) -> Step:
    attempt_id, seed, now = attempt(db, name, outcome)
    values: dict[str, Any] = dict(nodeid=node(name), seed=seed, now=now, attempt_id=attempt_id)
    values.update(changes)
    return Step(**values)


def add_flake(
    db: Path, flake_id: str, steps: list[Step], *, exc_type: str = "", location: str = "",
    message: str = "", hash_seed: int | None = None, kinds: tuple[str, ...] = ("victim",),
) -> None:  # fmt: skip
    repro = Reproducer(tuple(steps), hash_seed, exc_type, location, message, run_id=1)
    insert_flake(db, flake_id, steps[-1].nodeid, repro.to_json(), kinds=json.dumps(kinds))


def failing_hash_seed() -> int:
    """A PYTHONHASHSEED under which test_hash_parity fails (found, not assumed)."""
    for seed in range(1, 64):
        out = subprocess.run(
            [sys.executable, "-c", "print(hash('hermetic-hunt') % 2)"],
            env=clean_env(PYTHONHASHSEED=str(seed)), capture_output=True, text=True, check=True,
        )  # fmt: skip
        if out.stdout.strip() == "1":
            return seed
    raise AssertionError("no odd hash among 63 hash seeds")


@pytest.fixture(scope="module")
def hunted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("flaky")
    (where / "conftest.py").write_text(EXAMPLE_CONFTEST.read_text())
    (where / "test_suite.py").write_text(SUITE)
    hunt_output(where)
    return where


@pytest.fixture
def db(hunted: Path, tmp_path: Path) -> Path:
    """A copy of the hunt's database in another directory."""
    return copy_db(hunted / "flakes.db", tmp_path / "ci-artifacts")


def replay(hunted: Path, db: Path, ref: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pytest(hunted, f"--hermetic-replay-db={db}::{ref}", *args)


POLLUTED = f"AssertionError polluted at {line_of('assert STATE == []')}"


def test_a_victim_flake_replays_its_polluter_then_the_victim(hunted, db):
    add_flake(db, "F1", [step(db, "test_pollute"), step(db, "test_victim", "failed")],
              exc_type="AssertionError", location=line_of("assert STATE == []"),
              message="polluted")  # fmt: skip
    result = replay(hunted, db, "F1", "-v")
    text = output(result)
    assert result.returncode == 1, text
    assert f"F1 from {db}: 2 tests in order (1 before {node('test_victim')})" in text
    ran = [line.split(" ")[0] for line in text.splitlines() if line.startswith("test_suite.py::")]
    assert ran == [node("test_pollute"), node("test_victim")]
    line = f"reproduced F1: {node('test_victim')} failed with the recorded signature ({POLLUTED})"
    assert line in text.splitlines()
    (flake_row,) = query(db, "SELECT id FROM flakes WHERE flake_id = 'F1'")[0]
    attempt_id = attempt(db, "test_victim", "failed")[0]
    assert replays(db) == [("F1", flake_row, attempt_id, "reproduced", line)]


def test_the_recorded_order_is_honoured_a_cleaner_in_between_makes_it_pass(hunted, db):
    steps = [step(db, "test_pollute"), step(db, "test_clean"), step(db, "test_victim", "failed")]
    add_flake(db, "F1", steps, exc_type="AssertionError", location=line_of("assert STATE == []"))
    result = replay(hunted, db, "F1")
    assert result.returncode == 0, output(result)
    assert "did not reproduce F1 in " in output(result)  # every run of its N passed
    assert "; the last run: passed" in output(result)


def test_a_nodeid_replays_its_flake(hunted, db):
    add_flake(db, "F2", [step(db, "test_pollute"), step(db, "test_victim", "failed")],
              exc_type="AssertionError", location=line_of("assert STATE == []"))  # fmt: skip
    result = replay(hunted, db, node("test_victim"))
    assert result.returncode == 1, output(result)
    assert f"reproduced F2: {node('test_victim')}" in output(result)
    assert replays(db)[0][0] == node("test_victim")


def test_a_self_polluting_flake_runs_its_test_twice_in_one_process(hunted, db):
    once = step(db, "test_once")
    add_flake(db, "F3", [once, step(db, "test_once", "failed")], exc_type="AssertionError",
              location=line_of("assert len(RUNS) == 1"), kinds=("self-polluting",))  # fmt: skip
    result = replay(hunted, db, "F3")
    assert result.returncode == 1, output(result)
    assert "1 failed, 1 passed" in output(result)
    assert f"reproduced F3: {node('test_once')} failed with the recorded signature" in output(
        result
    )


def test_a_hash_order_flake_restarts_under_its_hash_seed(hunted, db):
    seed = failing_hash_seed()
    add_flake(db, "F4", [step(db, "test_hash_parity", None)], hash_seed=seed, kinds=("hash-order",),
              exc_type="AssertionError", location=line_of('hash("hermetic-hunt")'))  # fmt: skip
    result = replay(hunted, db, "F4")
    text = output(result)
    assert result.returncode == 1, text
    assert f"F4 needs PYTHONHASHSEED={seed} (this process has random): restarting pytest" in text
    assert f"restarted under PYTHONHASHSEED={seed}" in text
    assert f"reproduced F4: {node('test_hash_parity')} failed with the recorded signature" in text
    # already under it: no restart
    again = run_pytest(
        hunted, f"--hermetic-replay-db={db}::F4", env=clean_env(PYTHONHASHSEED=str(seed))
    )
    assert "restart" not in output(again) and "reproduced F4" in output(again)


def test_a_network_flake_is_reproduced_by_the_blocked_call_and_fails_like_the_hunt(hunted, db):
    # The suite's conftest refuses any real connection: if the guard missed
    # the call, the test would swallow that refusal and no violation would
    # be recorded, so "reproduced" proves the guard stopped it.
    add_flake(db, "F5", [step(db, "test_health")], kinds=("network",))
    result = replay(hunted, db, "F5")
    # the test passed, but its blocked call fails the session, as in the hunt
    # (seeds/hermetic-tests-policy: an unmarked test that opens a socket fails)
    assert result.returncode == 1, output(result)
    assert "1 passed" in output(result)
    assert (
        f"reproduced F5: {node('test_health')} made the recorded blocked network call ("
        in output(result)
    )
    assert "metrics.example.invalid" in output(result)
    assert (
        f"network violation: {node('test_health')} made a blocked network call (create_connection"
        in output(result)
    )


def test_x_stops_before_the_flaky_test_and_the_replay_says_it_did_not_run(hunted, db):
    steps = [step(db, "test_lucky", "failed"), step(db, "test_victim", "failed")]
    add_flake(db, "F6", steps, exc_type="AssertionError", location=line_of("assert STATE == []"))
    result = replay(hunted, db, "F6", "-x")
    assert result.returncode == 1, output(result)
    assert f"did not reproduce F6 ({node('test_victim')} did not run: stopped early" in output(
        result
    )
    assert [row[3] for row in replays(db)] == ["not-reproduced"]


def test_a_step_before_the_last_that_fails_is_noted(hunted, db):
    steps = [step(db, "test_lucky", "failed"), step(db, "test_pollute"),
             step(db, "test_victim", "failed")]  # fmt: skip
    add_flake(db, "F7", steps, exc_type="AssertionError", location=line_of("assert STATE == []"))
    result = replay(hunted, db, "F7")
    assert f"reproduced F7: {node('test_victim')}" in output(result)
    assert f"  note: {node('test_lucky')} (run before it) failed too" in output(result)


def test_a_reproducer_test_that_is_gone_is_named(hunted, db, tmp_path):
    add_flake(db, "F8", [step(db, "test_pollute"), step(db, "test_victim", "failed")],
              exc_type="AssertionError", location=line_of("assert STATE == []"))  # fmt: skip
    project = tmp_path / "renamed"
    project.mkdir()
    (project / "conftest.py").write_text(EXAMPLE_CONFTEST.read_text())
    (project / "test_suite.py").write_text(SUITE.replace("def test_pollute", "def test_dirty"))
    result = run_pytest(project, f"--hermetic-replay-db={db}::F8")
    assert result.returncode == 4, output(result)
    assert result.stderr.strip() == (
        f"ERROR: --hermetic-replay-db: F8 needs '{node('test_pollute')}', which is not collected "
        f"under rootdir {project} (renamed or deleted? run from the directory the hunt ran in, "
        "or hunt again with --hermetic-hunt)"
    )


def test_last_failed_does_not_change_what_a_replay_runs(hunted, db, tmp_path):
    add_flake(db, "F1", [step(db, "test_pollute"), step(db, "test_victim", "failed")],
              exc_type="AssertionError", location=line_of("assert STATE == []"))  # fmt: skip
    cache = f"cache_dir={tmp_path / 'cache'}"
    first = run_pytest(hunted, "-o", cache, f"--hermetic-replay-db={db}::F1", cache=True)
    again = run_pytest(hunted, "-o", cache, "--lf", f"--hermetic-replay-db={db}::F1", cache=True)
    for result in (first, again):
        assert result.returncode == 1, output(result)
        assert f"reproduced F1: {node('test_victim')}" in output(result)
    assert "--lf ignored: the reproducer decides what runs" in output(again)
    assert [row[3] for row in replays(db)] == ["reproduced", "reproduced"]


def test_a_record_mode_flake_replays_the_journal_of_its_failing_step(tmp_path):
    where = tmp_path / "recorded"
    where.mkdir()
    (where / "conftest.py").write_text(EXAMPLE_CONFTEST.read_text())
    (where / "test_suite.py").write_text(SUITE + RECORDED.replace("COUNT", "1"))
    hunt_output(where, "--hermetic-hunt-mode=record")
    db = copy_db(where / "flakes.db", tmp_path / "elsewhere")
    # as isolation stores it: every step in record mode, journals where kept
    steps = [step(db, "test_pollute", mode="record"),
             step(db, "test_token", "failed", mode="record")]  # fmt: skip
    add_flake(db, "F1", steps, exc_type="AssertionError", kinds=("random",),
              location=line_of('assert token == ""', SUITE + RECORDED))  # fmt: skip
    result = run_pytest(where, f"--hermetic-replay-db={db}::F1")
    text = output(result)
    assert result.returncode == 1, text
    assert f"journal of A{steps[-1].attempt_id}" in text
    assert f"reproduced F1: {node('test_token')} failed with the recorded signature" in text
    assert f"AssertionError: {message(db, steps[-1].attempt_id)}" in text
    assert f"{node('test_pollute')} ran in record mode without a stored journal" in text
