"""``hermetic-hunt merge``: combine databases from several machines into one.

Invariants of a merge into ``OUT.db``:

* A run is identified by ``runs.uuid``. A run already in ``OUT.db`` is never
  copied again, so merging the same database twice changes nothing, and no
  run is lost: every run of every input ends up in ``OUT.db`` exactly once.
* Row ids are renumbered: runs, attempts (``A...``) and flakes get the next
  free ids of ``OUT.db``, in the inputs' order, and every reference to them
  (attempts -> runs, failures/journals/violations -> attempts, reproducer
  steps, isolation steps, replays, ids in a flake's evidence) follows.
* Flakes are one per test. A flake whose test has no flake in ``OUT.db``
  gets the next free id (``F<n>``); one whose test has is combined with it
  (kinds, polluter/state-setter sets and cleaners united, probes added, the
  confirmed reproducer kept -- the earlier one when both are confirmed). An
  input's flake is merged only if one of the runs it comes from is new to
  ``OUT.db`` (so a second merge of the same input is a no-op).
* Everything happens in one transaction: an input that cannot be read leaves
  ``OUT.db`` as it was.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermetic_hunt.commands import display_path
from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import Reproducer
from hermetic_hunt.store.core import Store

_RUN_COLUMNS = (
    "uuid, started_at, finished_at, status, argv, invocation_dir, rootdir, base_seed, "
    "rounds_planned, budget_seconds, rounds_done, attempts, tests, workers, worker_spec, "
    "mode, order_strategy, shard, environment, exit_status"
)
_ATTEMPT_COLUMNS = (
    "id, run_id, round, worker, position, test_id, execution, outcome, phase, duration, seed, "
    "now, mode, hash_seed, counts, violations"
)
_FLAKE_COLUMNS = (
    "id, flake_id, test_id, first_run_id, last_run_id, kinds, status, evidence, reproducer, "
    "polluters, cleaners, state_setters, confirmed, probes, probe_seconds, note, created_at, "
    "updated_at"
)
#: Flake statuses, best first: a combined flake keeps the better one.
_STATUS_RANK = ("isolated", "partial", "pending", "skipped")


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
            if path == out_path:
                sources.append((path, None))
                continue
            sources.append((path, Store.open(path, create=False)))
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
                continue
            result.inputs.append(_Merger(source, dest).run())
        dest.conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        dest.conn.execute("ROLLBACK")
        raise BadDatabase(f"cannot merge: {exc}; {dest.path} was left as it was") from None
    except BaseException:
        dest.conn.execute("ROLLBACK")
        raise
    return result


def _chunks(ids: Sequence[int], size: int = 500) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


class _Merger:
    """One input merged into ``dest`` (inside the caller's transaction)."""

    def __init__(self, source: Store, dest: Store) -> None:
        self.src = source.conn
        self.dst = dest.conn
        self.summary = InputSummary(source.path)
        self.runs: dict[int, int] = {}  # source run id -> dest run id
        self.new_runs: set[int] = set()  # source ids of runs copied now
        self.tests: dict[int, int] = {}
        self.attempts: dict[int, int] = {}

    def run(self) -> InputSummary:
        try:
            self._runs()
            self._tests()
            self._attempts()
            self._checks()
            self._replays(self._flakes())
        except (KeyError, TypeError, ValueError) as exc:
            # Rows pointing at rows that do not exist, or of the wrong type.
            raise BadDatabase(
                f"{self.summary.path} has inconsistent rows ({type(exc).__name__}: {exc}): "
                "it is damaged; merge the other databases without it"
            ) from None
        return self.summary

    # -- runs, tests, attempts ---------------------------------------------------

    def _runs(self) -> None:
        known = {uuid: rid for rid, uuid in self.dst.execute("SELECT id, uuid FROM runs")}
        for row in self.src.execute(f"SELECT id, {_RUN_COLUMNS} FROM runs ORDER BY id"):  # noqa: S608
            src_id, uuid = row[0], row[1]
            if uuid in known:
                self.runs[src_id] = known[uuid]
                self.summary.known_runs += 1
                continue
            cursor = self.dst.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({','.join('?' * 20)})",  # noqa: S608
                row[1:],
            )
            assert cursor.lastrowid is not None
            self.runs[src_id] = cursor.lastrowid
            self.new_runs.add(src_id)
            self.summary.new_runs += 1

    def _tests(self) -> None:
        rows = self.src.execute("SELECT id, nodeid FROM tests").fetchall()
        self.dst.executemany(
            "INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", [(n,) for _, n in rows]
        )
        ids = dict(self.dst.execute("SELECT nodeid, id FROM tests").fetchall())
        self.tests = {src_id: ids[nodeid] for src_id, nodeid in rows}

    def _attempts(self) -> None:
        if not self.new_runs:
            return
        (next_id,) = self.dst.execute("SELECT coalesce(max(id), 0) + 1 FROM attempts").fetchone()
        for src_run in sorted(self.new_runs):
            rows = self.src.execute(
                f"SELECT {_ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? ORDER BY id",  # noqa: S608
                (src_run,),
            ).fetchall()
            copied = []
            for row in rows:
                self.attempts[row[0]] = next_id
                test_id = self.tests[row[5]]
                copied.append((next_id, self.runs[src_run], *row[2:5], test_id, *row[6:]))
                next_id += 1
            self.dst.executemany(
                f"INSERT INTO attempts ({_ATTEMPT_COLUMNS}) VALUES ({','.join('?' * 16)})",  # noqa: S608
                copied,
            )
            self.summary.attempts += len(copied)
            self._attempt_children([row[0] for row in rows])

    def _attempt_children(self, src_ids: list[int]) -> None:
        for chunk in _chunks(src_ids):
            marks = ",".join("?" * len(chunk))
            for table, columns in (
                ("failures", "attempt_id, exc_type, message, location, excerpt"),
                ("violations", "attempt_id, op, host, port, detail"),
                ("journals", "attempt_id, format, size, data"),
            ):
                rows = self.src.execute(
                    f"SELECT {columns} FROM {table} WHERE attempt_id IN ({marks}) ORDER BY rowid",  # noqa: S608
                    chunk,
                ).fetchall()
                marks_out = ",".join("?" * (columns.count(",") + 1))
                self.dst.executemany(
                    f"INSERT INTO {table} ({columns}) VALUES ({marks_out})",  # noqa: S608
                    [(self.attempts[r[0]], *r[1:]) for r in rows],
                )

    def attempt(self, src_id: Any) -> int | None:
        """The dest id of a source attempt (also of runs merged earlier)."""
        if not isinstance(src_id, int) or isinstance(src_id, bool):
            return None
        if src_id in self.attempts:
            return self.attempts[src_id]
        row = self.src.execute(
            "SELECT run_id, round, worker, position, execution FROM attempts WHERE id = ?",
            (src_id,),
        ).fetchone()
        if row is None or row[0] not in self.runs:
            return None
        found = self.dst.execute(
            "SELECT id FROM attempts WHERE run_id = ? AND round = ? AND worker = ? "
            "AND position = ? AND execution = ?",
            (self.runs[row[0]], *row[1:]),
        ).fetchone()
        mapped = int(found[0]) if found else None
        if mapped is not None:
            self.attempts[src_id] = mapped
        return mapped

    def run_id(self, src_id: Any) -> int | None:
        if not isinstance(src_id, int) or isinstance(src_id, bool):
            return None
        return self.runs.get(src_id)

    def _checks(self) -> None:
        for src_run in sorted(self.new_runs):
            rows = self.src.execute(
                "SELECT test_id, check_name, outcome, detail, created_at FROM test_checks "
                "WHERE run_id = ? ORDER BY id",
                (src_run,),
            ).fetchall()
            self.dst.executemany(
                "INSERT INTO test_checks (run_id, test_id, check_name, outcome, detail, "
                "created_at) VALUES (?,?,?,?,?,?)",
                [(self.runs[src_run], self.tests[r[0]], *r[1:]) for r in rows],
            )

    # -- flakes ---------------------------------------------------------------------

    def _flakes(self) -> dict[int, int]:
        """Merge the flakes; returns ``{source flake row id: dest flake row id}``."""
        mapping: dict[int, int] = {}
        for row in self.src.execute(f"SELECT {_FLAKE_COLUMNS} FROM flakes ORDER BY id").fetchall():  # noqa: S608
            flake = dict(zip(_FLAKE_COLUMNS.split(", "), row, strict=True))
            steps = self.src.execute(
                "SELECT run_id, step, purpose, sequence, environment, outcome, detail, duration, "
                "created_at FROM isolation_steps WHERE flake_id = ? ORDER BY id",
                (flake["id"],),
            ).fetchall()
            if not self._is_new(flake, steps):
                existing = self.dst.execute(
                    "SELECT id FROM flakes WHERE test_id = ?", (self.tests[flake["test_id"]],)
                ).fetchone()
                if existing:
                    mapping[flake["id"]] = int(existing[0])
                continue
            incoming = self._translated(flake)
            dest_row = self._store_flake(incoming)
            mapping[flake["id"]] = dest_row
            self.dst.executemany(
                "INSERT INTO isolation_steps (flake_id, run_id, step, purpose, sequence, "
                "environment, outcome, detail, duration, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(dest_row, self.run_id(s[0]), *s[1:]) for s in steps],
            )
        return mapping

    def _is_new(self, flake: dict[str, Any], steps: list[tuple[Any, ...]]) -> bool:
        runs = {flake["first_run_id"], flake["last_run_id"], *(s[0] for s in steps)}
        repro = _loads(flake["reproducer"], flake, "reproducer")
        if isinstance(repro, dict):
            runs.add(repro.get("run_id"))
        runs.discard(None)
        if not runs:
            return bool(self.new_runs)
        return any(r in self.new_runs for r in runs)

    def _translated(self, flake: dict[str, Any]) -> dict[str, Any]:
        """``flake`` with its run, attempt and test ids in dest numbering."""
        out = dict(flake)
        out["test_id"] = self.tests[flake["test_id"]]
        out["first_run_id"] = self.run_id(flake["first_run_id"])
        out["last_run_id"] = self.run_id(flake["last_run_id"])
        raw = _loads(flake["reproducer"], flake, "reproducer")
        if raw is not None:
            try:
                repro = Reproducer.from_json(raw)
            except ValueError as exc:
                raise BadDatabase(
                    f"flake {flake['flake_id']}: reproducer is malformed ({exc}); "
                    "the input is damaged"
                ) from None
            data = repro.to_json()
            data["run_id"] = self.run_id(repro.run_id)
            for step in data["steps"]:
                step["attempt_id"] = self.attempt(step["attempt_id"])
            out["reproducer"] = json.dumps(data, sort_keys=True)
        evidence = _loads(flake["evidence"], flake, "evidence")
        out["evidence"] = json.dumps(_renumber(evidence, self.attempt, self.run_id), sort_keys=True)
        return out

    def _store_flake(self, incoming: dict[str, Any]) -> int:
        existing = self.dst.execute(
            f"SELECT {_FLAKE_COLUMNS} FROM flakes WHERE test_id = ?",  # noqa: S608
            (incoming["test_id"],),
        ).fetchone()
        if existing is None:
            incoming["flake_id"] = self._next_flake_id()
            columns = _FLAKE_COLUMNS.split(", ")[1:]
            cursor = self.dst.execute(
                f"INSERT INTO flakes ({', '.join(columns)}) "  # noqa: S608
                f"VALUES ({','.join('?' * len(columns))})",
                [incoming[c] for c in columns],
            )
            assert cursor.lastrowid is not None
            self.summary.new_flakes.append(incoming["flake_id"])
            return cursor.lastrowid
        current = dict(zip(_FLAKE_COLUMNS.split(", "), existing, strict=True))
        combined = combine_flakes(current, incoming)
        assignments = ", ".join(f"{c} = ?" for c in combined)
        self.dst.execute(
            f"UPDATE flakes SET {assignments} WHERE id = ?",  # noqa: S608 - our column names
            [*combined.values(), current["id"]],
        )
        self.summary.combined_flakes.append(current["flake_id"])
        return int(current["id"])

    def _next_flake_id(self) -> str:
        numbers = [
            int(fid[1:])
            for (fid,) in self.dst.execute("SELECT flake_id FROM flakes")
            if isinstance(fid, str) and fid[1:].isdigit()
        ]
        return f"F{max(numbers, default=0) + 1}"

    # -- replays --------------------------------------------------------------------

    def _replays(self, flakes: dict[int, int]) -> None:
        rows = self.src.execute(
            "SELECT target, flake_id, attempt_id, started_at, outcome, detail, environment "
            "FROM replays ORDER BY id"
        ).fetchall()
        for r in rows:
            duplicate = self.dst.execute(
                "SELECT 1 FROM replays WHERE target = ? AND started_at = ? AND outcome = ? "
                "AND detail = ? AND environment = ?",
                (r[0], r[3], r[4], r[5], r[6]),
            ).fetchone()
            if duplicate:
                continue
            self.dst.execute(
                "INSERT INTO replays (target, flake_id, attempt_id, started_at, outcome, detail, "
                "environment) VALUES (?,?,?,?,?,?,?)",
                (r[0], flakes.get(r[1]) if r[1] is not None else None, self.attempt(r[2]), *r[3:]),
            )


