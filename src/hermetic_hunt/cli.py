"""The ``hermetic-hunt`` command line: a thin dispatcher over the library.

Each command parses its options, calls one function of the core, prints what
it returns and maps :class:`~hermetic_hunt.errors.HuntError` to a one-line
error with a documented exit status (see ``docs/cli.md``):

* 0 -- success (``report``: nothing flaky)
* 1 -- ``report``/``list``: flaky tests or violations were found
* 2 -- usage error (bad option, unknown command)
* 3 -- bad input: missing/invalid database, unknown id, corrupt journal
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from hermetic_hunt import __version__
from hermetic_hunt.errors import HuntError

EXIT_FOUND = 1
EXIT_BAD_INPUT = 3

F = TypeVar("F", bound=Callable[..., Any])


class BadInput(click.ClickException):
    """A one-line error about the user's input (exit status 3)."""

    exit_code = EXIT_BAD_INPUT


def user_errors(func: F) -> F:
    """Turn core errors into one-line CLI errors, never a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HuntError as exc:
            raise BadInput(str(exc)) from None

    return wrapper  # type: ignore[return-value]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Examples:\n\n"
    "\b\n"
    "  pytest --hermetic-hunt=50 -n auto   # hunt: 50 shuffled, sandboxed rounds\n"
    "  hermetic-hunt report                # what is flaky, why, how to replay it\n"
    "  hermetic-hunt demo                  # hunt the bundled example suite\n",
)
@click.version_option(__version__, "--version", prog_name="hermetic-hunt")
def main() -> None:
    """Hunt flaky tests and hand back a reproducer.

    Hunts run inside pytest (``pytest --hermetic-hunt=N``); these commands
    read, explain and replay what a hunt stored in its database.
    """
