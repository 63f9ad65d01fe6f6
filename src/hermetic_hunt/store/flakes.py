"""The ``flakes`` table: one :class:`~hermetic_hunt.findings.Flake` per test, read and written here.

Isolation writes a test's flake (:func:`ensure_flakes` gives it its ``F``
id, :func:`save_finding` its verdict and probes). Reports, ``show``,
replays and fixes read it back through :func:`read` (or :func:`get`),
validated once: a database is untrusted, so ``kinds``, ``polluters``,
``cleaners``, ``state_setters``, ``evidence`` and ``reproducer`` (JSON
text) become known kinds, real lists of nodeids and a
:class:`~hermetic_hunt.models.Reproducer`, or a :class:`BadDatabase`
naming the flake, the cell and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from hermetic_hunt.errors import BadDatabase, UnknownId
from hermetic_hunt.findings import Finding, Flake, Probe, ProbeResult
from hermetic_hunt.kinds import KINDS
from hermetic_hunt.models import Reproducer, parse_ref
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.rows import chunks, held, named, update
from hermetic_hunt.untrusted import load_json, number_or, text_or, whole_or

_SELECT = """
    SELECT fl.id, fl.flake_id, t.nodeid, fl.kinds, fl.status, fl.evidence, fl.reproducer,
           fl.polluters, fl.cleaners, fl.state_setters, fl.confirmed, fl.probes,
           fl.probe_seconds, fl.note, fl.first_run_id, fl.last_run_id
    FROM flakes fl JOIN tests t ON t.id = fl.test_id
"""


class BadReproducer(BadDatabase):
    """A flake's ``reproducer`` that is none; ``problem`` says why."""

    def __init__(self, message: str, flake_id: str, problem: str) -> None:
        super().__init__(message)
        self.flake_id = flake_id
        self.problem = problem


# -- reading --------------------------------------------------------------------------


def read(
    store: Store, where: str = "ORDER BY fl.id", params: Sequence[Any] = (), database: str = ""
) -> list[Flake]:
    """The flakes of ``SELECT ... where``; errors name the database ``database``
    (default: its file name)."""
    name = database or store.path.name
    return [_flake(row, name) for row in named(store.conn, _SELECT + where, params)]


def get(store: Store, flake_id: str, database: str = "") -> Flake:
    """Flake ``flake_id`` (:class:`UnknownId` naming the ids the database holds)."""
    for flake in read(store, "WHERE fl.flake_id = ?", (flake_id,), database):
        return flake
    ids = held(store.conn, "SELECT flake_id FROM flakes ORDER BY id", "no flakes yet", "", "")
    raise UnknownId(
        f"flake {flake_id} is not in {database or store.path.name} (it holds {ids}): "
        "hermetic-hunt list shows the flake ids"
    )


