"""Crafted and damaged databases: output or one line of error, never a traceback or a forged line.

Each test takes the sample database (tests/helpers.py: one of everything a
report shows), damages it the way a hand-crafted file can, and runs the
readers. ``tests/store/test_fuzz.py`` does the same with values Hypothesis
draws; these are the cases found by hand (issue 12), kept by name.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import BROKEN, VICTIM, Rows, one, sample

from hermetic_hunt.cli import main
from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.store import Store
from hermetic_hunt.store.flakes import ensure_flakes
from hermetic_hunt.store.replay import ReplaySource
from hermetic_hunt.store.runs import run_facts
from hermetic_hunt.store.schema import SCHEMA_VERSION

FOUND, BAD_INPUT = 1, 3
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_BUT_PARSEABLE = "[" * 900 + "]" * 900  # json.loads reads it; a recursive reader would not
TEXT_FORMATS = ("text", "markdown")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    sample(tmp_path / "flakes.db").close()
    return tmp_path / "flakes.db"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def one_line_error(code: int, stderr: str, text: str) -> None:
    assert code == BAD_INPUT, stderr
    assert stderr.startswith("Error: ") and stderr.count("\n") == 1, stderr
    assert text in stderr, stderr


def edit(db: Path, sql: str, *params: object) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(sql, params)
    conn.close()


def relax(db: Path) -> None:
    """What a crafted file can do: a schema without NOT NULL constraints."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'"
        )
    conn.close()


def failing_attempt(db: Path) -> int:
    return one(db, "SELECT min(attempt_id) FROM failures")


def every_reader(db: Path) -> dict[str, tuple[int, str, str]]:
    out = {
        f"report {fmt}": invoke("report", "--format", fmt) for fmt in ("text", "markdown", "json")
    }
    out["report html"] = invoke("report", "--format", "html", "-o", "r.html")
    out["list"] = invoke("list")
    out["show F1"] = invoke("show", "F1")
    out[f"show A{failing_attempt(db)}"] = invoke("show", f"A{failing_attempt(db)}")
    out["replay F1"] = invoke("replay", "F1")
    return out


# -- deeply nested JSON ------------------------------------------------------------


@pytest.mark.parametrize("nested", [DEEP, DEEP_BUT_PARSEABLE], ids=["100000", "900"])
def test_deeply_nested_json_in_argv_and_counts_is_read_as_absent(db, nested):
    edit(db, "UPDATE runs SET argv = ?, settings = ?", nested, nested)
    edit(db, "UPDATE attempts SET counts = ?", nested)
    for name, (code, out, err) in every_reader(db).items():
        assert code in (0, FOUND), (name, err)
        assert "Traceback" not in out + err
    code, out, _ = invoke("show", f"A{failing_attempt(db)}")
    assert "reads:" not in out  # the counts are unusable: not shown


@pytest.mark.parametrize("nested", [DEEP, DEEP_BUT_PARSEABLE], ids=["100000", "900"])
def test_deeply_nested_json_in_settings_gives_the_default_settings(db, nested):
    edit(db, "UPDATE runs SET settings = ?", nested)
    with Store.open(db, create=False) as store:
        assert ReplaySource(store).run_settings(1).isolate_budget == 200
        assert run_facts(store, 1).settings.base_seed == 7  # from the run's own row
    edit(db, "UPDATE runs SET argv = ?", nested)
    with Store.open(db, create=False) as store, pytest.raises(BadDatabase, match="damaged argv"):
        run_facts(store, 1)


@pytest.mark.parametrize("column", ["reproducer", "evidence", "polluters", "kinds"])
def test_deeply_nested_json_in_a_flake_is_one_line_naming_it(db, column):
    edit(db, f"UPDATE flakes SET {column} = ?", DEEP)
    code, _, err = invoke("report")
    one_line_error(code, err, f"flake F1: {column} is nested deeper than 32 levels")


# -- values of the wrong type ------------------------------------------------------


