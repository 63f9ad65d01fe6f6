"""A collision end to end: a ``-n 2`` hunt of a generated pair, its probe pair, its replay.

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
def test_the_probe_pair_confirmed_it_and_each_passed_alone(collided):
    root, _ = collided
    steps = rows(
        root / "flakes.db", "SELECT purpose, sequence, outcome FROM isolation_steps ORDER BY step"
    )
    pair = [(json.loads(seq), outcome) for purpose, seq, outcome in steps
            if purpose == f"collision: with {TOLERANT} at the same time"]  # fmt: skip
    # Runs of the pair, one probe per process: two of them failed one of the two.
    mine = [o for seq, o in pair if seq == [STRICT]]
    assert [seq for seq, _ in pair] == [[STRICT], [TOLERANT]] * len(mine)
    assert mine.count("failed") == 2 and mine[-1] == "failed"
    alone = [o for purpose, _, o in steps if purpose == f"collision: {TOLERANT} alone"]
    assert alone == ["passed"]
    assert "passed" in [o for purpose, seq, o in steps if json.loads(seq) == [STRICT]
                        and purpose.startswith("alone")]  # fmt: skip


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
