"""The only door to the database: every SQL statement lives in this package.

``flakes.db`` is plain SQLite (WAL mode), written through sqlite-utils by one
writer, the hunt's controller. Tables and views are documented in
``docs/database.md`` and readable with the ``sqlite3`` shell or Datasette.

A database may come from another machine (a CI artifact): it is untrusted.
Nothing read from it is unpickled, evaluated or passed to a shell; values are
validated where they are used.
"""

from __future__ import annotations

from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Store", "real_now_iso"]
