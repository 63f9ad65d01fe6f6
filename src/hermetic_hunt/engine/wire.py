"""The lines that travel from a process that runs tests to the one that stores them.

This module only frames lines; what is inside is each value's own codec
(:meth:`hermetic_hunt.models.Attempt.to_json` / ``from_json`` and the
``Leak``, ``Step`` and ``Job`` ones). One JSON line per finished step,
written by the process that ran it (a forked child) the moment the step is
over, so a crash loses at most the step it was running::

    {"failing": 1, "step": 3, "attempts": [{attempt}, ...], "reports": [{pytest report}, ...]}

(``failing`` only when an attempt failed: a line a worker hands on at once,
:func:`urgent`).

``attempts`` holds every execution of the step (pytest-rerunfailures reruns
included). ``reports`` holds pytest's own serialised reports of the failing
phases only, for the terminal's failure sections (nothing of ours is on
them), and, for a step whose subtests passed or were skipped, one
``{"counts": {"subtests passed": 6}}`` by pytest's category
(:func:`counts_report`): its last line counts them as a plain run does.
A job ends with one line, written by the process that watched the
child (never by the child itself: see :mod:`hermetic_hunt.engine.fork`)::

    {"op": "end", "status": "completed" | "stopped" | "error",
     "detail": "...", "steps": 12, "rejected": 0,
     "leaks": {"3": [[resource, name, change, detail], ...]}}

``steps`` counts the step lines the job sent (the controller checks it
against the plan), ``rejected`` the lines on the round's channel that did
not come from the child that owns it (forged by a test, or written by a
process it forked). ``leaks`` names what the round left behind, by position
(see :class:`hermetic_hunt.engine.leaks.RoundLeaks`).

On the round's private channel every line is *sealed* (:func:`seal`: the
job's random token and the writer's pid); why, in docs/how-it-works.md, 'A
round is a fresh run'. From the parent on, lines travel unsealed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hermetic_hunt.models import Attempt, Leak

END = "end"
#: How an end line starts (what a forwarder looks for without decoding it).
END_PREFIX = b'{"op":"end"'
_FAILING_PREFIX = b'{"failing":1'
T = TypeVar("T")


def urgent(line: bytes) -> bool:
    """A step line with a failing attempt, or an end line: to be handed on at once."""
    return line.startswith((_FAILING_PREFIX, END_PREFIX))


def attempts_in(message: dict[str, Any]) -> list[Attempt]:
    """The attempts of a step line (:meth:`Attempt.from_json`; a malformed one is left out,
    the others still count)."""
    found = message.get("attempts")
    return _parsed(Attempt.from_json, found if isinstance(found, list) else [])


def _parsed(parse: Callable[[Any], T], raw: list[Any]) -> list[T]:
    """``parse`` of each entry of ``raw``; an entry it refuses (ValueError) is left out."""
    out = []
    for entry in raw:
        with contextlib.suppress(ValueError):
            out.append(parse(entry))
    return out


def step_line(index: int, attempts: list[Attempt], reports: list[dict[str, Any]]) -> bytes:
    # "failing" first: a forwarder sends the line at once without decoding it (urgent).
    message: dict[str, Any] = {"failing": 1} if any(a.failed for a in attempts) else {}
    message.update(step=index, attempts=[a.to_json() for a in attempts])
    if reports:
        message["reports"] = reports
    return encode(message)


#: The key of a ``reports`` entry that counts reports not sent (:func:`counts_report`).
COUNTS = "counts"


def counts_report(counts: dict[str, int]) -> dict[str, Any]:
    """The reports of a step not sent one by one (passing subtests), counted by category."""
    return {COUNTS: counts}


def report_counts(data: dict[str, Any]) -> dict[str, int]:
    """:func:`counts_report`'s counts (bounded, malformed entries left out; empty: not one)."""
    raw = data.get(COUNTS)
    if len(data) != 1 or not isinstance(raw, dict):
        return {}
    return {
        category: count
        for category, count in raw.items()
        if isinstance(category, str) and 0 < len(category) <= 40
        and type(count) is int and 0 < count <= 1_000_000
    }  # fmt: skip


def end_line(
    status: str,
    detail: str = "",
    leaks: dict[int, list[Leak]] | None = None,
    *,
    steps: int | None = None,
    rejected: int = 0,
) -> bytes:
    # "op" first: END_PREFIX finds it without decoding.
    message: dict[str, Any] = {"op": END, "status": status, "detail": detail}
    if steps is not None:
        message["steps"] = steps
    if rejected:
        message["rejected"] = rejected
    if leaks:
        message["leaks"] = {
            str(position): [x.to_json() for x in found] for position, found in leaks.items()
        }
    return encode(message)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One line; ValueError when it is not a JSON object."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


def decode_batch(lines: Sequence[bytes]) -> list[dict[str, Any] | None]:
    """Many lines at once (one parse for the batch); None for each line that is not an object."""
    try:
        values = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):  # one bad line: find it, keep the others
        out: list[dict[str, Any] | None] = []
        for line in lines:
            try:
                out.append(decode(line))
            except ValueError:
                out.append(None)
        return out
    if type(values) is list and set(map(type, values)) == {dict}:  # (the usual batch)
        return values
    return [value if type(value) is dict else None for value in values]


def round_leaks(message: dict[str, Any]) -> dict[int, list[Leak]]:
    """The ``leaks`` of an ``end`` message, by position (malformed entries left out)."""
    raw = message.get("leaks")
    return {
        int(key): _parsed(Leak.from_json, found)
        for key, found in (raw.items() if isinstance(raw, dict) else ())
        if isinstance(key, str) and key.isdigit() and isinstance(found, list)
    }


# -- the private channel's seal -------------------------------------------------------


def seal_prefix(token: str, pid: int) -> bytes:
    """What starts every line ``pid`` writes for the job of ``token``."""
    return f"{token}:{pid}:".encode("ascii")


def seal(token: str, pid: int, line: bytes) -> bytes:
    return seal_prefix(token, pid) + line
