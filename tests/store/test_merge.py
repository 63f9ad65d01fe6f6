"""``hermetic-hunt merge``: shards combined without losing or duplicating anything."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import CLEANER, LONELY, POLLUTER, STABLE, VICTIM, Rows, victim_reproducer

from hermetic_hunt.cli import main
from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import Violation
from hermetic_hunt.store.merge import merge_databases

TABLES = (
    "runs",
    "tests",
    "attempts",
    "failures",
    "violations",
    "journals",
    "flakes",
    "isolation_steps",
    "test_checks",
    "replays",
)


def dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with closing(sqlite3.connect(db)) as conn, conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(sql, params).fetchall()


def shard_a(path: Path) -> Path:
    rows = Rows(path)
    run = rows.run(shard="1/2")
    attempts = rows.attempts(run, VICTIM, "PFFP", counts={"time": 1}, journal=True)
    rows.attempts(run, POLLUTER, "PPPP")
    rows.attempts(run, STABLE, "PPPP", violations=[Violation("connect", "x.invalid", 80)])
    rows.check(run, STABLE, "passed")
    flake = rows.flake(
        VICTIM,
        "F1",
        polluters=[[POLLUTER]],
        probes=3,
        confirmed=0,
        reproducer=victim_reproducer(POLLUTER, VICTIM, run, attempts[1]),
        evidence={"failing_attempts": attempts[1:3], "runs": [run], "target_attempt": attempts[1]},
    )
    rows.step(flake, run, 1, "alone", [VICTIM], "passed")
    rows.close()
    return path


def shard_b(path: Path) -> Path:
    rows = Rows(path)
    run = rows.run(shard="2/2")
    rows.attempts(run, STABLE, "PPP")
    lonely = rows.attempts(run, LONELY, "PFP")
    victim = rows.attempts(run, VICTIM, "FFPF")
    rows.flake(LONELY, "F1", kinds=["random"], evidence={"failing_attempts": [lonely[1]]})
    row = rows.flake(
        VICTIM,
        "F2",
        kinds=["victim", "time"],
        polluters=[[POLLUTER], [CLEANER]],
        probes=5,
        confirmed=1,
        reproducer=victim_reproducer(CLEANER, VICTIM, run, victim[0]),
        note="from b",
    )
    rows.step(row, run, 1, "preceding sequence", [CLEANER, VICTIM], "failed")
    rows.close()
    return path


@pytest.fixture
def shards(tmp_path: Path) -> tuple[Path, Path]:
    return shard_a(tmp_path / "a.db"), shard_b(tmp_path / "b.db")


def test_two_shards_merge_into_every_run_once_with_attempts_renumbered(shards, tmp_path):
    a, b = shards
    out = tmp_path / "out.db"
    result = merge_databases([a, b], out)
    assert [(s.new_runs, s.known_runs, s.attempts) for s in result.inputs] == [
        (1, 0, 12),
        (1, 0, 10),
    ]
    assert query(out, "SELECT id, shard FROM runs ORDER BY id") == [(1, "1/2"), (2, "2/2")]
    assert query(out, "SELECT min(id), max(id), count(*) FROM attempts") == [(1, 22, 22)]
    # Every attempt kept its run, test, round and outcome.
    for source, run in ((a, 1), (b, 2)):
        before = query(
            source,
            "SELECT t.nodeid, a.round, a.position, a.outcome, a.seed FROM attempts a "
            "JOIN tests t ON t.id = a.test_id ORDER BY a.id",
        )
        after = query(
            out,
            "SELECT t.nodeid, a.round, a.position, a.outcome, a.seed FROM attempts a "
            "JOIN tests t ON t.id = a.test_id WHERE a.run_id = ? ORDER BY a.id",
            run,
        )
        assert after == before
    # Failures, journals and violations follow their attempts.
    assert query(
        out,
        "SELECT count(*) FROM failures f JOIN attempts a ON a.id = f.attempt_id "
        "WHERE a.outcome = 'failed'",
    ) == [(6,)]
    assert query(
        out,
        "SELECT t.nodeid FROM journals j JOIN attempts a ON a.id = j.attempt_id "
        "JOIN tests t ON t.id = a.test_id",
    ) == [(VICTIM,), (VICTIM,)]
    assert query(
        out,
        "SELECT count(*), min(a.run_id) FROM violations v JOIN attempts a ON a.id = v.attempt_id",
    ) == [(4, 1)]
    assert query(out, "SELECT run_id, check_name FROM test_checks") == [(1, "sandbox-off")]


def test_flake_ids_are_renumbered_consistently_and_a_test_keeps_one_flake(shards, tmp_path):
    a, b = shards
    out = tmp_path / "out.db"
    result = merge_databases([a, b], out)
    assert result.inputs[0].new_flakes == ["F1"]
    assert (result.inputs[1].new_flakes, result.inputs[1].combined_flakes) == (["F2"], ["F1"])
    flakes = {
        nodeid: (flake_id, json.loads(kinds), json.loads(polluters), confirmed, probes, note)
        for flake_id, nodeid, kinds, polluters, confirmed, probes, note in query(
            out,
            "SELECT fl.flake_id, t.nodeid, fl.kinds, fl.polluters, fl.confirmed, fl.probes, "
            "fl.note FROM flakes fl JOIN tests t ON t.id = fl.test_id",
        )
    }
    assert flakes == {
        VICTIM: ("F1", ["victim", "time"], [[POLLUTER], [CLEANER]], 1, 8, "from b"),
        LONELY: ("F2", ["random"], [], 1, 4, ""),
    }
    # The confirmed reproducer (shard b's) won, with its ids in the merged numbering.
    (reproducer,) = query(out, "SELECT reproducer FROM flakes WHERE flake_id = 'F1'")[0]
    data = json.loads(reproducer)
    assert data["run_id"] == 2
    step_attempt = data["steps"][-1]["attempt_id"]
    assert query(
        out,
        "SELECT a.run_id, t.nodeid, a.outcome FROM attempts a JOIN tests t "
        "ON t.id = a.test_id WHERE a.id = ?",
        step_attempt,
    ) == [(2, VICTIM, "failed")]
    # Evidence ids point at the same attempts as before.
    (evidence,) = query(out, "SELECT evidence FROM flakes WHERE flake_id = 'F2'")[0]
    (failing,) = json.loads(evidence)["failing_attempts"]
    assert query(
        out,
        "SELECT t.nodeid, a.outcome FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.id = ?",
        failing,
    ) == [(LONELY, "failed")]
    # Both shards' isolation steps hang off the one flake, with their runs.
    assert query(
        out,
        "SELECT fl.flake_id, s.run_id, s.purpose FROM isolation_steps s JOIN flakes fl "
        "ON fl.id = s.flake_id ORDER BY s.id",
    ) == [
        ("F1", 1, "alone"),
        ("F1", 2, "preceding sequence"),
    ]


def test_merging_the_same_database_again_changes_nothing(shards, tmp_path):
    a, b = shards
    out = tmp_path / "out.db"
    merge_databases([a, b], out)
    before = dump(out)
    again = merge_databases([b, a, a], out)
    assert [(s.new_runs, s.known_runs, s.attempts) for s in again.inputs] == [(0, 1, 0)] * 3
    assert dump(out) == before


def test_the_output_database_among_the_inputs_is_skipped(shards, tmp_path):
    a, _ = shards
    out = tmp_path / "out.db"
    merge_databases([a], out)
    before = dump(out)
    result = merge_databases([out, a], out)
    assert result.inputs[0].skipped == "it is the output database"
    assert dump(out) == before


def test_a_damaged_input_leaves_the_output_as_it_was(shards, tmp_path):
    a, b = shards
    out = tmp_path / "out.db"
    merge_databases([a], out)
    before = dump(out)
    with closing(sqlite3.connect(b)) as conn, conn:
        conn.execute("UPDATE attempts SET test_id = 999 WHERE id = 1")
    with pytest.raises(BadDatabase, match=r"b\.db has inconsistent rows .*: it is damaged"):
        merge_databases([b], out)
    assert dump(out) == before


def test_the_merge_command_prints_what_it_did_and_refuses_bad_input(shards, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["merge", "a.db", "b.db", "-o", "out.db"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "a.db: 1 new run(s), 0 already present, 12 attempts, new flakes F1",
        "b.db: 1 new run(s), 0 already present, 10 attempts, new flakes F2, combined into F1",
        "merged into out.db: 2 new run(s)",
    ]
    missing = runner.invoke(main, ["merge", "a.db", "nope.db", "-o", "out.db"])
    assert missing.exit_code == 3
    assert missing.stderr == (
        f"Error: {tmp_path / 'nope.db'} does not exist: run a hunt first "
        "(pytest --hermetic-hunt=N)\n"
    )
    (tmp_path / "text.db").write_text("not sqlite")
    assert runner.invoke(main, ["merge", "text.db", "-o", "out.db"]).exit_code == 3


SUITE = """
import random


