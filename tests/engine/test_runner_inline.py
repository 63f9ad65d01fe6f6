"""The step runner and the attempt executor in this process: replay sessions
(``Engine.run``, no fork) through ``pytester.inline_run``, read from pytest's own
hook calls and the database rather than from terminal text."""

from __future__ import annotations

import pytest
from helpers import build_db, record, rows

from hermetic_hunt.models import Failure

SUITE = """
import random
import time


def test_draw():
    assert False, f"drew {random.random()} at {time.time()}"


def test_unrelated():
    pass
"""
NODEID = "test_suite.py::test_draw"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def replayed(suite: pytest.Pytester, attempt_id: int) -> list[pytest.TestReport]:
    """The call-phase reports of a replay of ``A<attempt_id>`` run in this process."""
    recorder = suite.inline_run(
        f"--hermetic-replay-db={suite.path / 'flakes.db'}::A{attempt_id}", "-p", "no:cacheprovider"
    )
    return [r for r in recorder.getreports("pytest_runtest_logreport") if r.when == "call"]


def drew(report: pytest.TestReport) -> str:
    """``"0.45... at 1500000000.0"``: what the test drew, and when."""
    message = report.longrepr.reprcrash.message  # type: ignore[union-attr]
    return str(message).split("drew ")[1].split("\n")[0]


def test_an_attempt_runs_alone_under_its_seed_and_start_time(suite: pytest.Pytester) -> None:
    failure = Failure("AssertionError", "drew", "test_suite.py:6", "E drew")
    ids = build_db(
        suite.path / "flakes.db",
        [
            record(NODEID, seed=11, now=1.5e9, failure=failure),
            record(NODEID, seed=12, now=1.5e9, failure=failure, position=1),
        ],
    )
    first, again, other = (replayed(suite, n) for n in (ids[0], ids[0], ids[1]))
    # only the attempt's test ran, and it failed as recorded
    assert [(r.nodeid, r.outcome) for r in first] == [(NODEID, "failed")]
    # its seed decides random, its start time the clock: the same in every replay
    assert drew(first[0]) == drew(again[0])
    assert drew(first[0]).split(" at ")[0] != drew(other[0]).split(" at ")[0]
    assert float(drew(first[0]).split(" at ")[1]) == pytest.approx(1.5e9, abs=1.0)
    outcomes = rows(suite.path / "flakes.db", "SELECT target, outcome FROM replays ORDER BY id")
    assert outcomes == [
        (f"A{ids[0]}", "reproduced"),
        (f"A{ids[0]}", "reproduced"),
        (f"A{ids[1]}", "reproduced"),
    ]
