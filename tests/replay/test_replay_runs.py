"""A replay runs its reproducer until it reproduces: N runs from the hunt's rate.

The victim here fails after its polluter only in the fourth process that runs
it (a counter file counts the runs): a flake that a single replay misses,
deterministic by construction.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import Rows

from hermetic_hunt import stats
from hermetic_hunt.models import Reproducer, Step
from hermetic_hunt.replay.verdict import MAX_RUNS, ReplayVerdict, Runs, over_runs, plan_runs

SUITE = """
from pathlib import Path

COUNTER = Path(__file__).with_name("runs.txt")
STATE = {}


def test_start_background_job():
    STATE["job"] = "running"


def test_report_is_idle():
    runs = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(runs))
    assert not (STATE and runs % 4 == 0), "the background job got in"
"""
POLLUTER = "test_bg.py::test_start_background_job"
VICTIM = "test_bg.py::test_report_is_idle"
LINE = SUITE.splitlines().index(
    '    assert not (STATE and runs % 4 == 0), "the background job got in"'
)


def _database(pytester: pytest.Pytester) -> Path:
    rows = Rows(pytester.path / "flakes.db")
    run = rows.run()
    rows.attempts(run, POLLUTER, "P" * 10)
    rows.attempts(run, VICTIM, "PPPFPPPPPP")  # 10%: 29 runs make a failure 95% expected
    reproducer = Reproducer(
        steps=(Step(POLLUTER, 11, 1_700_000_000.0), Step(VICTIM, 12, 1_700_000_001.0)),
        hash_seed=0,
        exc_type="AssertionError",
        location=f"test_bg.py:{LINE}",
        message="the background job got in",
        run_id=run,
    )
    rows.flake(VICTIM, "F1", polluters=[[POLLUTER]], reproducer=reproducer, confirmed=0)
    rows.store.conn.commit()
    rows.close()
    return pytester.path / "flakes.db"


@pytest.mark.slow
def test_a_probabilistic_victim_replays_as_reproduced_within_its_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    pytester.makepyfile(test_bg=SUITE)
    _database(pytester)
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # the reproducer's: no restart
    needed = stats.runs_for_rate(0.10)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-replay-db=flakes.db::F1"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            f"hermetic-hunt replay: up to {needed} runs, each in a fresh forked process, until one "
            "reproduces (95% sure to show a 10% flake)",
            "*= FAILURES =*",
            f"reproduced F1 in run 4 of {needed}: {VICTIM} failed with the recorded signature "
            f"(AssertionError the background job got in at test_bg.py:{LINE})",
            "*1 failed, 1 passed*",
        ]
    )
    assert (pytester.path / "runs.txt").read_text() == "4"
    # Three runs are too few: said so, and the session passes (exit status 0).
    (pytester.path / "runs.txt").unlink()
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-replay-db=flakes.db::F1", "--hermetic-replay-runs=3"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            f"did not reproduce F1 in 3 runs (not 95% expected: a 10% flake needs {needed} runs "
            "for that); the last run: passed",
            "*2 passed*",
        ]
    )
    # hermetic-hunt replay --run: the same replay, the same runs.
    (pytester.path / "runs.txt").unlink()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("hermetic-hunt")), "replay", "F1", "--run", "--",
         "-p", "no:randomly"],
        cwd=pytester.path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"reproduced F1 in run 4 of {needed}: {VICTIM}" in done.stdout


def test_the_runs_come_from_the_rate_capped_and_overridable():
    assert plan_runs(None) == Runs(1, 1)
    assert plan_runs(1.0).planned == 1
    assert plan_runs(0.10) == Runs(29, 29, 0.10)
    assert plan_runs(0.001) == Runs(MAX_RUNS, stats.runs_for_rate(0.01), 0.001)
    assert plan_runs(0.10, 5) == Runs(5, 29, 0.10, override=True)


def test_the_verdict_over_runs_names_the_run_that_reproduced():
    class Plan:
        label = "F11"

    passed = ReplayVerdict("not-reproduced", "did not reproduce F11 (passed)")
    hit = ReplayVerdict(
        "reproduced",
        "reproduced F11: t.py::test_x failed with the recorded signature (E at t.py:3)",
    )
    runs = Runs(23, 23, 0.12)
    got = over_runs(Plan(), [passed, passed, passed, hit], runs)  # type: ignore[arg-type]
    assert got == ReplayVerdict(
        "reproduced", "reproduced F11 in run 4 of 23: t.py::test_x failed with the recorded "
        "signature (E at t.py:3)"
    )  # fmt: skip
    assert over_runs(Plan(), [hit], runs) == hit  # type: ignore[arg-type]
    got = over_runs(Plan(), [passed] * 23, runs)  # type: ignore[arg-type]
    assert got.line == "did not reproduce F11 in 23 runs (95% expected); the last run: passed"
    assert got.outcome == "not-reproduced"
