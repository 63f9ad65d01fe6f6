"""What travels between the probe runner and its probe servers (JSON lines).

Client -> server (the server's request pipe)::

    {"op": "probe", "id": 7, "timeout": 120.0, "job": {job}}
    {"op": "quit"}

``job`` is the probe's :class:`~hermetic_hunt.engine.runner.Job` in its own
codec (``Job.to_json``): its steps, and the journals its record-mode steps
replay.

A probe of a pair (a collision) also carries ``"group": "3", "size": 2``
(and perhaps ``"after": PATH``): the server holds it until its whole group
arrived, forks every member behind a gate of its own, starts the members
without ``after`` at once and each other one as soon as its path exists (the
partner holds the shared path), at most :data:`AFTER_WAIT` seconds later.

Server -> client (its response pipe)::

    {"op": "ready", "collected": ["nodeid", ...]}
    {"op": "result", "id": 7, "status": "completed" | "timeout" | "error",
     "duration": 0.03, "detail": "", "steps": [{attempt}, ...]}

A result's steps are the first execution of every step that ran, as
:meth:`hermetic_hunt.models.Attempt.to_json` writes them. Also a probe
server's pytest arguments: :func:`probe_args` after a hunt,
:func:`stored_run_args` for a stored run (a stored ``argv`` is never run).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hermetic_hunt.engine import wire as engine_wire
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.findings import ProbeResult
from hermetic_hunt.models import Attempt
from hermetic_hunt.project import files_of
from hermetic_hunt.untrusted import text_or

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
    """``argv`` of the running hunt without hunt, xdist and stop-early options.

    Only for arguments the user gave this process (``config.invocation_params``,
    ``PYTEST_ADDOPTS``): never for a stored ``runs.argv``, which
    :func:`stored_run_args` replaces.

    Test paths, ``-k``/``-m`` selections, ``-p`` plugins, ``-o``/``-c``
    configuration and everything else stay, so the probe server collects
    what the hunt collected. ``--deselect`` is dropped: a probe only ever
    runs the tests it names.
    """
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        name, has_value, _ = arg.partition("=")
        if arg == "--":
            return [*out, arg, *args]
        if name.startswith(_DROP_PREFIXES) or name in _DROP_WITH_VALUE:
            if not has_value:
                next(args, None)  # the value is the next argument
            continue
        workers = arg.startswith("-n") and arg[2:].replace("auto", "1").isdigit()  # -n2, -nauto
        if arg not in _DROP_FLAGS and not workers:
            out.append(arg)
    return out


def cache_args(args: Sequence[str], addopts: str, cache_dir: str) -> list[str]:
    """``-o cache_dir=DIR`` for a probe server, unless its session has no cache plugin."""
    words = [*args, *shlex.split(addopts)]
    pairs = (" ".join(words[i : i + 2]) for i in range(len(words)))
    if any(pair.startswith(("-p no:cacheprovider", "-pno:cacheprovider")) for pair in pairs):
        return []
    return ["-o", f"cache_dir={cache_dir}"]


def stored_run_args(root: Path, nodeids: Iterable[str]) -> list[str]:
    """A probe server's pytest arguments for a stored run: an allow-list.

    ``--rootdir`` (the project's, :func:`hermetic_hunt.project.project_root`)
    and the absolute paths of the existing files of ``nodeids``, each
    resolved and confined to ``root``
    (:class:`~hermetic_hunt.project.OutsideProject` otherwise). Nothing
    else: the user's own ini file and ``PYTEST_ADDOPTS`` configure the
    server as they configure any pytest run there. No stored value can name
    a plugin, an output file, a rootdir, a conftest cut-off or an ini
    override.
    """
    return [f"--rootdir={root}", *(str(path) for path in files_of(root, nodeids))]


def decode(line: bytes) -> dict[str, Any]:
    """One message (ValueError when it is not a JSON object)."""
    if len(line) > MAX_LINE:
        raise ValueError(f"message of {len(line):,} bytes is over the {MAX_LINE:,} limit")
    return engine_wire.decode(line)


def probe_request(request_id: int, job: Job, timeout: float) -> dict[str, Any]:
    """A request to run ``job`` in a fresh process, stopped after ``timeout`` seconds."""
    return {"op": "probe", "id": request_id, "timeout": timeout, "job": job.to_json()}


def grouped(message: dict[str, Any], group: str, size: int, after: str = "") -> dict[str, Any]:
    """``message`` as a member of a group of ``size`` probes started together
    (``after``: once that path exists)."""
    return {**message, "group": group, "size": size, **({"after": after} if after else {})}


def after_of(message: dict[str, Any]) -> str:
    """The path a member of a group waits for ("" : none)."""
    after = message.get("after")
    return after if isinstance(after, str) and after.startswith("/") else ""


#: Most seconds a member of a group waits for its ``after`` path.
AFTER_WAIT = 2.0


def group_of(message: dict[str, Any]) -> tuple[str, int]:
    """The group and size of a probe of a pair (``("", 0)``: an ordinary probe)."""
    group, size = message.get("group"), message.get("size")
    if isinstance(group, str) and group and isinstance(size, int) and 2 <= size <= MAX_GROUP:
        return group, size
    return "", 0


#: Most probes started together.
MAX_GROUP = 8


def result(request_id: int, status: str, detail: str = "", attempts: Sequence[Attempt] = (),
           duration: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """The answer to request ``request_id``; :func:`result_from` reads it back."""
    return {"op": "result", "id": request_id, "status": status, "detail": detail,
            "duration": duration, "steps": [a.to_json() for a in attempts]}  # fmt: skip


def result_from(message: dict[str, Any]) -> ProbeResult:
    """A ``result`` message as a :class:`~hermetic_hunt.findings.ProbeResult`."""
    status, duration = message.get("status"), message.get("duration")
    return ProbeResult(
        status=status if status in ("completed", "timeout") else "error",
        steps=tuple(engine_wire.attempts_in({"attempts": message.get("steps")})),
        duration=float(duration) if isinstance(duration, (int, float)) else 0.0,
        detail=text_or(message.get("detail")),
    )
