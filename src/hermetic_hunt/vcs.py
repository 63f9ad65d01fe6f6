"""The few git questions hermetic-hunt asks (no network: local repositories only).

Every function runs ``git`` in a directory and returns plain values, or
None / an empty result when git is missing, the directory is not a
repository or the revision is unknown; :class:`GitError` carries a message
for the user where the caller needs one. Used by ``report --since REV`` and
``--hermetic-hunt-changed``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hermetic_hunt.errors import BadOption

_TIMEOUT = 30
#: Branches tried, in order, for "the default branch" when origin/HEAD is not set.
DEFAULT_BRANCHES = ("origin/main", "origin/master", "main", "master", "origin/trunk", "trunk")


class GitError(BadOption):
    """A git question that has no answer here (message names the fix)."""


def run(args: list[str], cwd: str | os.PathLike[str]) -> tuple[int, str]:
    """``git ARGS`` in ``cwd``: (exit status, stdout); (-1, '') when git cannot start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return -1, ""
    return done.returncode, done.stdout


def toplevel(cwd: str | os.PathLike[str]) -> Path | None:
    status, out = run(["rev-parse", "--show-toplevel"], cwd)
    return Path(out.strip()) if status == 0 and out.strip() else None


def commit_of(rev: str, cwd: str | os.PathLike[str]) -> str | None:
    """The full sha of ``rev`` (a commit), or None."""
    if not rev or rev.startswith("-"):
        return None
    status, out = run(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd)
    sha = out.strip()
    return sha if status == 0 and len(sha) in (40, 64) else None


def is_ancestor(ancestor: str, commit: str, cwd: str | os.PathLike[str]) -> bool:
    """``ancestor`` is ``commit`` or one of its ancestors (False if either is unknown)."""
    if ancestor.startswith("-") or commit.startswith("-"):
        return False
    status, _ = run(["merge-base", "--is-ancestor", ancestor, commit], cwd)
    return status == 0


def default_branch(cwd: str | os.PathLike[str]) -> str | None:
    """``origin/HEAD``'s branch, else the first of :data:`DEFAULT_BRANCHES` that exists."""
    status, out = run(["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], cwd)
    if status == 0 and out.strip():
        return out.strip()
    for name in DEFAULT_BRANCHES:
        if commit_of(name, cwd) is not None:
            return name
    return None


def resolve_base(base: str | None, cwd: str | os.PathLike[str]) -> tuple[str, str]:
    """``(sha, how it was chosen)`` of the base to compare with (GitError if none).

    ``base`` None or empty: the merge base of HEAD with the default branch.
    """
    if toplevel(cwd) is None:
        raise GitError(f"{cwd} is not in a git repository: --hermetic-hunt-changed needs one")
    if base:
        sha = commit_of(base, cwd)
        if sha is None:
            raise GitError(
                f"--hermetic-hunt-changed: {base!r} is not a commit here (write "
                "--hermetic-hunt-changed=BASE with a branch, tag or sha; test paths go "
                "before the option)"
            )
        return sha, base
    branch = default_branch(cwd)
    if branch is None:
        raise GitError(
            "--hermetic-hunt-changed: no default branch found (origin/HEAD, main, master): "
            "name the base, e.g. --hermetic-hunt-changed=origin/main"
        )
    status, out = run(["merge-base", "HEAD", branch], cwd)
    if status != 0 or not out.strip():
        raise GitError(
            f"--hermetic-hunt-changed: HEAD and {branch} have no merge base: "
            "name the base, e.g. --hermetic-hunt-changed=HEAD~1"
        )
    return out.strip(), f"the merge base with {branch}"


def changed_files(base_sha: str, cwd: str | os.PathLike[str]) -> set[Path]:
    """Files added, copied, modified or renamed since ``base_sha`` -- committed or
    not -- and untracked files git does not ignore: absolute paths."""
    top = toplevel(cwd)
    if top is None:
        return set()
    out: set[Path] = set()
    status, text = run(["diff", "--name-only", "-z", "--diff-filter=ACMRT", base_sha], top)
    if status == 0:
        out.update(top / name for name in text.split("\0") if name)
    status, text = run(["ls-files", "--others", "--exclude-standard", "-z"], top)
    if status == 0:
        out.update(top / name for name in text.split("\0") if name)
    return {p.resolve() for p in out}


def commit_time(rev: str, cwd: str | os.PathLike[str]) -> float | None:
    """The committer date of ``rev`` (UTC epoch seconds), or None."""
    sha = commit_of(rev, cwd)
    if sha is None:
        return None
    status, out = run(["log", "-1", "--format=%ct", sha], cwd)
    text = out.strip()
    return float(text) if status == 0 and text.isdigit() else None
