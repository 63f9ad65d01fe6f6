"""Tests for hermetic_hunt.store.history: what a run counts towards a flake's history."""

from __future__ import annotations

from helpers import Rows

from hermetic_hunt.report.history import history
from hermetic_hunt.store.history import Tally, runs, tallies


def test_a_run_whose_repeated_run_failed_is_no_clean_run(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    first, second = rows.run(), rows.run()
    rows.attempts(first, "t.py::test_a", "PPPF")
    rows.attempts(second, "t.py::test_a", "PPPP")
    rows.attempts(second, "t.py::test_a", "F", repeat=2)  # a twice round's second run
    rows.attempts(second, "t.py::test_a", "P", repeat=1)  # its first run: plain
    counted = tallies(rows.store, ["t.py::test_a"])
    points = runs(rows.store)
    rows.close()
    assert counted == [
        Tally("t.py::test_a", first, 4, 1),
        Tally("t.py::test_a", second, 5, 0, repeated_failed=1),
    ]
    seen = history("t.py::test_a", points, counted)
    assert seen.last.run_id == second and seen.rate == 1 / 9  # the rate is the plain runs'
    assert seen.status == "flaky"
