"""A private temporary folder per round: only the round's own processes write there."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import unset

from hermetic_hunt.engine import leaks
from hermetic_hunt.engine.leaks import RoundLeaks, Writes


@pytest.fixture
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a round's child: ``private_temp`` set up, everything put back after."""
    for var in ("TMPDIR", "TEMP", "TMP", "PYTEST_DEBUG_TEMPROOT"):
        if var in os.environ:
            monkeypatch.setenv(var, os.environ[var])
        else:
            unset(monkeypatch, var)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)
    monkeypatch.setattr(leaks, "_private", [])
    monkeypatch.setattr(leaks, "_system", [])
    system = os.path.realpath(tempfile.gettempdir())
    path = Path(leaks.private_temp(str(tmp_path / "job")))
    assert leaks.system_temp() == system
    return path


@pytest.mark.process
def test_the_round_gets_its_own_tmpdir_tempfile_and_pytest_root(private: Path) -> None:
    assert private.is_dir() and list(private.iterdir()) == []
    for var in ("TMPDIR", "TEMP", "TMP", "PYTEST_DEBUG_TEMPROOT"):
        assert os.environ[var] == str(private)
    assert tempfile.gettempdir() == str(private)
    assert Path(tempfile.mkdtemp()).parent == private
    # a process the test starts inherits it
    child = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert child.stdout.strip() == str(private)


def test_what_a_test_leaves_in_its_temp_folder_is_its_leak(private: Path) -> None:
    watch = RoundLeaks(None)
    fd, kept = tempfile.mkstemp(prefix="hh-left-")
    os.close(fd)
    (private / "pytest-of-someone").mkdir()  # pytest's own: never a leak
    first = watch.after_attempt(0)
    fd, passing = tempfile.mkstemp(prefix="hh-gone-")
    os.close(fd)
    second = watch.after_attempt(1)
    os.remove(passing)  # a later test cleans it up
    watch.after_attempt(2)
    system = leaks.system_temp()
    assert [(x.resource, x.name, x.change) for x in first] == [
        ("tempfile", os.path.join(system, os.path.basename(kept)), "added")
    ]
    assert [x.name for x in second] == [os.path.join(system, os.path.basename(passing))]
    left = watch.finish()
    assert list(left) == [0] and left[0][0].describe().startswith(f"left {system}")


def test_others_writing_into_the_system_temp_dir_are_nobodys_leak(
    private: Path, tmp_path: Path
) -> None:
    system = Path(leaks.system_temp())
    watch = RoundLeaks(None)
    stranger = Path(tempfile.mkdtemp(prefix="hh-stranger-", dir=system))
    try:
        assert watch.after_attempt(0) == []
    finally:
        stranger.rmdir()
    # The audit hook watches the system's temp dir (paths a test names outright).
    writes = Writes.install()
    writes.start(str(tmp_path))
    try:
        named = system / f"hh-named-{os.getpid()}"
        named.write_text("x")
        named.unlink()
        assert writes.take() == [str(named)]
    finally:
        writes.stop()


def test_a_cwd_left_in_a_deleted_temp_folder_is_named_as_in_the_system_temp_dir(
    private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(private)
    watch = RoundLeaks(None)
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
    (leak,) = watch.after_attempt(0)
    os.chdir(private)
    expected = os.path.join(leaks.system_temp(), os.path.basename(folder))
    assert leak.describe() == f"left the cwd in a deleted directory ({expected})"
