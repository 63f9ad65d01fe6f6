"""The plain-text report (``hermetic-hunt report``) and the list (``hermetic-hunt list``):
the layout of the findings, leaks and stable tests; the words are :mod:`.words`'.
"""

from __future__ import annotations

from collections.abc import Sequence

from hermetic_hunt.fix.suggest import describe
from hermetic_hunt.models import (
    CI_EXPOSURES,
    EXPOSURE_TEXT,
)
from hermetic_hunt.report.fixes import FixView, trend_text
from hermetic_hunt.report.history import History
from hermetic_hunt.report.model import Group, Report, rank_key
from hermetic_hunt.report.words import (
    LIST_LIMIT,
    SHOW,
    STATUS_TEXT,
    UNATTRIBUTED,
    bound_text,
    clean,
    exposure_line,
    group_rate_text,
    headline,
    kinds_text,
    leak_count_text,
    members_text,
    relation_lines,
    run_line,
    share_text,
    shared_text,
    stable_groups,
    status_text,
    summary_line,
    tighten_text,
)


def _group_block(group: Group) -> list[str]:
    test = group.lead
    flake = test.flake
    label = flake.flake_id if flake is not None else "-"
    title = clean(group.nodeid)
    if group.others and group.shared is None:
        title += f"  ({len(group.tests)} parametrizations that fail the same way)"
    out = [f"  {label:<4}{title}", f"      {status_text(test)}", f"      {group_rate_text(group)}"]
    if group.others:
        out.append(f"      tests: {members_text(group)}")
    if where := shared_text(group):
        out.append(f"      {where}")
    if (timing := test.timing()) is not None:
        out.append(f"      timing: {timing}")
    if flake is not None:
        out.extend(relation_lines(flake, flake.flake_id))
    if test.failure is not None and test.failure.exc_type:
        out.append(f"      failure: {clean(test.failure.describe())}")
    if test.check is not None and test.status not in STATUS_TEXT:
        out.append(f"      without the sandbox: {clean(test.check.outcome)}")
    if test.replay:
        out.append(f"      replay: {clean(test.replay)}")
    return out


def finding_lines(report: Report, limit: int | None = None) -> list[str]:
    """The findings by exposure (what CI will see first), then fail rate.

    ``limit``: at most that many findings, then how many more (the end of a
    hunt); None: all of them (``hermetic-hunt report``).
    """
    out: list[str] = []
    room = len(report.groups) if limit is None else limit
    left = 0
    for level, groups in report.by_exposure():
        shown, room = groups[:room], max(0, room - len(groups))
        left += len(groups) - len(shown)
        if not shown:
            continue
        noun = "finding" if len(groups) == 1 else "findings"
        title = groups[0].exposure_text if len(groups) == 1 else EXPOSURE_TEXT[level]
        if level not in CI_EXPOSURES:
            title += ", not what CI will see"
        out.extend(["", f"{title} ({len(groups)} {noun}):"])
        for group in shown:
            out.extend(_group_block(group))
    if left:
        out.append(f"  ... and {left} more finding(s): hermetic-hunt report lists them all")
    if any(t.flake is None and t.status == "flaky" for t in report.tests):
        out.append("")
        out.append(
            "  (not isolated: the hunt ran with --hermetic-hunt-isolate=off or stopped before "
            "isolation; replay commands replay each test's first failing attempt)"
        )
    return out


def leak_lines(report: Report, limit: int | None = None) -> list[str]:
    """``tests that leave state behind``: each test with what it left, bounded."""
    leaking = report.leaking()
    if not leaking:
        return []
    tests = sum(1 for nodeid, _ in leaking if nodeid is not None)
    title = f"tests that leave state behind ({tests}), even where nothing failed yet:"
    out = ["", title if tests else "state the rounds left behind:"]
    chosen = leaking if limit is None else leaking[:limit]
    for nodeid, leaks in chosen:
        out.append(f"  {clean(nodeid) if nodeid is not None else UNATTRIBUTED}")
        out.extend(f"      {leak_count_text(leak)}" for leak in leaks[:SHOW])
        if len(leaks) > SHOW:
            more = len(leaks) - SHOW
            out.append(f"      ... and {more} more: hermetic-hunt report --format json lists all")
    if len(chosen) < len(leaking):
        out.append(f"  ... and {len(leaking) - len(chosen)} more: hermetic-hunt report lists them")
    return out


