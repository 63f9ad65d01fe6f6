"""How ``merge`` combines flakes and renumbers ids (pure; no SQL).

Two shards that both found the same flaky test each store a flake for it;
``OUT.db`` keeps one per test, combined so that nothing either shard learned
is lost:

* kinds, cleaners: united, in order of first appearance;
* polluter and state-setter sets: united (a set is the same set in any order);
* reproducer and evidence: the confirmed reproducer wins; when both are
  confirmed (or neither), the flake already in ``OUT.db`` keeps its own;
* confirmed: 1 if either is, else 0 if either is, else NULL;
* status: the better of ``isolated``, ``partial``, ``pending``, ``error``,
  ``not-collected``, ``skipped``;
* probes and probe seconds: added; notes: joined; runs: the widest span.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import Reproducer
from hermetic_hunt.untrusted import is_whole, load_json

Mapper = Callable[[Any], "int | None"]

#: Flake statuses, best first.
STATUS_RANK = ("isolated", "partial", "pending", "error", "not-collected", "skipped")
_ATTEMPT_KEYS = ("attempt", "attempt_id", "attempts", "attempt_ids", "journals")
_ATTEMPT_SUFFIXES = ("_attempt", "_attempts", "_attempt_id", "_attempt_ids")
_RUN_KEYS = ("run", "run_id", "runs", "run_ids")
_RUN_SUFFIXES = ("_run", "_runs", "_run_id", "_run_ids")


def loads(text: Any, what: str) -> Any:
    """Stored JSON (untrusted); ``None`` stays ``None``."""
    if text is None:
        return None
    try:
        return load_json(text)
    except ValueError as exc:
        raise BadDatabase(f"{what} is {exc}; the input is damaged") from None


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _mapper_for(key: str, attempt: Mapper, run: Mapper) -> Mapper | None:
    if key in _ATTEMPT_KEYS or key.endswith(_ATTEMPT_SUFFIXES):
        return attempt
    if key in _RUN_KEYS or key.endswith(_RUN_SUFFIXES):
        return run
    return None


def renumber(value: Any, attempt: Mapper, run: Mapper) -> Any:
    """``value`` with the ids under attempt / run keys renumbered.

    Keys such as ``attempt_id``, ``failing_attempts``, ``journals`` hold
    attempt ids (numbers or ``"A12"``); ``run_id``, ``runs`` hold run ids.
    Everything else is kept as it is.
    """
    if isinstance(value, list):
        return [renumber(v, attempt, run) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        mapper = _mapper_for(str(key), attempt, run)
        if mapper is None:
            out[key] = renumber(item, attempt, run)
        elif isinstance(item, list):
            out[key] = [_map_id(v, mapper) for v in item]
        else:
            out[key] = _map_id(item, mapper)
    return out


def _map_id(value: Any, mapper: Mapper) -> Any:
    if is_whole(value):
        return mapper(value)
    if isinstance(value, str) and value[:1] in ("A", "a") and value[1:].isdigit():
        mapped = mapper(int(value[1:]))
        return f"A{mapped}" if mapped is not None else None
    return value


def translate_reproducer(text: Any, where: str, attempt: Mapper, run: Mapper) -> str | None:
    """A stored reproducer with its run and step attempt ids renumbered."""
    raw = loads(text, f"{where}: reproducer")
    if raw is None:
        return None
    try:
        repro = Reproducer.from_json(raw)
    except ValueError as exc:
        raise BadDatabase(
            f"{where}: reproducer is malformed ({exc}); the input is damaged"
        ) from None
    data = repro.to_json()
    data["run_id"] = run(repro.run_id) if repro.run_id is not None else None
    for step in data["steps"]:
        step["attempt_id"] = attempt(step["attempt_id"]) if step["attempt_id"] is not None else None
    return json.dumps(data)


def next_flake_id(existing: list[Any]) -> str:
    """``F<n>`` after the highest ``F`` number in ``existing``."""
    numbers = [int(f[1:]) for f in existing if isinstance(f, str) and f[1:].isdigit()]
    return f"F{max(numbers, default=0) + 1}"


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

    def both(key: str) -> tuple[Any, Any]:
        where = f"flake {current['flake_id']}: {key}"
        return loads(current[key], where), loads(incoming[key], where)

    take_incoming = incoming["reproducer"] is not None and (
        current["reproducer"] is None or (current["confirmed"] != 1 and incoming["confirmed"] == 1)
    )
    winner = incoming if take_incoming else current
    confirmed = [c for c in (current["confirmed"], incoming["confirmed"]) if c is not None]
    firsts = [r for r in (current["first_run_id"], incoming["first_run_id"]) if r is not None]
    lasts = [r for r in (current["last_run_id"], incoming["last_run_id"]) if r is not None]
    statuses = [s for s in (current["status"], incoming["status"]) if s in STATUS_RANK]
    notes = _union(*([row["note"]] for row in (current, incoming) if row["note"]))
    return {
        "kinds": json.dumps(_union(*both("kinds"))),
        "polluters": json.dumps(_set_union(*both("polluters"))),
        "state_setters": json.dumps(_set_union(*both("state_setters"))),
        "cleaners": json.dumps(_union(*both("cleaners"))),
        "reproducer": winner["reproducer"],
        "evidence": winner["evidence"],
        "confirmed": max(confirmed) if confirmed else None,
        "status": min(statuses, key=STATUS_RANK.index) if statuses else current["status"],
        "probes": (current["probes"] or 0) + (incoming["probes"] or 0),
        "probe_seconds": (current["probe_seconds"] or 0.0) + (incoming["probe_seconds"] or 0.0),
        "note": "; ".join(notes),
        "first_run_id": min(firsts) if firsts else None,
        "last_run_id": max(lasts) if lasts else None,
        "created_at": min(current["created_at"], incoming["created_at"]),
        "updated_at": max(current["updated_at"], incoming["updated_at"]),
    }
