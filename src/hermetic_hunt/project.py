"""Where a command works: the project's rootdir, and paths from a database confined to it.

A database is untrusted (``docs/guarantees.md``): its ``runs.rootdir``, its
nodeids and the paths of its patches are text someone else wrote. The
commands that run or write something from it (``hermetic-hunt isolate``,
``fix``) never take a directory from it. They work in :func:`project_root`:

1. the stored rootdir, when it is the current directory or a directory
   below it (the same rule as a replay command's location argument);
2. otherwise the project the current directory is in: its nearest ancestor
   (itself included) holding a pytest configuration file, or the current
   directory.

Every path read from the database is then resolved -- ``..`` and symbolic
links included -- and must stay inside that root (:func:`confine`), or the
command refuses in one line (:class:`OutsideProject`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.untrusted import clean

#: Files whose folder pytest may take as the rootdir (searched upwards from the cwd).
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "setup.py")


class OutsideProject(BadDatabase):
    """A path from the database leads outside the project's rootdir."""


def project_root(stored_rootdir: str, cwd: str | os.PathLike[str]) -> Path:
    """The rootdir a command on a stored run works in (see the module docstring)."""
    here = Path(cwd).resolve()
    if stored_rootdir and Path(stored_rootdir).is_absolute():
        try:
            stored = Path(stored_rootdir).resolve()
        except (OSError, RuntimeError, ValueError):
            stored = None
        if stored is not None and stored.is_dir() and (stored == here or here in stored.parents):
            return stored
    for folder in (here, *here.parents):
        if any((folder / name).is_file() for name in CONFIG_FILES):
            return folder
    return here


def inside(root: Path, path: Path) -> bool:
    """``path`` (resolved, links followed) is ``root`` or below it."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return resolved == root or root in resolved.parents


def confine(root: Path, relative: str, what: str = "a path") -> Path:
    """``root / relative``, resolved; :class:`OutsideProject` when it leaves ``root``.

    ``root`` must be resolved already. Absolute paths, ``..`` that climbs out,
    a NUL byte and a symbolic link pointing outside are all refused.
    """
    shown = clean(relative)[:200]
    if "\x00" in relative or Path(relative).is_absolute() or not relative:
        raise OutsideProject(f"{what} {shown!r} in the database is not a path inside {root}")
    target = root / relative
    if not inside(root, target):
        raise OutsideProject(
            f"{what} {shown!r} in the database leads outside the project ({root}): refused"
        )
    return target.resolve()


def files_of(root: Path, nodeids: Iterable[str]) -> list[Path]:
    """The existing files of ``nodeids`` (``path::name``), each confined to ``root``.

    A nodeid whose file leads outside the root is refused
    (:class:`OutsideProject`); one whose file no longer exists is left out (the
    test was renamed or deleted: the probes say it is not collected). A file
    is named as its nodeid names it, under ``root``: a test file that is a link
    to another file of the project keeps its own name (pytest names its tests
    by it), once the file it points to is found inside ``root``.
    """
    out: dict[Path, None] = {}
    for nodeid in nodeids:
        path = nodeid.partition("::")[0]
        if not path:
            continue
        target = confine(root, path, "the test file of")
        if target.is_file():
            named = root / path
            out[target if ".." in named.parts else named] = None
    return sorted(out)
