"""Files a round leaves in the checkout: named, attributed, removed (or never touched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermetic_hunt.engine.files import FileWatch, attribute
from hermetic_hunt.models import Attempt


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\n")
    (root / "data").mkdir()
    (root / "data" / "fixture.json").write_text("{}")
    (root / "empty").mkdir()
    return root


def changes(watch: FileWatch) -> set[tuple[str, str]]:
    return {(watch.leak(c).name, c.change) for c in watch.check() if not c.temp}


def test_created_files_are_named_and_removed_preexisting_ones_never_touched(checkout: Path):
    watch = FileWatch(str(checkout))
    (checkout / "out.txt").write_text("new")
    (checkout / "data" / "fixture.json").write_text('{"changed": true}')
    (checkout / "src" / "app.py").unlink()
    (checkout / "reports" / "x").mkdir(parents=True)  # the hunt's own reports: not watched
    (checkout / "build" / "deep").mkdir(parents=True)
    (checkout / "build" / "deep" / "artifact.bin").write_bytes(b"1")
    assert changes(watch) == {
        ("out.txt", "added"),
        ("data/fixture.json", "changed"),
        ("src/app.py", "removed"),
        ("build/deep/artifact.bin", "added"),
    }
    assert not (checkout / "out.txt").exists() and not (checkout / "build").exists()
    assert (checkout / "data" / "fixture.json").read_text() == '{"changed": true}'
    assert (checkout / "empty").is_dir()  # a folder that was there stays, empty or not
    assert changes(watch) == set()  # the next round starts from what is there now


def test_an_empty_folder_a_round_made_is_named_and_removed(checkout: Path) -> None:
    watch = FileWatch(str(checkout))
    (checkout / "cache").mkdir()
    assert changes(watch) == {("cache/", "added")}
    assert not (checkout / "cache").exists()


def test_caches_virtualenvs_and_the_database_are_not_watched(checkout: Path) -> None:
    db = checkout / "flakes.db"
    watch = FileWatch(str(checkout), own=(str(db),))
    for name in (".git/index", "__pycache__/a.pyc", ".pytest_cache/v", "x.egg-info/PKG-INFO",
                 ".hypothesis/examples/1", "node_modules/m/i.js"):  # fmt: skip
        path = checkout / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("1")
    (checkout / "venv").mkdir()
    (checkout / "venv" / "pyvenv.cfg").write_text("home = /usr")
    db.write_text("sqlite")
    (checkout / ".coverage.host.1").write_text("1")
    assert changes(watch) == set()


def test_a_file_is_attributed_to_the_attempt_that_wrote_it_else_by_its_time() -> None:
    from hermetic_hunt.engine.files import Change

    writer = Attempt("t.py::writer", "passed", position=3, started=100.0, duration=0.001,
                     writes=["/r/out.txt"])  # fmt: skip
    later = Attempt("t.py::later", "passed", position=4, started=100.002, duration=0.5)
    assert attribute(Change("/r/out.txt", "added", 100.3), [writer, later]) == (writer, 1)
    folder = Attempt("t.py::folder", "passed", position=5, started=101.0, writes=["/r/d/f"])
    assert attribute(Change("/r/d/", "added", 0.0), [writer, folder]) == (folder, 1)
    # written by a subprocess: the attempt whose window holds the modification time
    assert attribute(Change("/r/other.bin", "added", 100.3), [writer, later]) == (later, 1)
    assert attribute(Change("/r/other.bin", "added", 50.0), [writer, later]) == (None, 0)
