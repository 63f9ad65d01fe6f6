"""The ``runs`` table: a hunt's row from its start to its end, and what is read back from it.

The hunt writes its run (:func:`start_run` ... :func:`finish_run`); isolation,
fixes, replays and reports read it back: its stored :class:`Settings`
(:func:`settings_of`, the one reader of ``runs.settings``), where it ran
(:func:`locations`), what isolation needs to probe its tests (:func:`run_facts`)
and the report's :class:`RunRow`. A database is untrusted: a malformed value
falls back to its default, or is a :class:`BadDatabase` where nothing can.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, replace
from typing import Any

from hermetic_hunt.errors import BadDatabase, UnknownId
from hermetic_hunt.models import MODES, PLAIN_SQL, RunInfo, Settings
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.rows import RunRow, held, insert, named, scalar, texts, update
from hermetic_hunt.untrusted import json_or, number_or, text_or, whole_or

# -- the hunt's writes --------------------------------------------------------------


def start_run(store: Store, info: RunInfo) -> int:
    """A new ``running`` run; its id. Sets the disk reserve aside (:meth:`Store.keep_reserve`)."""
    settings = info.settings
    row = {
        "uuid": info.uuid,
        "started_at": real_now_iso(),
        "status": "running",
        "argv": json.dumps(info.argv),
        "invocation_dir": info.invocation_dir,
        "rootdir": info.rootdir,
        "base_seed": settings.base_seed,
        "rounds_planned": settings.rounds,
        "budget_seconds": settings.budget_seconds,
        "workers": info.workers,
        "worker_spec": json.dumps(info.worker_spec),
        "mode": settings.mode,
        "order_strategy": settings.order,
        "shard": str(settings.shard),
        "environment": json.dumps(info.environment, sort_keys=True),
        "settings": json.dumps(settings.to_json(), sort_keys=True),
        "git_sha": text_or(info.environment.get("git_sha")) or None,
        "git_branch": text_or(info.environment.get("git_branch")) or None,
    }
    with store.transaction() as conn:
        run_id = insert(conn, "runs", row)
    store.keep_reserve()
    return run_id


def set_run(store: Store, run_id: int, **columns: Any) -> None:
    """Columns of the run as the hunt goes: ``tests``, ``rounds_done``, ``incomplete``
    (what did not add up in its rounds: see ``docs/guarantees.md``). The names are ours."""
    store.execute(update("runs", columns), (*columns.values(), run_id))


def finish_run(
    store: Store, run_id: int, *, status: str, rounds_done: int, exit_status: int
) -> None:
    """The run's last write. On a full disk, the reserve is given back and it is tried again."""
    params = (status, real_now_iso(), rounds_done, exit_status, run_id)
    sql = update("runs", ("status", "finished_at", "rounds_done", "exit_status"))
    try:
        store.execute(sql, params)
    except BadDatabase:
        if not store.release_reserve():
            raise
        store.execute(sql, params)


# -- reading a run back --------------------------------------------------------------


def row_of(store: Store, run_id: int | None) -> sqlite3.Row | None:
    """The row of run ``run_id`` (None: no such run)."""
    return next(iter(named(store.conn, "SELECT * FROM runs WHERE id = ?", (run_id,))), None)


def newest(store: Store) -> int | None:
    """The id of the newest run (None: none yet)."""
    return whole_or(scalar(store.conn, "SELECT max(id) FROM runs"))


def settings_of(row: sqlite3.Row | None) -> Settings:
    """The settings a run's hunt ran with (defaults for what is malformed or missing;
    a run from before settings were stored keeps its ``mode`` column)."""
    if row is None:
        return Settings.from_json(None)
    stored = json_or(row["settings"])
    settings = Settings.from_json(stored, base_seed=whole_or(row["base_seed"]) or 0)
    if stored is None and row["mode"] in MODES:
        settings = replace(settings, mode=row["mode"])
    return settings


def run_context(store: Store, run_id: int | None) -> tuple[str, str]:
    """(rootdir, integration marker) of run ``run_id`` (the newest run when None)."""
    row = row_of(store, newest(store) if run_id is None else run_id)
    return (text_or(row["rootdir"]) if row else ""), settings_of(row).integration_marker


