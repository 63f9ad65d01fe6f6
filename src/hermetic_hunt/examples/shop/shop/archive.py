"""Archiving orders and the catalog as files in a folder."""

from __future__ import annotations

import json
import select
from pathlib import Path

#: Seconds an archive job keeps its folder open (it flushes the disk in the real shop).
FLUSH_SECONDS = 0.2


def archive(folder: Path, name: str, rows: list[dict[str, object]]) -> Path:
    """Write ``rows`` to ``folder/name`` and wait for the flush (real time)."""
    path = folder / name
    path.write_text(json.dumps(rows))
    select.select([], [], [], FLUSH_SECONDS)  # a real wait: both workers hold the folder
    return path
