"""Fixtures shared by the sandbox tests."""

from __future__ import annotations

from typing import Any

import pytest

from hermetic_hunt.sandbox import netguard


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every protected real function replaced by a spy that records and refuses:
    a guard test proves a call was blocked by the spy never being reached."""
    reached: list[str] = []
    for key, real in list(netguard.REAL.items()):
        if key == "raw_socket" or real is None:
            continue

        def spy(*args: Any, _key: str = key, **kwargs: Any) -> Any:
            reached.append(_key)
            raise OSError(f"spy: the real {_key} was reached")

        monkeypatch.setitem(netguard.REAL, key, spy)
    return reached
