"""Reports: a :class:`~hermetic_hunt.report.model.Report` in, text out.

One renderer per format, all pure (no database, no terminal):

* ``text`` (:mod:`~hermetic_hunt.report.text`) -- the default, for a terminal;
* ``markdown`` (:mod:`~hermetic_hunt.report.markdown`) -- a CI step summary
  (``md`` is the same format: :data:`ALIASES`);
* ``html`` (:mod:`~hermetic_hunt.report.html`) -- one self-contained page;
* ``json`` (:mod:`~hermetic_hunt.report.json_format`) -- versioned, for other tools.

:mod:`hermetic_hunt.report.load` reads a database into a ``Report``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from hermetic_hunt.report.model import Report

FORMATS = ("text", "markdown", "html", "json")
#: Other names a format is taken by, wherever one is (``--format md``).
ALIASES = {"md": "markdown"}


def format_name(fmt: str) -> str:
    """``fmt`` as one of :data:`FORMATS` (an alias is its format's name)."""
    return ALIASES.get(fmt, fmt)


#: Each format's module (imported only when that format is asked for), whose
#: ``render_<format>`` renders it.
_MODULES = {"text": "text", "markdown": "markdown", "html": "html", "json": "json_format"}


def render(report: Report, fmt: str = "text") -> str:
    """``report`` in format ``fmt`` (an alias renders its format)."""
    fmt = format_name(fmt)
    if fmt not in _MODULES:
        raise ValueError(
            f"unknown report format {fmt!r}: expected one of {', '.join([*FORMATS, *ALIASES])}"
        )
    module = importlib.import_module(f"hermetic_hunt.report.{_MODULES[fmt]}")
    renderer: Callable[[Report], str] = getattr(module, f"render_{fmt}")
    return renderer(report)