def _loads(text: Any, flake: dict[str, Any], what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise BadDatabase(
            f"flake {flake.get('flake_id')}: {what} is not valid JSON; the input is damaged"
        ) from None


_ATTEMPT_KEYS = ("attempt", "attempt_id", "attempts", "attempt_ids")
_RUN_KEYS = ("run", "run_id", "runs", "run_ids")


def _renumber(
    value: Any,
    attempt: Callable[[Any], int | None],
    run: Callable[[Any], int | None],
) -> Any:
    """Evidence with ids under attempt/run keys renumbered (anything else untouched)."""
    if isinstance(value, list):
        return [_renumber(v, attempt, run) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        mapper = attempt if key in _ATTEMPT_KEYS else run if key in _RUN_KEYS else None
        if mapper is not None and isinstance(item, list):
            out[key] = [_map_id(v, mapper) for v in item]
        elif mapper is not None:
            out[key] = _map_id(item, mapper)
        else:
            out[key] = _renumber(item, attempt, run)
    return out


def _map_id(value: Any, mapper: Callable[[Any], int | None]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return mapper(value)
    if isinstance(value, str) and value[:1] in "Aa" and value[1:].isdigit():
        mapped = mapper(int(value[1:]))
        return f"A{mapped}" if mapped is not None else None
    return value


def _union(*lists: Any) -> list[Any]:
    out: list[Any] = []
    for items in lists:
        for item in items if isinstance(items, list) else []:
            if item not in out:
                out.append(item)
    return out


def _set_union(*groups: Any) -> list[list[str]]:
    seen: dict[tuple[str, ...], list[str]] = {}
    for group in groups:
        for members in group if isinstance(group, list) else []:
            if isinstance(members, list):
                seen.setdefault(tuple(sorted(map(str, members))), members)
    return list(seen.values())


def combine_flakes(current: dict[str, Any], incoming: dict[str, Any]) -> dict[str, Any]:
    """The columns to update when ``incoming`` joins the flake ``current`` (same test)."""

    def load(row: dict[str, Any], key: str) -> Any:
        return _loads(row[key], row, key)

    keep_incoming = current["reproducer"] is None or (
        current["confirmed"] != 1 and incoming["confirmed"] == 1
    )
    winner = incoming if keep_incoming and incoming["reproducer"] is not None else current
    confirmed = [c for c in (current["confirmed"], incoming["confirmed"]) if c is not None]
    runs_first = [r for r in (current["first_run_id"], incoming["first_run_id"]) if r is not None]
    runs_last = [r for r in (current["last_run_id"], incoming["last_run_id"]) if r is not None]
    statuses = [s for s in (current["status"], incoming["status"]) if s in _STATUS_RANK]
    notes = _union(*([row["note"]] for row in (current, incoming) if row["note"]))
    return {
        "kinds": json.dumps(_union(load(current, "kinds"), load(incoming, "kinds"))),
        "polluters": json.dumps(
            _set_union(load(current, "polluters"), load(incoming, "polluters"))
        ),
        "state_setters": json.dumps(
            _set_union(load(current, "state_setters"), load(incoming, "state_setters"))
        ),
        "cleaners": json.dumps(_union(load(current, "cleaners"), load(incoming, "cleaners"))),
        "reproducer": winner["reproducer"],
        "evidence": winner["evidence"],
        "confirmed": max(confirmed) if confirmed else None,
        "status": min(statuses, key=_STATUS_RANK.index) if statuses else current["status"],
        "probes": (current["probes"] or 0) + (incoming["probes"] or 0),
        "probe_seconds": (current["probe_seconds"] or 0.0) + (incoming["probe_seconds"] or 0.0),
        "note": "; ".join(notes),
        "first_run_id": min(runs_first) if runs_first else None,
        "last_run_id": max(runs_last) if runs_last else None,
        "created_at": min(current["created_at"], incoming["created_at"]),
        "updated_at": max(current["updated_at"], incoming["updated_at"]),
    }
