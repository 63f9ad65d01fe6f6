"""Leak checks: snapshots of the process between attempts, and what a round left behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from helpers import unset

from hermetic_hunt.engine.leaks import RESOURCES, RoundLeaks, Snapshot, Writes, diff
from hermetic_hunt.models import Leak, describe_leak


def names(leaks: list[Leak]) -> set[tuple[str, str, str]]:
    return {(x.resource, x.name, x.change) for x in leaks}


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.name)
def test_every_resource_has_one_spelling_and_words_for_each_change_it_reports(resource) -> None:
    assert [r.name for r in RESOURCES].count(resource.name) == 1
    for change in resource.changes:
        generic = f"left {resource.name} X {change}"
        assert describe_leak(resource.name, "X", change) != generic, (resource.name, change)


def test_an_unchanged_process_has_no_leaks() -> None:
    assert diff(Snapshot.take(), Snapshot.take(), "/nowhere") == []


def test_environment_changes_are_named_with_bounded_masked_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HH_OLD", "1")
    monkeypatch.setenv("HH_GONE", "1")
    before = Snapshot.take()
    monkeypatch.setenv("HH_OLD", "2")
    monkeypatch.delenv("HH_GONE")
    monkeypatch.setenv("HH_NEW", "x" * 500)
    monkeypatch.setenv("HH_DB_PASSWORD", "hunter2")
    found = diff(before, Snapshot.take(), None)
    assert names(found) == {
        ("env", "HH_OLD", "changed"),
        ("env", "HH_GONE", "removed"),
        ("env", "HH_NEW", "added"),
        ("env", "HH_DB_PASSWORD", "added"),
    }
    details = {x.name: x.detail for x in found}
    assert len(details["HH_NEW"]) <= 80 and details["HH_NEW"].endswith("…")
    assert details["HH_DB_PASSWORD"] == "***"


def test_a_deleted_working_directory_is_its_own_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tempfile.gettempdir())
    before = Snapshot.take()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        deleted = os.getcwd()
    try:
        found = diff(before, Snapshot.take(), None)
    finally:
        os.chdir(tempfile.gettempdir())
    assert names(found) == {("cwd", "cwd", "deleted")}
    # The directory it was left in, not the one it came from.
    assert found[0].describe() == f"left the cwd in a deleted directory ({deleted})"


def test_a_thread_that_outlives_its_test_is_named() -> None:
    stop = threading.Event()
    before = Snapshot.take()
    thread = threading.Thread(target=stop.wait, name="hh-refresher", daemon=True)
    thread.start()
    try:
        found = diff(before, Snapshot.take(), None)
    finally:
        stop.set()
        thread.join()
    assert ("thread", "hh-refresher", "added") in names(found)
    leak = next(x for x in found if x.resource == "thread")
    assert leak.describe() == "left 1 thread running: hh-refresher"


def test_scalars_and_sys_path_changes_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    before = Snapshot.take()
    monkeypatch.setattr(sys, "path", [*sys.path, "/hh/extra"])
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 3)
    try:
        found = diff(before, Snapshot.take(), None)
    finally:
        sys.setrecursionlimit(limit)
    assert {
        ("sys.path", "/hh/extra", "added"),
        ("recursion-limit", "recursion-limit", "changed"),
    } <= names(found)


def test_a_round_keeps_value_changes_still_in_place_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unset(monkeypatch, "HH_FIXTURE", "HH_KEPT", "HH_UNDONE")
    leaks = RoundLeaks(None)
    os.environ["HH_FIXTURE"] = "1"  # a module fixture's set-up, in the first attempt...
    os.environ["HH_UNDONE"] = "1"
    assert names(leaks.after_attempt(0)) == {
        ("env", "HH_FIXTURE", "added"),
        ("env", "HH_UNDONE", "added"),
    }
    os.environ["HH_KEPT"] = "1"
    os.environ["HH_UNDONE"] = "2"
    leaks.after_attempt(1)
    del os.environ["HH_FIXTURE"]  # ...and its teardown, in the last
    del os.environ["HH_UNDONE"]
    leaks.after_attempt(2)
    kept = leaks.finish()
    assert {position: names(found) for position, found in kept.items()} == {
        1: {("env", "HH_KEPT", "added")}
    }


def test_a_round_keeps_threads_whoever_undoes_values() -> None:
    stop = threading.Event()
    leaks = RoundLeaks(None)
    thread = threading.Thread(target=stop.wait, name="hh-kept", daemon=True)
    thread.start()
    try:
        leaks.after_attempt(4)
        kept = leaks.finish()
    finally:
        stop.set()
        thread.join()
    assert ("thread", "hh-kept", "added") in names(kept[4])


def test_writes_from_python_are_noted_under_the_rootdir_and_the_temp_dir(tmp_path: Path) -> None:
    watch = Writes.install()
    root = tmp_path / "project"
    root.mkdir()
    watch.start(str(root))
    try:
        (root / "out.txt").write_text("x")
        (root / "out.txt").read_text()  # a read is no write
        os.rename(root / "out.txt", root / "moved.txt")
        (tmp_path / "elsewhere.txt").write_text("x")  # neither rootdir nor top of temp dir
        fd, name = tempfile.mkstemp(prefix="hh-writes-")
        os.close(fd)
        os.remove(name)
        first = watch.take()
        (root / "again.txt").write_text("y")
        second = watch.take()
    finally:
        watch.stop()
    real = os.path.realpath(root)
    temp = os.path.realpath(name)
    assert first == [f"{real}/out.txt", f"{real}/moved.txt", temp]
    assert second == [f"{real}/again.txt"]
    assert watch.take() == []  # stopped: nothing is noted


def test_writes_in_the_users_home_are_noted_as_state_every_worker_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """devtracker keeps its data in ~/devtrack_projects/test.csv: two workers share it
    as they share the checkout (where Python and packages are installed: not state)."""
    from hermetic_hunt.engine import leaks

    monkeypatch.setattr(leaks, "system_temp", lambda: str(tmp_path / "systemp"))
    home, root = tmp_path / "home", tmp_path / "home" / "project"
    (home / ".app" / "__pycache__").mkdir(parents=True)
    root.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "prefix", str(home / ".venv"))
    (home / ".venv").mkdir()
    watch = Writes.install()
    watch.start(str(root))
    try:
        (home / ".app" / "data.csv").write_text("x")
        (root / "out.txt").write_text("x")
        (home / ".app" / "__pycache__" / "m.pyc").write_text("x")
        (home / ".venv" / "installed.txt").write_text("x")
        (tmp_path / "elsewhere.txt").write_text("x")
        noted = watch.take()
    finally:
        watch.stop()
    real = os.path.realpath(home)
    assert noted == [f"{real}/.app/data.csv", f"{real}/project/out.txt"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_path_relative_to_a_folders_descriptor_is_taken_from_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shutil.rmtree removes what is inside its folder by name and dir_fd: those
    names are not the working directory's (issue 29: phantom paths at the rootdir)."""
    watch = Writes.install()
    root = tmp_path / "project"
    (root / "shared" / "inner").mkdir(parents=True)
    (root / "shared" / "file.txt").write_text("x")
    monkeypatch.chdir(root)
    watch.start(str(root))
    try:
        shutil.rmtree(root / "shared")
        folder = os.open(root, os.O_RDONLY)
        try:
            os.mkdir("made", dir_fd=folder)
        finally:
            os.close(folder)
        noted = watch.take()
    finally:
        watch.stop()
    real = os.path.realpath(root)
    assert f"{real}/shared" in noted and f"{real}/made" in noted
    assert f"{real}/shared/inner" in noted and f"{real}/shared/file.txt" in noted
    assert f"{real}/inner" not in noted and f"{real}/file.txt" not in noted


