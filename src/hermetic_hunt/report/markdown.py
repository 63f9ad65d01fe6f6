"""``hermetic-hunt report --format markdown``: made for a CI step summary.

GitHub renders ``$GITHUB_STEP_SUMMARY`` as GitHub-flavoured Markdown, which
passes some HTML through: everything from the database is escaped here, as
code spans (:func:`code`) or as escaped text (:func:`text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hermetic_hunt import stats
from hermetic_hunt.report.fixes import FixView, trend_text
from hermetic_hunt.report.history import History
from hermetic_hunt.report.model import Group, Report, calendar_dates
from hermetic_hunt.report.words import (
    LIST_LIMIT,
    SHOW,
    UNATTRIBUTED,
    bound_text,
    clean,
    exposure_line,
    leak_count_text,
    members_text,
    relation_lines,
    run_line,
    section_title,
    shared_text,
    stable_groups,
    status_text,
    summary_line,
    tighten_text,
)

# Inline markup only: text never starts a line here, so block markers
# (#, -, +, 1.) are inert; <, > and & become entities.
_SPECIAL = re.compile(r"([\\`*_\[\]|~!])")


def _flat(value: object) -> str:
    return clean(str(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))


def text(value: object) -> str:
    """Untrusted text as literal Markdown (no markup, links or HTML survive)."""
    escaped = _flat(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", escaped)


def code(value: object, *, table: bool = True) -> str:
    """Untrusted text as a code span (pipes escaped inside tables, as GFM wants)."""
    body = _flat(value)
    if not body:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`") or longest:
        body = f" {body} "
    if table:
        body = body.replace("|", "\\|")
    return f"{fence}{body}{fence}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _rate(group: Group) -> str:
    if not group.interval:
        return "-"
    if not group.others and calendar_dates(group.lead) is not None:
        return "dates (the calendar decides)"
    low, high = group.interval
    return f"{stats.percent(group.rate or 0.0)} ({stats.percent(low)}–{stats.percent(high)})"


def _test_cell(group: Group) -> str:
    cell = code(group.nodeid) if group.shared is None else text(group.nodeid)
    if group.others:
        cell += f"<br>{len(group.tests)} {group.members}: {text(members_text(group))}"
    if where := shared_text(group):
        cell += f"<br>{text(where)}"
    return cell


def _tests_table(groups: list[Group]) -> list[str]:
    rows = []
    for g in groups:
        t = g.lead
        failure = t.failure.describe() if t.failure and t.failure.exc_type else ""
        relations = relation_lines(t.flake, t.flake.flake_id) if t.flake is not None else []
        rows.append(
            [
                t.flake.flake_id if t.flake else "–",
                _test_cell(g),
                text(status_text(t)),
                _rate(g),
                f"{g.failures}/{g.attempts}",
                "<br>".join(text(line.strip()) for line in relations),
                text(failure),
                code(t.replay or ""),
            ]
        )
    header = ["id", "test", "what", f"fail rate ({stats.CONFIDENCE:.0%} CI)", "failed"]
    header += ["polluters · cleaners · state-setters", "failure", "replay"]
    return _table(header, rows)


#: A table of more rows than this is folded into ``<details>`` (a step summary stays short).
FOLD_ROWS = 5


def _folded(title: str, table: list[str]) -> list[str]:
    """``table`` under its ``### title``, inside ``<details>`` when it is long."""
    if len(table) - 2 <= FOLD_ROWS:
        return ["", f"### {title}", "", *table]
    rows = len(table) - 2
    return ["", f"### {title}", "", f"<details><summary>{rows} rows</summary>", "", *table,
            "", "</details>"]  # fmt: skip


