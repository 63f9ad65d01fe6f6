"""Tests for hermetic_hunt.store.attempts: one column list, an attempt to a row and back."""

from __future__ import annotations

from helpers import Rows, record

from hermetic_hunt.models import Attempt, Failure, Violation
from hermetic_hunt.store import attempts
from hermetic_hunt.store.integrity import expected_columns


def test_the_column_list_is_the_attempts_table_of_the_schema():
    assert sorted(attempts.COLUMNS) == sorted(name for name, _ in expected_columns()["attempts"])


def test_an_attempt_reads_back_as_it_was_written(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run_id = rows.run()
    written = record(
        "t.py::t", run_id=run_id, round_no=3, worker="gw1", position=4, execution=2,
        duration=0.25, seed=11, now=1.5e9, mode="record", hash_seed=9, counts={"time": 2},
        violations=(Violation("connect", "192.0.2.1", 80, "blocked"),), repeat=1,
        profile="jitter", switch_interval=0.001, stress=2, started=1.7e9,
        writes=("/tmp/a", "relative"), journal=b"data", journal_format="record/1",
    )  # fmt: skip
    (attempt_id,) = rows.store.add_attempts([written], rows.store.test_ids(["t.py::t"]))
    (read,) = attempts.read(rows.store.conn, "WHERE a.id = ?", (attempt_id,), violations=True)
    rows.close()
    assert read == Attempt(
        **{**written.__dict__, "attempt_id": attempt_id, "has_journal": True, "journal": None,
           "journal_format": None, "writes": ("/tmp/a",),
           "failure": Failure("AssertionError", "boom", "test_suite.py:2")},
    )  # fmt: skip


def test_values_of_the_wrong_kind_read_as_absent():
    row = {column: None for column in (*attempts.COLUMNS, "nodeid", "exc_type", "message",
                                         "location", "has_journal")}  # fmt: skip
    row.update(id=5, outcome="crashed", duration=-3.0, now=float("inf"), counts="[1]",
               writes='{"a": 1}', profile="sluggish", switch_interval=2.0, stress=-1)  # fmt: skip
    attempt = attempts.from_row(row)  # type: ignore[arg-type]
    assert (attempt.duration, attempt.now, attempt.counts, attempt.writes) == (0.0, None, None, ())
    assert (attempt.profile, attempt.switch_interval, attempt.stress) == (None, None, 0)
    assert attempt.failure == Failure("", "", "")  # failing without a failures row
    assert (attempt.mode, attempt.execution) == ("seeded", 1)
