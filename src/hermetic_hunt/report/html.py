"""``hermetic-hunt report --format html``: one self-contained HTML file.

The page loads nothing: CSS, the table-sorting script and the SVG charts are
inline. It is rendered by Jinja2 with autoescaping on, so every value from
the database (test ids, failure text, commands) is HTML-escaped; no value is
ever placed inside ``<script>`` or marked safe. Geometry for the charts is
computed here, in Python, and passed to the template as numbers.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

import jinja2
import markupsafe

from hermetic_hunt import __version__, stats
from hermetic_hunt.models import attempts_text
from hermetic_hunt.report.fixes import TREND_HEIGHT, trend_rows
from hermetic_hunt.report.model import Report, TestResult, evidence_of
from hermetic_hunt.report.words import (
    SHOW,
    UNATTRIBUTED,
    bound_text,
    calendar_text,
    dates_text,
    exposure_line,
    headline,
    kinds_text,
    leak_count_text,
    relation_items,
    section_title,
    shared_text,
    stable_groups,
    status_text,
    summary_line,
    tighten_text,
)
from hermetic_hunt.store.rows import RoundCell

DEFAULT_PATH = "reports/hermetic-hunt.html"
#: Tests drawn in the charts (the rest are in the tables).
CHART_LIMIT = 60
_BAR_WIDTH = 420


@dataclass(frozen=True)
class Bar:
    """One test in the fail-rate chart (SVG units); ``anchor``: its finding's row;
    ``dates``: a finding the calendar decides, drawn as its dates' words, no bar
    (:func:`~hermetic_hunt.report.words.calendar_text`)."""

    nodeid: str
    label: str
    y: int
    width: float
    low: float
    high: float
    rate: str
    interval: str
    anchor: str = ""
    dates: str = ""


@dataclass(frozen=True)
class Heading:
    """A group's label in the fail-rate chart (what CI will see of the bars below it)."""

    text: str
    y: int


@dataclass(frozen=True)
class Cell:
    x: float
    css: str
    title: str


@dataclass(frozen=True)
class Strip:
    """One test's outcomes, round by round."""

    nodeid: str
    y: int
    cells: tuple[Cell, ...]
    label: str = ""  # the flake id, when there is one
    anchor: str = ""  # the finding's row


_ROW = 22


def bars(groups: list[tuple[str, list[TestResult]]]) -> tuple[list[Bar], list[Heading], int]:
    """The chart's bars under one heading per exposure group, most surely failing
    first within each group (findings the calendar decides, which have no rate
    bar, after the rest); at most :data:`CHART_LIMIT` bars. Returns the bars,
    the headings and the chart's height."""
    out: list[Bar] = []
    headings: list[Heading] = []
    y = 0
    for title, tests in groups:
        chosen = sorted(tests, key=lambda t: (bool(calendar_text(t)), -(t.rate or 0.0), t.nodeid))
        chosen = chosen[: CHART_LIMIT - len(out)]
        if not chosen:
            break
        headings.append(Heading(f"{title} ({len(tests)})", y))
        y += _ROW
        for t in chosen:
            low, high = t.interval or (0.0, 0.0)
            dates = calendar_text(t)
            if dates:
                low = high = 0.0  # its rate is the hunt clock's, not a real run's: no bar
            out.append(
                Bar(
                    nodeid=t.nodeid,
                    label=t.flake.flake_id if t.flake else t.nodeid.rsplit("::", 1)[-1][:28],
                    y=y,
                    width=0.0 if dates else round((t.rate or 0.0) * _BAR_WIDTH, 1),
                    low=round(low * _BAR_WIDTH, 1),
                    high=round(high * _BAR_WIDTH, 1),
                    rate=stats.percent(t.rate or 0.0),
                    interval=f"{stats.percent(low)}–{stats.percent(high)}",
                    anchor=anchor_of(t),
                    dates=dates,
                )
            )
            y += _ROW
    return out, headings, max(_ROW, y)


def chart_width(chart: list[Bar]) -> int:
    """The chart's width: labels, bars, rates -- and the longest dates' words
    drawn from the bars' start (12px monospace: about 7.3 units a character)."""
    words = max((len(bar.dates) for bar in chart), default=0)
    return max(_BAR_WIDTH + 320, 250 + math.ceil(words * 7.3))


def anchor_of(test: TestResult) -> str:
    """The id of a finding's row in the page (``F3``, or ``test-`` and a digest)."""
    if test.flake is not None:
        return test.flake.flake_id
    digest = hashlib.sha256(test.nodeid.encode("utf-8", "replace")).hexdigest()[:12]
    return f"test-{digest}"