def _leaks(report: Report) -> list[str]:
    leaking = report.leaking()
    if not leaking:
        return []
    rows = []
    for nodeid, leaks in leaking[:LIST_LIMIT]:
        what = "<br>".join(text(leak_count_text(leak)) for leak in leaks[:SHOW])
        if len(leaks) > SHOW:
            what += f"<br>… and {len(leaks) - SHOW} more"
        rows.append([code(nodeid) if nodeid is not None else text(UNATTRIBUTED), what])
    tests = sum(1 for nodeid, _ in leaking if nodeid is not None)
    table = _table(["test", "what it left behind"], rows)
    out = _folded(f"Tests that leave state behind ({tests})", table)
    if len(leaking) > LIST_LIMIT:
        out.extend(
            ["", f"_… and {len(leaking) - LIST_LIMIT} more: `hermetic-hunt report` lists them._"]
        )
    return out


def _fixes(views: Sequence[FixView]) -> list[str]:
    """One row per fix, folded (a step summary stays short): ``hermetic-hunt fix ID``
    prints each change and the patch."""
    if not views:
        return []
    rows = []
    for view in views:
        s = view.suggestion
        where = "<br>".join(code(c.where) for c in s.changes if c.where)
        rows.append(
            [
                text(view.label),
                code(view.nodeid),
                f"**{text(s.kind)}**: {text(s.summary)}{'<br>' + where if where else ''}",
                "patch: " + ", ".join(code(p) for p in s.patch.paths) if s.patch else "",
                text(view.status),
            ]
        )
    return [
        "",
        f"### Suggested fixes ({len(views)})",
        "",
        "<details><summary>One per flake: <code>hermetic-hunt fix ID</code> prints the "
        "change and its patch, verifies it, and applies it with <code>--apply</code>."
        "</summary>",
        "",
        *_table(["id", "test", "suggestion", "patch", "verification"], rows),
        "",
        "</details>",
    ]


def _histories(histories: Sequence[tuple[str, History]]) -> list[str]:
    rows = [
        [
            text(label),
            code(h.nodeid),
            text(h.lines()[0]) if h.first is not None else "",
            text(h.status_text()),
            text(trend_text(h)),
        ]
        for label, h in histories
        if h.lines()
    ]
    if not rows:
        return []
    header = ["id", "test", "seen", "fixed?", "fail rate by run"]
    return ["", "### History across runs and commits", "", *_table(header, rows)]


def render_markdown(report: Report) -> str:
    which = f"run {report.selected_run}" if report.selected_run else f"{len(report.runs)} run(s)"
    if report.since:
        which += f" since {text(report.since)}"
    out = [
        f"## hermetic-hunt: {text(summary_line(report))}",
        "",
        f"**{text(exposure_line(report))}**",
        "",
        f"{code(report.database, table=False)} · {which} · {report.attempts_text} of "
        f"{len(report.tests):,} tests",
        "",
    ]
    out.extend(f"- {text(run_line(run))}" for run in report.runs)
    for level, findings in report.by_exposure():
        title = f"### {text(section_title(level, findings))} ({len(findings)})"
        out.extend(["", title, "", *_tests_table(findings)])
    if any(t.flake is None and t.status == "flaky" for t in report.tests):
        out.extend(
            [
                "",
                "_Not isolated: the hunt ran with `--hermetic-hunt-isolate=off` or "
                "stopped before isolation; replay commands replay the first failing "
                "attempt._",
            ]
        )
    out.extend(_leaks(report))
    if report.violations:
        rows = [
            [code(v.nodeid), text(v.op), code(v.target), str(v.attempts), f"A{v.first_attempt_id}"]
            for v in report.violations
        ]
        table = _table(["test", "call", "target", "attempts", "first"], rows)
        out.extend(_folded("Network violations (blocked outbound calls)", table))
    out.extend(_fixes(report.fix_views()))
    out.extend(_histories(report.history_items()))
    if groups := stable_groups(report):
        out.extend(["", "### Never failed", ""])
        for attempts, count in groups:
            out.append(
                f"- {count} test{'s' * (count != 1)}: {text(bound_text(attempts))}; "
                f"{text(tighten_text(attempts))}"
            )
    if skipped := report.with_status("skipped"):
        out.extend(["", f"{len(skipped)} test(s) were skipped in every attempt."])
    return "\n".join(out) + "\n"
