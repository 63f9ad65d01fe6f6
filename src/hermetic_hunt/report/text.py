"""The plain-text report (``hermetic-hunt report``), and helpers shared by ``show``.

Everything printed from the database goes through :func:`clean`: a test id
or failure message is untrusted text, and terminal control sequences in it
must not reach the terminal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from hermetic_hunt import stats
from hermetic_hunt.models import format_seconds
from hermetic_hunt.report.fixes import fix_text_lines, history_text_lines
from hermetic_hunt.report.model import Flake, Report, RunRow, TestResult

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: Tests listed by name in a group before the rest are only counted.
LIST_LIMIT = 10


def clean(text: object) -> str:
    """``text`` with control characters (ANSI escapes, bidi overrides, NUL,
    newlines inside a value) shown as ``\\xNN`` / ``\\uNNNN`` instead of acted on."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(escape, str(text))


def sets_text(sets: Sequence[Sequence[str]]) -> str:
    """``[[a, b], [c]]`` -> ``a + b; or c`` (each set is minimal on its own)."""
    return "; or ".join(" + ".join(clean(n) for n in group) for group in sets if group)


def kinds_text(flake: Flake | None) -> str:
    if flake is None:
        return "not isolated"
    return ", ".join(flake.kinds) or "not classified yet"


def flake_state(flake: Flake) -> str:
    status = {
        "pending": "isolation pending",
        "isolated": "isolated",
        "partial": "partly isolated (probe budget or timeout reached)",
        "skipped": "isolation skipped",
        "error": "isolation failed (see the note)",
        "not-collected": "not isolated: the test is no longer collected",
    }.get(flake.status, clean(flake.status))
    confirmed = {
        True: "reproducer confirmed",
        False: "reproducer NOT confirmed",
        None: "reproducer not tried",
    }[flake.confirmed]
    if flake.reproducer is None and flake.confirmed is None:
        confirmed = "no reproducer"
    return f"{status} · {confirmed}"


def interval_text(test: TestResult) -> str:
    if test.interval is None:
        return ""
    low, high = test.interval
    return f"{stats.CONFIDENCE:.0%} CI {stats.percent(low)}–{stats.percent(high)}"


def rate_text(test: TestResult) -> str:
    """``failed 28 of 30 attempts: 93% (95% CI 79%-98%)`` (an en dash, really)."""
    if not test.attempts:
        return f"skipped in all {test.skipped} attempt(s)"
    if test.failures == 0:
        return bound_text(test.attempts)
    rate = stats.percent(test.rate or 0.0)
    extra = f", {test.crashed} crashed" if test.crashed else ""
    return (
        f"failed {test.failures} of {test.attempts} attempts{extra}: {rate} ({interval_text(test)})"
    )


def bound_text(attempts: int) -> str:
    """``0/50 failures: flake rate < 6% at 95%``."""
    return f"0/{attempts} failures: {stats.bound_text(attempts)}"


def tighten_text(attempts: int) -> str:
    more = stats.more_attempts_for_bound(attempts)
    if not more:
        return "already below 1%"
    return f"{more:,} more clean attempts each would tighten it to < 1%"


def run_line(run: RunRow) -> str:
    if run.rounds_planned is not None:
        rounds = f"{run.rounds_done}/{run.rounds_planned} rounds"
    else:
        budget = format_seconds(run.budget_seconds or 0)
        rounds = f"{run.rounds_done} rounds in a {budget} budget"
    started = clean(run.started_at).replace("T", " ").replace("+00:00", " UTC")
    shard = f" · shard {clean(run.shard)}" if run.shard != "1/1" else ""
    return (
        f"run {run.id} · {started} · {clean(run.status)} · {rounds} · {run.attempts:,} "
        f"attempts · {run.tests:,} tests · seed {run.base_seed} · {clean(run.mode)} · "
        f"order {clean(run.order)} · {run.workers} worker{'s' if run.workers != 1 else ''}"
        f"{shard}"
    )


def headline(report: Report) -> str:
    runs = len(report.runs)
    which = f"{runs} run{'s' * (runs != 1)}"
    if report.selected_run:
        which = f"run {report.selected_run}"
    if report.since:
        which += f" since {clean(report.since)}"
    return (
        f"hermetic-hunt report · {clean(report.database)} · {which} · "
        f"{report.attempts:,} attempts of {len(report.tests):,} tests"
    )


def summary_line(report: Report) -> str:
    count = Counter(t.status for t in report.tests)
    violators = len({v.nodeid for v in report.violations})
    parts = [
        f"{count['flaky']} flaky",
        f"{count['broken']} broken",
        f"{count['sandbox-incompatible']} sandbox-incompatible",
        f"{count['stable']} stable",
    ]
    if count["skipped"]:
        parts.append(f"{count['skipped']} skipped")
    parts.append(f"{violators} with network violations")
    return " · ".join(parts)