def environment(store: Store, run_id: int) -> dict[str, Any] | None:
    """The environment the hunt of ``run_id`` recorded (None: none, or malformed)."""
    row = row_of(store, run_id)
    value = json_or(row["environment"]) if row else None
    return value if isinstance(value, dict) else None


def locations(store: Store) -> dict[int, tuple[str, str]]:
    """``{run id: (rootdir, invocation_dir)}``: where each hunt collected its tests."""
    rows = named(store.conn, "SELECT id, rootdir, invocation_dir FROM runs")
    return {
        r["id"]: (r["rootdir"], r["invocation_dir"])
        for r in rows
        if isinstance(r["rootdir"], str) and isinstance(r["invocation_dir"], str)
    }


def rounds_seconds(store: Store, run_id: int) -> float | None:
    """How long the run's hunt took (start to finish), from its real timestamps."""
    value = number_or(
        scalar(
            store.conn,
            "SELECT (julianday(finished_at) - julianday(started_at)) * 86400.0 FROM runs "
            "WHERE id = ?",
            (run_id,),
        )
    )
    return value if value is not None and value >= 0 else None


@dataclass(frozen=True)
class RunFacts:
    """What isolation needs to know about a run to probe its tests."""

    run_id: int
    argv: tuple[str, ...]
    invocation_dir: str
    rootdir: str
    settings: Settings
    workers: int

    @property
    def base_seed(self) -> int:
        return self.settings.base_seed


def run_facts(store: Store, run_id: int | None) -> RunFacts:
    """The run ``run_id`` (None: the newest run)."""
    if run_id is None:
        run_id = newest(store)
        if run_id is None:
            raise UnknownId(f"{store.path} holds no run yet: hunt first (pytest --hermetic-hunt=N)")
    row = row_of(store, run_id)
    if row is None:
        raise UnknownId(f"run {run_id} is not in {store.path}: see 'hermetic-hunt list'")
    argv = json_or(row["argv"])
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise BadDatabase(f"{store.path}: run {run_id} has a damaged argv; re-run the hunt")
    invocation_dir, rootdir = row["invocation_dir"], row["rootdir"]
    if whole_or(row["base_seed"]) is None or not (
        isinstance(invocation_dir, str) and isinstance(rootdir, str)
    ):
        raise BadDatabase(f"{store.path}: run {run_id} is damaged; re-run the hunt")
    return RunFacts(
        run_id=run_id,
        argv=tuple(argv),
        invocation_dir=invocation_dir,
        rootdir=rootdir,
        settings=settings_of(row),
        workers=max(1, whole_or(row["workers"]) or 1),
    )


# -- the report's runs ------------------------------------------------------------------


def run_rows(store: Store, run_id: int | None = None) -> list[RunRow]:
    """The runs of the database (oldest first), or the one run ``run_id``."""
    where, params = ("", []) if run_id is None else ("WHERE id = ?", [run_id])
    rows = named(
        store.conn,
        "SELECT id, uuid, started_at, finished_at, status, argv, base_seed, rounds_planned, "  # noqa: S608
        "budget_seconds, rounds_done, attempts, tests, workers, mode, order_strategy AS "
        f'"order", shard, exit_status, git_sha, git_branch, incomplete FROM runs {where} '
        "ORDER BY id",
        params,
    )
    if run_id is not None and not rows:
        ids = held(store.conn, "SELECT id FROM runs ORDER BY id", "no runs", "run ", "runs ")
        raise UnknownId(
            f"run {run_id} is not in {store.path.name} (it holds {ids}): pass one of "
            "those to --run, or leave --run out to report every run"
        )
    repeated = dict(
        store.conn.execute(  # attempts that are no plain run (a twice round's repeated runs)
            f"SELECT a.run_id, count(*) FROM attempts a WHERE NOT ({PLAIN_SQL}) "  # noqa: S608
            f"{'AND a.run_id = ? ' if run_id is not None else ''}GROUP BY a.run_id",
            params,
        ).fetchall()
    )
    return [
        RunRow(**{**r, "argv": texts(r["argv"]), "incomplete": text_or(r["incomplete"]),
                  "repeated": repeated.get(r["id"], 0)})
        for r in rows
    ]  # fmt: skip
