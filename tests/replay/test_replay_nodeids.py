"""``hermetic-hunt replay``: the printed command, ``--run``, and awkward nodeids through a real shell."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import clean_env
from test_replay import (
    NODE,
    SUITE,
    attempt_of,
    copy_db,
    hunt_output,
    output,
    query,
    replays,
)

from hermetic_hunt.cli import main

#: Every test here reads a hunt of a module-scoped fixture (a pytest process).
pytestmark = pytest.mark.process

EXAMPLE_CONFTEST = (
    Path(__file__).resolve().parents[2]
    / "src"
    / "hermetic_hunt"
    / "examples"
    / "shop"
    / "conftest.py"
)
AWKWARD = """
import random

import pytest

IDS = [
    "two words", "it's \\"quoted\\" [brackets]", "$(touch pwned) `touch pwned2` $HOME",
    "a;b|c&d>e *?~ back\\\\slash", "naïve-ü", "x::y", "-n 2",
]


@pytest.mark.parametrize("value", IDS, ids=IDS)
def test_awkward(value):
    assert random.random() < 0.5, value
"""


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from hermetic_hunt.cli import main; main()", *args],
        cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def shell(cwd: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` the way a developer pastes it: through bash."""
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hunt run from the parent of the suite's rootdir (``pytest --hermetic-hunt app``)."""
    top = tmp_path_factory.mktemp("nested")
    app = top / "app"
    app.mkdir()
    (app / "pytest.ini").write_text("[pytest]\n")
    (app / "test_suite.py").write_text(SUITE)
    (top / "hunt.txt").write_text(hunt_output(top, "app"))
    return top


def test_the_command_names_the_database_and_the_id(nested):
    attempt_id = attempt_of(nested / "flakes.db", "test_lucky")
    result = cli(nested / "app", "replay", f"a{attempt_id}", "--db", "../flakes.db")
    assert result.returncode == 0, output(result)
    expected = shlex.join(["pytest", f"--hermetic-replay-db={nested}/flakes.db::A{attempt_id}"])
    assert result.stdout == f"{expected}\n"


def test_printed_from_the_hunts_directory_the_command_finds_the_rootdir_again(nested):
    attempt_id = attempt_of(nested / "flakes.db", "test_lucky")
    result = cli(nested, "replay", f"A{attempt_id}")
    command = f"pytest --hermetic-replay-db=flakes.db::A{attempt_id} app"
    assert result.stdout == f"{command}\n"
    # the hunt's own summary prints the same form
    assert f"      replay: {command}\n" in (nested / "hunt.txt").read_text()
    before = len(replays(nested / "flakes.db"))
    replayed = shell(nested, command)
    assert replayed.returncode == 1, output(replayed)
    assert f"reproduced A{attempt_id}: {NODE.format('test_lucky')}" in replayed.stdout
    assert len(replays(nested / "flakes.db")) == before + 1


@pytest.mark.slow
def test_run_runs_the_command_with_extra_pytest_arguments(nested, tmp_path):
    db = copy_db(nested / "flakes.db", tmp_path / "elsewhere")
    # other tests of this module replay against the same hunt: count from here
    before = len(replays(db))
    attempt_id = attempt_of(db, "test_lucky")
    result = cli(nested / "app", "replay", f"A{attempt_id}", "--db", str(db), "--run", "--", "-q")
    assert result.returncode == 1, output(result)
    command = shlex.join(["pytest", f"--hermetic-replay-db={db}::A{attempt_id}", "-q"])
    assert result.stderr.startswith(f"$ {command}\n")
    assert f"reproduced A{attempt_id}" in result.stdout
    assert [row[3] for row in replays(db)[before:]] == ["reproduced"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["replay", "A999999"],
            "Error: flakes.db has no attempt A999999: see 'hermetic-hunt list'*",
        ),
        (["replay", "F1", "--db", "missing.db"], "Error: */missing.db does not exist: run a hunt*"),
        (["replay", "x::", "--db", "flakes.db"], "Error: flakes.db knows no test 'x::'*"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_3(nested, args, message):
    from fnmatch import fnmatch

    result = cli(nested, *args)
    assert result.returncode == 3, output(result)
    assert result.stdout == ""
    assert fnmatch(result.stderr.strip(), message), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_awkward_nodeids_round_trip_through_the_printed_command_and_a_shell(tmp_path, monkeypatch):
    project = tmp_path / "it's a $HOME (project)"
    project.mkdir()
    (project / "conftest.py").write_text(EXAMPLE_CONFTEST.read_text())
    (project / "test_awkward.py").write_text(AWKWARD)
    hunt_output(project, "--hermetic-hunt=16")
    artifacts = tmp_path / 'CI "artifacts" ü'
    db = copy_db(project / "flakes.db", artifacts)
    nodeids = [nodeid for (nodeid,) in query(db, "SELECT nodeid FROM flaky_tests ORDER BY nodeid")]
    assert len(nodeids) == 7, nodeids
    monkeypatch.chdir(project)
    for nodeid in nodeids:
        printed = CliRunner().invoke(main, ["replay", nodeid, "--db", str(db)])
        assert printed.exit_code == 0, printed.output
        command = printed.output.strip()
        assert shlex.split(command) == ["pytest", f"--hermetic-replay-db={db}::{nodeid}"]
        replayed = shell(project, command)
        assert replayed.returncode == 1, output(replayed)
        assert "reproduced A" in replayed.stdout and f": {nodeid} failed with the recorded" in (
            replayed.stdout
        ), output(replayed)
    assert [row[0] for row in replays(db)] == nodeids
    assert not list(tmp_path.rglob("pwned*"))