def known_verdicts(store: Store, nodeids: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """``{nodeid: (status, kinds)}`` of the flakes these tests already have (a damaged
    one is not known: isolation writes it anew)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for chunk, marks in chunks(nodeids):
        for row in named(store.conn, _SELECT + f"WHERE t.nodeid IN ({marks})", chunk):
            with contextlib.suppress(BadDatabase):
                flake = _flake(row, store.path.name)
                out[flake.nodeid] = (flake.status, list(flake.kinds))
    return out


def _flake(row: sqlite3.Row, database: str) -> Flake:
    flake_id = row["flake_id"]
    parsed = parse_ref(flake_id) if isinstance(flake_id, str) else None
    if parsed is None or parsed.kind != "flake" or str(parsed) != flake_id:
        raise BadDatabase(
            f"{database}: flake id {flake_id!r} is not F followed by a number; the database "
            "is damaged or was edited (re-run the hunt)"
        )
    where = f"{database}: flake {flake_id}"
    return Flake(
        flake_id=flake_id,
        nodeid=text_or(row["nodeid"]),
        kinds=_kinds(row["kinds"], where),
        status=text_or(row["status"]),
        confirmed=None if row["confirmed"] is None else bool(row["confirmed"]),
        polluters=_sets(row["polluters"], "polluters", where),
        cleaners=_nodeids(_cell(row["cleaners"], "cleaners", where), "cleaners", where),
        state_setters=_sets(row["state_setters"], "state_setters", where),
        reproducer=_reproducer(row["reproducer"], where, flake_id),
        evidence=_cell(row["evidence"], "evidence", where),
        probes=whole_or(row["probes"]) or 0,
        probe_seconds=number_or(row["probe_seconds"]) or 0.0,
        note=text_or(row["note"]),
        first_run_id=whole_or(row["first_run_id"]),
        last_run_id=whole_or(row["last_run_id"]),
        row_id=row["id"],
    )


def _cell(raw: Any, what: str, where: str) -> Any:
    """The parsed JSON of a cell (NULL: None)."""
    if raw is None:
        return None
    try:
        return load_json(raw)
    except ValueError as exc:
        raise BadDatabase(
            f"{where}: {what} is {exc}; the database is damaged (re-run the hunt)"
        ) from None


def _malformed(what: str, shape: str, where: str) -> BadDatabase:
    return BadDatabase(
        f"{where}: {what} must be {shape}; the database is damaged or written by another tool "
        "(re-run the hunt)"
    )


def _nodeids(value: Any, what: str, where: str) -> tuple[str, ...]:
    """A cell's JSON list of test ids (None: none)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _malformed(what, "a JSON list of test ids", where)
    return tuple(value)


def _sets(raw: Any, what: str, where: str) -> tuple[tuple[str, ...], ...]:
    """A cell holding a JSON list of sets of test ids (NULL: none)."""
    value = _cell(raw, what, where)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _malformed(what, "a JSON list of sets of test ids", where)
    return tuple(_nodeids(item, what, where) for item in value)


def _kinds(raw: Any, where: str) -> tuple[str, ...]:
    """A flake's kinds, each one this version knows."""
    found = _nodeids(_cell(raw, "kinds", where), "kinds", where)
    unknown = [k for k in found if k not in KINDS]
    if unknown:
        raise BadDatabase(
            f"{where}: unknown flake kind {unknown[0]!r} (known: {', '.join(KINDS)}); "
            "upgrade hermetic-hunt or re-run the hunt"
        )
    return found


def _reproducer(raw: Any, where: str, flake_id: str) -> Reproducer | None:
    """A flake's reproducer (NULL: none)."""
    if raw is None:
        return None
    try:
        loaded = load_json(raw)
    except ValueError as exc:
        message = f"{where}: reproducer is {exc}; the database is damaged (re-run the hunt)"
        raise BadReproducer(message, flake_id, str(exc)) from None
    try:
        return None if loaded is None else Reproducer.from_json(loaded)
    except ValueError as exc:
        message = f"{where}: reproducer is malformed ({exc}); re-run the hunt"
        raise BadReproducer(message, flake_id, str(exc)) from None


# -- writing ---------------------------------------------------------------------------


def ensure_flakes(store: Store, nodeids: Sequence[str], run_id: int) -> dict[str, tuple[int, str]]:
    """A flake row for each test (new ones get the next ``F`` id); ``{nodeid: (row, id)}``."""
    now = real_now_iso()
    out: dict[str, tuple[int, str]] = {}
    with store.transaction() as conn:
        for nodeid in nodeids:
            conn.execute("INSERT OR IGNORE INTO tests (nodeid) VALUES (?)", (nodeid,))
            (test_id,) = conn.execute("SELECT id FROM tests WHERE nodeid = ?", (nodeid,)).fetchone()
            found = conn.execute(
                "SELECT id, flake_id FROM flakes WHERE test_id = ?", (test_id,)
            ).fetchone()
            if found is None:
                (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM flakes").fetchone()
                row_id, flake_id = last + 1, f"F{last + 1}"
                conn.execute(
                    "INSERT INTO flakes (id, flake_id, test_id, first_run_id, last_run_id, "
                    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (row_id, flake_id, test_id, run_id, run_id, now, now),
                )
            else:
                row_id, flake_id = found
                conn.execute(
                    "UPDATE flakes SET first_run_id = min(coalesce(first_run_id, ?), ?), "
                    "last_run_id = max(coalesce(last_run_id, ?), ?) WHERE id = ?",
                    (run_id, run_id, run_id, run_id, row_id),
                )
            out[nodeid] = (int(row_id), str(flake_id))
    return out


def save_finding(
    store: Store, flake_row: int, run_id: int, verdict: Finding, *, steps_from: int = 1
) -> None:
    """Write one test's isolation: its flake row and its probes from step ``steps_from``
    (1: every probe, replacing what an earlier isolation of this run stored)."""
    now = real_now_iso()
    reproducer = verdict.reproducer
    values = {
        "kinds": json.dumps(verdict.kinds),
        "status": verdict.status,
        "evidence": json.dumps(verdict.evidence, sort_keys=True),
        "reproducer": json.dumps(reproducer.to_json()) if reproducer is not None else None,
        "polluters": json.dumps(verdict.polluters),
        "cleaners": json.dumps(verdict.cleaners),
        "state_setters": json.dumps(verdict.state_setters),
        "confirmed": None if verdict.confirmed is None else int(verdict.confirmed),
        "probes": len(verdict.probes),
        "probe_seconds": round(verdict.probe_seconds, 3),
        "note": "; ".join(verdict.notes),
        "updated_at": now,
    }
    with store.transaction() as conn:
        conn.execute(update("flakes", values), [*values.values(), flake_row])
        if steps_from <= 1:
            conn.execute(
                "DELETE FROM isolation_steps WHERE flake_id = ? AND run_id = ?",
                (flake_row, run_id),
            )
        conn.executemany(
            "INSERT INTO isolation_steps (flake_id, run_id, step, purpose, sequence, "
            "environment, outcome, detail, duration, journal, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                _step_row(flake_row, run_id, n, probe, result, now)
                for n, (probe, result) in enumerate(verdict.probes, start=1)
                if n >= steps_from
            ],
        )


def _environment(probe: Probe) -> str:
    """The probe's hash seed and its steps' JSON without their nodeids (``sequence``'s)."""
    steps = [{k: v for k, v in s.to_json().items() if k != "nodeid"} for s in probe.steps]
    return json.dumps({"hash_seed": probe.hash_seed, "steps": steps}, separators=(",", ":"))


def _step_row(
    flake_row: int, run_id: int, number: int, probe: Probe, result: ProbeResult, now: str
) -> tuple[Any, ...]:
    last = result.last
    detail = result.detail
    if last is not None and last.exc_type:
        detail = f"{last.exc_type} at {last.location}: {last.message}".strip(": ")
    if last is not None and last.violations:
        blocked = ", ".join(sorted({v.describe() for v in last.violations}))
        detail = f"{detail}; blocked: {blocked}" if detail else f"blocked: {blocked}"
    return (
        flake_row, run_id, number, probe.purpose,
        json.dumps([s.nodeid for s in probe.steps]), _environment(probe), result.outcome,
        detail[:2000], round(result.duration, 6), last.journal if last is not None else None, now,
    )  # fmt: skip
