"""Tests for hermetic_hunt.report.show: stored evidence reads as indented lines, not JSON."""

from __future__ import annotations

from hermetic_hunt.report.show import _evidence_lines


def test_evidence_is_nested_key_value_lines_with_flat_records_on_one_line():
    lines = _evidence_lines({
        "verdicts": [{"kind": "random", "failed": 3}],
        "dates": {"fails_now": False, "next_failure": "2026-12-31T00:00:00.250+00:00"},
        "note": "one\nline",
        "tests": ["a", "b"],
    })  # fmt: skip
    assert lines == [
        "evidence:",
        "  dates:",
        "    fails_now: false",
        "    next_failure: 2026-12-31T00:00:00.250+00:00",
        r"  note: one\x0aline",
        "  tests:",
        "    - a",
        "    - b",
        "  verdicts:",
        "    - failed: 3, kind: random",
    ]


def test_no_evidence_prints_nothing():
    assert _evidence_lines({}) == [] and _evidence_lines(None) == []
