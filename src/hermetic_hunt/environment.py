"""Facts about the machine and the code a hunt ran on (stored with each run).

Replays compare them with the replaying machine to warn about anything that
makes a replay less than faithful.
"""

from __future__ import annotations

import locale
import os
import platform
import sys
import time
from importlib import metadata
from typing import Any

from hermetic_hunt import vcs

_PACKAGES = (
    "pytest",
    "pytest-xdist",
    "hermetic-sandbox",
    "hermetic-hunt",
    "pytest-randomly",
    "pytest-rerunfailures",
)


def platform_name() -> str:
    """The system, its release and the machine, e.g. ``Linux-6.1.0-x86_64-with-glibc2.36``.

    :func:`platform.platform` without the processor: finding that runs
    ``uname -p`` in a subprocess, which inside a test's attempt would be a
    process the test never started.
    """
    name = f"{platform.system()}-{platform.release()}-{platform.machine()}"
    libc, version = platform.libc_ver()
    return f"{name}-with-{libc}{version}" if libc else name


def git_sha(directory: str) -> str | None:
    """``git rev-parse HEAD`` in ``directory`` (None outside a repository)."""
    return vcs.commit_of("HEAD", directory)


#: Where CI services put the branch of a detached checkout (pull requests first).
_CI_BRANCH = (
    "GITHUB_HEAD_REF",
    "GITHUB_REF_NAME",
    "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME",
    "CI_COMMIT_REF_NAME",
    "BUILDKITE_BRANCH",
    "CIRCLE_BRANCH",
    "BRANCH_NAME",
)


def git_branch(directory: str) -> str | None:
    """The checked-out branch in ``directory``; on a detached HEAD (CI), the branch
    the CI service names; None outside a repository."""
    status, out = vcs.run(["symbolic-ref", "--quiet", "--short", "HEAD"], directory)
    name = out.strip()
    if status == 0 and name:
        return name[:200]
    if status not in (0, 1):
        return None  # not a repository
    for key in _CI_BRANCH:
        value = os.environ.get(key, "").strip()
        if value:
            return value[:200]
    return None


def versions() -> dict[str, str]:
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def current_locale() -> str | None:
    """``LC_ALL`` as ``setlocale`` names it (None when it cannot)."""
    try:
        return locale.setlocale(locale.LC_ALL)
    except locale.Error:
        return None


def process_facts() -> dict[str, Any]:
    """What a test may change of its process (the TZ, its zone names, the locale) and
    PYTHONHASHSEED: the last facts of a run's environment and of a journal's fingerprint."""
    return {
        "tz": os.environ.get("TZ"),
        "tzname": list(time.tzname),
        "locale": current_locale(),
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
    }


def collect(rootdir: str) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform_name(),
        "executable": sys.executable,
        "git_sha": git_sha(rootdir),
        "git_branch": git_branch(rootdir),
        **process_facts(),
        "versions": versions(),
    }


def differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between a recorded environment and this one, as sentences."""
    labels = (
        ("python", "Python"),
        ("implementation", "Python implementation"),
        ("platform", "platform"),
        ("tz", "TZ"),
        ("locale", "locale"),
        ("git_sha", "git commit"),
    )
    lines = []
    for key, label in labels:
        old, new = recorded.get(key), current.get(key)
        if old != new and (old is not None or key in ("tz",)):
            lines.append(f"{label} differs: recorded {old!r}, here {new!r}")
    old, new = recorded.get("versions") or {}, current.get("versions") or {}
    if isinstance(old, dict):
        lines += [
            f"{name} differs: recorded {old[name]!r}, here {new.get(name)!r}"
            for name in ("hermetic-sandbox", "pytest")
            if old.get(name) and old[name] != new.get(name)
        ]
    return lines