@pytest.mark.parametrize(
    "column, value, kind",
    [("now", "soon", "text"), ("duration", "slow", "text"), ("duration", b"\x00", "blob"),
     ("seed", 1.5, "real"), ("hash_seed", "seven", "text")],
)  # fmt: skip
def test_a_value_of_the_wrong_type_is_one_line_naming_the_cell(db, column, value, kind):
    attempt = failing_attempt(db)
    edit(db, f"UPDATE attempts SET {column} = ? WHERE id = ?", value, attempt)
    for command in (("show", f"A{attempt}"), ("report",), ("list",), ("replay", f"A{attempt}")):
        code, _, err = invoke(*command)
        one_line_error(code, err, f"attempts.{column} of row {attempt} is {kind}, where hermetic")


def test_null_where_the_schema_says_not_null_is_one_line(db):
    relax(db)
    edit(db, "UPDATE runs SET attempts = NULL")
    code, _, err = invoke("report")
    one_line_error(code, err, "runs.attempts of row 1 is null, where hermetic-hunt writes integer")


def test_a_missing_column_is_one_line(db):
    edit(db, "ALTER TABLE attempts RENAME COLUMN stress TO strain")
    code, _, err = invoke("list")
    one_line_error(code, err, "table 'attempts' has no column 'stress'")


def test_text_that_is_not_utf8_reads_as_replacement_characters(db):
    edit(
        db, "UPDATE tests SET nodeid = CAST(? AS TEXT) WHERE nodeid = ?", b"t.py::\xff\xfe", BROKEN
    )
    code, out, err = invoke("report")
    assert code == FOUND, err
    assert "t.py::\ufffd\ufffd" in out


def test_a_damaged_page_is_one_line(db):
    data = bytearray(db.read_bytes())
    page = one(db, "PRAGMA page_size")
    for start in range(page, len(data), page):  # every page but the first: garbage
        data[start + 8 : start + page] = b"\xa5" * (page - 8)
    db.write_bytes(bytes(data))
    for command in (("report",), ("list",), ("show", "F1"), ("replay", "F1")):
        code, _, err = invoke(*command)
        assert code == BAD_INPUT, err
        assert err.startswith("Error: ") and err.count("\n") == 1, err


def test_a_flake_id_that_is_not_f_and_a_number_is_refused(db):
    edit(db, "UPDATE flakes SET flake_id = ? WHERE flake_id = 'F1'", "F1\x1b[2J\nFAKE")
    code, _, err = invoke("report")
    one_line_error(code, err, r"flake id 'F1\x1b[2J\nFAKE' is not F followed by a number")


# -- forged lines -------------------------------------------------------------------

FORGED = "\nFAKE: all tests passed\r\x1b[32mOK\t"


def test_nodeids_and_messages_with_newlines_are_printed_escaped_in_every_text_output(db):
    edit(db, "UPDATE tests SET nodeid = nodeid || ? WHERE nodeid = ?", FORGED, VICTIM)
    edit(db, "UPDATE failures SET message = message || ?, location = location || ?, "
         "excerpt = excerpt || ?", FORGED, FORGED, FORGED)  # fmt: skip
    edit(db, "UPDATE flakes SET note = ?", FORGED)
    outputs = {f"report {fmt}": invoke("report", "--format", fmt)[1] for fmt in TEXT_FORMATS}
    outputs["list"] = invoke("list")[1]
    outputs["show F1"] = invoke("show", "F1")[1]
    outputs["show A"] = invoke("show", f"A{failing_attempt(db)}")[1]
    escaped = r"\x0aFAKE: all tests passed\x0d\x1b[32mOK\x09"
    for name, out in outputs.items():
        assert not any(line.startswith("FAKE") for line in out.splitlines()), (name, out)
        assert "\x1b" not in out and "\r" not in out and "\t" not in out, name
        # markdown flattens line breaks to spaces first (a table cell is one line)
        assert escaped in out or (name == "report markdown" and "FAKE: all" in out), (name, out)
    # JSON keeps the exact value (escaped by JSON itself)
    report = json.loads(invoke("report", "--format", "json")[1])
    assert VICTIM + FORGED in {t["nodeid"] for t in report["tests"]}


