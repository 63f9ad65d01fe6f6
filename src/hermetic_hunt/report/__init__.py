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

from collections.abc import Callable

from hermetic_hunt.report.model import Report

FORMATS = ("text", "markdown", "html", "json")
#: Other names a format is taken by, wherever one is (``--format md``).
ALIASES = {"md": "markdown"}


def format_name(fmt: str) -> str:
    """``fmt`` as one of :data:`FORMATS` (an alias is its format's name)."""
    return ALIASES.get(fmt, fmt)


def renderer(fmt: str) -> Callable[[Report], str]:
    """The render function of ``fmt`` (imports only what that format needs; an alias
    renders its format)."""
    fmt = format_name(fmt)
    if fmt == "text":
        from hermetic_hunt.report.text import render_text

        return render_text
    if fmt == "markdown":
        from hermetic_hunt.report.markdown import render_markdown

        return render_markdown
    if fmt == "html":
        from hermetic_hunt.report.html import render_html

        return render_html
    if fmt == "json":
        from hermetic_hunt.report.json_format import render_json

        return render_json
    raise ValueError(
        f"unknown report format {fmt!r}: expected one of {', '.join([*FORMATS, *ALIASES])}"
    )


def render(report: Report, fmt: str = "text") -> str:
    return renderer(fmt)(report)
