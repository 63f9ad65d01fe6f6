"""``hermetic-hunt fix``: on a small hunted suite, every exit status and option."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import hunt

from hermetic_hunt.cli import main

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

SUITE = """
import os


def test_sets_the_env():
    os.environ["APP_MODE"] = "debug"
    assert os.environ["APP_MODE"] == "debug"


def test_reads_the_env():
    assert os.environ.get("APP_MODE", "prod") == "prod"
"""


@pytest.fixture
def hunted(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makepyfile(test_env=SUITE)
    result = hunt(pytester, "--hermetic-hunt=6", "-p", "no:xdist")
    assert "hermetic-hunt isolation:" in result.stdout.str()
    monkeypatch.chdir(pytester.path)
    return pytester.path


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["fix", *args])
    return result.exit_code, result.stdout


def test_fix_verifies_the_patch_on_a_copy_and_applies_it_when_asked(hunted):
    before = (hunted / "test_env.py").read_text()
    code, out = run("F1", "--runs", "6")
    assert code == 0, out
    assert out.splitlines()[0] == (
        "F1 test_env.py::test_reads_the_env: victim: fails after test_sets_the_env: make it put "
        "back what it changes"
    )
    assert "+def test_sets_the_env(monkeypatch):" in out
    assert '+    monkeypatch.setenv("APP_MODE", "debug")' in out
    assert "verified: the reproducer passes 6/6 with the patch" in out
    assert "control: the reproducer fails without the patch (in run 1 of 1)" in out
    assert (hunted / "test_env.py").read_text() == before
    code, diff = run("F1", "--diff")
    assert code == 0 and diff.startswith("--- a/test_env.py\n+++ b/test_env.py\n")
    with closing(sqlite3.connect(hunted / "flakes.db")) as conn, conn:
        stored = conn.execute("SELECT outcome, runs, passed, applied FROM fixes").fetchall()
    assert stored == [("verified", 6, 6, 0)]
    code, out = run("F1", "--apply", "--runs", "5")
    assert code == 0 and out.rstrip().endswith("applied to test_env.py")
    assert 'monkeypatch.setenv("APP_MODE", "debug")' in (hunted / "test_env.py").read_text()


def test_fix_without_verification_and_the_bad_inputs(hunted):
    code, out = run("F1", "--no-verify")
    assert code == 0 and out.rstrip().endswith("not verified (--no-verify)")
    code, out = run("F9")
    assert code == 3
    code, out = run("A1")
    assert code == 3
    result = CliRunner().invoke(main, ["fix", "F9"])
    assert result.stderr == "Error: flake F9 is not in flakes.db (it holds only F1): " \
                            "hermetic-hunt list shows the flake ids\n"  # fmt: skip
    result = CliRunner().invoke(main, ["fix", "F1", "--diff", "--apply"])
    assert result.exit_code == 2


def test_a_patch_that_cannot_be_verified_is_applied_only_with_no_verify(hunted):
    with closing(sqlite3.connect(hunted / "flakes.db")) as conn, conn:
        conn.execute("UPDATE flakes SET reproducer = NULL")
    conn.close()
    before = (hunted / "test_env.py").read_text()
    code, out = run("F1", "--apply")
    assert code == 1, out
    assert "not verified: the flake has no reproducer to run" in out
    assert out.rstrip().endswith("not applied: the patch is not verified (--no-verify --apply "
                                 "applies it anyway)")  # fmt: skip
    assert (hunted / "test_env.py").read_text() == before
    code, out = run("F1", "--no-verify", "--apply")
    assert code == 0 and out.rstrip().endswith("applied to test_env.py")
    assert 'monkeypatch.setenv("APP_MODE", "debug")' in (hunted / "test_env.py").read_text()


def test_a_verification_that_cannot_run_exits_1(hunted):
    # The victim was renamed since the hunt: the reproducer's test is not collected in the copy.
    source = (hunted / "test_env.py").read_text()
    (hunted / "test_env.py").write_text(source.replace("test_reads_the_env", "test_reads_env"))
    code, out = run("F1", "--runs", "2")
    assert code == 1, out
    assert "not verified: " in out and "verified: the reproducer passes" not in out


def test_a_test_file_linked_to_another_file_of_the_checkout_is_verified_and_patched_there(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory
):
    # pytest names the tests by the link; the copy collects them by that name and
    # the patch is written to the file the link points to, the link kept.
    (pytester.path / "shared").mkdir()
    real = pytester.path / "shared" / "env_tests.py"
    real.write_text(SUITE)
    (pytester.path / "test_env.py").symlink_to(Path("shared", "env_tests.py"))
    result = hunt(pytester, "--hermetic-hunt=6", "-p", "no:xdist")
    assert "F1 test_env.py::test_reads_the_env  victim" in result.stdout.str()
    monkeypatch.chdir(pytester.path)
    code, out = run("F1", "--runs", "5", "--apply")
    assert code == 0, out
    assert "verified: the reproducer passes 5/5 with the patch" in out
    assert out.rstrip().endswith("applied to shared/env_tests.py")
    assert (pytester.path / "test_env.py").readlink() == Path("shared", "env_tests.py")
    assert 'monkeypatch.setenv("APP_MODE", "debug")' in real.read_text()
    # A link out of the checkout: one line says why there is no patch, nothing is written.
    outside = tmp_path_factory.mktemp("outside") / "env_tests.py"
    outside.write_text(SUITE)
    (pytester.path / "test_env.py").unlink()
    (pytester.path / "test_env.py").symlink_to(outside)
    code, out = run("F1", "--apply")
    assert code == 1, out
    assert (
        f"  no patch: test_env.py is a link to {outside.resolve()}, outside the checkout "
        f"({pytester.path}); fix reads and patches only files inside it\n"
    ) in out
    assert outside.read_text() == SUITE
