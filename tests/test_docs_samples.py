"""The output samples in docs/ are what the commands print (scripts/regen_docs.py).

The fast tests hold the pages' sample markers to the script's table and
check what the comparison forgives (times, ids, counts) and what it does not
(words, lines). The slow one compares every sample with what the session's
shared demo hunt and the commands after it print now (no hunt of its own).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "regen_docs.py"


def _regen():  # the script is no module of the package: load it by path
    spec = importlib.util.spec_from_file_location("regen_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["regen_docs"] = module
    spec.loader.exec_module(module)
    return module


regen = _regen()


def test_every_sample_block_of_the_docs_has_its_command_and_every_command_a_block():
    marked = [name for blocks in regen.pages().values() for name, _ in blocks]
    assert sorted(marked) == sorted(regen.SAMPLES)
    for blocks in regen.pages().values():
        for name, text in blocks:
            assert text.strip(), f"{name}: empty sample (python scripts/regen_docs.py fills it)"


def test_the_comparison_forgives_times_ids_counts_and_paths():
    one = (
        "hermetic-hunt report · flakes.db · 1 run · 1,827 plain attempts + 126 repeated of 63 tests\n"
        "  run 1 · 2026-12-03 14:41:38 UTC · complete · 30/30 rounds · seed 7\n"
        "  F21 tests/test_tags.py::test_tags_are_listed_in_order (25 probes, 3.8s) in /tmp/x_1\n"
        "  1 fails on 2026-12-31 (in 27 days)\n"
    )
    two = (
        "hermetic-hunt report · flakes.db · 1 run · 1,890 plain attempts + 63 repeated of 64 tests\n"
        "  run 1 · 2027-01-01 00:00:00 UTC · complete · 30/30 rounds · seed 7\n"
        "  F3 tests/test_tags.py::test_tags_are_listed_in_order (2 probes, 1m5s) in /tmp/y\n"
        "  1 fails on 2027-01-31 (in 1 day)\n"
    )
    assert regen.normalise(one) == regen.normalise(two)


def test_the_comparison_catches_changed_words_and_lines():
    printed = (
        "hermetic-hunt: 20 flaky · 0 broken\n  replay: pytest --hermetic-replay-db=flakes.db::F3\n"
    )
    stale = "flaky tests (passed and failed on the same code):\n  replay: pytest --hermetic-replay-db=flakes.db::A49\n"
    assert regen.normalise(printed) != regen.normalise(stale)
    assert regen.normalise(printed) != regen.normalise(printed.split("\n", 1)[1])


def test_a_sample_shows_the_lines_it_picks_and_marks_the_cuts():
    lines = ["pytest header", "a 1", "a 2", "b", "c 1", "c 2", "c 3", "tail"]
    assert regen.spans(("a", 2), ("c", 2))(lines) == [
        "...",
        "a 1",
        "a 2",
        "...",
        "c 1",
        "c 2",
        "...",
    ]
    assert regen.head(2, tail=1)(lines) == ["pytest header", "a 1", "...", "tail"]
    assert regen.head(20)(lines) == lines


@pytest.mark.slow
def test_every_docs_sample_matches_what_its_command_prints_now(demo_hunt):
    """The session's demo hunt (the one the script runs), then each sample's command."""
    assert demo_hunt.returncode == 0, demo_hunt.stdout[-3000:] + demo_hunt.stderr[-3000:]
    stale = regen.stale(regen.samples_of(demo_hunt.root, demo_hunt.stdout))
    assert not stale, "\n".join(stale) + "\n(python scripts/regen_docs.py rewrites them)"


@pytest.mark.slow
def test_the_examples_markdown_report_fits_a_step_summary(demo_hunt):
    from click.testing import CliRunner

    from hermetic_hunt.cli import main

    result = CliRunner().invoke(
        main, ["report", "--db", str(demo_hunt.db), "--format", "markdown"], catch_exceptions=False
    )
    assert result.exit_code == 1  # findings
    lines = result.stdout.splitlines()
    assert len(lines) <= 150, len(lines)
    assert "<details><summary>One per flake: <code>hermetic-hunt fix ID</code>" in result.stdout
