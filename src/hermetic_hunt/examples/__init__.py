"""Example suites that ship with hermetic-hunt (``hermetic-hunt demo`` hunts them)."""

from __future__ import annotations

from pathlib import Path

#: The bundled flaky suite: a small shop app whose tests include every flake kind.
SHOP = Path(__file__).parent / "shop"
