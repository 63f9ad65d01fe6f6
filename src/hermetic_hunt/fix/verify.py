"""Verify a patch: apply it to a temporary copy of the rootdir, re-run the reproducer.

:func:`verify` copies the hunt's rootdir to a temporary directory (without
version control, virtual environments, caches and the database), runs the
flake's reproducer there once or a few times *without* the patch (the
control: it must still fail as recorded, or there is nothing to verify),
applies the patch to the copy, and runs the reproducer
:func:`runs_needed` times with it -- enough clean runs to be 95% sure a
flake failing at the hunt's rate is gone. Runs go through the isolation's
probe servers (:mod:`hermetic_hunt.isolate.probes`): one collection per
server, a forked child per run, the recorded seeds, start times and hash
seed. The user's files are never touched.

When the project is installed in editable mode from the original checkout,
the copy's packages are put first on ``PYTHONPATH`` so the probes import
the patched code.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from hermetic_hunt import stats
from hermetic_hunt.errors import HuntError
from hermetic_hunt.findings import Probe, ProbeResult, StoredFix
from hermetic_hunt.fix.patch import Patch, PatchConflict
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget
from hermetic_hunt.isolate.wire import stored_run_args
from hermetic_hunt.models import Reproducer, Settings
from hermetic_hunt.seeds import probe_hash_seed

#: Fewest runs with the patch, whatever the rate (1/1 proves little).
MIN_RUNS = 5
#: Runs of the reproducer without the patch before concluding it no longer fails.
CONTROL_TRIES = 3
#: Never copied: version control, environments, caches, build output.
IGNORED = frozenset(
    {
        *(".git", ".hg", ".svn"),
        *(".tox", ".nox", ".venv", "venv", "node_modules"),
        *("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".eggs"),
    }
)


def runs_needed(rate: float) -> int:
    """Clean runs that make 95% sure a flake failing at ``rate`` is gone.

    ``runs_needed(0.10)`` is 29: 29 passes in a row happen less than 5% of
    the time to a test that still fails one run in ten.
    """
    return max(MIN_RUNS, stats.runs_for_rate(rate))


@dataclass(frozen=True)
class RunPlace:
    """Where to verify: the project's rootdir (:func:`hermetic_hunt.project.project_root`,
    never a directory or argv read from the database), the hunt's settings and seed."""

    rootdir: str
    settings: Settings
    base_seed: int


@dataclass(frozen=True)
class Verification:
    """What running the reproducer on the patched copy showed."""

    outcome: str  # verified | not-verified | no-control | error
    runs: int = 0
    passed: int = 0
    control: str = ""
    detail: str = ""

    def describe(self) -> str:
        """As the stored verification says it (every detail here is written)."""
        return StoredFix("", "", "", "", **asdict(self)).describe()


@dataclass(frozen=True)
class Copy:
    root: Path
    args: tuple[str, ...]
    pythonpath: tuple[str, ...]


def make_copy(
    place: RunPlace, where: Path, exclude: tuple[Path, ...] = (), nodeids: tuple[str, ...] = ()
) -> Copy:
    """Copy ``place.rootdir`` under ``where``, and the probe arguments that collect
    ``nodeids`` there (:func:`~hermetic_hunt.isolate.wire.stored_run_args`).

    A real copy: symbolic links are copied as links, and every link that
    points into the rootdir is pointed at the same place in the copy, so
    that patching the copy never writes through a link into the checkout. A
    link that points outside the rootdir stays; a patch through it is
    refused (:meth:`~hermetic_hunt.fix.patch.Patch.apply_to` confines every
    file it writes to the copy).
    """
    root = Path(place.rootdir).resolve()
    excluded = {p.resolve() for p in exclude}

    def ignore(folder: str, names: list[str]) -> set[str]:
        base = Path(folder)
        return {n for n in names if n in IGNORED or (base / n).resolve() in excluded}

    copy_root = where.resolve() / "tree" / root.name
    shutil.copytree(root, copy_root, symlinks=True, ignore=ignore)
    _relink(root, copy_root)
    args = tuple(stored_run_args(copy_root, nodeids))
    return Copy(copy_root, args, _shadowing(root, copy_root))


def _relink(root: Path, copy_root: Path) -> None:
    """Point every link of the copy that leads into ``root`` at the copy instead."""
    for folder, dirs, files in os.walk(copy_root):
        for name in [*dirs, *files]:
            link = Path(folder, name)
            if not link.is_symlink():
                continue
            target = root / link.relative_to(copy_root)
            try:
                resolved = target.resolve()
            except (OSError, RuntimeError):
                continue
            if resolved == root or root in resolved.parents:
                link.unlink()
                link.symlink_to(copy_root / resolved.relative_to(root))


