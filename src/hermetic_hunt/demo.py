"""``hermetic-hunt demo``: hunt the bundled example suite end to end.

The example suite (:data:`hermetic_hunt.examples.SHOP`) is copied to a
directory of its own -- a new temporary directory unless ``--dir`` names
one -- and hunted there by ``python -m pytest --hermetic-hunt=N -n auto``
in a subprocess, with a fixed ``--hermetic-seed`` so that every demo finds
the same flakes. The database is ``flakes.db`` in that directory, and the
directory is kept: the report's replay commands work from there.

The demo succeeds (exit status 0) when the hunt ran; finding flakes is the
expected result. It fails (1) when the hunt itself did not run to the end.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from hermetic_hunt.errors import BadOption
from hermetic_hunt.examples import SHOP
from hermetic_hunt.models import DEFAULT_DB

DEFAULT_SEED = 7
DEFAULT_ROUNDS = 30
#: Isolation's budget: enough for every example on a loaded machine (``auto``, the
#: rounds' time, can run out there and leave a flake unexplained).
ISOLATE_BUDGET = "200,10m"
#: Environment that would change what the demo's pytest does.
_DROPPED_ENV = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_CURRENT_TEST",
)
#: pytest exit statuses of a hunt that ran to the end (1: it found failures).
_HUNT_RAN = (0, 1)

Echo = Callable[..., None]


def prepare(directory: str | os.PathLike[str] | None) -> Path:
    """A fresh copy of the example suite; ``directory`` must be new or empty."""
    if directory is None:
        target = Path(tempfile.mkdtemp(prefix="hermetic-hunt-demo-"))
    else:
        target = Path(directory).expanduser().resolve()
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise BadOption(
                f"--dir {directory}: exists and is not an empty directory; "
                "pass a new path (the demo copies the example suite into it)"
            )
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.db*")
    shutil.copytree(SHOP, target, dirs_exist_ok=True, ignore=ignore)
    return target


def hunt_argv(rounds: int, seed: int, workers: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest",
        f"--hermetic-hunt={rounds}", "-n", workers, f"--hermetic-seed={seed}",
        f"--hermetic-hunt-db={DEFAULT_DB}", f"--hermetic-hunt-isolate-budget={ISOLATE_BUDGET}",
        "-p", "no:randomly", "-p", "no:cacheprovider", "--tb=no", "-rN",
    ]  # fmt: skip


def run_hunt(target: Path, argv: list[str], echo: Echo) -> int:
    """Run the hunt in ``target``, streaming its output through ``echo``."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    with subprocess.Popen(
        argv,
        cwd=target,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            echo(line, nl=False)
    return proc.returncode


def next_steps(target: Path) -> list[str]:
    where = shlex.quote(str(target))
    return [
        "",
        f"The example suite and its database are in {target} (kept; delete it when done).",
        "Next:",
        f"  cd {where}",
        "  hermetic-hunt list                        # one line per flake",
        "  hermetic-hunt show F1                     # everything about a flake",
        f"  pytest --hermetic-replay-db={DEFAULT_DB}::F1   # replay it",
        "  hermetic-hunt report --format html        # reports/hermetic-hunt.html",
    ]


def run_demo(
    *,
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    workers: str = "auto",
    directory: str | os.PathLike[str] | None = None,
    echo: Echo,
) -> int:
    """Copy, hunt, report. Returns the demo's exit status (0: it ran)."""
    from hermetic_hunt.report.load import write_report

    target = prepare(directory)
    argv = hunt_argv(rounds, seed, workers)
    echo(f"hermetic-hunt demo: hunting the example suite in {target}")
    echo(f"$ {shlex.join(['python', *argv[1:]])}")
    status = run_hunt(target, argv, echo)
    if status not in _HUNT_RAN or not (target / DEFAULT_DB).exists():
        echo(
            f"hermetic-hunt demo: the hunt did not run to the end (pytest exit status "
            f"{status}); its output is above",
            err=True,
        )
        return 1
    outcome = write_report(target / DEFAULT_DB, run=None, fmt="text", output=None, cwd=str(target))
    echo("")
    echo(outcome.text or "", nl=False)
    for line in next_steps(target):
        echo(line)
    return 0
