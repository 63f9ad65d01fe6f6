"""``hermetic-hunt report --format markdown``: made for a CI step summary.

GitHub renders ``$GITHUB_STEP_SUMMARY`` as GitHub-flavoured Markdown, which
passes some HTML through: everything from the database is escaped here, as
code spans (:func:`code`) or as escaped text (:func:`text`).
"""

from __future__ import annotations

import re

from hermetic_hunt import stats
from hermetic_hunt.report.fixes import fix_markdown_lines, history_markdown_lines
from hermetic_hunt.report.model import Report, TestResult
from hermetic_hunt.report.text import (
    bound_text,
    clean,
    flake_state,
    kinds_text,
    run_line,
    sets_text,
    stable_groups,
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


def _rate(test: TestResult) -> str:
    if not test.interval:
        return "-"
    low, high = test.interval
    return f"{stats.percent(test.rate or 0.0)} ({stats.percent(low)}–{stats.percent(high)})"


def _relations(test: TestResult) -> str:
    flake = test.flake
    if flake is None:
        return ""
    parts = []
    if flake.polluters:
        parts.append("polluters: " + text(sets_text(flake.polluters)))
    if flake.cleaners:
        parts.append("cleaners: " + text(", ".join(flake.cleaners)))
    if flake.state_setters:
        parts.append("state-setters: " + text(sets_text(flake.state_setters)))
    return "<br>".join(parts)


def _tests_table(tests: list[TestResult]) -> list[str]:
    rows = []
    for t in tests:
        state = flake_state(t.flake) if t.flake else ""
        failure = t.failure.describe() if t.failure and t.failure.exc_type else ""
        rows.append(
            [
                t.flake.flake_id if t.flake else "–",
                code(t.nodeid),
                text(kinds_text(t.flake)) + (f"<br>{text(state)}" if state else ""),
                _rate(t),
                f"{t.failures}/{t.attempts}",
                _relations(t),
                text(failure),
                code(t.replay or ""),
            ]
        )
    header = ["id", "test", "kinds", f"fail rate ({stats.CONFIDENCE:.0%} CI)", "failed"]
    header += ["polluters · cleaners · state-setters", "failure", "replay"]
    return _table(header, rows)


def render_markdown(report: Report) -> str:
    which = f"run {report.selected_run}" if report.selected_run else f"{len(report.runs)} run(s)"
    if report.since:
        which += f" since {text(report.since)}"
    out = [
        f"## hermetic-hunt: {text(summary_line(report))}",
        "",
        f"{code(report.database, table=False)} · {which} · {report.attempts:,} attempts of "
        f"{len(report.tests):,} tests",
        "",
    ]
    out.extend(f"- {text(run_line(run))}" for run in report.runs)
    sections = (
        ("Flaky tests", "flaky"),
        ("Broken tests (failed in every attempt)", "broken"),
        ("Sandbox-incompatible tests (pass only without the sandbox)", "sandbox-incompatible"),
    )
    for title, status in sections:
        tests = report.with_status(status)
        if tests:
            out.extend(["", f"### {title} ({len(tests)})", "", *_tests_table(tests)])
            if status == "flaky" and any(t.flake is None for t in tests):
                out.extend(
                    [
                        "",
                        "_Not isolated: the hunt ran with `--hermetic-hunt-isolate=off` or "
                        "stopped before isolation; replay commands replay the first failing "
                        "attempt._",
                    ]
                )
    if report.violations:
        rows = [
            [code(v.nodeid), text(v.op), code(v.target), str(v.attempts), f"A{v.first_attempt_id}"]
            for v in report.violations
        ]
        out.extend(
            [
                "",
                "### Network violations (blocked outbound calls)",
                "",
                *_table(["test", "call", "target", "attempts", "first"], rows),
            ]
        )
    out.extend(fix_markdown_lines(report.fix_views(), text, code))
    out.extend(history_markdown_lines(report.history_items(), text, code))
    groups = stable_groups(report)
    if groups:
        out.extend(["", "### Never failed", ""])
        for attempts, count in groups:
            out.append(
                f"- {count} test{'s' * (count != 1)}: {text(bound_text(attempts))}; "
                f"{text(tighten_text(attempts))}"
            )
    skipped = report.with_status("skipped")
    if skipped:
        out.extend(["", f"{len(skipped)} test(s) were skipped in every attempt."])
    return "\n".join(out) + "\n"
