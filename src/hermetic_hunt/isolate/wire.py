"""What travels between the probe runner and its probe servers (JSON lines).

Client -> server (the server's request pipe)::

    {"op": "probe", "id": 7, "timeout": 120.0,
     "steps": [{"nodeid": "...", "seed": 1, "now": 2.0, "mode": "seeded",
                "journal": "<base64 gzip>" | null}, ...]}
    {"op": "quit"}

Server -> client (its response pipe)::

    {"op": "ready", "collected": ["nodeid", ...], "hash_seed": "123", "fork": true}
    {"op": "result", "id": 7, "status": "completed" | "timeout" | "error",
     "duration": 0.03, "detail": "", "steps": [{"nodeid": ..., "outcome": ...,
     "exc_type": ..., "location": ..., "message": ..., "violations": [[op, host, port,
     detail]], "journal": "<base64>" | null}, ...]}

Also :func:`probe_args`: the hunt's pytest arguments without the options
that make no sense (or do harm) in a probe server.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from hermetic_hunt.isolate.classifier import ProbeResult, ProbeStep, StepResult
from hermetic_hunt.models import Violation

#: Environment variable that hands a probe server its settings (JSON).
ENV = "HERMETIC_HUNT_PROBE"
#: Longest line either side accepts (a collection of many thousand tests fits).
MAX_LINE = 64 * 1024 * 1024

#: Options that take a value and are dropped from a probe server's arguments:
#: the hunt itself, xdist, stop-early and rerun options, report files (the
#: server would overwrite the hunt's) and --basetemp (each probe gets its own).
_DROP_WITH_VALUE = frozenset(
    {
        "--hermetic-hunt", "--hermetic-seed", "--hermetic-replay-db", "-n", "--numprocesses",
        "--maxprocesses", "--tx", "--dist", "--max-worker-restart", "--rsyncdir",
        "--rsyncignore", "--maxfail", "--count", "--reruns", "--reruns-delay", "--only-rerun",
        "--rerun-except", "--junitxml", "--junit-xml", "--junitprefix", "--junit-prefix",
        "--html", "--report-log", "--json-report-file", "--basetemp", "--lfnf",
        "--last-failed-no-failures", "--deselect", "--flake-runs",
    }
)  # fmt: skip
_DROP_FLAGS = frozenset(
    {
        "-x", "--exitfirst", "--lf", "--last-failed", "--ff", "--failed-first", "--nf",
        "--new-first", "--sw", "--stepwise", "--sw-skip", "--stepwise-skip", "--pdb",
        "--trace", "-f", "--looponfail", "-d", "--distload", "--flake-finder",
        "--hermetic-all", "--hermetic-record", "--cache-clear",
    }
)  # fmt: skip
_DROP_PREFIXES = ("--hermetic-hunt-",)


def probe_args(argv: Sequence[str]) -> list[str]:
    """``argv`` of a hunt without hunt, xdist and stop-early options.

    Test paths, ``-k``/``-m`` selections, ``-p`` plugins, ``-o``/``-c``
    configuration and everything else stay, so the probe server collects
    what the hunt collected. ``--deselect`` is dropped: a probe only ever
    runs the tests it names.
    """
    out: list[str] = []
    args = list(argv)
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        name, has_value, _ = arg.partition("=")
        if arg == "--":
            out.extend(args[index - 1 :])
            break
        if name.startswith(_DROP_PREFIXES) or name in _DROP_WITH_VALUE:
            if not has_value:
                index += 1  # the value is the next argument
            continue
        if arg in _DROP_FLAGS:
            continue
        if arg.startswith("-n") and arg[2:].replace("auto", "1").isdigit():
            continue  # -n2, -nauto
        out.append(arg)
    return out


def option_value(argv: Sequence[str], name: str) -> str | None:
    """The last value of ``--name=V`` / ``--name V`` in ``argv`` (None: absent)."""
    value = None
    for index, arg in enumerate(argv):
        if arg.startswith(f"{name}="):
            value = arg.partition("=")[2]
        elif arg == name and index + 1 < len(argv):
            value = argv[index + 1]
    return value


def _b64(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode("ascii") if data is not None else None


def _unb64(text: Any) -> bytes | None:
    if not isinstance(text, str):
        return None
    return base64.b64decode(text.encode("ascii"), validate=True)


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()


def decode(line: bytes) -> dict[str, Any]:
    """One message (ValueError when it is not a JSON object)."""
    if len(line) > MAX_LINE:
        raise ValueError(f"message of {len(line):,} bytes is over the {MAX_LINE:,} limit")
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("a message must be a JSON object")
    return value


def probe_request(
    request_id: int, steps: Sequence[ProbeStep], journals: dict[int, bytes], timeout: float
) -> dict[str, Any]:
    return {
        "op": "probe",
        "id": request_id,
        "timeout": timeout,
        "steps": [_step_json(s, journals) for s in steps],
    }


def _step_json(step: ProbeStep, journals: dict[int, bytes]) -> dict[str, Any]:
    replayed = None
    if step.mode == "record" and step.attempt_id is not None:
        replayed = _b64(journals.get(step.attempt_id))
    return {
        "nodeid": step.nodeid,
        "seed": step.seed,
        "now": step.now,
        "mode": step.mode,
        "journal": replayed,
    }


def step_result_json(record: Any) -> dict[str, Any]:
    """An :class:`~hermetic_hunt.models.AttemptRecord` as a result step."""
    failure = record.failure
    return {
        "nodeid": record.nodeid,
        "outcome": record.outcome,
        "exc_type": failure.exc_type if failure else "",
        "location": failure.location if failure else "",
        "message": failure.message if failure else "",
        "violations": [[v.op, v.host, v.port, v.detail] for v in record.violations],
        "journal": _b64(record.journal),
    }


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _violation(raw: Any) -> Violation | None:
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    port = raw[2] if isinstance(raw[2], int) and not isinstance(raw[2], bool) else None
    return Violation(op=_text(raw[0]), host=_text(raw[1]), port=port, detail=_text(raw[3]))


def result_from(message: dict[str, Any]) -> ProbeResult:
    """A ``result`` message as a :class:`~hermetic_hunt.isolate.classifier.ProbeResult`."""
    steps = []
    for raw in message.get("steps") or []:
        if not isinstance(raw, dict):
            continue
        violations = tuple(v for v in map(_violation, raw.get("violations") or []) if v)
        steps.append(
            StepResult(
                nodeid=_text(raw.get("nodeid")),
                outcome=_text(raw.get("outcome")) or "error",
                exc_type=_text(raw.get("exc_type")),
                location=_text(raw.get("location")),
                message=_text(raw.get("message")),
                violations=violations,
                journal=_unb64(raw.get("journal")),
            )
        )
    status = message.get("status")
    duration = message.get("duration")
    return ProbeResult(
        status=status if status in ("completed", "timeout", "error") else "error",
        steps=tuple(steps),
        duration=float(duration) if isinstance(duration, (int, float)) else 0.0,
        detail=_text(message.get("detail")),
    )