def stable_groups(report: Report) -> list[tuple[int, int]]:
    """``(attempts, how many stable tests had that many)``, fewest attempts first."""
    groups = Counter(t.attempts for t in report.tests if t.status == "stable")
    return sorted(groups.items())


def _test_block(test: TestResult, label: str) -> list[str]:
    flake = test.flake
    out = [f"  {label:<4}{clean(test.nodeid)}"]
    if flake is not None or test.status == "flaky":
        state = f" · {flake_state(flake)}" if flake is not None else ""
        out.append(f"      {kinds_text(flake)}{state}")
    out.append(f"      {rate_text(test)}")
    timing = test.timing()
    if timing is not None:
        out.append(f"      timing: {timing}")
    if flake is not None:
        if flake.polluters:
            out.append(f"      polluters: {sets_text(flake.polluters)}")
        if flake.cleaners:
            out.append(f"      cleaners: {', '.join(clean(c) for c in flake.cleaners)}")
        if flake.state_setters:
            out.append(f"      state-setters: {sets_text(flake.state_setters)}")
    if test.failure is not None and test.failure.exc_type:
        out.append(f"      failure: {clean(test.failure.describe())}")
    if test.check is not None:
        out.append(f"      without the sandbox: {clean(test.check.outcome)}")
    if test.replay:
        out.append(f"      replay: {clean(test.replay)}")
    return out


def _names(tests: Iterable[TestResult]) -> list[str]:
    chosen = list(tests)
    out = [f"  {clean(t.nodeid)}" for t in chosen[:LIST_LIMIT]]
    if len(chosen) > LIST_LIMIT:
        out.append(f"  ... and {len(chosen) - LIST_LIMIT} more")
    return out


def _section(title: str, tests: list[TestResult]) -> list[str]:
    if not tests:
        return []
    out = ["", title]
    for test in tests:
        out.extend(_test_block(test, test.flake.flake_id if test.flake else "-"))
    return out


def _violations(report: Report) -> list[str]:
    if not report.violations:
        return []
    by_test = {t.nodeid: t for t in report.tests}
    out = ["", "network violations (outbound calls the guard blocked, even where the test passed):"]
    seen: set[str] = set()
    for v in report.violations:
        if v.nodeid not in seen:
            seen.add(v.nodeid)
            out.append(f"  {clean(v.nodeid)}")
        out.append(
            f"      {clean(v.op)} {clean(v.target)} in {v.attempts} attempt(s), first A"
            f"{v.first_attempt_id}"
        )
        test = by_test.get(v.nodeid)
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


def render_text(report: Report) -> str:
    out = [headline(report)]
    out.extend(f"  {run_line(run)}" for run in report.runs)
    out.append(summary_line(report))
    flaky = report.with_status("flaky")
    out.extend(_section(f"flaky tests ({len(flaky)}), most surely failing first:", flaky))
    if any(t.flake is None for t in flaky):
        out.append(
            "  (not isolated: the hunt ran with --hermetic-hunt-isolate=off or stopped before "
            "isolation; replay commands replay each test's first failing attempt)"
        )
    out.extend(
        _section(
            "broken tests (failed in every attempt, with and without the sandbox):",
            report.with_status("broken"),
        )
    )
    out.extend(
        _section(
            "sandbox-incompatible tests (fail under the sandbox, pass without it):",
            report.with_status("sandbox-incompatible"),
        )
    )
    out.extend(_violations(report))
    out.extend(fix_text_lines(report.fix_views(), clean))
    out.extend(history_text_lines(report.history_items(), clean))
    out.extend(_stable(report))
    skipped = report.with_status("skipped")
    if skipped:
        out.extend(["", f"skipped in every attempt ({len(skipped)}):", *_names(skipped)])
    if not report.tests:
        out.extend(["", "no attempts stored yet: run a hunt (pytest --hermetic-hunt=30 -n auto)"])
    return "\n".join(out) + "\n"


def list_lines(report: Report) -> list[str]:
    """``hermetic-hunt list``: one line per flake (and per flaky test not isolated)."""
    out = []
    for test in report.with_status("flaky") + [
        t for t in report.tests if t.flake is not None and t.status != "flaky"
    ]:
        label = test.flake.flake_id if test.flake else "-"
        rate = (
            f"{stats.percent(test.rate or 0.0)} ({test.failures}/{test.attempts})"
            if test.attempts
            else "-"
        )
        out.append(
            f"{label:<5}{kinds_text(test.flake):<24} {rate:<14} {clean(test.nodeid)}  "
            f"{clean(test.replay or '')}".rstrip()
        )
    return out
