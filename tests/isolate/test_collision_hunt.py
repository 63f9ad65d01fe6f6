"""A collision end to end: a ``-n 2`` hunt of a generated pair, the probe of its folder, its replay.

``test_writer.py::test_strict`` creates ``shared_out`` with a strict
``mkdir`` and removes it; ``test_tolerant.py::test_tolerant`` uses the same
folder tolerantly (``exist_ok``, ``ignore_errors``). Each holds the folder for
0.3 s of real time, so whenever two workers reach them at about the same
time the strict one fails; ``-n 0`` never does. One hunt (module scope), then
what it found, what it printed, and its replay.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import hunt, one, rows

from hermetic_hunt.cli import main
from hermetic_hunt.isolate.shared import TOGETHER_RUNS

PAIR = {
    "test_writer": """
        import select
        import shutil
        from pathlib import Path

        FOLDER = Path(__file__).parent / "shared_out"

        def setup_function(function):
            if function.__name__ == "test_strict":
                FOLDER.mkdir()

        def teardown_function(function):
            if function.__name__ == "test_strict":
                shutil.rmtree(FOLDER, ignore_errors=True)

        def test_strict():
            (FOLDER / "a.txt").write_text("a")
            select.select([], [], [], 0.3)
            assert (FOLDER / "a.txt").read_text() == "a"

        def test_stable_one():
            pass
    """,
    "test_tolerant": """
        import contextlib
        import select
        import shutil
        from pathlib import Path

        FOLDER = Path(__file__).parent / "shared_out"

        def test_tolerant():
            FOLDER.mkdir(exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                (FOLDER / "b.txt").write_text("b")
                select.select([], [], [], 0.3)
            shutil.rmtree(FOLDER, ignore_errors=True)

        def test_stable_two():
            pass
    """,
}
STRICT, TOLERANT = "test_writer.py::test_strict", "test_tolerant.py::test_tolerant"


@pytest.fixture(scope="module")
def collided(pytester_module: Path) -> tuple[Path, str]:
    done = hunt(
        pytester_module, "--hermetic-hunt=8", "-n", "2", "--hermetic-hunt-isolate-budget=200,5m",
        "-p", "no:cacheprovider", seed=3,
    )  # fmt: skip
    return pytester_module, done.stdout + done.stderr


@pytest.fixture(scope="module")
def pytester_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("collision")
    for name, body in PAIR.items():
        text = "\n".join(line[8:] for line in body.splitlines()[1:])
        (root / f"{name}.py").write_text(text)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


@pytest.mark.slow
def test_the_hunt_names_the_collision_its_partner_and_the_folder(collided):
    root, out = collided
    db = root / "flakes.db"
    kinds, reproducer = one(
        db, "SELECT fl.kinds, fl.reproducer FROM flakes fl JOIN tests t ON t.id = fl.test_id "
        "WHERE t.nodeid = ?", STRICT,
    )  # fmt: skip
    assert json.loads(kinds) == ["collision"], out[-3000:]
    repro = json.loads(reproducer)
    assert [s["nodeid"] for s in repro["steps"]] == [STRICT]
    assert [s["nodeid"] for s in repro["together"]] == [TOLERANT]
    assert repro["resource"] == "shared_out"
    # Only the strict test fails; the tolerant one is its partner, not a flake.
    assert [n for (n,) in rows(db, "SELECT t.nodeid FROM flakes fl JOIN tests t "
                               "ON t.id = fl.test_id")] == [STRICT]  # fmt: skip
    assert f"collides with: {TOLERANT} over shared_out, at the same time on another worker" in out
    assert not (root / "shared_out").exists()


@pytest.mark.slow
def test_the_probe_of_the_folder_confirmed_it_and_each_side_passed_alone(collided):
    root, _ = collided
    steps = rows(
        root / "flakes.db", "SELECT purpose, sequence, outcome FROM isolation_steps ORDER BY step"
    )
    sides = [TOLERANT, STRICT]  # the tests that use the folder, in collection order
    alone = [(json.loads(seq), outcome) for purpose, seq, outcome in steps
             if purpose == "shared shared_out: one side alone"]  # fmt: skip
    assert alone == [(sides, "passed"), (sides[::-1], "passed")]
    both = [(json.loads(seq), outcome) for purpose, seq, outcome in steps
            if purpose == "shared shared_out: both sides at the same time"]  # fmt: skip
    # Each run: one probe per process, the two sides started at the same moment.
    assert [seq for seq, _ in both] == [sides, sides[::-1]] * TOGETHER_RUNS
    assert "failed" in [outcome for _, outcome in both]
    # The single-test pair probe is not needed: the folder was shown shared.
    assert not [p for p, _, _ in steps if p.startswith("collision:")]


@pytest.mark.slow
def test_every_format_and_the_quarantine_list_name_the_partner_and_the_folder(collided):
    root, _ = collided
    db = str(root / "flakes.db")
    report = CliRunner().invoke(main, ["report", "--db", db, "--format", "json"])
    (flake,) = json.loads(report.stdout)["flakes"]
    assert flake["collides_with"] == {"partner": TOLERANT, "resource": "shared_out"}
    fix = flake["fix"]
    assert fix["kind"] == "collision" and "shared_out" in fix["summary"]
    assert any("tmp_path" in a and "worker_id" in a for a in fix["advice"])
    assert {c["where"] for c in fix["changes"]} == {"test_writer.py:5", "test_tolerant.py:6"}
    for fmt in ("text", "markdown", "html"):
        written = root / f"report.{fmt}"
        CliRunner().invoke(main, ["report", "--db", db, "--format", fmt, "-o", str(written)])
        shown = written.read_text()
        if fmt == "markdown":  # literal Markdown: underscores escaped
            shown = shown.replace("\\_", "_")
        shown = re.sub(r"<[^>]+>", "", shown)  # HTML: the words, not the markup
        assert f"collides with: {TOLERANT} over shared_out" in shown, fmt
    listed = CliRunner().invoke(main, ["quarantine", "--db", db]).stdout
    assert f"collides with {TOLERANT} over shared_out under xdist" in listed


@pytest.mark.slow
def test_the_replay_runs_the_pair_at_the_same_time_and_reproduces_it(collided):
    root, _ = collided
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--hermetic-replay-db=flakes.db::F1", "-p", "no:randomly"],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert f"and {TOLERANT} at the same time in a second process" in done.stdout
    assert f"reproduced F1: {STRICT} " in done.stdout, done.stdout[-3000:]
    assert "the collision over shared_out" in done.stdout
    assert not (root / "shared_out").exists()
    # Without its partner the strict test passes: -n 0 never shows it.
    plain = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q"],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stdout[-2000:]
    shutil.rmtree(root / "shared_out", ignore_errors=True)