def test_a_fixed_port_a_test_binds_is_noted_like_a_path(tmp_path: Path) -> None:
    """Two workers cannot both hold one port: it is a resource they can collide over."""
    watch = Writes.install()
    watch.start(str(tmp_path))
    try:
        with socket.socket() as fixed, socket.socket() as free:
            fixed.bind(("127.0.0.1", 0))
            port = fixed.getsockname()[1]
            free.bind(("127.0.0.1", 0))  # an ephemeral port: nobody else's
            with socket.socket() as again:
                again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                with contextlib.suppress(OSError):
                    again.bind(("127.0.0.1", port))  # taken: still noted, as tried
        noted = watch.take()
    finally:
        watch.stop()
    assert noted == [f"port:{port}"]


def test_an_sqlite_database_a_test_connects_to_is_a_write(tmp_path: Path) -> None:
    """SQLite writes its file from C: the connect is what the hook sees (issue 29)."""
    watch = Writes.install()
    root = tmp_path / "project"
    root.mkdir()
    watch.start(str(root))
    try:
        sqlite3.connect(root / "codes.sqlite").close()
        sqlite3.connect(f"file:{root / 'uri.sqlite'}?mode=rwc", uri=True).close()
        sqlite3.connect(":memory:").close()
        sqlite3.connect(tmp_path / "outside.sqlite").close()
        noted = watch.take()
    finally:
        watch.stop()
    real = os.path.realpath(root)
    assert noted == [f"{real}/codes.sqlite", f"{real}/uri.sqlite"]


