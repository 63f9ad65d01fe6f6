"""Phase reports folded into attempts, fed fake reports (no pytest session)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from hermetic_hunt.engine.recorder import Fold
from hermetic_hunt.models import Attempt, Leak


def report(when: str, outcome: str = "passed", *, wasxfail: str | None = None,
           message: str = "") -> Any:  # fmt: skip
    crash = SimpleNamespace(path="/r/t.py", lineno=3, message=message)
    longrepr = SimpleNamespace(reprcrash=crash, reprtraceback=SimpleNamespace(reprentries=[]))
    fake = SimpleNamespace(
        when=when, outcome=outcome, failed=outcome == "failed", passed=outcome == "passed",
        skipped=outcome == "skipped", longrepr=longrepr if outcome == "failed" else None,
        longreprtext=message, nodeid="t.py::test_x",
    )  # fmt: skip
    if wasxfail is not None:
        fake.wasxfail = wasxfail
    return fake


def fold(*reports: Any, exc_type: str | None = None) -> Attempt:
    partial = Fold("t.py::test_x", round_no=2, position=5, repeat=0, execution=1)
    for phase in reports:
        partial.phase_report(phase, "/r", exc_type if phase.failed else None)
    return partial.attempt(seed=7, mode="seeded", journal=b"j")


def test_a_passing_execution_is_one_passed_attempt_without_its_journal() -> None:
    attempt = fold(report("setup"), report("call"), report("teardown"))
    assert (attempt.outcome, attempt.phase, attempt.failure, attempt.journal) == (
        "passed", None, None, None,
    )  # fmt: skip
    assert (attempt.round_no, attempt.position, attempt.seed) == (2, 5, 7)


def test_a_failed_call_keeps_its_type_phase_and_journal() -> None:
    attempt = fold(
        report("setup"),
        report("call", "failed", message="AssertionError: assert 1 == 2"),
        report("teardown"),
        exc_type="AssertionError",
    )
    assert (attempt.outcome, attempt.phase, attempt.exc_type) == (
        "failed",
        "call",
        "AssertionError",
    )
    assert attempt.failure is not None and attempt.failure.message == "assert 1 == 2"
    assert attempt.journal == b"j"


def test_the_first_failing_phase_decides_and_a_later_one_does_not_overwrite_it() -> None:
    attempt = fold(
        report("setup", "failed", message="KeyError: 'db'"),
        report("teardown", "failed", message="OSError: gone"),
        exc_type="KeyError",
    )
    assert (attempt.phase, attempt.exc_type) == ("setup", "KeyError")


def test_xfail_and_xpass_and_skips() -> None:
    xfailed = fold(report("setup"), report("call", "skipped", wasxfail=""), report("teardown"))
    xpassed = fold(report("setup"), report("call", "passed", wasxfail="why"), report("teardown"))
    skipped = fold(report("setup", "skipped"), report("teardown"))
    assert [xfailed.outcome, xpassed.outcome, skipped.outcome] == ["xfailed", "xpassed", "skipped"]
    assert xpassed.exc_type == "XPASS"


def test_a_rerun_counts_as_a_failed_execution() -> None:
    attempt = fold(report("setup"), report("call", "rerun", message="E"), report("teardown"))
    assert attempt.outcome == "failed"


def test_an_executions_facts_and_what_its_step_left_make_one_attempt_never_changed() -> None:
    partial = Fold("t.py::test_x", round_no=2, position=5, repeat=0, execution=1,
                   facts={"seed": 7, "mode": "seeded"})  # fmt: skip
    for phase in (report("setup"), report("call"), report("teardown")):
        partial.phase_report(phase, "/r")
    leak = Leak("env", "X", "added")
    attempt = partial.attempt(leaks=(leak,), writes=("/r/out",))
    assert (attempt.seed, attempt.leaks, attempt.writes) == (7, (leak,), ("/r/out",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        attempt.outcome = "failed"  # type: ignore[misc]
