"""A crafted database takes no option, writes nothing outside the project, and is only read.

Each test is one defect of issue 19, seen as a hostile database author would
cause it; docs/guarantees.md names them in its table of what a crafted
database can and cannot do.
"""

from __future__ import annotations

import json
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import POLLUTER, POLLUTING, VICTIM, VICTIM_SOURCE, Rows, sample, tree_digest

from hermetic_hunt.cli import main
from hermetic_hunt.fix.patch import FileChange, Patch, PatchConflict
from hermetic_hunt.fix.verify import RunPlace, make_copy
from hermetic_hunt.isolate.wire import stored_run_args
from hermetic_hunt.models import Settings
from hermetic_hunt.project import OutsideProject, project_root
from hermetic_hunt.quarantine.listfile import Entry, Unwritable, parse

BAD_INPUT = 3


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


# -- 1. options from runs.argv ----------------------------------------------------------


def test_a_stored_runs_probe_arguments_are_the_rootdir_and_its_test_files_only(tmp_path):
    root = tmp_path.resolve()
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (root / "-p").write_text("")  # an option-shaped file name is still only a path
    args = stored_run_args(
        root,
        ["tests/test_a.py::test_a", "tests/test_a.py::test_a[1]", "-p::x", "--debug=/x::y",
         "tests/gone.py::test_renamed"],
    )  # fmt: skip
    assert args == [f"--rootdir={root}", str(root / "-p"), str(root / "tests" / "test_a.py")]
    assert all(a.startswith(("--rootdir=", "/")) for a in args)
    for outside in ("../elsewhere/test_x.py::t", "/etc/passwd::t", "tests/\x00::t"):
        with pytest.raises(OutsideProject):
            stored_run_args(root, [outside])


# -- 2. fix writes outside the project ------------------------------------------------


