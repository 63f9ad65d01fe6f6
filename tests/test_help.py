"""``pytest --help`` works with hermetic-hunt installed (each command's ``--help``: test_cli)."""

from __future__ import annotations

import pytest

from hermetic_hunt.plugin import HUNT_OPTIONS


def test_pytest_help_works_and_lists_every_hunt_option(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0, result.stderr.str()
    out = result.stdout.str()
    assert "Traceback (most recent call last)" not in out + result.stderr.str()
    for flag in [o.flag for o in HUNT_OPTIONS] + ["--hermetic-hunt=", "--hermetic-replay-db"]:
        assert flag in out
    # A percent sign in a help text is shown as written, in the option and its ini key.
    assert out.count("jitter 20%, slow 10%") == 2


def test_pytest_help_works_with_the_hunt_options_in_the_ini_file(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nhermetic_hunt_time = jitter=30\n")
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0, result.stderr.str()
