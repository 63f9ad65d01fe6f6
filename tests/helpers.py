"""Small helpers shared by the tests (reading a hunt's database)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def one(db: Path, sql: str, *params: Any) -> Any:
    result = rows(db, sql, *params)
    assert len(result) == 1, result
    return result[0][0] if len(result[0]) == 1 else result[0]


def sequences(db: Path, run_id: int) -> dict[str, list[tuple[int, str]]]:
    """Each worker's sequence of (round, nodeid), in the order it ran them."""
    out: dict[str, list[tuple[int, str]]] = {}
    for worker, round_no, nodeid in rows(
        db,
        "SELECT a.worker, a.round, t.nodeid FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.run_id = ? AND a.execution = 1 ORDER BY a.worker, a.position",
        run_id,
    ):
        out.setdefault(worker, []).append((round_no, nodeid))
    return out
