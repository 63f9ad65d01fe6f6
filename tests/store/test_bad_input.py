"""Bad input to a hunt: a one-line usage error (exit 4), never a traceback, nothing lost."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from helpers import one

from hermetic_hunt.store import Store


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_one="def test_one(): pass")
    return pytester


def _usage_error(result: pytest.RunResult, message: str) -> None:
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "abc",
            "--hermetic-hunt: expected a number of rounds or a duration like 90s, 10m or 1h, got 'abc'",
        ),
        ("0", "--hermetic-hunt: expected between 1 and 1,000,000 rounds, got '0'"),
        ("-3", "--hermetic-hunt: expected a number of rounds or a duration like*got '-3'"),
        ("10x", "*got '10x'"),
        ("0s", "--hermetic-hunt: the time budget must be positive, got '0s'"),
    ],
)
def test_a_bad_hunt_value_is_a_usage_error(suite, value, message):
    # In this process: the value is refused before the hunt starts anything (the
    # first case also in a fresh process, as a user runs it).
    run = suite.runpytest_subprocess if value == "abc" else suite.runpytest_inprocess
    _usage_error(run(f"--hermetic-hunt={value}"), message)


@pytest.mark.parametrize(
    "option, message",
    [
        (
            "--hermetic-hunt-mode=fuzzy",
            "--hermetic-hunt-mode: expected one of seeded, record, off, got 'fuzzy'",
        ),
        (
            "--hermetic-hunt-order=random",
            "--hermetic-hunt-order: expected one of auto, shuffle, grouped, reversed, twice, got 'random'",
        ),
        ("--hermetic-hunt-shard=3/2", "--hermetic-hunt-shard: K must be between 1 and M*"),
        (
            "--hermetic-hunt-shard=half",
            "--hermetic-hunt-shard: expected K/M such as 1/4, got 'half'",
        ),
        (
            "--hermetic-hunt-isolate=maybe",
            "--hermetic-hunt-isolate: expected one of on, off, got 'maybe'",
        ),
        (
            "--hermetic-hunt-isolate-budget=lots",
            "--hermetic-hunt-isolate-budget: expected probes per flaky test (300), an overall "
            "time (15m), both (300,15m) or auto, got 'lots'",
        ),
        (
            "--hermetic-hunt-probe-timeout=soon",
            "--hermetic-hunt-probe-timeout: expected seconds or a duration*",
        ),
        (
            "--hermetic-hunt-integration-marker=not a marker",
            "--hermetic-hunt-integration-marker: expected a marker name*",
        ),
        (
            "--hermetic-hunt-time=chaos",
            "--hermetic-hunt-time: expected default, exact, or percents of rounds like "
            "jitter=20,slow=10,stress=10,switch=10,edge=10 (at most 100 in all), got 'chaos'",
        ),
        (
            "--hermetic-hunt-time=jitter=80,switch=30",
            "--hermetic-hunt-time: the shares add up to 110%, over 100%: got 'jitter=80,switch=30'",
        ),
        (
            "--hermetic-hunt-time=slow=5,slow=5",
            "--hermetic-hunt-time: slow is given twice in 'slow=5,slow=5'",
        ),
    ],
)
def test_an_unknown_option_value_is_a_usage_error(suite, option, message):
    _usage_error(suite.runpytest_inprocess("--hermetic-hunt=2", option), message)


def test_an_ini_value_is_validated_like_the_option(suite):
    suite.makeini("[pytest]\nhermetic_hunt_mode = sometimes\n")
    _usage_error(
        suite.runpytest_subprocess("--hermetic-hunt=2"), "--hermetic-hunt-mode: *got 'sometimes'"
    )


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(suite):
    target = suite.path / "notes.db"
    target.write_text("my notes, not a database\n")
    result = suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-hunt-db={target}")
    _usage_error(result, f"{target} is not an SQLite database*")
    assert target.read_text() == "my notes, not a database\n"


def test_another_programs_sqlite_database_is_refused(suite):
    target = suite.path / "app.db"
    with closing(sqlite3.connect(target)) as conn, conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    result = suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-hunt-db={target}")
    _usage_error(result, f"{target} is not a hermetic-hunt database (it holds tables: users)*")


def test_a_database_from_a_newer_version_is_refused_untouched(suite):
    target = suite.path / "new.db"
    Store.open(target).close()
    with closing(sqlite3.connect(target)) as conn, conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('hermetic_hunt', '9999_from_the_future', '2030-01-01')"
        )
    result = suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-hunt-db={target}")
    _usage_error(result, f"{target} was written by a newer hermetic-hunt*upgrade*")
    assert one(target, "SELECT count(*) FROM runs") == 0


def test_a_database_in_a_missing_directory_is_refused(suite):
    target = suite.path / "no" / "such" / "dir" / "flakes.db"
    _usage_error(
        suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-hunt-db={target}"),
        f"cannot create {target}: directory * does not exist",
    )


def test_an_unwritable_database_path_is_refused(suite):
    folder = suite.path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        import os

        if os.access(folder, os.W_OK):  # running as root: permissions are not enforced
            pytest.skip("permissions are not enforced for this user")
        _usage_error(
            suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-hunt-db={folder}/f.db"),
            "cannot create *: directory * is not writable",
        )
    finally:
        folder.chmod(0o700)


def test_a_directory_as_database_is_refused(suite):
    _usage_error(
        suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-hunt-db={suite.path}"),
        f"{suite.path} is a directory, not a database file",
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--hermetic-all"],
            "--hermetic-hunt cannot be combined with --hermetic-all: a hunt sandboxes every attempt itself",
        ),
        (
            ["--hermetic-record=journals"],
            "--hermetic-hunt cannot be combined with --hermetic-record: use --hermetic-hunt-mode=record instead",
        ),
        (
            ["-p", "repeat", "--count=3"],
            "--hermetic-hunt cannot be combined with --count (pytest-repeat)*",
        ),
        (
            ["-n", "2", "--dist=each"],
            "--hermetic-hunt cannot be combined with --dist=each*",
        ),
        (["--stepwise"], "--hermetic-hunt cannot be combined with --stepwise*"),
        (
            ["--hermetic-replay-db=flakes.db::F1"],
            "--hermetic-hunt and --hermetic-replay-db cannot be combined*",
        ),
    ],
)
def test_options_a_hunt_cannot_honour_are_named(suite, extra, message):
    if "--count=3" in extra:
        pytest.importorskip("pytest_repeat")
    _usage_error(suite.runpytest_subprocess("--hermetic-hunt=2", *extra), message)


def test_a_seed_out_of_range_is_refused(suite):
    _usage_error(
        suite.runpytest_subprocess("--hermetic-hunt=2", f"--hermetic-seed={2**63}"),
        "--hermetic-seed: expected a seed between 0 and 2**63-1, got *",
    )
