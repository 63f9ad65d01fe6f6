"""Errors raised by hermetic-hunt's core.

Every error is a user-facing, one-line message that names the bad value and
the fix. The edges translate them: the pytest plugin raises
``pytest.UsageError`` (exit status 4), the CLI a ``click.ClickException``.

::

    HuntError
    ├── BadOption      an option or marker value that cannot be honoured
    ├── BadDatabase    missing / not SQLite / not ours / newer schema / unwritable
    ├── UnknownId      a flake or attempt id that the database does not hold
    ├── BadJournal     a stored journal that is corrupt, oversized or foreign
    └── NotCollected   a test named by the database is no longer collected
"""

from __future__ import annotations

from hermetic_hunt.untrusted import clean


class HuntError(Exception):
    """Base class: a problem the user can fix, described in one line.

    The line may quote values from a database: control characters in it
    (a newline, an ANSI escape) are shown escaped, never acted on.
    """

    def __str__(self) -> str:
        return clean(super().__str__())


class BadOption(HuntError):
    """An option, ini value or marker argument that cannot be honoured."""


class BadDatabase(HuntError):
    """The database path cannot be used (see the message for why)."""


class UnknownId(HuntError):
    """A flake id (F3), attempt id (A1207) or nodeid not in the database."""


class BadJournal(HuntError):
    """A journal that fails validation: corrupt, oversized, or for another test."""


class NotCollected(HuntError):
    """A test the database names is not collected any more (renamed or deleted)."""
