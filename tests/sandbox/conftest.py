"""Fixtures shared by the sandbox tests."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hermetic_hunt.sandbox import clock, netguard

REAL_GAP = clock.REAL_GAP


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


@pytest.fixture(autouse=True)
def no_real_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox's tests assert exact virtual readings: a stall of a loaded
    machine between two readings must not move the clock (the tests of the
    real-gap rule turn it back on with ``real_gaps``)."""
    monkeypatch.setattr(clock, "REAL_GAP", math.inf)


@pytest.fixture
def real_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "REAL_GAP", REAL_GAP)
