"""Validating stored flakes: a database is untrusted input (:func:`parse_flake`).

A ``flakes`` row (:class:`~hermetic_hunt.report.model.RawFlake`, JSON
columns still text) becomes a :class:`~hermetic_hunt.report.model.Flake`
whose every list is a real list of nodeids, or :class:`BadDatabase` names
what is wrong.
"""

from __future__ import annotations

from typing import Any

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import KINDS, Reproducer, parse_ref
from hermetic_hunt.report.model import Flake
from hermetic_hunt.store.rows import RawFlake
from hermetic_hunt.untrusted import load_json


def _load(raw: str | None, what: str, where: str) -> Any:
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
        f"{where}: {what} must be {shape}; the database is damaged or written by "
        "another tool (re-run the hunt)"
    )


def _nodeids(value: Any, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _malformed(what, "a JSON list of test ids", where)
    return tuple(value)


def _sets(value: Any, what: str, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list):
        raise _malformed(what, "a JSON list of sets of test ids", where)
    return tuple(_nodeids(item, what, where) for item in value)


def parse_flake(raw: RawFlake, database: str) -> Flake:
    """Validate a stored flake (untrusted); :class:`BadDatabase` names what is wrong."""
    parsed = parse_ref(raw.flake_id) if isinstance(raw.flake_id, str) else None
    if parsed is None or parsed.kind != "flake" or str(parsed) != raw.flake_id:
        raise BadDatabase(
            f"{database}: flake id {raw.flake_id!r} is not F followed by a number; the database "
            "is damaged or was edited (re-run the hunt)"
        )
    where = f"{database}: flake {raw.flake_id}"
    kinds = _nodeids(_load(raw.kinds, "kinds", where), "kinds", where)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise BadDatabase(
            f"{where}: unknown flake kind {unknown[0]!r} (known: {', '.join(KINDS)}); "
            "upgrade hermetic-hunt or re-run the hunt"
        )
    reproducer = None
    loaded = _load(raw.reproducer, "reproducer", where)
    if loaded is not None:
        try:
            reproducer = Reproducer.from_json(loaded)
        except ValueError as exc:
            raise BadDatabase(
                f"{where}: reproducer is malformed ({exc}); re-run the hunt"
            ) from None
    return Flake(
        flake_id=raw.flake_id,
        nodeid=raw.nodeid,
        kinds=kinds,
        status=raw.status,
        confirmed=None if raw.confirmed is None else bool(raw.confirmed),
        polluters=_sets(_load(raw.polluters, "polluters", where), "polluters", where),
        cleaners=_nodeids(_load(raw.cleaners, "cleaners", where), "cleaners", where),
        state_setters=_sets(
            _load(raw.state_setters, "state_setters", where), "state_setters", where
        ),
        reproducer=reproducer,
        evidence=_load(raw.evidence, "evidence", where),
        probes=raw.probes,
        probe_seconds=raw.probe_seconds,
        note=raw.note,
        first_run_id=raw.first_run_id,
        last_run_id=raw.last_run_id,
    )