def test_an_error_message_quoting_the_database_is_one_line(db):
    edit(db, "UPDATE flakes SET kinds = ?", json.dumps(["victim\nFAKE: fine"]))
    code, _, err = invoke("list")
    one_line_error(code, err, r"unknown flake kind 'victim\nFAKE: fine'")


# -- schema versions -------------------------------------------------------------


def test_a_newer_user_version_without_a_migration_row_is_refused(db):
    edit(db, "PRAGMA user_version = 99")
    code, _, err = invoke("report")
    one_line_error(
        code,
        err,
        "was written by a newer hermetic-hunt (schema 99, this version reads up to "
        f"{SCHEMA_VERSION})",
    )
    with pytest.raises(BadDatabase, match="newer hermetic-hunt"):
        Store.open(db)  # the hunt refuses it too, and leaves it alone
    assert one(db, "PRAGMA user_version") == 99


# -- concurrent hunts --------------------------------------------------------------


def test_isolations_that_finish_out_of_order_keep_first_run_before_last_run(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    for _ in range(3):
        rows.run()
    store = rows.store
    # run 3 started last but isolated first (concurrent hunts of one database)
    ensure_flakes(store, [VICTIM], 3)
    ensure_flakes(store, [VICTIM], 1)
    ensure_flakes(store, [VICTIM], 2)
    rows.close()
    assert one(tmp_path / "flakes.db", "SELECT first_run_id, last_run_id FROM flakes") == (1, 3)


# -- a read-only database ---------------------------------------------------------


def _read_only(directory: Path, *command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` with ``directory`` read-only: a read-only bind mount when root can
    make one (a CI artifact on a read-only volume), else file permissions."""
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("root without unshare: cannot make a read-only mount")
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        argv = ["unshare", "-m", "sh", "-c", script, "_", str(directory), *command]
    else:
        for path in directory.iterdir():
            path.chmod(0o444)
        directory.chmod(0o555)
        argv = list(command)
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    finally:
        if os.geteuid() != 0:
            directory.chmod(0o755)


def _hunted(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(test_one="def test_one():\n    pass\n\ndef test_two():\n    assert 0\n")
    pytester.runpytest_subprocess("-p", "no:randomly", "--hermetic-hunt=2",
                                  "--hermetic-hunt-isolate=off")  # fmt: skip
    artifact = pytester.path / "artifact"
    artifact.mkdir()
    shutil.move(pytester.path / "flakes.db", artifact / "flakes.db")
    return artifact


@pytest.mark.slow
def test_a_database_on_a_read_only_mount_is_read_and_reported(pytester):
    artifact = _hunted(pytester)
    db = str(artifact / "flakes.db")
    if not (Path(sys.executable).parent / "hermetic-hunt").exists():
        pytest.skip("the hermetic-hunt script is not installed next to this Python")
    cli = [str(Path(sys.executable).parent / "hermetic-hunt")]
    report = _read_only(artifact, *cli, "report", "--db", db, cwd=pytester.path)
    assert report.returncode == FOUND, report.stderr
    assert "1 broken" in report.stdout
    failed = one(artifact / "flakes.db", "SELECT min(attempt_id) FROM failures")
    shown = _read_only(artifact, *cli, "show", f"A{failed}", "--db", db, cwd=pytester.path)
    assert shown.returncode == 0, shown.stderr
    # a replay runs from it, and says it could not store its outcome there
    replay = _read_only(
        artifact, sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
        f"--hermetic-replay-db={db}::A{failed}", cwd=pytester.path,
    )  # fmt: skip
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert f"reproduced A{failed}" in replay.stdout
    assert "could not store this replay in" in replay.stdout
    assert "attempt to write a readonly database" in replay.stdout
