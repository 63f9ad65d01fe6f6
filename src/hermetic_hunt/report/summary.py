"""The end of a hunt, in words: the same counts as ``hermetic-hunt report``.

:func:`end_of_hunt` reads the run back from the database and words it with
the report's own functions (:func:`~hermetic_hunt.report.words.summary_line`
counts the statuses for both), so the end of a hunt and ``hermetic-hunt
report`` never disagree. Then the isolation's findings
(:mod:`hermetic_hunt.report.isolation`) -- or, without isolation, the
findings by exposure -- and the tests that leave state behind, every list
bounded. The plugin calls it (the hunt stage comes before the report stage).
"""

from __future__ import annotations

import contextlib

from hermetic_hunt import pasteable
from hermetic_hunt.errors import HuntError
from hermetic_hunt.findings import IsolationReport
from hermetic_hunt.report.isolation import isolation_lines
from hermetic_hunt.report.load import load_report
from hermetic_hunt.report.model import Report
from hermetic_hunt.report.text import finding_lines, leak_lines
from hermetic_hunt.report.words import (
    clean,
    exposure_line,
    summary_line,
)
from hermetic_hunt.store import Store

#: Findings (and violators, leaking tests) listed before the rest are only counted.
SUMMARY_FINDINGS = 10


def end_of_hunt(
    store: Store,
    run_id: int,
    header: str,
    *,
    cwd: str,
    attempts: int,
    error: str | None,
    isolation: IsolationReport | None,
    stored: int | None = None,
    rounds: int = 0,
    incomplete: str = "",
    rejected: str = "",
) -> list[str]:
    """The lines after pytest's own summary (``header``: what the rounds did;
    ``stored``: how many of the ``attempts`` reached the database, when a hunt
    stopped early; ``incomplete``: the rounds whose attempts did not add up;
    ``rejected``: lines forged on the rounds' channels, ignored)."""
    out = ["", header]
    report = None
    if attempts:  # this run's report, read back from the database (None: it cannot be)
        with contextlib.suppress(HuntError):
            report = load_report(store, run_id, cwd)
    if report is not None:
        out.append(f"hermetic-hunt: {summary_line(report)}")
        if report.groups:
            out.append(f"hermetic-hunt: {exposure_line(report)}")
    if incomplete:
        out.append(f"hermetic-hunt: the run is incomplete: {incomplete}")
    if rejected:
        out.append(f"hermetic-hunt: {rejected}; nothing of theirs was stored")
    if error is not None:
        out.append(f"hermetic-hunt: the hunt stopped early: {error}")
        if stored is not None and stored != attempts:
            out.append(
                f"hermetic-hunt: {stored:,} of the {attempts:,} attempts are in "
                f"the database ({rounds} whole round(s))"
            )
    if isolation is not None and (isolated := isolation_lines(isolation, cwd)):
        out.extend(isolated)
    elif report is not None:
        out.extend(finding_lines(report, limit=SUMMARY_FINDINGS))
        out.extend(_violators(report))
    if report is not None:
        out.extend(leak_lines(report, limit=SUMMARY_FINDINGS))
        out.extend(next_steps(report, store, cwd))
    return out


def next_steps(report: Report, store: Store, cwd: str) -> list[str]:
    """What to run next, when something was found: the fix of the first finding, the report."""
    if not report.groups:
        return []
    out = ["next:"]
    flakes = [g.lead.flake.flake_id for g in report.groups if g.lead.flake is not None]
    # The first finding with a patch to verify, else the first one.
    patched = [f for f in flakes if f in report.fixes and report.fixes[f].suggestion.patch]
    flakes = patched + flakes
    if flakes:
        fix = pasteable.cli_command(["fix", flakes[0]], store.path, cwd)
        out.append(f"  {fix}   # the suggested fix for {flakes[0]}, verified on a copy")
    html = pasteable.cli_command(["report", "--format", "html"], store.path, cwd)
    out.append(f"  {html}   # every finding with its fix and replay")
    return out


def _violators(report: Report) -> list[str]:
    violators = [t for t in report.tests if t.with_violations]
    if not violators:
        return []
    out = ["network violations (outbound calls the guard blocked):"]
    for test in violators[:SUMMARY_FINDINGS]:
        out.append(f"  {clean(test.nodeid)}  in {test.with_violations} attempt(s)")
    if len(violators) > SUMMARY_FINDINGS:
        more = len(violators) - SUMMARY_FINDINGS
        out.append(f"  ... and {more} more: hermetic-hunt report lists them")
    return out
