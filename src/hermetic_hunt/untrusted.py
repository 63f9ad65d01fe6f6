"""Values from a database someone else wrote: JSON read within bounds, text shown inert.

A ``flakes.db`` handed over by CI is input from elsewhere (docs/database.md,
'Treat a database as untrusted'; ``docs/guarantees.md``). The helpers every
reader uses: :func:`load_json` for stored JSON, bounded in size and nesting
(the structures hermetic-hunt writes are at most 4 levels deep; a deeper one
would make a recursive reader overflow); :func:`is_whole`, :func:`whole_or`
and their kin for a stored value's type; :func:`whole`, :func:`number`,
:func:`text` and :func:`items` for one field of a decoded value, in the
codecs of what crosses a process boundary (``Attempt.from_json``...); and
:func:`clean`, so that a value printed on a terminal or in an error message
is one inert line.

Pure: no SQLite, pytest or click.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeGuard

#: Deepest nesting of lists and objects accepted in a stored JSON value.
MAX_JSON_DEPTH = 32
#: Longest stored JSON text read (characters).
MAX_JSON_CHARS = 4_000_000

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text: object) -> str:
    """``text`` with control characters (newlines and tabs too, ANSI escapes, bidi
    overrides, NUL) shown as ``\\xNN`` / ``\\uNNNN`` instead of acted on."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(escape, str(text))


def depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a parsed JSON value, counted up to ``limit + 1`` (no deeper)."""
    if not isinstance(value, (dict, list)):
        return 0
    if limit < 0:
        return 1
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((depth(child, limit - 1) for child in children), default=0)


def load_json(text: Any) -> Any:
    """Stored JSON (untrusted): ``ValueError`` when it is unusable.

    The reason reads after "is": ``not valid JSON (...)``, ``nested deeper
    than 32 levels``...
    """
    if isinstance(text, (bytes, bytearray)):
        raise ValueError("stored as bytes, not as text")
    if not isinstance(text, str):
        raise ValueError(f"stored as {type(text).__name__}, not as JSON text")
    if len(text) > MAX_JSON_CHARS:
        raise ValueError(f"longer than {MAX_JSON_CHARS:,} characters ({len(text):,})")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({clean(exc)})") from None
    if depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def json_or(text: Any, default: Any = None) -> Any:
    """:func:`load_json`, or ``default`` when the value is unusable."""
    try:
        return load_json(text)
    except ValueError:
        return default


def is_whole(value: object) -> TypeGuard[int]:
    """An ``int`` and not a ``bool`` (JSON and SQLite readers hand back both)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """A finite ``int`` or ``float``, not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def whole_or(value: object, default: int | None = None) -> int | None:
    """``value`` when :func:`is_whole`, else ``default``."""
    return value if is_whole(value) else default


def number_or(value: object, default: float | None = None) -> float | None:
    """``value`` as a float when :func:`is_number`, else ``default``."""
    return float(value) if is_number(value) else default


def text_or(value: object, default: str = "") -> str:
    """``value`` when it is a str, else ``default``."""
    return value if isinstance(value, str) else default


# -- fields of decoded values (the codecs' checks) ------------------------------


def whole(value: Any, what: str, *, optional: bool = False, least: int | None = None) -> Any:
    """``value`` as an int (not a bool), ``least`` or more; None only when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be a whole number, not {clean(repr(value))[:40]}")
    if least is not None and value < least:
        raise ValueError(f"{what} must be at least {least}, not {value}")
    return value


def number(value: Any, what: str, *, optional: bool = False) -> Any:
    """``value`` as a finite float; None only when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, not {clean(repr(value))[:40]}")
    return float(value)


def text(value: Any, what: str, *, optional: bool = False) -> Any:
    """``value`` as a str; None only when ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text, not {type(value).__name__}")
    return value


def items(value: Any, what: str, size: int | None = None) -> list[Any]:
    """``value`` as a list (of ``size`` elements when given); None is an empty list
    (not a list of ``size``: a null leak or failure is refused, not built empty)."""
    if value is None and size is None:
        return []
    if not isinstance(value, list) or (size is not None and len(value) != size):
        kind = f"a list of {size}" if size is not None else "a list"
        raise ValueError(f"{what} must be {kind}")
    return value
