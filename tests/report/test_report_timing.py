"""The report says when a test failed only under timing conditions, and how far sleeps stretched."""

from __future__ import annotations

from pathlib import Path

from helpers import Rows

from hermetic_hunt.models import Attempt, Failure
from hermetic_hunt.report.load import load_report
from hermetic_hunt.report.text import render_text

BOOM = Failure("AssertionError", "assert None == 'ada'", "t.py:3")


def add(rows: Rows, run_id: int, nodeid: str, specs: list[tuple[str, dict]]) -> None:
    records = []
    for offset, (outcome, conditions) in enumerate(specs):
        records.append(
            Attempt(
                nodeid=nodeid, outcome=outcome, run_id=run_id, round_no=offset, worker="main",
                position=offset, seed=offset + 1, now=1.7e9, mode="seeded", hash_seed=0,
                failure=BOOM if outcome == "failed" else None, **conditions,
            )
        )  # fmt: skip
    rows.store.add_attempts(records, rows.store.test_ids([nodeid]))


def test_a_test_failing_only_under_noisy_clocks_gets_a_timing_line(tmp_path: Path) -> None:
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    exact = {"profile": "exact"}
    add(rows, run, "t.py::test_ttl", [
        ("passed", exact), ("passed", exact), ("passed", exact),
        ("failed", {"profile": "slow", "counts": {"stretch": 1370}}),
        ("passed", {"profile": "slow", "counts": {"stretch": 1050}}),
        ("failed", {"profile": "jitter", "counts": {"stretch": 1190}}),
        ("passed", {"profile": "jitter"}),
        ("passed", {"profile": "exact", "switch_interval": 2e-6}),
    ])  # fmt: skip
    add(rows, run, "t.py::test_victim", [
        ("failed", exact), ("passed", exact), ("failed", {"profile": "jitter"}),
    ])  # fmt: skip
    report = load_report(rows.store, cwd=str(tmp_path))
    rows.close()
    by_test = {t.nodeid: t for t in report.tests}
    assert by_test["t.py::test_ttl"].timing() == (
        "jitter 1/2 · slow 1/2 · switch 0/1 · exact 0/3 failed; "
        "fails when sleeps last ≥ 1.19x their duration"
    )
    assert by_test["t.py::test_victim"].timing() is None  # it fails calm too
    text = render_text(report)
    assert (
        "      timing: jitter 1/2 · slow 1/2 · switch 0/1 · exact 0/3 failed; "
        "fails when sleeps last ≥ 1.19x their duration"
    ) in text.splitlines()


def test_a_race_under_switch_intervals_and_a_stress_failure_get_their_line(tmp_path: Path) -> None:
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run(mode="record")
    add(rows, run, "t.py::test_race", [
        ("passed", {}), ("failed", {"switch_interval": 1e-5}), ("failed", {"stress": 2}),
        ("passed", {"stress": 2}),
    ])  # fmt: skip
    report = load_report(rows.store, cwd=str(tmp_path))
    rows.close()
    (test,) = report.tests
    assert test.timing() == "switch 1/1 · stress 1/2 · exact 0/1 failed"
