"""The paste-able commands hermetic-hunt prints (one form everywhere).

Every finding ends in ``pytest --hermetic-replay-db=PATH::ID``, quoted with
:func:`shlex.join` so that any path or id survives a copy into a shell.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from hermetic_hunt.models import DEFAULT_DB


def display_path(path: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None) -> str:
    """``path`` relative to ``cwd`` when it is inside it, else absolute."""
    resolved = Path(path).resolve()
    base = Path(cwd or os.getcwd()).resolve()
    try:
        return str(resolved.relative_to(base))
    except ValueError:
        return str(resolved)


def replay_argv(
    db_path: str | os.PathLike[str],
    ref: str,
    cwd: str | None = None,
    *,
    rootdir: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The replay command as an argv list (see :func:`replay_command`)."""
    argv = ["pytest", f"--hermetic-replay-db={display_path(db_path, cwd)}::{ref}"]
    if rootdir is not None:
        where = display_path(rootdir, cwd)
        if where != ".":
            argv.append(f"./{where}" if where.startswith("-") else where)
    return argv


def replay_command(
    db_path: str | os.PathLike[str],
    ref: str,
    cwd: str | None = None,
    *,
    rootdir: str | os.PathLike[str] | None = None,
) -> str:
    """``pytest --hermetic-replay-db=flakes.db::F3``, shell-quoted.

    Nodeids in the database are relative to the rootdir the hunt ran with:
    pass ``rootdir`` when the command is printed for a directory other than
    that rootdir (``pytest --hermetic-replay-db=flakes.db::F3 shop``) so
    pytest finds the same rootdir again.
    """
    return shlex.join(replay_argv(db_path, ref, cwd, rootdir=rootdir))


def cli_command(words: list[str], db_path: str | os.PathLike[str], cwd: str | None = None) -> str:
    """``hermetic-hunt fix F3``, with ``--db PATH`` unless the database is ``./flakes.db``."""
    where = display_path(db_path, cwd)
    db = [] if where == DEFAULT_DB else ["--db", where]
    return shlex.join(["hermetic-hunt", *words, *db])
