"""A flake's JSON cells, checked for shape: a database is untrusted input.

``kinds``, ``polluters``, ``cleaners``, ``state_setters`` and
``reproducer`` are JSON text in ``flakes``; whoever reads them (the
report's flakes, a fix's facts) gets real lists of nodeids and a
:class:`~hermetic_hunt.models.Reproducer`, or a :class:`BadDatabase`
naming the cell and what is wrong with it.
"""

from __future__ import annotations

from typing import Any

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.kinds import KINDS
from hermetic_hunt.models import Reproducer
from hermetic_hunt.untrusted import load_json


def cell(raw: Any, what: str, where: str) -> Any:
    """The parsed JSON of a cell (None stays None)."""
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


def nodeids(raw: Any, what: str, where: str) -> tuple[str, ...]:
    """A cell holding a JSON list of test ids (NULL: none)."""
    return _nodeids(cell(raw, what, where), what, where)


def _nodeids(value: Any, what: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _malformed(what, "a JSON list of test ids", where)
    return tuple(value)


def sets(raw: Any, what: str, where: str) -> tuple[tuple[str, ...], ...]:
    """A cell holding a JSON list of sets of test ids (NULL: none)."""
    value = cell(raw, what, where)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _malformed(what, "a JSON list of sets of test ids", where)
    return tuple(_nodeids(item, what, where) for item in value)


def kinds(raw: Any, where: str) -> tuple[str, ...]:
    """A flake's kinds, each one this version knows."""
    found = nodeids(raw, "kinds", where)
    unknown = [k for k in found if k not in KINDS]
    if unknown:
        raise BadDatabase(
            f"{where}: unknown flake kind {unknown[0]!r} (known: {', '.join(KINDS)}); "
            "upgrade hermetic-hunt or re-run the hunt"
        )
    return found


def reproducer(raw: Any, where: str) -> Reproducer | None:
    """A flake's reproducer (NULL: none)."""
    loaded = cell(raw, "reproducer", where)
    if loaded is None:
        return None
    try:
        return Reproducer.from_json(loaded)
    except ValueError as exc:
        raise BadDatabase(f"{where}: reproducer is malformed ({exc}); re-run the hunt") from None
