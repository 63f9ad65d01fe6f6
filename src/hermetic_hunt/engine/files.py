"""Files a round (or an isolation probe) leaves in the checkout and in the temporary directory.

Compared at every round boundary (all workers done with the round): files
the round created in the rootdir are named and removed, pre-existing ones it
changed or deleted are named and never touched (docs/how-it-works.md, 'A
round is a fresh run'). New entries at the top of the system's temporary
directory are named only when a test of the round wrote them from Python
(its audit hook saw the path), and left alone: they are not ours to remove,
and other processes (pip, another hunt) write there too. Tests that follow
``TMPDIR`` write into the round's private folder instead (``engine/leaks.py``).

Each checkout file is attributed to the attempt that wrote it from Python,
else to the attempt whose real-time window contains its modification time
(the directory's, for a deleted file); with several workers more than one
attempt can fit, and the detail says so.

Caches, tool directories (:data:`_SKIP_DIRS`, ``*.egg-info``), virtual
environments (a folder with ``pyvenv.cfg``), ``.coverage*`` and the hunt's
own database and reports are not watched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hermetic_hunt.models import Attempt, Leak

#: Most entries walked in the rootdir; a larger tree is not watched.
MAX_ENTRIES = 50_000
#: Most file leaks named per round.
MAX_PER_ROUND = 50
#: Slack (seconds) around an attempt's window when a modification time is matched.
SLACK = 0.05
_SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
        ".hypothesis", ".tox", ".nox", "node_modules", "reports",
    }
)  # fmt: skip
_TEMP_PREFIXES = ("pytest-of-", "hermetic-hunt-", "pymp-", "tmp-hermetic")
#: A folder's entry in a walk: its own times do not matter, only that it exists.
_FOLDER = (0.0, -1)


@dataclass(frozen=True)
class Change:
    """One file change of a round: ``added``, ``changed`` or ``removed``."""

    path: str
    change: str
    mtime: float
    temp: bool = False


def _skip_dir(entry: os.DirEntry[str]) -> bool:
    name = entry.name
    if name in _SKIP_DIRS or name.endswith(".egg-info"):
        return True
    return os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))


class FileWatch:
    """The rootdir (and the temp dir's top level) between rounds."""

    def __init__(self, rootdir: str, own: Iterable[str] = ()) -> None:
        self.rootdir = os.path.realpath(rootdir)
        self.own = {os.path.realpath(p) for p in own}
        # A hunt whose output goes to a file in the checkout (pytester, CI logs)
        # writes that file itself: never a test's leak.
        self.streams = _stream_files()
        self.tempdir = os.path.realpath(tempfile.gettempdir())
        self.too_large = False
        self._tree = self._walk()
        self._temp = self._temp_entries()

    def _walk(self) -> dict[str, tuple[float, int]]:
        tree: dict[str, tuple[float, int]] = {}
        stack = [self.rootdir]
        while stack:
            for entry in _scan(stack.pop()):
                if len(tree) >= MAX_ENTRIES:
                    self.too_large = True
                    return tree
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not _skip_dir(entry):
                            stack.append(entry.path)
                            tree[entry.path] = _FOLDER
                        continue
                    if entry.name.startswith(".coverage") or entry.path in self.own:
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) in self.streams:
                    continue
                tree[entry.path] = (info.st_mtime, info.st_size)
        return tree

    def _temp_entries(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for entry in _scan(self.tempdir):
            if entry.name.startswith(_TEMP_PREFIXES) or self.rootdir.startswith(
                entry.path + os.sep
            ):
                continue
            with contextlib.suppress(OSError):
                out[entry.path] = entry.stat(follow_symlinks=False).st_mtime
        return out

    def check(self) -> list[Change]:
        """What changed since the last check; created rootdir files are removed."""
        if self.too_large:
            return []
        now = self._walk()
        changes: list[Change] = []
        added_folders: list[str] = []
        for path, (mtime, size) in now.items():
            before = self._tree.get(path)
            if before is None:
                if (mtime, size) == _FOLDER:
                    added_folders.append(path)
                else:
                    changes.append(Change(path, "added", mtime))
            elif before != (mtime, size) and before != _FOLDER:
                changes.append(Change(path, "changed", mtime))
        for path in self._tree.keys() - now.keys():
            if self._tree[path] == _FOLDER:
                continue
            try:
                mtime = os.stat(os.path.dirname(path)).st_mtime
            except OSError:
                mtime = 0.0
            changes.append(Change(path, "removed", mtime))
        filled = {os.path.dirname(c.path) for c in changes if c.change == "added"}
        for folder in added_folders:
            if not any(f == folder or f.startswith(folder + os.sep) for f in filled):
                changes.append(Change(folder + os.sep, "added", 0.0))
        # Outermost first: what is inside a removed folder went with it.
        removed: list[str] = []
        added = {c.path.rstrip(os.sep) for c in changes if c.change == "added"}
        for path in sorted(added.union(added_folders)):
            if not any(path.startswith(r + os.sep) for r in removed):
                _remove(path)
                removed.append(path)
        # (a folder the tree had holds nothing added: the walk names a folder first)
        self._tree = {path: value for path, value in now.items() if path in self._tree}
        temp = self._temp_entries()
        for path in temp.keys() - self._temp.keys():
            changes.append(Change(path, "added", temp[path], temp=True))
        self._temp = temp
        changes.sort(key=lambda c: (c.temp, c.path))
        return changes[:MAX_PER_ROUND]

    def tidy(self, paths: Iterable[str]) -> list[str]:
        """Remove what of ``paths`` (written since the snapshot) the checkout did not
        have then: for each, the outermost folder or file under the rootdir that is
        new. Only these paths are touched (others' work may be under way). Returns
        what was removed."""
        if self.too_large:
            return []
        removed: list[str] = []
        for path in paths:
            path = os.path.normpath(path)
            if not path.startswith(self.rootdir + os.sep) or path in self.own:
                continue
            relative = os.path.relpath(path, self.rootdir).split(os.sep)
            if any(part in _SKIP_DIRS for part in relative):
                continue
            prefixes = (
                os.path.join(self.rootdir, *relative[:depth])
                for depth in range(1, len(relative) + 1)
            )
            new = next((prefix for prefix in prefixes if prefix not in self._tree), None)
            if new is None or new in removed or not os.path.lexists(new):
                continue
            _remove(new)
            removed.append(new)
        return removed

    def leak(self, change: Change) -> Leak:
        if change.temp:
            return Leak("tempfile", change.path, change.change)
        name = os.path.relpath(change.path, self.rootdir)
        return Leak("file", name + os.sep if change.path.endswith(os.sep) else name, change.change)


def _stream_files() -> set[tuple[int, int]]:
    """``(device, inode)`` of the regular files this process's stdout and stderr write to."""
    out = set()
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                out.add((info.st_dev, info.st_ino))
    return out


def _scan(folder: str) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


def attribute(change: Change, attempts: Sequence[Attempt]) -> tuple[Attempt | None, int]:
    """The attempt that made ``change``, and how many attempts could have.

    The last attempt that wrote the path (or, for a folder, a path inside
    it) from Python, as its audit hook saw; else, in the checkout, the
    attempt whose real-time window holds the modification time. An entry of
    the system's temporary directory no attempt wrote is nobody's: ``(None, 0)``.
    """
    path = change.path.rstrip(os.sep)
    folder = path + os.sep
    writers = [a for a in attempts if any(w == path or w.startswith(folder) for w in a.writes)]
    if writers:
        return max(writers, key=lambda a: (a.started or 0.0, a.position)), 1
    if change.temp:
        # The system's temporary directory is shared with every process on the
        # machine: a modification time there says nothing about who wrote it.
        return None, 0
    fits = [
        a
        for a in attempts
        if a.started is not None
        and a.started - SLACK <= change.mtime <= a.started + a.duration + SLACK
    ]
    if not fits:
        return None, 0
    return min(fits, key=lambda a: (a.started or 0.0, a.position)), len(fits)
