"""Turning a failing pytest report into a :class:`~hermetic_hunt.models.Failure`.

The signature of a failure is the exception type and the location where it
was raised (``path:line`` relative to the rootdir). The message is kept but
normalised -- memory addresses, temporary directories and object ids masked
-- so the same failure compares equal across attempts and machines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from hermetic_hunt.models import Failure

#: Bytes of failure text kept per failing attempt (the tail: where it broke).
EXCERPT_LIMIT = 4000
MESSAGE_LIMIT = 500

_MASKS = (
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x…"),
    (re.compile(r"/(?:tmp|var/folders)/[^\s'\"]*pytest-of-[^\s'\"/]+/pytest-\d+"), "<tmp>"),
    (re.compile(r"/tmp/[A-Za-z0-9_.-]{6,}"), "<tmp>"),  # noqa: S108 - a pattern
    (re.compile(r"\bid=\d+"), "id=…"),
)


def normalise(message: str) -> str:
    text = message.strip()
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 1] + "…"
    return text


def _split_crash_message(message: str) -> tuple[str, str]:
    """``"KeyError: 'sku'"`` -> ``("KeyError", "'sku'")``."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    head, sep, rest = first.partition(": ")
    if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head):
        remainder = "\n".join([rest, *message.strip().splitlines()[1:]]).strip()
        return head.rsplit(".", 1)[-1], remainder
    if re.fullmatch(r"[A-Za-z_][\w.]*", first):
        return first.rsplit(".", 1)[-1], ""
    return "Failed", message.strip()


def _inside(path: str, rootdir: str) -> str | None:
    """``path`` relative to ``rootdir`` when it is the project's own code.

    A relative path (``<frozen posixpath>``, a module found through ``''``
    on ``sys.path``) is nobody's own code; resolving it would read the
    working directory, which a test may have deleted.
    """
    if not os.path.isabs(path):
        return None
    absolute = os.path.normpath(path)
    root = rootdir.rstrip(os.sep) + os.sep
    if not absolute.startswith(root) or f"{os.sep}site-packages{os.sep}" in absolute:
        return None
    return absolute[len(root) :]


def own_location(frames: Sequence[tuple[str, int]], rootdir: str) -> str | None:
    """``path:line`` of the innermost frame of the project's own code.

    A crash inside the standard library or a dependency (``urllib``, say) is
    located where the project called into it: that is what the failure is
    about, and it is the same on every machine (an interpreter's install
    path is not). None when no frame is the project's.
    """
    for path, line in reversed(frames):
        own = _inside(path, rootdir)
        if own is not None:
            return f"{own}:{line}"
    return None


def _location(longrepr: Any, crash_path: str, crash_line: Any, rootdir: str | None) -> str:
    """The crash's location, moved into the project's code when possible."""
    if not rootdir:
        return f"{crash_path}:{crash_line}"
    own = _inside(crash_path, rootdir)
    if own is not None:
        return f"{own}:{crash_line}"
    entries = getattr(getattr(longrepr, "reprtraceback", None), "reprentries", None) or []
    frames = [
        (str(entry.reprfileloc.path), entry.reprfileloc.lineno)
        for entry in entries
        if getattr(entry, "reprfileloc", None) is not None
    ]
    return own_location(frames, rootdir) or f"{crash_path}:{crash_line}"


def from_report(
    report: Any,
    rootdir: str | None = None,
    *,
    exc_type: str | None = None,
    location: str | None = None,
) -> Failure:
    """Build the failure of ``report`` (a failed ``TestReport``).

    The executing process names the exception type and, when it found one,
    the project's own frame (``exc_type``, ``location``, from the exception
    itself); the message is the first line of the crash message.
    """
    longrepr = report.longrepr
    known_type = exc_type
    crash = getattr(longrepr, "reprcrash", None)
    text = str(getattr(report, "longreprtext", "") or longrepr or "")
    if crash is not None:
        exc_type, message = _split_crash_message(str(crash.message))
        location = location or _location(longrepr, str(crash.path), crash.lineno, rootdir)
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:
        exc_type, message, location = "Skipped", str(longrepr[2]), f"{longrepr[0]}:{longrepr[1]}"
    else:
        lines = [line for line in text.strip().splitlines() if line.strip()]
        exc_type, message = _split_crash_message(lines[-1] if lines else "")
        location = ""
    if isinstance(known_type, str) and known_type:
        if exc_type != known_type and message.startswith(f"{known_type}: "):
            message = message[len(known_type) + 2 :]
        elif exc_type not in (known_type, "Failed", "Skipped"):
            message = f"{exc_type}: {message}" if message else exc_type
        exc_type = known_type
    message = message.strip().splitlines()[0] if message.strip() else ""
    if getattr(report, "wasxfail", None) is not None and report.passed:
        exc_type, message = "XPASS", str(report.wasxfail)
    return Failure(exc_type or "Failed", normalise(message), location, text[-EXCERPT_LIMIT:])
