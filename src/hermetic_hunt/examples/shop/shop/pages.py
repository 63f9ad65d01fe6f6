"""Rendering pages to files."""

from pathlib import Path


def render(name: str, body: str) -> Path:
    path = Path(name)
    path.write_text(f"<p>{body}</p>")
    return path.resolve()
