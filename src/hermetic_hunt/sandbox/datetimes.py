"""Frozen ``datetime.now()`` / ``date.today()``, patched on the real classes.

The attempt writes the three classmethods that read the clock --
``datetime.now``, ``datetime.utcnow`` and ``date.today`` (which
``datetime.today`` inherits) -- into the types' own dicts
(:func:`hermetic_hunt._compat.type_dict`) and flushes their attribute caches,
for a fixed cost whatever the number of modules loaded, rather than swapping
the class as freezegun does: ``docs/sandbox.md`` ("datetime is patched in
place") says why, and what every reference to the classes then sees.

Outside an attempt the original descriptors are back in place; a bound
method kept past an attempt falls through to them.
"""

from __future__ import annotations

import datetime as _dt
import sys
import warnings
from typing import Any

from hermetic_hunt import _compat
from hermetic_hunt.sandbox import clock as clock_module
from hermetic_hunt.sandbox.patches import Patches

real_datetime = _dt.datetime
real_date = _dt.date

_ORIGINAL_NOW: Any = vars(real_datetime)["now"]
_ORIGINAL_UTCNOW: Any = vars(real_datetime)["utcnow"]
_ORIGINAL_TODAY: Any = vars(real_date)["today"]
_UTCNOW_DEPRECATED = sys.version_info >= (3, 12)

# The patched methods read the source the patched ``time`` functions read
# (:func:`hermetic_hunt.sandbox.clock.activate`, ``rest_on``, a forked child's).


def _now(cls: Any, tz: Any = None) -> Any:
    source = clock_module._source
    if source is None:
        return _ORIGINAL_NOW.__get__(None, cls)(tz)
    return cls.fromtimestamp(source.wall(), tz)


def _utcnow(cls: Any) -> Any:
    source = clock_module._source
    if source is None:
        return _ORIGINAL_UTCNOW.__get__(None, cls)()
    if _UTCNOW_DEPRECATED:  # as loud as the real one
        warnings.warn(
            "datetime.datetime.utcnow() is deprecated and scheduled for removal in a future "
            "version. Use timezone-aware objects to represent datetimes in UTC: "
            "datetime.datetime.now(datetime.UTC).",
            DeprecationWarning,
            stacklevel=2,
        )
    return cls.fromtimestamp(source.wall(), _dt.timezone.utc).replace(tzinfo=None)


def _today(cls: Any) -> Any:
    source = clock_module._source
    if source is None:
        return _ORIGINAL_TODAY.__get__(None, cls)()
    return cls.fromtimestamp(source.wall())


_DATETIME_DICT = _compat.type_dict(real_datetime)
_DATE_DICT = _compat.type_dict(real_date)
_MODIFIED = _compat.type_modified()
DATETIME_PATCH: dict[str, Any] = {"now": classmethod(_now), "utcnow": classmethod(_utcnow)}
DATE_PATCH: dict[str, Any] = {"today": classmethod(_today)}


def _flush() -> None:
    # datetime is a subclass of date: flushing date drops both caches.
    assert _MODIFIED is not None
    _MODIFIED(real_date)


def _works() -> bool:
    """Whether patching the type dicts takes effect here (CPython does; checked once)."""
    if _DATETIME_DICT is None or _DATE_DICT is None or _MODIFIED is None:
        return False
    patches = Patches()
    try:
        install(patches, checked=False)
        works = all(
            getattr(cls, name).__func__ is function  # resolved through the cache
            for cls, name, function in (
                (real_datetime, "now", _now),
                (real_datetime, "today", _today),
                (real_date, "today", _today),
            )
        )
    except Exception:
        works = False
    finally:
        patches.undo()
    return works and real_datetime.now == _ORIGINAL_NOW.__get__(None, real_datetime)


def install(patches: Patches, *, checked: bool = True) -> None:
    """Freeze ``now``/``utcnow``/``today`` until ``patches`` is undone (where supported)."""
    if checked and not AVAILABLE:
        return
    assert _DATETIME_DICT is not None and _DATE_DICT is not None
    # Undone newest first: the cache flush rides on the first (undone last).
    patches.update(_DATE_DICT, DATE_PATCH, after=_flush)
    patches.update(_DATETIME_DICT, DATETIME_PATCH)
    _flush()


AVAILABLE: bool = _works()
