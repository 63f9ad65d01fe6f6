"""The ``hermetic_sandbox`` fixture during a hunt or replay.

hermetic-sandbox's own fixture would open a second sandbox inside the
attempt's (and fail: sandboxes do not nest). This one, registered after it,
returns the attempt's handle instead -- or ``None`` for an attempt that runs
unsandboxed (``--hermetic-hunt-mode=off``, ``@pytest.mark.hermetic(off=True)``),
as hermetic's fixture does for ``off=True``.
"""

from __future__ import annotations

from typing import Any

import pytest

_EXECUTOR = pytest.StashKey[Any]()


def bind(config: pytest.Config, executor: Any) -> None:
    config.stash[_EXECUTOR] = executor


@pytest.fixture
def hermetic_sandbox(request: pytest.FixtureRequest) -> Any:
    """The active sandbox handle of this attempt (a ``hermetic.SandboxHandle``)."""
    executor = request.config.stash.get(_EXECUTOR, None)
    return getattr(executor, "handle", None)
