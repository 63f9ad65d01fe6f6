"""The smallest patch: a test that changes its own parametrize value gets a copy, verified."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import hunt

from hermetic_hunt.cli import main

SUITE = """
import pytest


@pytest.mark.parametrize("test_args", [["--verbose"]])
def test_the_color_flag_goes_first(test_args):
    test_args.insert(0, "--color")
    assert test_args == ["--color", "--verbose"]


def test_fine():
    pass
"""


@pytest.fixture
def hunted(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makepyfile(test_cli=SUITE)
    result = hunt(pytester, "--hermetic-hunt=6", "-p", "no:xdist")
    assert "hermetic-hunt isolation:" in result.stdout.str()
    monkeypatch.chdir(pytester.path)
    return pytester.path


@pytest.mark.slow
def test_a_parametrize_argument_mutation_gets_a_verified_copy_patch(hunted):
    result = CliRunner().invoke(main, ["fix", "F1", "--runs", "5"])
    out = result.stdout
    assert result.exit_code == 0, out
    assert out.splitlines()[0].endswith(
        "self-polluting: fails on its second run in one process: it leaves state for itself: "
        "work on a copy of its parametrize value"
    )
    assert (
        "test_the_color_flag_goes_first changes its parametrize argument test_args in place "
        "(test_args.insert())" in out
    )
    assert "+import copy" in out
    assert "+    test_args = copy.deepcopy(test_args)  # its parametrize value is shared" in out
    assert "snapshot" not in out and "restore_" not in out  # nothing heavier
    assert "verified: the reproducer passes 5/5 with the patch" in out