def project_with_outside_polluter(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose database names a polluter outside it (``../elsewhere``)."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "test_victim.py").write_text(VICTIM_SOURCE)
    (elsewhere / "test_x.py").write_text(POLLUTING)
    return project, elsewhere


def craft_victim(project: Path, polluter: str) -> None:
    rows = Rows(project / "flakes.db")
    run = rows.run()
    victim = "test_victim.py::test_reads_the_env"
    rows.attempts(run, polluter, "PPPP")
    rows.attempts(run, victim, "PFPF")
    rows.flake(victim, "F1", kinds=["victim"], polluters=[[polluter]])
    rows.close()


def test_fix_apply_never_writes_a_polluter_outside_the_project(tmp_path, monkeypatch):
    project, elsewhere = project_with_outside_polluter(tmp_path)
    craft_victim(project, "../elsewhere/test_x.py::test_sets_the_env")
    monkeypatch.chdir(project)
    before = tree_digest(elsewhere)
    code, out = invoke("fix", "F1", "--no-verify", "--apply")
    assert code == 1, out  # documented: nothing to apply
    assert "nothing to apply" in out and "applied to" not in out
    assert tree_digest(elsewhere) == before


@pytest.mark.process  # fix runs git to name the commit it patched
def test_fix_apply_writes_a_polluter_inside_the_project(tmp_path, monkeypatch):
    # The control of the test above: the same polluter, inside, is patched.
    project, _ = project_with_outside_polluter(tmp_path)
    (project / "test_x.py").write_text(POLLUTING)
    craft_victim(project, "test_x.py::test_sets_the_env")
    monkeypatch.chdir(project)
    code, out = invoke("fix", "F1", "--no-verify", "--apply")
    assert code == 0, out
    assert "applied to test_x.py" in out
    assert "monkeypatch.setenv" in (project / "test_x.py").read_text()


def test_a_patch_path_leaving_the_root_is_refused_and_nothing_is_written(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.py").write_text("x = 1\n")
    (root / "linked.py").symlink_to(tmp_path / "outside.py")
    for path in ("../outside.py", str(tmp_path / "outside.py"), "linked.py"):
        patch = Patch((FileChange(path, "x = 1\n", "x = 2\n"),))
        with pytest.raises(PatchConflict, match=r"outside|not a path inside"):
            patch.apply_to(root)
    assert (tmp_path / "outside.py").read_text() == "x = 1\n"


def test_a_stored_rootdir_outside_the_current_directory_is_not_the_project(tmp_path):
    here = tmp_path / "checkout"
    (here / "sub").mkdir(parents=True)
    (here / "pytest.ini").write_text("[pytest]\n")
    assert project_root("/", here / "sub") == here
    assert project_root(str(tmp_path), here) == here
    assert project_root(str(here / "sub"), here) == here / "sub"  # below the cwd: taken
    assert project_root("relative/path", here) == here


# -- 3. the verification copy is a real copy ----------------------------------------------


def test_the_verification_copy_never_patches_through_a_link_into_the_checkout(tmp_path):
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "test_x.py").write_text("x = 1\n")
    (root / "tests").symlink_to(root / "real")  # an absolute link into the checkout
    (root / "test_file.py").symlink_to(root / "real" / "test_x.py")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_o.py").write_text("x = 1\n")
    (root / "linked_out").symlink_to(outside)
    before = tree_digest(root / "real", outside)
    place = RunPlace(str(root), Settings(rounds=1, budget_seconds=None, base_seed=1), 1)
    copy = make_copy(place, tmp_path / "copy", nodeids=("tests/test_x.py::t", "test_file.py::t"))
    # Collected by the names the nodeids give them (pytest names the tests by the link).
    args = (str(copy.root / "test_file.py"), str(copy.root / "tests" / "test_x.py"))
    assert copy.args == (f"--rootdir={copy.root}", *args)
    assert all(Path(a).resolve() == copy.root / "real" / "test_x.py" for a in args)
    for path in ("tests/test_x.py", "test_file.py"):
        Patch((FileChange(path, "x = 1\n", "x = 2\n"),)).apply_to(copy.root)
        Patch((FileChange(path, "x = 2\n", "x = 1\n"),)).apply_to(copy.root)
    with pytest.raises(PatchConflict, match="outside"):
        Patch((FileChange("linked_out/test_o.py", "x = 1\n", "x = 2\n"),)).apply_to(copy.root)
    Patch((FileChange("tests/test_x.py", "x = 1\n", "x = 3\n"),)).apply_to(copy.root)
    assert (copy.root / "real" / "test_x.py").read_text() == "x = 3\n"
    assert tree_digest(root / "real", outside) == before


# -- 4. --apply keeps line endings, encoding and mode ----------------------------------------


def test_apply_keeps_crlf_line_endings_the_encoding_and_the_mode(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_bytes("# -*- coding: latin-1 -*-\r\nname = 'caf\xe9'\r\n".encode("latin-1"))
    path.chmod(0o751)
    before = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n"
    after = before + "other = 'd\xe9j\xe0'\n"
    written = Patch((FileChange("test_x.py", before, after),)).apply_to(tmp_path)
    assert written == [path.resolve()]
    assert path.read_bytes() == after.replace("\n", "\r\n").encode("latin-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["test_x.py"]  # no temporary file left


def test_apply_keeps_a_byte_order_mark(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_bytes(b"\xef\xbb\xbfx = 1\n")
    Patch((FileChange("test_x.py", "\ufeffx = 1\n", "\ufeffx = 2\n"),)).apply_to(tmp_path)
    assert path.read_bytes() == b"\xef\xbb\xbfx = 2\n"


# -- 5. quarantine lines ---------------------------------------------------------------


@pytest.mark.parametrize(
    "nodeid",
    ["tests/test_x.py\n::t", "tests/test_x.py\u2028::t", "tests/test_x.py\r::t",
     "tests/test_x.py\x85::t", "tests/test_x.py  # F1 victim::t", "#tests/test_x.py::t",
     "tests/test_x.py::t\t", "tests/test_x.py"],
)  # fmt: skip
def test_a_nodeid_that_would_not_read_back_from_its_line_is_refused(nodeid):
    with pytest.raises(Unwritable):
        Entry(nodeid, "F2", ("victim",)).format()


def test_quarantine_leaves_out_a_crafted_nodeid_and_never_writes_a_file_line(tmp_path, monkeypatch):
    rows = sample(tmp_path / "flakes.db")
    crafted = "tests/test_x.py\n::test_y"
    rows.attempts(1, crafted, "PFPF")
    rows.flake(crafted, "F2", kinds=["victim"], polluters=[[POLLUTER]])
    rows.flake("tests/test_x.py\u2028::test_z", "F3", kinds=["random"])
    rows.close()
    monkeypatch.chdir(tmp_path)
    code, out = invoke("quarantine", "-o", "q.txt")
    assert code == 0, out
    text = (tmp_path / "q.txt").read_text()
    entries = parse(text)
    nodeids = [e.nodeid for e in entries]
    assert VICTIM in nodeids and len(nodeids) == len(set(nodeids))  # every other one, once
    assert not [n for n in nodeids if "test_x.py" in n]  # neither crafted id
    assert all("::" in n and n.isprintable() for n in nodeids)
    assert "F2: refused: test id 'tests/test_x.py\\x0a::test_y' cannot be written" in text
    assert "\u2028" not in text


def test_a_quarantine_line_with_many_blanks_is_read_in_linear_time():
    # The old pattern backtracked: 400 blanks took 106 s. These lines would not finish.
    blanks = " " * 20_000
    lines = [
        f"t.py::test_a{blanks}x",
        f"t.py::test_a  #{blanks}F1{blanks}victim{blanks},{blanks}time{blanks}x",
        f"t.py::test_a  # F1 {'1' * 20_000}",
        f"t.py::test_a{blanks}#{blanks}#",
    ]
    entries = parse("\n".join(lines))
    assert [e.nodeid for e in entries] == [lines[0]] + ["t.py::test_a"] * 3
    assert entries[1].flake_id is None and entries[1].reason.endswith("x")
    good = parse("t.py::test_a  # F3 victim, time 24%: fails after t.py::b\n")[0]
    assert (good.flake_id, good.kinds, good.rate, good.reason) == (
        "F3", ("victim", "time"), 0.24, "fails after t.py::b"
    )  # fmt: skip


# -- 6. read-only commands ------------------------------------------------------------------


def empty_sqlite(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE scratch (x)")
        conn.execute("DROP TABLE scratch")
        conn.commit()


@pytest.mark.parametrize("kind", ["zero bytes", "an SQLite file without tables"])
@pytest.mark.parametrize(
    "command", [("report",), ("list",), ("show", "F1"), ("replay", "F1"), ("quarantine",)]
)
def test_a_reader_never_turns_a_file_into_a_database(tmp_path, monkeypatch, kind, command):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "flakes.db"
    if kind == "zero bytes":
        path.write_bytes(b"")
    else:
        empty_sqlite(path)
    before = tree_digest(tmp_path)
    code, out = invoke(*command)
    assert code == BAD_INPUT, out
    assert out.startswith("Error: ") and out.count("\n") == 1, out
    assert "not a hermetic-hunt database" in out
    assert tree_digest(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flakes.db"]


def test_a_reader_opens_a_good_database_read_only(tmp_path, monkeypatch):
    sample(tmp_path / "flakes.db").close()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flakes.db").chmod(0o444)  # the file, not the folder: root still could write
    before = tree_digest(tmp_path)
    for command, status in (
        (("report", "--format", "json"), 1),
        (("list",), 1),
        (("show", "F1"), 0),
    ):
        code, out = invoke(*command)
        assert code == status, out
    assert tree_digest(tmp_path) == before
    assert json.loads(invoke("report", "--format", "json")[1])["flakes"][0]["nodeid"] == VICTIM