def _shadowing(root: Path, copy_root: Path) -> tuple[str, ...]:
    """Copy folders to put first on PYTHONPATH: packages this Python imports from the
    original checkout (an editable install) are imported from the copy instead."""
    out: list[str] = []
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if not (child / "__init__.py").is_file() or not child.name.isidentifier():
                continue
            try:
                spec = importlib.util.find_spec(child.name)
            except (ImportError, ValueError):
                continue
            origin = Path(spec.origin).resolve() if spec and spec.origin else None
            if origin is not None and origin.is_relative_to(root):
                out.append(str(copy_root / base.relative_to(root)))
    return tuple(dict.fromkeys(out))


@contextlib.contextmanager
def _pythonpath(extra: tuple[str, ...]) -> Iterator[None]:
    if not extra:
        yield
        return
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([*extra, *([old] if old else [])])
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _same(result: ProbeResult, reproducer: Reproducer) -> bool:
    """The reproducer's last step failed as recorded (its exception type)."""
    last = result.last
    return last is not None and last.failed and last.exc_type == reproducer.exc_type


def _touch(root: Path, paths: list[Path]) -> None:
    """Patched files must not be mistaken for their cached bytecode."""
    for folder in root.rglob("__pycache__"):
        shutil.rmtree(folder, ignore_errors=True)
    for path in paths:
        with contextlib.suppress(OSError):
            stat = path.stat()
            os.utime(path, (stat.st_atime, stat.st_mtime + 2))


def verify(
    patch: Patch,
    reproducer: Reproducer,
    place: RunPlace,
    runs: int,
    *,
    journals: Callable[[int], bytes | None] | None = None,
    parallel: int = 2,
    exclude: tuple[Path, ...] = (),
    say: Callable[[str], None] | None = None,
) -> Verification:
    """Run ``reproducer`` on a patched copy of ``place``'s rootdir ``runs`` times."""
    hash_seed = reproducer.hash_seed
    if hash_seed is None:
        hash_seed = probe_hash_seed(place.base_seed, 0)
    probe = Probe("verify a fix", reproducer.steps, hash_seed)
    wait = place.settings.probe_timeout
    with tempfile.TemporaryDirectory(prefix="hermetic-hunt-fix-") as tmp:
        try:
            nodeids = tuple(step.nodeid for step in reproducer.steps)
            copy = make_copy(place, Path(tmp), exclude, nodeids)
        except (OSError, shutil.Error) as exc:
            return Verification("error", detail=f"cannot copy {place.rootdir}: {exc}")
        except HuntError as exc:  # a reproducer's file outside the project
            return Verification("error", detail=str(exc))
        target = ProbeTarget(str(copy.root), copy.args, place.settings)
        with _pythonpath(copy.pythonpath):
            if say is not None:
                say(
                    f"copied {place.rootdir} to {copy.root}; running the reproducer without "
                    "the patch (control)"
                )
            with ProbeRunner(target, parallel=1, timeout=wait, journals=journals) as runner:
                missing = _missing(runner, probe)
                if missing:
                    return Verification("error", detail=missing)
                control = [runner.run(probe)]
                while not _same(control[-1], reproducer) and len(control) < CONTROL_TRIES:
                    control.append(runner.run(probe))
            if not _same(control[-1], reproducer):
                why = control[-1].detail or control[-1].outcome
                return Verification(
                    "no-control",
                    control=f"passes without the patch ({len(control)} of {len(control)})",
                    detail=f"the reproducer does not fail without the patch either "
                    f"({len(control)} run(s): {why}); the flake may be fixed already",
                )
            control_text = f"fails without the patch (in run {len(control)} of {len(control)})"
            try:
                written = patch.apply_to(copy.root)
            except PatchConflict as exc:
                return Verification("error", control=control_text, detail=str(exc))
            _touch(copy.root, written)
            if say is not None:
                say(f"patched the copy; running the reproducer {runs} times")
            with ProbeRunner(target, parallel=parallel, timeout=wait, journals=journals) as runner:
                results = runner.run_many([probe] * runs)
    passed = sum(1 for r in results if r.outcome == "passed")
    errors = [r.detail for r in results if r.status != "completed"]
    outcome = "verified" if passed == runs else "not-verified"
    detail = ""
    if passed < runs:
        failing = [r for r in results if r.outcome == "failed"]
        if failing and failing[0].last is not None and failing[0].last.failure is not None:
            detail = f"still fails: {failing[0].last.failure.describe()}"
        elif errors:
            detail = f"probes did not complete: {errors[0][:300]}"
    return Verification(outcome, runs, passed, control_text, detail)


def _missing(runner: ProbeRunner, probe: Probe) -> str:
    collected = runner.collected(probe.hash_seed)
    if collected is None:
        return f"the copy did not start: {runner.startup_error or 'no detail'}"
    gone = [s.nodeid for s in probe.steps if s.nodeid not in collected]
    if gone:
        return f"not collected in the copy: {', '.join(sorted(set(gone))[:3])}"
    return ""
