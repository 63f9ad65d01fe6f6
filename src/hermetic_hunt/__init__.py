"""hermetic-hunt: hunt flaky tests and hand back a reproducer.

``pytest --hermetic-hunt=50 -n auto`` runs the suite in shuffled, repeated,
sandboxed rounds, stores every attempt in SQLite, isolates why each flaky test
flakes, and prints a replay command; ``hermetic-hunt report`` shows the result.

The pytest plugin (``hermetic_hunt.plugin``) is inert until a
``--hermetic-hunt*`` or ``--hermetic-replay-db`` option is given.
"""

from __future__ import annotations

from hermetic_hunt.errors import (
    BadDatabase,
    BadJournal,
    BadOption,
    HuntError,
    NotCollected,
    UnknownId,
)

__version__ = "0.1.0"

__all__ = [
    "BadDatabase",
    "BadJournal",
    "BadOption",
    "HuntError",
    "NotCollected",
    "UnknownId",
    "__version__",
]
