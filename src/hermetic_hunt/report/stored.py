"""Validating stored flakes: a database is untrusted input (:func:`parse_flake`).

A ``flakes`` row (:class:`~hermetic_hunt.store.rows.RawFlake`, JSON
columns still text) becomes a :class:`~hermetic_hunt.report.model.Flake`
whose every list is a real list of nodeids, or :class:`BadDatabase` names
what is wrong (the cells are checked by :mod:`hermetic_hunt.store.cells`).
"""

from __future__ import annotations

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import parse_ref
from hermetic_hunt.report.model import Flake
from hermetic_hunt.store import cells
from hermetic_hunt.store.rows import RawFlake


def parse_flake(raw: RawFlake, database: str) -> Flake:
    """Validate a stored flake (untrusted); :class:`BadDatabase` names what is wrong."""
    parsed = parse_ref(raw.flake_id) if isinstance(raw.flake_id, str) else None
    if parsed is None or parsed.kind != "flake" or str(parsed) != raw.flake_id:
        raise BadDatabase(
            f"{database}: flake id {raw.flake_id!r} is not F followed by a number; the database "
            "is damaged or was edited (re-run the hunt)"
        )
    where = f"{database}: flake {raw.flake_id}"
    return Flake(
        flake_id=raw.flake_id,
        nodeid=raw.nodeid,
        kinds=cells.kinds(raw.kinds, where),
        status=raw.status,
        confirmed=None if raw.confirmed is None else bool(raw.confirmed),
        polluters=cells.sets(raw.polluters, "polluters", where),
        cleaners=cells.nodeids(raw.cleaners, "cleaners", where),
        state_setters=cells.sets(raw.state_setters, "state_setters", where),
        reproducer=cells.reproducer(raw.reproducer, where),
        evidence=cells.cell(raw.evidence, "evidence", where),
        probes=raw.probes,
        probe_seconds=raw.probe_seconds,
        note=raw.note,
        first_run_id=raw.first_run_id,
        last_run_id=raw.last_run_id,
    )
