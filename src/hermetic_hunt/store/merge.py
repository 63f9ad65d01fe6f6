"""``hermetic-hunt merge``: combine databases from several machines into one.

The invariants a user sees (a run identified by ``runs.uuid`` lands exactly
once, ids renumbered with every reference following, one flake per test,
history kept, one transaction) are in docs/cli.md, "hermetic-hunt merge".
Besides: an input's flake is merged only if a run it comes from is new to
``OUT.db`` (so a second merge of the same input is a no-op), and is
combined by :func:`~hermetic_hunt.store.merge_rules.combine_flakes`. Every
input is validated (and migrated to this version's schema) by
:meth:`Store.open` first, so both sides have the same columns; columns are
copied by name.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.pasteable import display_path
from hermetic_hunt.store.core import Store
from hermetic_hunt.store.integrity import quote
from hermetic_hunt.store.merge_rules import (
    combine_flakes,
    dumps,
    loads,
    next_flake_id,
    renumber,
    translate_reproducer,
)
from hermetic_hunt.store.rows import chunks, insert, scalar, update
from hermetic_hunt.untrusted import is_whole

Remap = dict[str, Callable[[Any], Any]]
#: The rows that follow a flake, and the columns that make one a copy of another.
_SAME = {
    "replays": ("target", "started_at", "outcome", "detail", "environment"),
    "fixes": ("flake_id", "created_at", "patch_sha", "outcome"),
}


@dataclass
class InputSummary:
    path: Path
    new_runs: int = 0
    known_runs: int = 0
    attempts: int = 0
    new_flakes: list[str] = field(default_factory=list)
    combined_flakes: list[str] = field(default_factory=list)
    skipped: str | None = None  # why the whole input was skipped


@dataclass
class MergeResult:
    output: Path
    inputs: list[InputSummary]

    def lines(self, cwd: str | None = None) -> list[str]:
        out = []
        for s in self.inputs:
            name = display_path(s.path, cwd)
            if s.skipped:
                out.append(f"{name}: skipped ({s.skipped})")
                continue
            flakes = ""
            if s.new_flakes:
                flakes += f", new flakes {', '.join(s.new_flakes)}"
            if s.combined_flakes:
                flakes += f", combined into {', '.join(s.combined_flakes)}"
            out.append(
                f"{name}: {s.new_runs} new run(s), {s.known_runs} already present, "
                f"{s.attempts:,} attempts{flakes}"
            )
        total = sum(s.new_runs for s in self.inputs)
        out.append(f"merged into {display_path(self.output, cwd)}: {total} new run(s)")
        return out


def merge_databases(
    inputs: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
) -> MergeResult:
    """Merge every input into ``output`` (created when missing)."""
    out_path = Path(output).expanduser().resolve()
    sources: list[tuple[Path, Store | None]] = []
    try:
        for raw in inputs:
            path = Path(raw).expanduser().resolve()
            sources.append((path, None if path == out_path else Store.open(path, create=False)))
        with Store.open(out_path, create=True) as dest:
            return _merge_all(dest, sources)
    finally:
        for _, store in sources:
            if store is not None:
                store.close()


def _merge_all(dest: Store, sources: list[tuple[Path, Store | None]]) -> MergeResult:
    result = MergeResult(dest.path, [])
    dest.conn.execute("BEGIN IMMEDIATE")
    try:
        for path, source in sources:
            if source is None:
                result.inputs.append(InputSummary(path, skipped="it is the output database"))
            else:
                result.inputs.append(_Merger(source, dest).run())
        dest.conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        dest.conn.execute("ROLLBACK")
        raise BadDatabase(f"cannot merge: {exc}; {dest.path} was left as it was") from None
    except BaseException:
        dest.conn.execute("ROLLBACK")
        raise
    return result


class _Merger:
    """One input merged into ``dest`` (inside the caller's transaction)."""

    def __init__(self, source: Store, dest: Store) -> None:
        self.src = source.conn
        self.dst = dest.conn
        self.summary = InputSummary(source.path)
        self.runs: dict[int, int] = {}  # source run id -> dest run id
        self.new_runs: set[int] = set()  # source ids of the runs copied now
        self.tests: dict[int, int] = {}
        self.attempts: dict[int, int] = {}
        self.columns: dict[str, list[str]] = {}

    def run(self) -> InputSummary:
        try:
            self._runs()
            self._tests()
            for src_run in sorted(self.new_runs):
                self._attempts(src_run)
                self._copy("test_checks", "run_id = ?", [src_run],
                           {"run_id": self.run_id, "test_id": self.tests.__getitem__})  # fmt: skip
            self._follow(self._flakes())
        except (KeyError, TypeError, ValueError) as exc:
            # Rows pointing at rows that do not exist, or of the wrong type.
            raise BadDatabase(
                f"{self.summary.path} has inconsistent rows ({type(exc).__name__}: {exc}): "
                "it is damaged; merge the other databases without it"
            ) from None
        return self.summary

    # -- copying rows by column name ------------------------------------------------
    # Column names come from the destination's schema, which a user may have
    # altered: every identifier is quoted, never pasted into SQL as it is.

    def _columns(self, table: str) -> list[str]:
        if table not in self.columns:
            rows = self.dst.execute(f"PRAGMA table_info({quote(table)})").fetchall()
            self.columns[table] = [str(name) for _, name, *_ in rows]
        return self.columns[table]

    def _rows(
        self, table: str, where: str, params: Sequence[Any], conn: sqlite3.Connection | None = None
    ) -> list[dict[str, Any]]:
        """The rows of ``table`` in the input (or ``conn``), by column name."""
        columns = self._columns(table)
        names = ", ".join(map(quote, columns))
        cursor = (conn or self.src).execute(
            f"SELECT {names} FROM {quote(table)} WHERE {where} ORDER BY rowid",  # noqa: S608
            list(params),
        )
        return [dict(zip(columns, row, strict=True)) for row in cursor]

    def _copy(self, table: str, where: str, params: Sequence[Any], remap: Remap) -> None:
        """Copy matching rows with new ids."""
        for row in self._rows(table, where, params):
            row.pop("id", None)
            for column, mapper in remap.items():
                row[column] = mapper(row[column])
            insert(self.dst, table, row)

    # -- runs, tests, attempts ----------------------------------------------------

    def _runs(self) -> None:
        known = dict(self.dst.execute("SELECT uuid, id FROM runs").fetchall())
        for row in self._rows("runs", "1", []):
            src_id = row.pop("id")
            if row["uuid"] in known:
                self.runs[src_id] = known[row["uuid"]]
                self.summary.known_runs += 1
            else:
                self.runs[src_id] = insert(self.dst, "runs", row)
                self.new_runs.add(src_id)
                self.summary.new_runs += 1

    def _tests(self) -> None:
        rows = self.src.execute("SELECT id, nodeid FROM tests").fetchall()
        self.dst.executemany(
            "INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", [(nodeid,) for _, nodeid in rows]
        )
        ids = dict(self.dst.execute("SELECT nodeid, id FROM tests").fetchall())
        self.tests = {src_id: ids[nodeid] for src_id, nodeid in rows}

    def _attempts(self, src_run: int) -> None:
        (first,) = self.dst.execute("SELECT coalesce(max(id), 0) + 1 FROM attempts").fetchone()
        rows = self._rows("attempts", "run_id = ?", [src_run])
        ids = [row["id"] for row in rows]
        for next_id, row in enumerate(rows, start=first):
            self.attempts[row["id"]] = next_id
            row.update(id=next_id, run_id=self.runs[src_run], test_id=self.tests[row["test_id"]])
            insert(self.dst, "attempts", row)
        self.summary.attempts += len(rows)
        remap: Remap = {"attempt_id": self.attempts.__getitem__}
        for chunk, marks in chunks(ids):
            for table in ("failures", "violations", "journals"):
                self._copy(table, f"attempt_id IN ({marks})", chunk, remap)

    def attempt(self, src_id: Any) -> int | None:
        """The dest id of a source attempt (also of runs merged earlier)."""
        if not is_whole(src_id):
            return None
        if src_id in self.attempts:
            return self.attempts[src_id]
        row = self.src.execute(
            "SELECT run_id, round, worker, position, execution FROM attempts WHERE id = ?",
            (src_id,),
        ).fetchone()
        run_id, *place = row if row is not None else (None,)
        if run_id not in self.runs:
            return None
        found = scalar(
            self.dst,
            "SELECT id FROM attempts WHERE run_id = ? AND round = ? AND worker = ? "
            "AND position = ? AND execution = ?",
            (self.runs[run_id], *place),
        )
        if found is not None:
            self.attempts[src_id] = int(found)
        return self.attempts.get(src_id)

    def run_id(self, src_id: Any) -> int | None:
        return self.runs.get(src_id) if is_whole(src_id) else None

    # -- flakes and what hangs off them --------------------------------------------

    def _flakes(self) -> dict[int, int]:
        """Merge the flakes; returns ``{source flake row id: dest flake row id}``."""
        mapping: dict[int, int] = {}
        for flake in self._rows("flakes", "1", []):
            src_row = flake.pop("id")
            steps = self._rows("isolation_steps", "flake_id = ?", [src_row])
            flake["test_id"] = self.tests[flake["test_id"]]
            existing = scalar(
                self.dst, "SELECT id FROM flakes WHERE test_id = ?", (flake["test_id"],)
            )
            if not self._is_new(flake, steps):
                if existing is not None:
                    mapping[src_row] = int(existing)
                continue
            mapping[src_row] = dest_row = self._store_flake(self._translated(flake), existing)
            for step in steps:
                step.pop("id")
                step.update(flake_id=dest_row, run_id=self.run_id(step["run_id"]))
                step["environment"] = dumps(
                    renumber(
                        loads(step["environment"], "isolation step"), self.attempt, self.run_id
                    )
                )
                insert(self.dst, "isolation_steps", step)
        return mapping

    def _is_new(self, flake: dict[str, Any], steps: list[dict[str, Any]]) -> bool:
        runs = {flake["first_run_id"], flake["last_run_id"], *(s["run_id"] for s in steps)}
        repro = loads(flake["reproducer"], f"flake {flake['flake_id']}: reproducer")
        if isinstance(repro, dict):
            runs.add(repro.get("run_id"))
        runs.discard(None)
        return any(r in self.new_runs for r in runs) if runs else bool(self.new_runs)

    def _translated(self, flake: dict[str, Any]) -> dict[str, Any]:
        """``flake`` with its run and attempt ids in dest numbering."""
        where = f"flake {flake['flake_id']}"
        flake["first_run_id"] = self.run_id(flake["first_run_id"])
        flake["last_run_id"] = self.run_id(flake["last_run_id"])
        flake["reproducer"] = translate_reproducer(
            flake["reproducer"], where, self.attempt, self.run_id
        )
        evidence = loads(flake["evidence"], f"{where}: evidence")
        flake["evidence"] = dumps(renumber(evidence, self.attempt, self.run_id))
        return flake

    def _store_flake(self, incoming: dict[str, Any], current: int | None) -> int:
        """``incoming`` as a new flake, or combined with flake row ``current`` of its test."""
        if current is None:
            incoming["flake_id"] = next_flake_id(
                [flake_id for (flake_id,) in self.dst.execute("SELECT flake_id FROM flakes")]
            )
            self.summary.new_flakes.append(incoming["flake_id"])
            return insert(self.dst, "flakes", incoming)
        (row,) = self._rows("flakes", "id = ?", [current], self.dst)
        combined = combine_flakes(row, incoming)
        self.dst.execute(update("flakes", combined), [*combined.values(), row["id"]])
        self.summary.combined_flakes.append(str(row["flake_id"]))
        return int(row["id"])

    def _follow(self, flakes: dict[int, int]) -> None:
        """Replays, then verified fixes, follow their flake (a fix only with its flake);
        one ``dest`` already has (the same :data:`_SAME` columns) is not copied."""
        for table, keys in _SAME.items():
            for row in self._rows(table, "1", []):
                row.pop("id")
                row["flake_id"] = flakes.get(row["flake_id"])
                if table == "replays":
                    row["attempt_id"] = self.attempt(row["attempt_id"])
                elif row["flake_id"] is None:
                    continue
                same = " AND ".join(f"{quote(k)} IS ?" for k in keys)
                found = self.dst.execute(
                    f"SELECT 1 FROM {quote(table)} WHERE {same}",  # noqa: S608 - quoted names
                    [row[k] for k in keys],
                ).fetchone()
                if found is None:
                    insert(self.dst, table, row)
