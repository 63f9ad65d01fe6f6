"""Tests for Store.defer_indexes: a hunt into a database without attempts builds the
indexes of ``attempts`` once, at its end -- and every later reader finds them."""

from __future__ import annotations

from pathlib import Path

from helpers import Rows, record, rows

from hermetic_hunt.store import Store
from hermetic_hunt.store.attempts import first_executions
from hermetic_hunt.store.schema import ATTEMPT_INDEXES


def indexes(db: Path) -> list[tuple[str, str]]:
    return rows(db, "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                    "AND tbl_name = 'attempts' ORDER BY name")  # fmt: skip


def add(store: Store, run_id: int, count: int) -> None:
    nodeids = [f"t.py::test_{i}" for i in range(count)]
    found = [record(n, "passed", run_id=run_id, worker=f"gw{i % 2}", position=i // 2)
             for i, n in enumerate(nodeids)]  # fmt: skip
    store.add_attempts(found, store.test_ids(nodeids))


def test_a_hunt_into_a_database_without_attempts_builds_its_indexes_at_the_end(tmp_path):
    db = tmp_path / "flakes.db"
    fresh = Rows(db)
    migrated = indexes(db)
    run_id = fresh.run()
    assert fresh.store.defer_indexes()
    assert indexes(db) == []
    add(fresh.store, run_id, 6)
    # read the same without them (a scan)
    assert first_executions(fresh.store.conn, run_id, 0) == {
        (f"gw{i % 2}", i // 2): i + 1 for i in range(6)
    }
    fresh.store.build_indexes()
    assert not fresh.store.indexes_deferred
    fresh.close()
    assert indexes(db) == migrated
    assert [name for name, _ in migrated] == sorted(ATTEMPT_INDEXES)


def test_a_database_that_holds_attempts_keeps_its_indexes(tmp_path):
    db = tmp_path / "flakes.db"
    held = Rows(db)
    add(held.store, held.run(), 1)
    migrated = indexes(db)
    assert not held.store.defer_indexes()
    assert indexes(db) == migrated
    held.close()


def test_the_indexes_a_hunt_left_out_are_built_when_its_store_closes(tmp_path):
    db = tmp_path / "flakes.db"
    hunt = Rows(db)
    migrated = indexes(db)
    hunt.store.defer_indexes()
    add(hunt.store, hunt.run(), 3)
    hunt.close()  # (a hunt stopped before its end: the store closes all the same)
    assert indexes(db) == migrated


def test_a_killed_hunts_indexes_are_built_by_the_next_writer_and_its_rows_read_before(tmp_path):
    db = tmp_path / "flakes.db"
    hunt = Rows(db)
    migrated = indexes(db)
    hunt.store.defer_indexes()
    run_id = hunt.run()
    add(hunt.store, run_id, 4)
    hunt.store.conn.close()  # (kill -9: nothing more of the hunt runs)
    with Store.open(db, create=False, write=False) as reader:
        assert len(first_executions(reader.conn, run_id, 0)) == 4
    assert indexes(db) == []  # (a reader writes nothing)
    Store.open(db).close()
    assert indexes(db) == migrated