def test_pytest_moving_the_projects_folders_in_sys_path_is_no_ones_leak(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root, src = str(tmp_path), str(tmp_path / "src")
    outside = ["/hh/site-packages", "/hh/lib"]
    monkeypatch.setattr(sys, "path", [root, src, root, *outside])
    before = Snapshot.take()
    # pytest's prepend import mode put the project's src first: the same entries
    monkeypatch.setattr(sys, "path", [src, root, src, root, *outside])
    assert [x for x in diff(before, Snapshot.take(), root) if x.resource == "sys.path"] == []
    # a test that swaps what is searched first outside the project: its leak
    monkeypatch.setattr(sys, "path", [root, src, root, *reversed(outside)])
    assert ("sys.path", "order", "changed") in names(diff(before, Snapshot.take(), root))


def test_what_a_wider_fixture_starts_is_its_own_until_it_outlives_the_teardown() -> None:
    leaks = RoundLeaks(None)
    held, forgotten = threading.Event(), threading.Event()
    before = Snapshot.running()
    server = threading.Thread(target=held.wait, name="hh-held", daemon=True)
    server.start()
    leaks.fixture_set_up("server", "session fixture 'server' at conftest.py:4", 0,
                         before, Snapshot.running())  # fmt: skip
    before = Snapshot.running()
    stray = threading.Thread(target=forgotten.wait, name="hh-stray", daemon=True)
    stray.start()
    leaks.fixture_set_up("stray", "module fixture 'stray' at conftest.py:9", 0,
                         before, Snapshot.running())  # fmt: skip
    try:
        assert leaks.after_attempt(0) == []  # the fixtures', not the first test's
        assert leaks.after_attempt(1) == []
        held.set()
        server.join()
        leaks.fixture_torn_down("server")  # stopped by its teardown: nobody's leak
        leaks.fixture_torn_down("stray")  # still running: the fixture's, where it was set up
        leaks.after_attempt(1)
        kept = leaks.finish()
    finally:
        held.set()
        forgotten.set()
        stray.join()
    assert kept == {
        0: [Leak("thread", "hh-stray", "added",
                 "started by module fixture 'stray' at conftest.py:9, "
                 "still running after its teardown")]
    }  # fmt: skip
    assert kept[0][0].describe() == (
        "left 1 thread running: hh-stray (started by module fixture 'stray' at conftest.py:9, "
        "still running after its teardown)"
    )


def test_a_fixture_that_starts_nothing_holds_nothing() -> None:
    leaks = RoundLeaks(None)
    now = Snapshot.running()
    leaks.fixture_set_up("quiet", "session fixture 'quiet'", 0, now, now)
    assert leaks.held == {}
    leaks.fixture_torn_down("quiet")  # a fixture never held: nothing to do
    assert leaks.finish() == {}
