"""Opening, validating and migrating a database; the hunt's write path."""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlite_utils

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import Attempt, Columns, Leak, database_path
from hermetic_hunt.store.attempts import INSERT, column_rows, to_row
from hermetic_hunt.store.integrity import check_types, connect, writable
from hermetic_hunt.store.rows import chunks
from hermetic_hunt.store.schema import (
    ATTEMPT_INDEXES,
    MIGRATION_SET,
    NAMES,
    SCHEMA_VERSION,
    migrations,
)

_SQLITE_HEADER = b"SQLite format 3\x00"
#: Disk space a hunt sets aside for its last write (see :meth:`Store.keep_reserve`).
RESERVE_BYTES = 64 * 1024
# Captured at import, before any sandbox can patch the clock: stored
# timestamps are always real.
_REAL_TIME = time.time


def real_now_iso() -> str:
    return datetime.fromtimestamp(_REAL_TIME(), timezone.utc).isoformat(timespec="seconds")


def _check_file(path: Path, *, create: bool) -> None:
    if path.is_dir():
        raise BadDatabase(f"{path} is a directory, not a database file")
    if path.exists():
        if not os.access(path, os.R_OK):
            raise BadDatabase(f"{path} is not readable: check its permissions")
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
        if header and header != _SQLITE_HEADER:
            what = "a new path or " if create else ""
            raise BadDatabase(
                f"{path} is not an SQLite database: pass {what}a flakes.db written by hermetic-hunt"
            )
        if create and not os.access(path, os.W_OK):
            raise BadDatabase(f"{path} is not writable: check its permissions")
        return
    if not create:
        raise BadDatabase(f"{path} does not exist: run a hunt first (pytest --hermetic-hunt=N)")
    parent = path.parent
    if not parent.is_dir():
        raise BadDatabase(f"cannot create {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadDatabase(f"cannot create {path}: directory {parent} is not writable")


def _identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def _free_name(path: Path) -> Path:
    """``flakes.recovered.db`` next to ``flakes.db`` (``-2``, ``-3``... when taken)."""
    tails = ("" if number == 1 else f"-{number}" for number in itertools.count(1))
    names = (path.with_name(f"{path.stem}.recovered{tail}{path.suffix}") for tail in tails)
    return next(name for name in names if not name.exists())


class Store:
    """A validated, migrated hermetic-hunt database."""

    def __init__(
        self, path: Path, conn: sqlite3.Connection, *, read_only: bool, create: bool, write: bool
    ) -> None:
        self.path = path
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self._reserve: Path | None = None
        self.read_only = read_only
        self._create = create
        self._write = write
        #: (device, inode) of the file this connection writes (None: not watched).
        self._identity: tuple[int, int] | None = None
        #: A descriptor of that file, open as long as the connection is, to read its
        #: header through: opening and closing another one would drop the POSIX
        #: locks SQLite holds on the file for this process (every descriptor's
        #: close releases them all), and another process's connection -- a test
        #: reading the database -- could then checkpoint and delete the log
        #: under the hunt's feet.
        self._header_fd: int | None = None
        #: The indexes of ``attempts`` wait for :meth:`build_indexes` (:meth:`defer_indexes`).
        self.indexes_deferred = False

    # -- opening ---------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        base: str | os.PathLike[str] | None = None,
        write: bool = True,
    ) -> Store:
        """Open (and, with ``create``, create) the database at ``path``.

        Raises :class:`BadDatabase` for anything that is not a hermetic-hunt
        database this version can read. Older schemas are migrated forward.
        Without ``create``, a file that holds no hermetic-hunt database (0
        bytes, an SQLite file without tables) is refused, never turned into
        one, and a database that cannot be written (a read-only mount, a CI
        artifact) is opened read-only. With ``write=False`` (the readers:
        ``report``, ``list``, ``show``, ``replay``, ``quarantine``) it is
        always opened read-only (a ``mode=ro`` URI): never created, migrated
        or switched to WAL. Every value in it is checked against the schema
        before anything reads it (:func:`~hermetic_hunt.store.integrity.check_types`:
        a crafted or damaged database is refused in one line naming the first bad
        value, rather than deep inside a report). A relative ``path`` is taken
        from ``base`` (default: the working directory), as
        :func:`~hermetic_hunt.models.database_path` says.
        """
        resolved = database_path(path, base)
        create = create and write
        _check_file(resolved, create=create)
        if not create and resolved.stat().st_size == 0:
            raise BadDatabase(
                f"{resolved} is empty, not a hermetic-hunt database: run a hunt first "
                "(pytest --hermetic-hunt=N) or pass another path"
            )
        read_only = not write or (not create and not writable(resolved))
        try:
            conn = connect(resolved, read_only=read_only)
        except sqlite3.Error as exc:
            raise BadDatabase(f"cannot open {resolved}: {exc}") from None
        store = cls(resolved, conn, read_only=read_only, create=create, write=write)
        try:
            store._prepare()
            check_types(conn, resolved)
            if not read_only:
                store._watch(resolved)
                with contextlib.suppress(BadDatabase):  # (queries read right without them)
                    store.build_indexes()  # left out by a hunt that never reached its end
        except BadDatabase:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise BadDatabase(f"{resolved} is not a usable SQLite database: {exc}") from None
        return store

    def _prepare(self) -> None:
        if not self.read_only:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        tables = set(self.db.table_names())
        if not tables and not self._create:
            raise BadDatabase(
                f"{self.path} holds no table, not a hermetic-hunt database: run a hunt first "
                "(pytest --hermetic-hunt=N) or pass another path"
            )
        applied = self._applied_names(tables)
        if tables and not applied:
            shown = ", ".join(sorted(tables)[:5])
            raise BadDatabase(
                f"{self.path} is not a hermetic-hunt database (it holds tables: {shown}); "
                "pass another path"
            )
        (version,) = self.conn.execute("PRAGMA user_version").fetchone()
        unknown = [name for name in applied if name not in NAMES]
        if unknown or version > SCHEMA_VERSION:
            raise BadDatabase(
                f"{self.path} was written by a newer hermetic-hunt (schema "
                f"{max(len(applied), version)}, this version reads up to {SCHEMA_VERSION}): "
                "upgrade with 'pip install -U hermetic-hunt' or use another database"
            )
        if len(applied) < SCHEMA_VERSION:
            if not self._write:
                raise BadDatabase(
                    f"{self.path} was written by an older hermetic-hunt, and this command only "
                    "reads: 'hermetic-hunt isolate' or the next hunt with this database upgrades it"
                )
            if self.read_only:
                raise BadDatabase(
                    f"{self.path} was written by an older hermetic-hunt and is read-only here: "
                    "copy it to a writable directory (it is upgraded when opened there)"
                )
            migrations.apply(self.db)
            self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION:d}")

    def _applied_names(self, tables: set[str]) -> list[str]:
        if migrations.migrations_table not in tables:
            return []
        rows = self.conn.execute(
            f"SELECT name FROM {migrations.migrations_table} "  # noqa: S608 - constant
            "WHERE migration_set = ? ORDER BY rowid",
            (MIGRATION_SET,),
        )
        return [name for (name,) in rows]

    # -- the file is the hunt's ------------------------------------------------------

    def reclaim(self) -> tuple[str, Path] | None:
        """When the file at :attr:`path` is no longer the one this store writes.

        A test may remove the database, or put another file in its place,
        while a hunt writes it: the connection still holds what was written
        (SQLite keeps the open file). Then everything is copied into a new
        file next to it (``flakes.recovered.db``, ``flakes.recovered-2.db``...),
        the store goes on writing there, and ``(what happened, the new path)``
        is returned. None while the file is the one opened (same device and
        inode, an SQLite header). Raises :class:`BadDatabase` when no copy can
        be written.
        """
        if self._identity is None:
            return None
        try:
            same = _identity(self.path) == self._identity
            header = b""
            if same and self._header_fd is not None:
                header = os.pread(self._header_fd, len(_SQLITE_HEADER), 0)
        except FileNotFoundError:
            how = "removed"
        except OSError:
            how = "made unreadable"
        else:
            if same and header == _SQLITE_HEADER:
                return None
            how = "replaced" if not same else "overwritten"
        target = _free_name(self.path)
        try:
            with contextlib.closing(sqlite3.connect(target)) as copy:
                self.conn.backup(copy)
            conn = connect(target, read_only=False)
        except (sqlite3.Error, OSError) as exc:
            raise BadDatabase(
                f"{self.path} was {how} during the hunt and no copy of what was recorded "
                f"could be written to {target}: {exc}"
            ) from None
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()  # folds its log into the file it had open, not into the path
        self._unwatch()
        self.release_reserve()
        self.path, self.conn, self.db = target, conn, sqlite_utils.Database(conn)
        self._prepare()
        self._watch(target)
        self.keep_reserve()
        return how, target

    def close(self) -> None:
        if self.indexes_deferred:  # (a hunt that stopped before its end)
            with contextlib.suppress(BadDatabase):
                self.build_indexes()
        # Fold the write-ahead log into the file: what a CI job uploads is
        # usually flakes.db alone, and it must be complete on its own.
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()
        self._unwatch()  # after the connection: its locks are gone with it
        self.release_reserve()

    def _watch(self, path: Path) -> None:
        """Watch ``path`` (the file this connection writes) for removal or replacement."""
        self._identity = _identity(path)
        with contextlib.suppress(OSError):
            self._header_fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def _unwatch(self) -> None:
        fd, self._header_fd = self._header_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a failure rolls it back and says why in one line.

        ``BEGIN IMMEDIATE`` takes the write lock up front: under WAL a
        deferred transaction that upgrades later can fail with "database is
        locked". When SQLite already rolled back by itself (a full disk), the
        original error is the one reported, not "no transaction is active".
        """
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._write_error(exc) from None
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException as exc:
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._write_error(exc) from None
            raise

    def _write_error(self, exc: sqlite3.Error) -> BadDatabase:
        text = str(exc)
        if "full" in text:
            return BadDatabase(
                f"cannot write to {self.path}: the disk is full ({text}); free some space "
                "(what was written before is kept)"
            )
        return BadDatabase(f"cannot write to {self.path}: {text}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """One statement outside a transaction (autocommit), errors in one line."""
        try:
            self.conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._write_error(exc) from None

    def test_ids(self, nodeids: Iterable[str]) -> dict[str, int]:
        """Ids of ``nodeids`` in ``tests``, inserting the ones not seen before."""
        wanted = list(dict.fromkeys(nodeids))
        with self.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", [(n,) for n in wanted]
            )
        return {
            nodeid: row_id
            for chunk, marks in chunks(wanted)
            for row_id, nodeid in self.conn.execute(
                f"SELECT id, nodeid FROM tests WHERE nodeid IN ({marks})",  # noqa: S608
                chunk,
            )
        }

    def add_attempts(
        self, records: Sequence[Attempt | Columns], test_ids: dict[str, int]
    ) -> list[int]:
        """Store a batch of attempts (and their failures, violations, journals); their ids.

        ``records``: attempts, and plain attempts as :class:`Columns` (a hunt's
        batches), numbered in order. All or nothing: on an error (a full disk)
        nothing of the batch is stored and :class:`BadDatabase` says why; the
        caller keeps the batch.
        """
        if not records:
            return []
        with self.transaction() as conn:
            (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM attempts").fetchone()
            rows: list[tuple[Any, ...]] = []
            failures: list[tuple[Any, ...]] = []
            violations: list[tuple[Any, ...]] = []
            journals: list[tuple[Any, ...]] = []
            plain: dict[str, list[tuple[Any, ...]]] = {}  # the INSERT of Columns -> rows
            next_id = last + 1
            for record in records:
                if isinstance(record, Columns):
                    insert, found = column_rows(record, next_id, test_ids)
                    plain.setdefault(insert, []).extend(found)
                    whole = [(next_id + index, attempt) for index, attempt in record.aside]
                    next_id += len(record)
                else:
                    whole = [(next_id, record)]
                    next_id += 1
                for attempt_id, rec in whole:
                    rows.append(to_row(attempt_id, rec, test_ids[rec.nodeid]))
                    if rec.failure is not None:  # (exc_type, message, location, excerpt)
                        failures.append((attempt_id, *rec.failure.to_json()))
                    violations.extend((attempt_id, *v.to_json()) for v in rec.violations)
                    if rec.journal is not None:
                        form, size = rec.journal_format or "unknown", len(rec.journal)
                        journals.append((attempt_id, form, size, rec.journal))
            for insert, found in [*plain.items(), (INSERT, rows)]:
                conn.executemany(insert, found)
            conn.executemany("INSERT INTO failures VALUES (?,?,?,?,?)", failures)
            conn.executemany(
                "INSERT INTO violations (attempt_id, op, host, port, detail) VALUES (?,?,?,?,?)",
                violations,
            )
            conn.executemany(
                "INSERT INTO journals (attempt_id, format, size, data) VALUES (?,?,?,?)", journals
            )
            conn.execute(
                "UPDATE runs SET attempts = attempts + ? WHERE id = ?",
                (next_id - 1 - last, records[0].run_id),
            )
        return list(range(last + 1, next_id))

    def defer_indexes(self) -> bool:
        """Before a hunt's first attempt: when ``attempts`` holds none, drop its indexes
        (:data:`~hermetic_hunt.store.schema.ATTEMPT_INDEXES`) until :meth:`build_indexes`
        at the hunt's end (True).

        Building an index once over a hunt's rows costs about half what keeping
        it up to date row by row does. A database that holds attempts keeps its
        indexes (building them would read its history again). Until they are
        built, queries read the same rows, by a scan. A hunt that stops
        before its end leaves them to :meth:`close`, or to the next writer
        that opens the database (:meth:`open` builds what is missing).
        """
        if self.read_only or self.conn.execute("SELECT 1 FROM attempts LIMIT 1").fetchone():
            return False
        with self.transaction() as conn:
            for name in ATTEMPT_INDEXES:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
        self.indexes_deferred = True
        return True

    def build_indexes(self) -> None:
        """Build the indexes of ``attempts`` that are missing (see :meth:`defer_indexes`)."""
        marks = ",".join("?" * len(ATTEMPT_INDEXES))
        found = self.conn.execute(
            f"SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ({marks})",  # noqa: S608
            tuple(ATTEMPT_INDEXES),
        ).fetchone()
        if found != (len(ATTEMPT_INDEXES),):
            with self.transaction() as conn:
                for statement in ATTEMPT_INDEXES.values():
                    conn.execute(statement)
        self.indexes_deferred = False

    def add_leaks(self, run_id: int, rows: Sequence[tuple[int, int | None, Leak, bool]]) -> None:
        """Store leaks: ``(round, attempt id or None, leak, persisted)`` each."""
        if not rows:
            return
        with self.transaction() as conn:
            conn.executemany(
                "INSERT INTO leaks (run_id, round, attempt_id, resource, name, change, detail, "
                "persisted) VALUES (?,?,?,?,?,?,?,?)",
                [(run_id, r, a, *leak.to_json(), int(kept)) for r, a, leak, kept in rows],
            )

    # -- a little disk space for the last write -------------------------------------------

    def own_files(self) -> tuple[str, ...]:
        """Every file this database writes beside itself (none is a test's leak)."""
        db = str(self.path)
        return (db, f"{db}-wal", f"{db}-shm", f"{db}-journal", f"{db}-reserve")

    def keep_reserve(self) -> None:
        """Set :data:`RESERVE_BYTES` of disk aside next to the database while a hunt writes.

        When the disk fills up, the hunt stops; freeing this file first lets
        the run's final status be written (else it would stay ``running``).
        Without the space to make it, the hunt goes on without a reserve.
        """
        path = self.path.with_name(self.path.name + "-reserve")
        try:
            path.write_bytes(bytes(RESERVE_BYTES))
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            return
        self._reserve = path

    def release_reserve(self) -> bool:
        """Give the reserve back (False: none was kept)."""
        path, self._reserve = self._reserve, None
        if path is None:
            return False
        with contextlib.suppress(OSError):
            path.unlink()
        return True
