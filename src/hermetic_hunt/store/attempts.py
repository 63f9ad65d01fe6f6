"""The ``attempts`` table: its columns written once, an :class:`Attempt` to a row and back.

:meth:`Store.add_attempts <hermetic_hunt.store.core.Store.add_attempts>`
inserts :func:`to_row` tuples (the values of :data:`COLUMNS`, in order) and,
for the plain attempts a hunt decodes a batch at a time
(:class:`~hermetic_hunt.models.Columns`), the rows of :func:`column_rows`
-- only the columns they have, the rest left to their defaults:
``executemany`` of tuples is the hunt's hot path. Every reader selects
:data:`SELECT` -- an attempt's columns with its failure and whether a
journal is kept -- and gets each row as an :class:`Attempt` from
:func:`from_row`, by column name: a new query is ``read(conn, "WHERE ...")``.
A new column is a name in :data:`COLUMNS`, a value in :func:`to_row`, a
field in :func:`from_row` (and a migration). A database is untrusted:
every value is checked for its type here, once (a wrong one reads as
absent), and at most :data:`MAX_WRITES` paths are read.
"""

from __future__ import annotations

import functools
import itertools
import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from hermetic_hunt.models import (
    DEFAULT_MODE,
    FAILING,
    MAX_WRITES,
    Attempt,
    Columns,
    Failure,
    Violation,
)
from hermetic_hunt.store.rows import chunks, named
from hermetic_hunt.timing import as_profile, switch_interval
from hermetic_hunt.untrusted import json_or, number_or, text_or, whole_or

#: The ``attempts`` table's columns, in the order of :func:`to_row`'s values.
COLUMNS = (
    "id", "run_id", "round", "worker", "position", "test_id", "execution", "outcome", "phase",
    "duration", "seed", "now", "mode", "hash_seed", "counts", "violations", "repeat", "started",
    "profile", "switch_interval", "stress", "writes",
)  # fmt: skip
INSERT = f"INSERT INTO attempts ({', '.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})"  # noqa: S608

#: Most blocked calls read per attempt.
MAX_VIOLATIONS = 100
#: Every reader's query: an attempt with its test, failure and journal (add a WHERE).
SELECT = (
    f"SELECT {', '.join(f'a.{c}' for c in COLUMNS if c != 'test_id')}, t.nodeid, f.exc_type, "  # noqa: S608
    "f.message, f.location, j.attempt_id IS NOT NULL AS has_journal "
    "FROM attempts a JOIN tests t ON t.id = a.test_id "
    "LEFT JOIN failures f ON f.attempt_id = a.id LEFT JOIN journals j ON j.attempt_id = a.id "
)


def to_row(attempt_id: int, attempt: Attempt, test_id: int) -> tuple[Any, ...]:
    """``attempt`` as the values of :data:`COLUMNS`, in order."""
    a = attempt
    return (
        attempt_id, a.run_id, a.round_no, a.worker, a.position, test_id, a.execution, a.outcome,
        a.phase, round(a.duration, 6), a.seed, a.now, a.mode, a.hash_seed,
        json.dumps(a.counts, separators=(",", ":")) if a.counts else None, len(a.violations),
        a.repeat, a.started, a.profile, a.switch_interval, a.stress,
        json.dumps(a.writes[:MAX_WRITES]) if a.writes else None,
    )  # fmt: skip


#: An :class:`Attempt` field -> its column, where the two names differ.
_COLUMN_OF = {"nodeid": "test_id", "round_no": "round"}
_COUNTS = json.JSONEncoder(separators=(",", ":")).encode


def column_rows(
    columns: Columns, first_id: int, test_ids: dict[str, int]
) -> tuple[str, list[tuple[Any, ...]]]:
    """``columns`` as an INSERT and its rows, with ids from ``first_id`` on (but for the
    rows of :attr:`Columns.aside <hermetic_hunt.models.Columns.aside>`: :func:`to_row`'s)."""
    values: list[Any] = [
        range(first_id, first_id + len(columns)),
        itertools.repeat(columns.run_id),
        itertools.repeat(columns.worker),
    ]
    for field, column in zip(columns.fields, columns.values, strict=True):
        if field == "nodeid":
            values.append(map(test_ids.__getitem__, column))
        elif field == "counts":
            values.append([_COUNTS(counts) if counts else None for counts in column])
        else:
            values.append(column)
    rows: Iterable[tuple[Any, ...]] = zip(*values, strict=False)  # (repeat() is endless)
    if columns.aside:
        aside = {index for index, _ in columns.aside}
        rows = itertools.compress(rows, [i not in aside for i in range(len(columns))])
    return _insert(columns.fields), list(rows)


