"""Replaying attempts of real hunts: ``pytest --hermetic-replay-db=PATH::A123``.

Every replay here runs in a fresh process, usually from a copy of the
database in another directory, the way a developer replays what CI found.
The helpers at the top are shared by the other ``test_replay_*`` modules.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from helpers import clean_env

#: Every test here reads a hunt of a module-scoped fixture (a pytest process).
pytestmark = pytest.mark.process

SUITE = """
import datetime
import random

STATE = []


def test_pollute():
    STATE.append("dirty")


def test_victim():
    assert STATE == [], "polluted"


def test_lucky():
    assert random.random() < 0.5, "unlucky draw"


def test_month_end():
    today = datetime.date.today()
    today.replace(day=today.day + 1)


def test_hash_parity():
    assert hash("hermetic-hunt") % 2 == 0, "odd hash"


def test_stable():
    pass
"""
NODE = "test_suite.py::{}"


def run_pytest(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    cache: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in a fresh process (pytest-randomly off)."""
    plugins = ["-p", "no:randomly"] + ([] if cache else ["-p", "no:cacheprovider"])
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, *args],
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
        check=False,
    )


def hunt_output(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Hunt in ``cwd`` (database: ``cwd/flakes.db``); returns the hunt's output."""
    result = run_pytest(
        cwd,
        "--hermetic-hunt=12",
        "--hermetic-seed=5",
        "--hermetic-hunt-isolate=off",
        *args,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stdout


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(sql, params).fetchall()


def attempt_of(db: Path, test: str, outcome: str = "failed") -> int:
    """The first attempt of ``test`` with ``outcome``."""
    rows = query(
        db,
        "SELECT a.id FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ? AND a.outcome = ? ORDER BY a.id LIMIT 1",
        NODE.format(test) if "::" not in test else test,
        outcome,
    )
    assert rows, f"no {outcome} attempt of {test}"
    return int(rows[0][0])


def signature(db: Path, attempt_id: int) -> str:
    exc_type, message, location = query(
        db, "SELECT exc_type, message, location FROM failures WHERE attempt_id = ?", attempt_id
    )[0]
    return f"{exc_type} {message} at {location}"


def copy_db(db: Path, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    target = where / "copy.db"
    shutil.copy(db, target)
    return target


def replays(db: Path) -> list[tuple[Any, ...]]:
    return query(
        db, "SELECT target, flake_id, attempt_id, outcome, detail FROM replays ORDER BY id"
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded ``-n 0`` hunt of SUITE (its directory; flakes.db inside)."""
    where = tmp_path_factory.mktemp("seeded")
    (where / "test_suite.py").write_text(SUITE)
    hunt_output(where)
    return where


@pytest.fixture
def suite(tmp_path: Path, seeded: Path) -> Path:
    """A private copy of the hunted suite (without its database)."""
    target = tmp_path / "project"
    target.mkdir()
    shutil.copy(seeded / "test_suite.py", target)
    return target


# -- attempts of a seeded hunt ---------------------------------------------------


@pytest.mark.parametrize("test", ["test_lucky", "test_month_end"])
def test_a_failing_attempt_fails_again_from_a_copy_of_the_database_elsewhere(
    seeded, suite, tmp_path, test
):
    attempt_id = attempt_of(seeded / "flakes.db", test)
    db = copy_db(seeded / "flakes.db", tmp_path / "downloads" / "ci artifact")
    result = run_pytest(suite, f"--hermetic-replay-db={db}::A{attempt_id}")
    text = output(result)
    assert result.returncode == 1, text
    line = (
        f"reproduced A{attempt_id}: {NODE.format(test)} failed with the recorded signature "
        f"({signature(db, attempt_id)})"
    )
    assert line in text.splitlines()
    assert "1 failed, 5 deselected" in text
    assert replays(db) == [(f"A{attempt_id}", None, attempt_id, "reproduced", line)]
    assert replays(seeded / "flakes.db") == []


def test_a_passing_attempt_passes_again_and_says_so(seeded, suite, tmp_path):
    attempt_id = attempt_of(seeded / "flakes.db", "test_lucky", "passed")
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(suite, f"--hermetic-replay-db={db}::A{attempt_id}")
    assert result.returncode == 0, output(result)
    assert f"reproduced A{attempt_id}: {NODE.format('test_lucky')} passed as recorded" in output(
        result
    )


def test_an_order_dependent_failure_does_not_come_back_alone_and_the_replay_says_so(
    seeded, suite, tmp_path
):
    attempt_id = attempt_of(seeded / "flakes.db", "test_victim")
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(suite, f"--hermetic-replay-db={db}::A{attempt_id}")
    assert result.returncode == 0, output(result)
    assert f"did not reproduce A{attempt_id} (passed)" in output(result)
    assert [row[3] for row in replays(db)] == ["not-reproduced"]


def test_a_different_failure_is_called_failed_differently(seeded, suite, tmp_path):
    attempt_id = attempt_of(seeded / "flakes.db", "test_lucky")
    source = suite / "test_suite.py"
    source.write_text(
        source.read_text().replace(
            'assert random.random() < 0.5, "unlucky draw"', 'raise ValueError("changed")'
        )
    )
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(suite, f"--hermetic-replay-db={db}::A{attempt_id}")
    assert result.returncode == 1, output(result)
    recorded = signature(db, attempt_id)
    line = (
        f"failed differently: A{attempt_id} recorded {recorded}, the replay of "
        f"{NODE.format('test_lucky')} got ValueError changed at test_suite.py:"
    )
    assert line in output(result)
    assert [row[3] for row in replays(db)] == ["failed-differently"]


def test_a_replay_is_an_ordinary_session_for_verbose_output_tracebacks_and_x(
    seeded, suite, tmp_path
):
    attempt_id = attempt_of(seeded / "flakes.db", "test_lucky")
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(
        suite, f"--hermetic-replay-db={db}::A{attempt_id}", "-vv", "--tb=long", "-x", "-s"
    )
    text = output(result)
    assert result.returncode == 1, text
    assert f"{NODE.format('test_lucky')} FAILED" in text
    assert "def test_lucky():" in text  # the long traceback shows the source
    assert f"reproduced A{attempt_id}" in text


def test_pdb_stops_at_the_replayed_failure(seeded, suite, tmp_path):
    attempt_id = attempt_of(seeded / "flakes.db", "test_lucky")
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(
        suite, f"--hermetic-replay-db={db}::A{attempt_id}", "--pdb", stdin="p 6 * 7\nc\n"
    )
    text = output(result)
    assert "(Pdb)" in text and "42" in text, text
    assert "AssertionError: unlucky draw" in text
    assert f"reproduced A{attempt_id}" in text


def test_workers_asked_for_by_n_are_ignored_a_replay_runs_in_one_process(seeded, suite, tmp_path):
    attempt_id = attempt_of(seeded / "flakes.db", "test_lucky")
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(suite, "-n", "2", f"--hermetic-replay-db={db}::A{attempt_id}")
    assert result.returncode == 1, output(result)
    assert "created:" not in output(result)
    assert "hermetic-hunt replay: -n/--dist ignored: the reproducer decides what runs" in output(
        result
    )
    assert f"reproduced A{attempt_id}" in output(result)


def test_the_header_says_what_is_replayed_and_warnings_come_at_the_end(seeded, suite, tmp_path):
    attempt_id = attempt_of(seeded / "flakes.db", "test_lucky")
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    environment = json.loads(query(db, "SELECT environment FROM runs")[0][0])
    environment.update(python="2.7.18", tz="Pacific/Apia")
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE runs SET environment = ?", (json.dumps(environment),))
    result = run_pytest(suite, f"--hermetic-replay-db={db}::A{attempt_id}")
    text = output(result)
    seed = query(db, "SELECT seed FROM attempts WHERE id = ?", attempt_id)[0][0]
    assert (
        f"hermetic-hunt replay: A{attempt_id} from {db}: {NODE.format('test_lucky')} · "
        f"mode seeded · seed {seed} · now "
    ) in text
    warnings = text.split("this replay may be less than faithful:", 1)[1]
    assert "  - Python differs: recorded '2.7.18'" in warnings
    assert "  - TZ differs: recorded 'Pacific/Apia'" in warnings
    assert "  - the recording's PYTHONHASHSEED is unknown" in warnings


def test_a_nodeid_without_a_flake_replays_its_newest_failing_attempt(seeded, suite, tmp_path):
    newest = query(
        seeded / "flakes.db",
        "SELECT max(a.id) FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ? AND a.outcome = 'failed'",
        NODE.format("test_lucky"),
    )[0][0]
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    result = run_pytest(suite, f"--hermetic-replay-db={db}::{NODE.format('test_lucky')}")
    assert result.returncode == 1, output(result)
    assert (
        f"{NODE.format('test_lucky')} has no flake in the database yet: replaying its newest "
        f"failing attempt, A{newest}"
    ) in output(result)
    assert f"reproduced A{newest}" in output(result)
    assert replays(db)[0][:4] == (NODE.format("test_lucky"), None, newest, "reproduced")


# -- record mode, xdist and hash seeds -------------------------------------------


#: Record mode lets real time and entropy through: these tests fail in every
#: attempt (deterministic), with the values they drew in the failure message.
RECORDED = """
import os
import random
import time


def test_token():
    token = f"{os.urandom(4).hex()} {random.random():.9f} {time.time():.6f}"
    assert token == "", token


def test_timed():
    stamps = [time.time() for _ in range(COUNT)]
    assert stamps == [], stamps[0]
"""


def message(db: Path, attempt_id: int) -> str:
    return str(query(db, "SELECT message FROM failures WHERE attempt_id = ?", attempt_id)[0][0])


@pytest.mark.slow
def test_a_record_mode_attempt_replays_the_time_and_entropy_of_its_journal(tmp_path):
    where = tmp_path / "recorded"
    where.mkdir()
    (where / "test_suite.py").write_text(RECORDED.replace("COUNT", "3"))
    hunt_output(where, "--hermetic-hunt-mode=record", env=clean_env(PYTHONHASHSEED="11"))
    db = copy_db(where / "flakes.db", tmp_path / "elsewhere")
    attempt_id = attempt_of(db, "test_token")
    assert query(db, "SELECT mode, hash_seed FROM attempts WHERE id = ?", attempt_id) == [
        ("record", 11)
    ]
    recorded = message(db, attempt_id)
    assert len(recorded.split()) == 3  # urandom, random and time, as drawn in the hunt
    result = run_pytest(
        where, f"--hermetic-replay-db={db}::A{attempt_id}", env=clean_env(PYTHONHASHSEED="11")
    )
    text = output(result)
    assert result.returncode == 1, text
    assert f"journal of A{attempt_id}" in text
    assert f"reproduced A{attempt_id}: {NODE.format('test_token')} failed with the recorded" in text
    assert f"AssertionError: {recorded}" in text  # the very values of the recording
    assert "less than faithful" not in text  # same machine, same hash seed

    # A replay that reads fewer values than the journal holds says so.
    timed = attempt_of(db, "test_timed")
    (where / "test_suite.py").write_text(RECORDED.replace("COUNT", "1"))
    result = run_pytest(
        where, f"--hermetic-replay-db={db}::A{timed}", env=clean_env(PYTHONHASHSEED="11")
    )
    text = output(result)
    assert result.returncode == 1, text
    assert f"reproduced A{timed}" in text
    assert (
        f"  - {NODE.format('test_timed')}: replay read time 1 of 3 recorded time(s): the code "
        "path consumed less than the recording"
    ) in text


@pytest.mark.slow
def test_an_xdist_hunts_attempts_replay_under_their_workers_hash_seed(tmp_path):
    where = tmp_path / "distributed"
    where.mkdir()
    (where / "test_suite.py").write_text(SUITE)
    hunt_output(where, "-n", "2")
    db = copy_db(where / "flakes.db", tmp_path / "elsewhere")
    parity = query(
        db,
        "SELECT a.id, a.hash_seed FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ? AND a.outcome = 'failed' ORDER BY a.id LIMIT 1",
        NODE.format("test_hash_parity"),
    )
    lucky = attempt_of(db, "test_lucky")
    for attempt_id, needs in [*parity, (lucky, None)]:
        needs = needs or query(db, "SELECT hash_seed FROM attempts WHERE id = ?", lucky)[0][0]
        result = run_pytest(where, f"--hermetic-replay-db={db}::A{attempt_id}")
        text = output(result)
        assert result.returncode == 1, text
        assert "restarting pytest under it" in text
        assert f"restarted under PYTHONHASHSEED={needs}" in text
        assert f"reproduced A{attempt_id}" in text


def test_a_replay_that_cannot_restart_itself_says_how_to_run_it(seeded, suite, tmp_path):
    db = copy_db(seeded / "flakes.db", tmp_path / "elsewhere")
    attempt_id = attempt_of(db, "test_lucky")
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE attempts SET hash_seed = 123 WHERE id = ?", (attempt_id,))
    code = (
        "import sys, pytest\n"
        f"sys.exit(pytest.main(['-p', 'no:randomly', '--hermetic-replay-db={db}::A{attempt_id}']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=suite, env=clean_env(), capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 4, output(result)
    assert result.stderr.strip() == (
        f"ERROR: --hermetic-replay-db: A{attempt_id} needs PYTHONHASHSEED=123 (this process has "
        "random) and this pytest was not started from its command line: run PYTHONHASHSEED=123 "
        + shlex.join(["pytest", "-p", "no:randomly", f"--hermetic-replay-db={db}::A{attempt_id}"])
    )
    assert "Traceback" not in output(result)