def strips(
    tests: list[TestResult], cells: tuple[RoundCell, ...]
) -> tuple[list[Strip], list[tuple[int, int]], float]:
    """Rows of the outcome-by-round view, the (run, round) columns, and cell width."""
    wanted = {t.nodeid for t in tests[:CHART_LIMIT]}
    columns = sorted({(c.run_id, c.round_no) for c in cells if c.nodeid in wanted})
    width = max(2.0, min(12.0, 960 / max(1, len(columns))))
    where = {column: index for index, column in enumerate(columns)}
    by_test: dict[str, list[Cell]] = {}
    for c in cells:
        if c.nodeid not in wanted:
            continue
        css = "mixed" if c.passed and c.failed else ("fail" if c.failed else "pass")
        if not c.passed and not c.failed:
            css = "skip"
        title = f"run {c.run_id} round {c.round_no + 1}: {c.passed} passed, {c.failed} failed"
        by_test.setdefault(c.nodeid, []).append(
            Cell(x=round(where[(c.run_id, c.round_no)] * width, 2), css=css, title=title)
        )
    rows = [
        Strip(
            nodeid=t.nodeid,
            y=index * 16,
            cells=tuple(by_test.get(t.nodeid, ())),
            label=t.flake.flake_id if t.flake else "",
            anchor=anchor_of(t),
        )
        for index, t in enumerate(tests[:CHART_LIMIT])
    ]
    return rows, columns, width


@dataclass(frozen=True)
class Relation:
    """One list of a finding (polluters, cleaners...): shown inline when short,
    collapsed (``<details>``) when long."""

    label: str
    items: tuple[str, ...]

    @property
    def short(self) -> bool:
        return len(self.items) <= SHOW


def relations(test: TestResult) -> list[Relation]:
    """A finding's lists, every item (the page collapses long ones)."""
    found = relation_items(test.flake) if test.flake is not None else {}
    return [Relation(label, tuple(items)) for label, items in found.items()]


def _dates(test: TestResult) -> str:
    return dates_text(evidence_of(test.flake).get("dates"))


#: Where a test id may wrap: after a path separator, ``::``, ``[``, ``,`` or a space.
_BREAKS = re.compile(r"(?<=/)|(?<=::)|(?<=\[)|(?<=,)|(?<= )")


def breakable(text: object) -> markupsafe.Markup:
    """``text`` escaped, in unbreakable pieces with a ``<wbr>`` between them where an
    id may wrap (:data:`_BREAKS`); never mid-token (not at a ``-``)."""
    parts = [part for part in _BREAKS.split(str(text)) if part]
    return markupsafe.Markup("<wbr>").join(_piece(part) for part in parts)


def command(text: object) -> markupsafe.Markup:
    """A printed command escaped, wrapping only at its spaces (each word unbroken)."""
    return markupsafe.Markup(" ").join(_piece(word) for word in str(text).split(" "))


def _piece(text: str) -> markupsafe.Markup:
    return markupsafe.Markup('<span class="tok">{}</span>').format(text)


#: A failure message longer than this (lines, characters) is folded under its start.
FOLD_LINES, FOLD_CHARS, SUMMARY_CHARS = 3, 160, 100


def folded(text: str) -> tuple[str, str]:
    """``(what a folded message shows, the whole message)``; the whole is "" when the
    message is short enough to show as it is."""
    if text.count("\n") < FOLD_LINES and len(text) <= FOLD_CHARS:
        return text, ""
    first = text.split("\n", 1)[0]
    if len(first) > SUMMARY_CHARS:
        first = first[:SUMMARY_CHARS].rstrip() + "…"
    return first, text


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hermetic_hunt.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["breakable"] = breakable
    env.filters["command"] = command
    env.globals.update(
        folded=folded,
        attempts_text=attempts_text,
        anchor_of=anchor_of,
        percent=stats.percent,
        percent_ceiling=stats.percent_ceiling,
        kinds_text=kinds_text,
        bound_text=bound_text,
        tighten_text=tighten_text,
        status_text=status_text,
        relations=relations,
        shared_text=shared_text,
        dates=_dates,
        leak_count_text=leak_count_text,
    )
    return env


def render_html(report: Report) -> str:
    interesting = [g.lead for g in report.groups if g.lead.attempts]
    rows, columns, cell_width = strips(interesting, report.rounds)
    sections = [
        (level, section_title(level, groups), groups) for level, groups in report.by_exposure()
    ]
    chart, headings, chart_height = bars(
        [(title, [g.lead for g in groups if g.lead.attempts]) for _, title, groups in sections]
    )
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report,
        tests_by_nodeid={t.nodeid: t for t in report.tests},
        version=__version__,
        headline=headline(report),
        summary=summary_line(report),
        exposures=exposure_line(report),
        sections=sections,
        not_isolated=any(t.flake is None and t.status == "flaky" for t in report.tests),
        leaking=report.leaking(),
        show=SHOW,
        unattributed=UNATTRIBUTED,
        stable_groups=stable_groups(report),
        bars=chart,
        headings=headings,
        bar_width=_BAR_WIDTH,
        chart_width=chart_width(chart),
        chart_height=chart_height,
        fixed=set(report.fixes),
        gridded={strip.anchor for strip in rows},
        strips=rows,
        columns=columns,
        cell_width=cell_width,
        strip_width=max(1.0, len(columns) * cell_width),
        confidence=f"{stats.CONFIDENCE:.0%}",
        chart_limit=CHART_LIMIT,
        interesting=len(interesting),
        fix_views=report.fix_views(),
        trend_rows=trend_rows(report.history_items()),
        trend_height=TREND_HEIGHT,
    )
