"""Before anything reads a database: how it is opened, and whether its values fit the schema.

A database may come from elsewhere (a CI artifact, a colleague, an
attacker). :func:`connect` opens it -- read-only when it cannot be written
(a read-only mount), with text that is not UTF-8 read as replacement
characters. :func:`check_types` holds every value against the type its
column has in the schema this version's migrations create (not the schema
stored in the file, which a crafted file may have altered), so a reader
never meets text where it expects a number.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import urllib.parse
from pathlib import Path

import sqlite_utils

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.store.schema import migrations


def writable(path: Path) -> bool:
    """Whether SQLite can write ``path`` and create its -wal and -shm files beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _decode(raw: bytes) -> str:
    # Text that is not UTF-8 (a crafted file) reads as replacement characters
    # instead of failing the query that met it.
    return raw.decode("utf-8", "replace")


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if not read_only:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
    elif not wal.exists():
        # No write-ahead log: no hunt is writing it now, and a reader must
        # not create the -wal and -shm files a WAL-mode reader would.
        conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
    else:
        conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL-mode file in a read-only directory: SQLite cannot create
            # its -shm file. Without a write-ahead log to read, nothing is
            # missed by reading the file as it is (immutable).
            conn.close()
            if wal.exists() and wal.stat().st_size > 0:
                raise BadDatabase(
                    f"{path} is read-only here and its write-ahead log {wal.name} holds data "
                    "that only a writable copy can read: copy both files to a writable "
                    "directory"
                ) from None
            conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
    conn.text_factory = _decode
    return conn


_TYPES = {"INTEGER": ("integer",), "REAL": ("real", "integer"), "TEXT": ("text",),
          "BLOB": ("blob", "text")}  # fmt: skip


def quote(identifier: str) -> str:
    """``identifier`` as an SQL quoted identifier (``"`` doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


@functools.cache
def expected_columns() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """``{table: [(column, allowed typeof() values)]}`` of the schema the migrations create."""
    db = sqlite_utils.Database(memory=True)
    migrations.apply(db)
    found = {
        table: [
            (str(name), (*_TYPES[str(declared).upper()], *(() if notnull or pk else ("null",))))
            for _cid, name, declared, notnull, _default, pk in db.execute(
                f"PRAGMA table_info({quote(table)})"
            ).fetchall()
        ]
        for table in db.table_names()
        if not table.startswith(("_", "sqlite_"))
    }
    db.close()
    return found


def check_types(conn: sqlite3.Connection, path: Path) -> None:
    """Every table and column of the schema is there, every value of its column's type.

    :class:`BadDatabase` names the first table, column or value that is not.
    """
    present = {str(name) for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}  # fmt: skip
    for table, columns in expected_columns().items():
        if table not in present:
            raise BadDatabase(
                f"{path} has no table {table!r}: it is damaged or was edited (re-run the hunt)"
            )
        names = {str(name) for _, name, *_ in conn.execute(f"PRAGMA table_info({quote(table)})")}
        for name, _ in columns:
            if name not in names:
                raise BadDatabase(
                    f"{path}: table {table!r} has no column {name!r}: it is damaged or was "
                    "edited (re-run the hunt)"
                )
        tests = [
            f"typeof({quote(name)}) NOT IN ({', '.join(repr(t) for t in allowed)})"
            for name, allowed in columns
        ]
        typeofs = ", ".join(f"typeof({quote(name)})" for name, _ in columns)
        row = conn.execute(
            f"SELECT rowid, {typeofs} FROM {quote(table)} "  # noqa: S608 - the schema's own names
            f"WHERE {' OR '.join(tests)} LIMIT 1"
        ).fetchone()
        if row is None:
            continue
        rowid, *kinds = row
        for (name, allowed), kind in zip(columns, kinds, strict=True):
            if kind not in allowed:
                raise BadDatabase(
                    f"{path}: {table}.{name} of row {rowid} is {kind}, where hermetic-hunt "
                    f"writes {' or '.join(allowed)}: the database is damaged or was edited "
                    "(re-run the hunt)"
                )