@functools.lru_cache(maxsize=64)
def _insert(fields: tuple[str, ...]) -> str:
    """The INSERT of rows with ``fields`` (names of :class:`Attempt` fields, never data)."""
    names = ("id", "run_id", "worker", *(_COLUMN_OF.get(f, f) for f in fields))
    return f"INSERT INTO attempts ({', '.join(names)}) VALUES ({','.join('?' * len(names))})"  # noqa: S608


def from_row(row: sqlite3.Row, violations: Sequence[Violation] = ()) -> Attempt:
    """A row of :data:`SELECT` as an :class:`Attempt`, each value checked for its type.

    A failing attempt always has a :class:`Failure` (empty texts when no
    ``failures`` row was stored: a crashed worker's); any other has none.
    """
    outcome = text_or(row["outcome"])
    counts = json_or(row["counts"])
    return Attempt(
        attempt_id=int(row["id"]),
        run_id=whole_or(row["run_id"]) or 0,
        round_no=whole_or(row["round"]) or 0,
        worker=text_or(row["worker"]),
        position=whole_or(row["position"]) or 0,
        nodeid=text_or(row["nodeid"]),
        execution=whole_or(row["execution"]) or 1,
        outcome=outcome,
        phase=row["phase"] if isinstance(row["phase"], str) else None,
        duration=max(0.0, number_or(row["duration"], 0.0) or 0.0),
        seed=whole_or(row["seed"]),
        now=number_or(row["now"]),
        mode=text_or(row["mode"]) or DEFAULT_MODE,
        hash_seed=whole_or(row["hash_seed"]),
        counts=counts if isinstance(counts, dict) else None,
        failure=(
            Failure(text_or(row["exc_type"]), text_or(row["message"]), text_or(row["location"]))
            if outcome in FAILING
            else None
        ),
        violations=tuple(violations),
        has_journal=bool(row["has_journal"]),
        repeat=whole_or(row["repeat"]) or 0,
        profile=as_profile(row["profile"]),
        switch_interval=switch_interval(row["switch_interval"]),
        stress=max(0, whole_or(row["stress"]) or 0),
        started=number_or(row["started"]),
        writes=writes(row["writes"]),
    )


def writes(value: Any) -> tuple[str, ...]:
    """``attempts.writes`` (JSON): the absolute paths (and ``port:N``), at most
    :data:`MAX_WRITES`."""
    found = json_or(value, [])
    if not isinstance(found, list):
        return ()
    return tuple([p for p in found if isinstance(p, str) and _written(p)][:MAX_WRITES])


def _written(entry: str) -> bool:
    """An absolute path, or ``port:N`` (a fixed port a test bound)."""
    if entry.startswith("/"):
        return True
    port = entry.removeprefix("port:")
    return port != entry and port.isdigit() and 0 < int(port) < 65536


def read(
    conn: sqlite3.Connection, where: str, params: Sequence[Any] = (), *, violations: bool = False
) -> list[Attempt]:
    """The attempts of ``SELECT ... where`` (``WHERE ... ORDER BY ...``), with their
    blocked calls when ``violations``."""
    rows = named(conn, SELECT + where, params)
    ids = [r["id"] for r in rows if r["violations"]] if violations else []
    blocked = blocked_calls(conn, ids)
    return [from_row(row, blocked.get(row["id"], ())) for row in rows]


def first_executions(
    conn: sqlite3.Connection, run_id: int, round_no: int
) -> dict[tuple[str | None, int | None], int]:
    """``{(worker, position): attempt id}`` of the first executions of a round's steps."""
    found = conn.execute(
        "SELECT worker, position, id FROM attempts "
        "WHERE run_id = ? AND round = ? AND execution = 1",
        (run_id, round_no),
    )
    return {(worker, position): attempt_id for worker, position, attempt_id in found}


def blocked_calls(
    conn: sqlite3.Connection, attempt_ids: Sequence[int]
) -> dict[int, list[Violation]]:
    """``{attempt id: its violations}``, in stored order, :data:`MAX_VIOLATIONS` at most each."""
    out: dict[int, list[Violation]] = {}
    for chunk, marks in chunks(attempt_ids):
        for row in named(
            conn,
            "SELECT attempt_id, op, host, port, detail FROM (SELECT *, row_number() OVER "  # noqa: S608
            f"(PARTITION BY attempt_id ORDER BY id) AS n FROM violations WHERE attempt_id IN "
            f"({marks})) WHERE n <= ? ORDER BY attempt_id, n",
            [*chunk, MAX_VIOLATIONS],
        ):
            out.setdefault(row["attempt_id"], []).append(violation(row))
    return out


def violation(row: sqlite3.Row) -> Violation:
    """A ``violations`` row (``op``, ``host``, ``port``, ``detail``)."""
    return Violation(
        text_or(row["op"]), text_or(row["host"]), whole_or(row["port"]), text_or(row["detail"])
    )