def test_random():
    assert random.random() < 0.6


def test_a():
    pass


def test_b():
    pass


def test_c():
    pass


def test_d():
    pass
"""


def sequences(db: Path) -> list[tuple[Any, ...]]:
    """Each worker's sequence (attempt ids follow arrival order, which timing decides)."""
    return query(
        db,
        "SELECT a.round, a.worker, a.position, t.nodeid, a.seed, a.now, a.outcome "
        "FROM attempts a JOIN tests t ON t.id = a.test_id "
        "ORDER BY a.worker, a.position",
    )


def by_worker(rows: list[tuple[Any, ...]]) -> list[tuple[tuple[Any, ...], ...]]:
    """The sequences of ``rows`` (as :func:`sequences` returns them), without worker names."""
    workers: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        workers.setdefault(row[1], []).append(row[:1] + row[2:])
    return sorted(tuple(sequence) for sequence in workers.values())


def hunt_shard(pytester: pytest.Pytester, shard: str, db: str) -> None:
    result = pytester.runpytest_subprocess(
        "--hermetic-hunt=4",
        "--hermetic-seed=5",
        # one today for every shard: a run's start dates are drawn from its today
        "--hermetic-hunt-today=2030-06-01",
        f"--hermetic-hunt-shard={shard}",
        f"--hermetic-hunt-db={db}",
        "-n",
        "2",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret in (0, 1), result.stdout.str()


@pytest.mark.slow
def test_shards_hunt_distinct_reproducible_rounds_and_merge_cleanly(pytester, monkeypatch):
    pytester.makepyfile(test_suite=SUITE)
    hunt_shard(pytester, "1/2", "s1.db")
    hunt_shard(pytester, "2/2", "s2.db")
    hunt_shard(pytester, "1/2", "s1-again.db")
    s1, s2 = sequences(pytester.path / "s1.db"), sequences(pytester.path / "s2.db")
    # Distinct: shard K of M runs global rounds K-1, K-1+M, ...
    assert {r[0] for r in s1} == {0, 2, 4, 6}
    assert {r[0] for r in s2} == {1, 3, 5, 7}
    assert {r[4] for r in s1}.isdisjoint({r[4] for r in s2})  # no attempt seed repeats
    # Reproducible: the same shard and seed give the same worker sequences, seeds and
    # outcomes. (Which gateway, gw0 or gw1, serves which sequence depends on which
    # worker reports ready first, so the sequences are compared without their labels.)
    assert by_worker(sequences(pytester.path / "s1-again.db")) == by_worker(s1)

    monkeypatch.chdir(pytester.path)
    result = CliRunner().invoke(main, ["merge", "s1.db", "s2.db", "-o", "all.db"])
    assert result.exit_code == 0, result.output
    merged = pytester.path / "all.db"
    assert query(merged, "SELECT shard, attempts FROM runs ORDER BY id") == [
        ("1/2", 20),
        ("2/2", 25),  # global round 3 is the twice round: 5 tests run twice
    ]
    assert sorted(r[:4] + r[5:] for r in sequences(merged)) == sorted(
        r[:4] + r[5:] for r in s1 + s2
    )
    assert query(merged, "SELECT count(*), count(DISTINCT test_id) FROM flakes") in (
        [(0, 0)],
        [(1, 1)],
    )
    flake_ids = [r[0] for r in query(merged, "SELECT flake_id FROM flakes ORDER BY id")]
    assert flake_ids == [f"F{i}" for i in range(1, len(flake_ids) + 1)]
    report = CliRunner().invoke(main, ["report", "--db", "all.db", "--format", "json"])
    data = json.loads(report.stdout)
    assert [r["shard"] for r in data["runs"]] == ["1/2", "2/2"]
    # the twice round's second runs counted apart, as every output counts them
    assert [(r["plain_attempts"], r["repeated"]) for r in data["runs"]] == [(20, 0), (20, 5)]
    random_test = next(t for t in data["tests"] if t["nodeid"] == "test_suite.py::test_random")
    assert random_test["attempts"] == 8  # 8 rounds: a twice round's first run is plain too
    assert random_test["status"] == "flaky"


def test_merge_quotes_column_names_a_destination_may_hold(tmp_path):
    a = shard_a(tmp_path / "a.db")
    out = tmp_path / "out.db"
    merge_databases([a], out)
    # A destination altered by hand: a column whose name is SQL, not an identifier.
    with closing(sqlite3.connect(out)) as conn, conn:
        conn.execute('ALTER TABLE runs ADD COLUMN "x) VALUES (1); DROP TABLE tests; --" TEXT')
    b = shard_b(tmp_path / "b.db")
    merge_databases([b], out)
    assert query(out, "SELECT count(*) FROM tests")[0][0] > 0
    assert query(out, "SELECT count(*) FROM runs")[0][0] == 2
