"""What an isolation run did, in words: the end of a hunt and ``hermetic-hunt isolate``.

Findings what CI will see first (their exposure, then fail rate), each list
bounded (``hermetic-hunt show`` lists all), grouped parametrizations as one;
the data is a :class:`~hermetic_hunt.findings.IsolationReport`.
"""

from __future__ import annotations

from hermetic_hunt import pasteable
from hermetic_hunt.findings import Finding, IsolationReport
from hermetic_hunt.models import (
    EXPOSURE_TEXT,
    EXPOSURES,
    FOUND_BY,
    exposure_words,
    format_seconds,
    function_of,
)
from hermetic_hunt.report.model import flake_order_of
from hermetic_hunt.report.words import (
    LIST_LIMIT,
    clean,
    listing,
    relation_lines,
)


def isolation_lines(report: IsolationReport, cwd: str) -> list[str]:
    """The isolation's part of the end of a hunt and of ``hermetic-hunt isolate``:
    findings what CI will see first, each list bounded (``show`` lists all)."""
    if not report.flakes and not report.checks and not report.interrupted:
        return []
    probes = sum(len(v.probes) for _, v in report.flakes)
    how = "forked from a collected session" if report.fork else "one process each"
    plural = "s" if len(report.flakes) != 1 else ""
    grouped = {m for members in report.members.values() for m in members}
    grouped |= {m for _, members in report.collide.values() for m in members}
    leads = [(i, v) for i, v in report.flakes if i not in grouped]
    findings = f" in {len(leads)} findings" if len(leads) != len(report.flakes) else ""
    out = [
        "",
        f"hermetic-hunt isolation: {len(report.flakes)} test{plural}{findings} · "
        f"{probes} probes ({how}, {report.parallel} at a time) in "
        f"{format_seconds(round(report.seconds, 1))}",
    ]
    if left := report.out_of_time:
        out.append(
            f"  time budget of {format_seconds(round(report.time_budget, 1))} reached: "
            f"{left} not (fully) isolated; finish with: hermetic-hunt isolate "
            "(--hermetic-hunt-isolate-budget sets it)"
        )
    for flake_id, verdict in sorted(leads, key=lambda item: _rank(report, *item)):
        out.extend(_flake_lines(report, flake_id, verdict, cwd))
    if report.checks:
        out.append("always failing (run once with the sandbox off):")
        shown = report.checks[:LIST_LIMIT]
        out.extend(f"  {clean(nodeid)}  {verdict}" for nodeid, verdict in shown)
        if len(report.checks) > LIST_LIMIT:
            out.append(f"  ... and {len(report.checks) - LIST_LIMIT} more: hermetic-hunt report")
    if report.interrupted:
        out.append(
            f"isolation interrupted: {report.pending} flaky test(s) not isolated; "
            "finish with: hermetic-hunt isolate"
        )
    return out


def _rank(report: IsolationReport, flake_id: str, v: Finding) -> tuple[int, float, tuple[int, str]]:
    level = v.evidence.get("exposure") if isinstance(v.evidence, dict) else None
    where = EXPOSURES.index(level) if level in EXPOSURES else len(EXPOSURES)
    return (where, -report.rates.get(flake_id, 0.0), flake_order_of(flake_id))


def _flake_lines(report: IsolationReport, flake_id: str, v: Finding, cwd: str) -> list[str]:
    kinds = ", ".join(v.kinds) or "not classified"
    status = "" if v.status == "isolated" else f" [{v.status}]"
    evidence = v.evidence if isinstance(v.evidence, dict) else {}
    level = evidence.get("exposure") if v.kinds else None
    exposed = f" · {exposure_words(level, evidence.get('dates'))}" if level in EXPOSURE_TEXT else ""
    if not exposed and evidence.get("failed") == 0 and "network" in v.kinds:
        exposed = " · never failed: its network calls were blocked"
    cost = f"{len(v.probes)} probes, {format_seconds(round(v.probe_seconds, 1))}"
    out = [f"  {flake_id} {clean(v.nodeid)}  {kinds}{exposed}{status} ({cost})"]
    unfinished = " (search unfinished, not minimal)" if v.status == "partial" else ""
    labels = ("collides with", "polluters", "state-setters", "cleaners")
    out.extend(relation_lines(v, flake_id, labels, unfinished))
    if members := report.members.get(flake_id, []):
        sampled = len(report.sampled.get(flake_id, ()))
        out.append(
            f"      and {len(members)} more parametrization{'s' * (len(members) != 1)} of "
            f"{clean(function_of(v.nodeid))} that fail the same way ({listing(members, 'flakes')}"
            f"{f'; {sampled} confirmed by a probe' if sampled else ''}): "
            f"hermetic-hunt show {flake_id} lists them"
        )
    if evidence.get("found_by") == FOUND_BY:
        out.append(f"      {clean(v.notes[0]) if v.notes else 'found by the polluter probe'}")
    if v.reproducer is not None and v.confirmed is False and v.status == "isolated":
        out.append("      reproducer not confirmed: it did not fail again when re-run")
    rate = [n for n in v.notes if n.startswith("the reproducer fails in about")]
    if "concurrency" in v.kinds and rate:
        out.append(f"      {rate[0]}: replay it a few times")
    elif v.status != "isolated" and v.notes:
        out.append(f"      note: {clean(v.notes[-1])}")
    elif "unexplained" in v.kinds:
        claims = [c for c in evidence.get("verdicts", []) if c.get("kind") == "unexplained"]
        why = v.notes[0] if v.notes else str(claims[0]["why"]) if claims else ""
        out.append(f"      note: {clean(why)}")
    if flake_id in report.collide:
        path, others = report.collide[flake_id]
        out.append(
            f"      and {len(others)} more test{'s' * (len(others) != 1)} that only collide over "
            f"{clean(path)} ({listing(others, 'flakes')}): one finding, hermetic-hunt show "
            f"{flake_id} lists them"
        )
    if v.reproducer is not None:
        command = pasteable.replay_command(report.database, flake_id, cwd, rootdir=report.rootdir)
        out.append(f"      replay: {command}")
    return out
