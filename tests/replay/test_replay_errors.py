"""Bad input to a replay: one line, exit status 4, no traceback -- whatever the database holds."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from helpers import build_db, record

SUITE = "def test_one():\n    assert False, 'boom'\n\ndef test_two():\n    pass\n"


def insert_flake(path: Path, flake_id: str, nodeid: str, reproducer: Any, **columns: Any) -> None:
    db = sqlite_utils.Database(path)
    (test_id,) = db.execute("SELECT id FROM tests WHERE nodeid = ?", [nodeid]).fetchone()
    db["flakes"].insert(
        {
            "flake_id": flake_id,
            "test_id": test_id,
            "kinds": json.dumps(["victim"]),
            "status": "isolated",
            "reproducer": reproducer if isinstance(reproducer, str) else json.dumps(reproducer),
            "created_at": "2030-01-01T00:00:00+00:00",
            "updated_at": "2030-01-01T00:00:00+00:00",
            **columns,
        }
    )
    db.conn.close()


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def usage_error(result: pytest.RunResult, message: str) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    assert "Traceback" not in text and "INTERNALERROR" not in text


def test_a_missing_database_is_a_usage_error(suite):
    target = suite.path / "nowhere" / "flakes.db"
    usage_error(
        suite.runpytest(f"--hermetic-replay-db={target}::F1"),
        f"--hermetic-replay-db: {target} does not exist: run a hunt first*",
    )


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(suite):
    target = suite.path / "flakes.db"
    target.write_text("not a database\n")
    usage_error(
        suite.runpytest("--hermetic-replay-db=flakes.db::F1"),
        f"--hermetic-replay-db: {target} is not an SQLite database*",
    )
    assert target.read_text() == "not a database\n"


def test_another_programs_database_is_refused(suite):
    with closing(sqlite3.connect(suite.path / "app.db")) as conn, conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    usage_error(
        suite.runpytest("--hermetic-replay-db=app.db::A1"),
        "--hermetic-replay-db: * is not a hermetic-hunt database (it holds tables: users)*",
    )


def test_a_database_from_a_newer_version_is_refused(suite):
    build_db(suite.path / "flakes.db", [record("test_suite.py::test_one")])
    with closing(sqlite3.connect(suite.path / "flakes.db")) as conn, conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('hermetic_hunt', '9999_from_the_future', '2030-01-01')"
        )
    usage_error(
        suite.runpytest("--hermetic-replay-db=flakes.db::A1"),
        "--hermetic-replay-db: * was written by a newer hermetic-hunt*upgrade*",
    )


@pytest.mark.parametrize(
    "value", ["flakes.db", "flakes.db::", "::F1", "flakes.db:F1", "flakes.db::F0", "flakes.db::A"]
)
def test_a_malformed_path_and_id_is_a_usage_error(suite, value):
    usage_error(
        suite.runpytest(f"--hermetic-replay-db={value}"),
        f"--hermetic-replay-db: expected PATH::ID, e.g. flakes.db::F3*got {value!r}*",
    )


@pytest.mark.parametrize(
    "ref, message",
    [
        ("A99", "flakes.db has no attempt A99: see 'hermetic-hunt list' for the ids it holds"),
        ("F9", "flakes.db has no flake F9: see 'hermetic-hunt list' for the flakes it holds"),
        ("test_suite.py::test_gone", "flakes.db knows no test 'test_suite.py::test_gone'*"),
        ("test_suite.py::test_two", "'test_suite.py::test_two' never failed in flakes.db*"),
    ],
)
def test_an_unknown_id_is_a_usage_error(suite, ref, message):
    build_db(
        suite.path / "flakes.db",
        [record("test_suite.py::test_one"), record("test_suite.py::test_two", "passed")],
    )
    usage_error(
        suite.runpytest(f"--hermetic-replay-db=flakes.db::{ref}"),
        f"--hermetic-replay-db: {message}",
    )


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage", "the journal of A1: journal is*"),
        (b'{"format": "something-else"}', "the journal of A1: not a hermetic-hunt journal*"),
        (b"[" * 100_000, "the journal of A1: journal is *"),
        (
            json.dumps(
                {"format": "hermetic-hunt-journal", "version": 1, "test": "test_suite.py::test_one",
                 "mode": "record", "events": {"time": ["__import__('os')"]}}
            ).encode(),
            "the journal of A1: 'time' events must be numbers",
        ),
    ],
)  # fmt: skip
def test_a_corrupt_journal_is_a_usage_error(suite, blob, message):
    build_db(
        suite.path / "flakes.db",
        [record("test_suite.py::test_one", mode="record", journal=blob, journal_format="record/1")],
    )
    usage_error(
        suite.runpytest("--hermetic-replay-db=flakes.db::A1"), f"--hermetic-replay-db: {message}"
    )


def test_an_oversized_journal_is_refused_before_it_is_read(suite):
    build_db(
        suite.path / "flakes.db",
        [record("test_suite.py::test_one", mode="record", journal=b"x" * (16 * 1024 * 1024 + 1))],
    )
    usage_error(
        suite.runpytest("--hermetic-replay-db=flakes.db::A1"),
        "--hermetic-replay-db: the journal of A1: journal is 16,777,217 bytes, over the "
        "16,777,216 limit*",
    )


@pytest.mark.parametrize(
    "reproducer",
    ["not json {", {"steps": []}, {"steps": [{"nodeid": ["test_suite.py::test_one"]}]},
     {"steps": [{"nodeid": "test_suite.py::test_one", "mode": "sudo"}]}],
)  # fmt: skip
def test_a_malformed_reproducer_is_a_usage_error(suite, reproducer):
    build_db(suite.path / "flakes.db", [record("test_suite.py::test_one")])
    insert_flake(suite.path / "flakes.db", "F1", "test_suite.py::test_one", reproducer)
    usage_error(
        suite.runpytest("--hermetic-replay-db=flakes.db::F1"),
        "--hermetic-replay-db: the reproducer of F1 is malformed*",
    )


def test_a_test_that_is_no_longer_collected_is_named_with_the_fix(suite):
    build_db(suite.path / "flakes.db", [record("test_suite.py::test_renamed")])
    result = suite.runpytest_subprocess("-p", "no:randomly", "--hermetic-replay-db=flakes.db::A1")
    usage_error(
        result,
        f"--hermetic-replay-db: A1 needs 'test_suite.py::test_renamed', which is not collected "
        f"under rootdir {suite.path} (renamed or deleted? run from the directory the hunt ran "
        "in, or hunt again with --hermetic-hunt)",
    )
    with closing(sqlite3.connect(suite.path / "flakes.db")) as conn:
        assert conn.execute("SELECT count(*) FROM replays").fetchone() == (0,)


def test_a_test_deselected_by_an_option_is_named_with_the_fix(suite):
    build_db(suite.path / "flakes.db", [record("test_suite.py::test_one")])
    result = suite.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-replay-db=flakes.db::A1", "-k", "test_two"
    )
    usage_error(
        result,
        "--hermetic-replay-db: A1 needs 'test_suite.py::test_one', which an option deselected "
        "(-k, -m, --lf, --deselect?): drop it to replay",
    )


@pytest.mark.parametrize(
    "option, message",
    [
        ("--hermetic-all", "--hermetic-replay-db cannot be combined with --hermetic-all*"),
        (
            "-p repeat --count=3",
            "--hermetic-replay-db cannot be combined with --count (pytest-repeat)*",
        ),
    ],
)
def test_options_a_replay_cannot_honour_are_refused(suite, option, message):
    if "--count" in option:
        pytest.importorskip("pytest_repeat")
    build_db(suite.path / "flakes.db", [record("test_suite.py::test_one")])
    usage_error(suite.runpytest("--hermetic-replay-db=flakes.db::A1", *option.split()), message)


def test_a_reproducer_that_ends_with_another_test_is_refused(suite):
    build_db(
        suite.path / "flakes.db",
        [record("test_suite.py::test_one"), record("test_suite.py::test_two", "passed")],
    )
    steps = [
        {"nodeid": "test_suite.py::test_one", "seed": 7, "now": 1.0e9, "mode": "seeded"},
        {"nodeid": "test_suite.py::test_two", "seed": 7, "now": 1.0e9, "mode": "seeded"},
    ]
    insert_flake(suite.path / "flakes.db", "F1", "test_suite.py::test_one", {"steps": steps})
    usage_error(
        suite.runpytest("--hermetic-replay-db=flakes.db::F1"),
        "--hermetic-replay-db: the reproducer of F1 ends with 'test_suite.py::test_two', not "
        "with the flake's own test 'test_suite.py::test_one'*",
    )
