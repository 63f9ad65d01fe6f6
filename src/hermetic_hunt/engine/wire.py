"""What travels from a process that runs tests to the one that stores them.

One JSON line per finished step, written by the process that ran it (a
forked child) the moment the step is over, so a crash loses at most the
step it was running::

    {"step": 3, "attempts": [{attempt}, ...], "reports": [{pytest report}, ...]}

``attempts`` holds every execution of the step (pytest-rerunfailures reruns
included), each as :func:`attempt_json` writes it: short keys, defaults
left out. ``reports`` holds pytest's own serialised reports of the failing
phases only, for the terminal's failure sections. A job ends with::

    {"op": "end", "status": "completed" | "stopped" | "interrupted",
     "detail": "...", "leaks": {"3": [[resource, name, change, detail], ...]}}

``leaks`` names what the round left behind, by position (see
:class:`hermetic_hunt.engine.leaks.RoundLeaks`). The lines travel unchanged
from a worker to the hunt's controller in batches (xdist) and are decoded
once, there.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from hermetic_hunt.models import Attempt, Failure, Leak, Violation

END = "end"


def _b64(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode("ascii") if data is not None else None


def unb64(text: Any) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError):
        return None


def attempt_json(a: Attempt) -> dict[str, Any]:
    out: dict[str, Any] = {"n": a.nodeid, "o": a.outcome, "r": a.round_no, "p": a.position,
                           "d": round(a.duration, 6), "m": a.mode}  # fmt: skip
    optional = {
        "x": a.execution if a.execution != 1 else None,
        "ph": a.phase,
        "s": a.seed,
        "t": a.now,
        "h": a.hash_seed,
        "c": a.counts or None,
        "v": [[v.op, v.host, v.port, v.detail] for v in a.violations] or None,
        "f": [a.failure.exc_type, a.failure.message, a.failure.location, a.failure.excerpt]
        if a.failure is not None
        else None,
        "l": [[x.resource, x.name, x.change, x.detail] for x in a.leaks] or None,
        "rp": a.repeat or None,
        "pf": a.profile,
        "si": a.switch_interval,
        "st": a.stress or None,
        "j": _b64(a.journal),
        "jf": a.journal_format,
        "b": a.started,
        "w": a.writes or None,
    }
    out.update((key, value) for key, value in optional.items() if value is not None)
    return out


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _int(value: Any, default: int | None = None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _float(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def violation(raw: Any) -> Violation | None:
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    return Violation(_str(raw[0]), _str(raw[1]), _int(raw[2]), _str(raw[3]))


def leak(raw: Any) -> Leak | None:
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    return Leak(_str(raw[0]), _str(raw[1]), _str(raw[2]), _str(raw[3]))


def attempt_from(raw: Any) -> Attempt | None:
    """An attempt from :func:`attempt_json`'s form (None: not one)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("n"), str):
        return None
    failure = raw.get("f")
    counts = raw.get("c")
    return Attempt(
        nodeid=raw["n"],
        outcome=_str(raw.get("o"), "failed"),
        round_no=_int(raw.get("r"), 0) or 0,
        position=_int(raw.get("p"), 0) or 0,
        execution=_int(raw.get("x"), 1) or 1,
        phase=raw.get("ph") if isinstance(raw.get("ph"), str) else None,
        duration=_float(raw.get("d")) or 0.0,
        seed=_int(raw.get("s")),
        now=_float(raw.get("t")),
        mode=_str(raw.get("m"), "seeded"),
        hash_seed=_int(raw.get("h")),
        counts=counts if isinstance(counts, dict) else None,
        violations=[v for v in map(violation, raw.get("v") or []) if v is not None],
        failure=Failure(*(_str(part) for part in failure))
        if isinstance(failure, list) and len(failure) == 4
        else None,
        leaks=[x for x in map(leak, raw.get("l") or []) if x is not None],
        repeat=_int(raw.get("rp"), 0) or 0,
        profile=raw.get("pf") if isinstance(raw.get("pf"), str) else None,
        switch_interval=_float(raw.get("si")),
        stress=_int(raw.get("st"), 0) or 0,
        journal=unb64(raw.get("j")),
        journal_format=raw.get("jf") if isinstance(raw.get("jf"), str) else None,
        started=_float(raw.get("b")),
        writes=[w for w in raw.get("w") or [] if isinstance(w, str)],
    )


def step_line(index: int, attempts: list[Attempt], reports: list[dict[str, Any]]) -> bytes:
    message: dict[str, Any] = {"step": index, "attempts": [attempt_json(a) for a in attempts]}
    if reports:
        message["reports"] = reports
    return encode(message)


def end_line(status: str, detail: str = "", leaks: dict[int, list[Leak]] | None = None) -> bytes:
    message: dict[str, Any] = {"op": END, "status": status, "detail": detail}
    if leaks:
        message["leaks"] = {
            str(position): [[x.resource, x.name, x.change, x.detail] for x in found]
            for position, found in leaks.items()
        }
    return encode(message)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One line; ValueError when it is not a JSON object."""
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


def round_leaks(message: dict[str, Any]) -> dict[int, list[Leak]]:
    """The ``leaks`` of an ``end`` message, by position."""
    out: dict[int, list[Leak]] = {}
    raw = message.get("leaks")
    if not isinstance(raw, dict):
        return out
    for key, found in raw.items():
        if isinstance(key, str) and key.isdigit() and isinstance(found, list):
            out[int(key)] = [x for x in map(leak, found) if x is not None]
    return out
