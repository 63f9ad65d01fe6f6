"""A polluter from an earlier round, end to end, at ``-n 0`` and ``-n 2``.

The suite creates a file in the home folder when it is imported (as a tool
keeps ``~/.app/state``) and one test removes it. A plain ``pytest`` run
imports the suite again and passes in collection order; the remover before
the reader fails it. A hunt's rounds fork from one collected session, so the
file is created once per hunt and the reader fails in every round after the
first, whatever ran before it there: the polluter ran in an earlier round.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from helpers import clean_env, hunt, rows

#: Every test here hunts and isolates in fresh pytest processes.
pytestmark = pytest.mark.slow

SUITE = """
    from pathlib import Path

    STATE = Path.home() / ".tallyapp" / "state.txt"
    STATE.parent.mkdir(exist_ok=True)
    STATE.write_text("ready")  # at import: every plain run creates it again


    def test_reads_the_state():
        assert STATE.read_text() == "ready"


    def test_formats():
        assert f"{3:03}" == "003"


    def test_sums():
        assert sum(range(4)) == 6


    def test_resets_the_state():
        STATE.unlink(missing_ok=True)
"""
READER = "test_state.py::test_reads_the_state"
REMOVER = "test_state.py::test_resets_the_state"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The suite hunted with seed 3 at ``-n 0`` and ``-n 2``, its home folder its own."""
    root = tmp_path_factory.mktemp("earlier")
    home, temp = root / "home", root / "tmp"
    home.mkdir()
    temp.mkdir()
    (root / "suite").mkdir()
    (root / "suite" / "test_state.py").write_text(textwrap.dedent(SUITE).lstrip())
    (root / "suite" / "pytest.ini").write_text("[pytest]\n")
    # (a temporary folder of its own: the home folder is not inside the one the hunt watches)
    env = {"HOME": str(home), "TMPDIR": str(temp)}
    out: dict[str, Any] = {"root": root / "suite", "env": env}
    for workers in ("0", "2"):
        db = root / f"flakes-n{workers}.db"
        done = hunt(root / "suite", "--hermetic-hunt=8", "-n", workers, f"--hermetic-hunt-db={db}",
                    "-p", "no:cacheprovider", seed=3, env=out["env"])  # fmt: skip
        out[workers] = (db, done.stdout + done.stderr)
    return out


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_reader_is_a_victim_of_the_remover_at_any_worker_count(
    suite: dict[str, Any], workers: str
) -> None:
    db, out = suite[workers]
    found = rows(
        db,
        "SELECT t.nodeid, fl.kinds, fl.polluters, fl.evidence FROM flakes fl "
        "JOIN tests t ON t.id = fl.test_id",
    )
    assert [(nodeid, json.loads(kinds)) for nodeid, kinds, _, _ in found] == [
        (READER, ["victim"])
    ], out[-3000:]
    _, _, polluters, evidence = found[0]
    assert json.loads(polluters) == [[REMOVER]]
    assert json.loads(evidence)["exposure"] == "order"  # a plain run in collection order passes
    assert "fails under shuffling or xdist" in out


def plain(suite: dict[str, Any], *nodeids: str) -> subprocess.CompletedProcess[str]:
    """Plain ``pytest`` in a fresh process, without hermetic-hunt."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:hermetic_hunt",
            "-p", "no:cacheprovider", "-q", *nodeids]  # fmt: skip
    return subprocess.run(argv, cwd=suite["root"], capture_output=True, text=True, check=False,
                          env=clean_env(**suite["env"]), timeout=120)  # fmt: skip


def test_plain_pytest_shows_what_the_hunt_reports(suite: dict[str, Any]) -> None:
    assert plain(suite).returncode == 0  # collection order
    assert plain(suite, REMOVER, READER).returncode == 1  # the reported order
    assert plain(suite, READER).returncode == 0
