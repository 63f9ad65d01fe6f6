"""Tests for hermetic_hunt.report.fixes: the commands a report prints are paste-able."""

from __future__ import annotations

import shlex

from hermetic_hunt.findings import FixFacts
from hermetic_hunt.report.fixes import fix_views


def test_the_fix_command_of_a_report_is_shell_quoted(tmp_path):
    db = str(tmp_path / "a$(touch pwn) b'.db")
    facts = FixFacts(flake_id="F2", nodeid="tests/t.py::test_v", kinds=("random",),
                     rootdir=str(tmp_path))  # fmt: skip
    view = fix_views([facts], {}, db)["F2"]
    assert shlex.split(view.command) == ["hermetic-hunt", "fix", "F2", "--db", db]


def test_the_default_database_is_not_named(tmp_path):
    facts = FixFacts(flake_id="F2", nodeid="tests/t.py::test_v", kinds=("random",),
                     rootdir=str(tmp_path))  # fmt: skip
    assert fix_views([facts], {}, "flakes.db")["F2"].command == "hermetic-hunt fix F2"
