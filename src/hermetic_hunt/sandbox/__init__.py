"""The per-attempt sandbox: the only package that imports hermetic-sandbox.

:class:`Sandbox` enters and leaves one attempt's sandbox (virtual clock,
seeded entropy, network guard); :class:`SandboxSpec` says how, and
:func:`spec_from_marker` applies ``@pytest.mark.hermetic(...)`` to it. The
parts -- clock, datetimes, entropy, netguard, patches, state -- import no
framework; :mod:`hermetic_hunt.sandbox.attempt` composes them.
"""

from __future__ import annotations

from hermetic_hunt.sandbox.attempt import (
    AttemptFacts,
    NetworkBlocked,
    Sandbox,
    guard_between_attempts,
)
from hermetic_hunt.sandbox.bound import follow as follow_bound_clocks
from hermetic_hunt.sandbox.spec import SandboxSpec, spec_from_marker

__all__ = [
    "AttemptFacts",
    "NetworkBlocked",
    "Sandbox",
    "SandboxSpec",
    "follow_bound_clocks",
    "guard_between_attempts",
    "spec_from_marker",
]