def _violations(report: Report) -> list[str]:
    if not report.violations:
        return []
    by_test = {t.nodeid: t for t in report.tests}
    out = ["", "network violations (outbound calls the guard blocked, even where the test passed):"]
    calls: dict[str, list[str]] = {}
    for v in report.violations:
        call = f"{clean(v.op)} {clean(v.target)}"
        text = f"      {call} in {v.attempts} attempt(s), first A{v.first_attempt_id}"
        calls.setdefault(v.nodeid, []).append(text)
    for nodeid, lines in calls.items():
        out += [f"  {clean(nodeid)}", *lines]
        test = by_test.get(nodeid)
        # (once for the test, after its last blocked call)
        if test is not None and test.flake is not None and test.status != "flaky":
            out.append(f"      flake {test.flake.flake_id}: {kinds_text(test.flake)}")
            if test.replay:
                out.append(f"      replay: {clean(test.replay)}")
    return out


def _stable(report: Report) -> list[str]:
    groups = stable_groups(report)
    if not groups:
        return []
    out = ["", "never failed (how sure that is):"]
    for attempts, tests in groups:
        noun = "test" if tests == 1 else "tests"
        out.append(f"  {tests} {noun}: {bound_text(attempts)}; {tighten_text(attempts)}")
    return out


def _fixes(views: Sequence[FixView]) -> list[str]:
    if not views:
        return []
    out = ["", "suggested fixes (hermetic-hunt fix ID prints the patch, verifies and applies it):"]
    for view in views:
        s = view.suggestion
        out.append(f"  {clean(view.label)} {clean(view.nodeid)}")
        out.append(f"      {clean(s.kind)}: {clean(s.summary)}")
        out.extend(describe(s, indent="      ")[1:])  # its changes and advice
        if s.patch is not None:
            files = ", ".join(clean(p) for p in s.patch.paths)
            out.append(f"      patch: {files} ({clean(view.command)} --diff)")
        out.append(f"      {clean(view.status)}")
    return out


def _histories(histories: Sequence[tuple[str, History]]) -> list[str]:
    shown = [(label, h) for label, h in histories if h.lines()]
    if not shown:
        return []
    out = ["", "history across runs and commits:"]
    for label, h in shown:
        out.append(f"  {clean(label)} {clean(h.nodeid)}")
        out.extend(f"      {clean(line)}" for line in h.lines())
        if len(h.trend) > 1:
            out.append(f"      fail rate by run: {trend_text(h)}")
    return out


def render_text(report: Report) -> str:
    out = [headline(report)]
    out.extend(f"  {run_line(run)}" for run in report.runs)
    out.append(summary_line(report))
    if report.groups:
        out.append(exposure_line(report))
    out.extend(finding_lines(report))
    out.extend(leak_lines(report))
    out.extend(_violations(report))
    out.extend(_fixes(report.fix_views()))
    out.extend(_histories(report.history_items()))
    out.extend(_stable(report))
    if skipped := report.with_status("skipped"):
        out.extend(["", f"skipped in every attempt ({len(skipped)}):"])
        out.extend(f"  {clean(t.nodeid)}" for t in skipped[:LIST_LIMIT])
        if len(skipped) > LIST_LIMIT:
            out.append(f"  ... and {len(skipped) - LIST_LIMIT} more")
    if not report.tests:
        out.extend(["", "no attempts stored yet: run a hunt (pytest --hermetic-hunt=30 -n auto)"])
    return "\n".join(out) + "\n"


def list_lines(report: Report) -> list[str]:
    """``hermetic-hunt list``: one line per flake (and per flaky test not isolated),
    what CI sees first."""
    out = []
    listed = [
        t for t in report.tests if t.flake is not None or t.status in ("flaky", "not-idempotent")
    ]
    for test in sorted(listed, key=rank_key):
        label = test.flake.flake_id if test.flake else "-"
        rate = f"{share_text(test)} ({test.failures}/{test.attempts})" if test.attempts else "-"
        out.append(
            f"{label:<5}{kinds_text(test.flake):<24} {rate:<14} {clean(test.nodeid)}  "
            f"{clean(test.replay or '')}".rstrip()
        )
    return out
