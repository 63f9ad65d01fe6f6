"""A sales ledger kept in one JSON file."""

import json
from pathlib import Path


def entries(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def record(path: Path, sku: str, cents: int) -> None:
    data = entries(path)
    data.append({"sku": sku, "cents": cents})
    path.write_text(json.dumps(data))
