"""The global ``random`` stream as a plain run has it, when the suite seeds it at import.

Why reseeding per attempt would hide this order dependence, and what a
report then says, is in docs/isolation.md, 'The kinds' ("The global
``random`` stream seeded at import"). :class:`ImportSeeds` watches
``random.seed`` while pytest collects and notes the calls with a seed made
from files under the rootdir. When there is one, the sandbox neither seeds
nor restores the stream (``SandboxSpec.stream``), and a forked child starts
from the parent's post-collection state (:func:`stream_state`,
:func:`resume`; ``random`` would reseed itself from the OS after a fork). A
seed in a conftest loaded before the session (the rootdir's own) is not
seen.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Generator
from typing import Any

import pytest


class ImportSeeds:
    """``random.seed(x)`` calls made during collection from under ``rootdir``."""

    def __init__(self, rootdir: str) -> None:
        self.rootdir = os.path.join(os.path.abspath(rootdir), "")
        #: ``path:line`` of each call, relative to the rootdir, in call order.
        self.calls: list[str] = []

    @property
    def where(self) -> str | None:
        """The first import-time seed (None: the suite does not seed at import)."""
        return self.calls[0] if self.calls else None

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, Any, Any]:
        real = random.seed
        calls = self.calls
        rootdir = self.rootdir

        def seed(a: Any = None, version: int = 2) -> None:
            if a is not None:
                caller = sys._getframe(1)
                path = os.path.abspath(caller.f_code.co_filename)
                if path.startswith(rootdir):
                    calls.append(f"{path[len(rootdir) :]}:{caller.f_lineno}")
            real(a, version)

        random.seed = seed
        try:
            return (yield)
        finally:
            if random.seed is seed:
                random.seed = real


def stream_state() -> tuple[Any, ...]:
    """The global stream's state, to hand to a forked child."""
    return random.getstate()


def resume(state: tuple[Any, ...] | None) -> None:
    """In a forked child: continue the parent's stream (the fork reseeded it)."""
    if state is not None:
        random.setstate(state)
