"""``hermetic-hunt show``: everything stored about one flake or attempt, as text.

Pure: the rows come from :mod:`hermetic_hunt.store.queries`, the journal
comparison from :func:`hermetic_hunt.journal.compare`; this module only lays
them out.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from hermetic_hunt.journal import Journal
from hermetic_hunt.models import EXPOSURE_TEXT, describe_leak, exposure_words
from hermetic_hunt.report.model import Group, evidence_of
from hermetic_hunt.report.words import clean, flake_state, rate_text, relation_texts
from hermetic_hunt.store.rows import AttemptDetail, StepRow

_WIDTH = 15


@dataclass(frozen=True)
class Comparison:
    """Journal comparison of a failing and a passing attempt of one test."""

    failing: int
    passing: int | None
    basis: str  # "journals", "read counts" or "" when there is nothing to compare
    lines: tuple[str, ...]
    problem: str | None = None  # a journal that could not be read


def _row(label: str, value: str) -> str:
    return f"{label + ':':<{_WIDTH}}{value}"


def when(now: float | None) -> str:
    if now is None:
        return "-"
    try:
        stamp = datetime.fromtimestamp(now, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{now!r}"
    return f"{stamp.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} ({now:.3f})"


def comparison_lines(comparison: Comparison | None) -> list[str]:
    if comparison is None:
        return []
    if comparison.passing is None:
        return [
            "journal comparison: no passing attempt of this test to compare with "
            "(it failed every time)"
        ]
    head = (
        f"journal comparison (failing A{comparison.failing} vs passing "
        f"A{comparison.passing}, by {comparison.basis or 'read counts'}):"
    )
    out = [head]
    if comparison.problem:
        out.append(f"  {clean(comparison.problem)}")
    elif comparison.lines:
        out.extend(f"  {clean(line)}" for line in comparison.lines)
    else:
        out.append(
            "  no difference in what they read from clocks and entropy: the cause is "
            "elsewhere (order, shared state, the environment)"
        )
    return out


def render_attempt(
    detail: AttemptDetail,
    *,
    journal: Journal | None,
    journal_problem: str | None,
    comparison: Comparison | None,
    replay: str,
    leaks: Sequence[tuple[str, str, str, str, bool]] = (),
) -> str:
    d = detail
    out = [
        f"attempt A{d.id} · {clean(d.nodeid)}",
        _row(
            "where",
            f"run {d.run_id} · round {d.round_no} · worker {clean(d.worker)} · position "
            f"{d.position} · execution {d.execution}",
        ),
        _row(
            "outcome",
            f"{clean(d.outcome)}{f' ({clean(d.phase)})' if d.phase else ''} in {d.duration:.3f}s",
        ),
        _row(
            "sandbox",
            f"mode {clean(d.mode)} · seed {d.seed if d.seed is not None else '-'} · "
            f"now {when(d.now)} · PYTHONHASHSEED {d.hash_seed if d.hash_seed is not None else '-'}",
        ),
    ]
    if counts := d.parsed_counts():
        reads = ", ".join(f"{clean(k)} {v}" for k, v in sorted(counts.items()))
        out.append(_row("reads", reads))
    if d.exc_type is not None:
        text = f"{d.exc_type}: {d.message}" if d.message else d.exc_type
        out.append(_row("failure", clean(f"{text} at {d.location}" if d.location else text)))
        if d.excerpt:
            out.append("failure text (the end of it):")
            out.extend(f"  {clean(line)}" for line in d.excerpt.rstrip().splitlines())
    for v in d.violations:
        extra = f" ({v.detail})" if v.detail else ""
        out.append(_row("violation", clean(f"{v.describe()}{extra}")))
    for resource, name, change, leak_detail, persisted in leaks:
        phrase = describe_leak(resource, name, change, leak_detail)
        if not persisted:
            phrase += " (put back before the round ended: not left behind)"
        out.append(_row("left" if persisted else "changed", clean(phrase)))
    if journal_problem:
        out.append(_row("journal", clean(journal_problem)))
    elif journal is not None:
        events = ", ".join(f"{k} {len(v)}" for k, v in sorted(journal.events.items())) or "none"
        stored = f"{d.journal_format} · {d.journal_size} bytes · mode {journal.mode}"
        out.append(_row("journal", f"{stored} · events: {clean(events)}"))
        if journal.overflow:
            out.append(_row("", f"overflowed: {clean(', '.join(journal.overflow))}"))
    out.extend(comparison_lines(comparison))
    out.append(f"replay: {clean(replay)}")
    return "\n".join(out) + "\n"


def _steps_lines(steps: list[StepRow]) -> list[str]:
    out = []
    for s in steps:
        tests = s.tests()
        shown = " -> ".join(clean(t) for t in tests[:6])
        if len(tests) > 6:
            shown += f" -> ... ({len(tests)} tests)"
        detail = f" ({clean(s.detail)})" if s.detail else ""
        out.append(
            f"  {s.step:>3}. {clean(s.purpose)}: {clean(s.outcome)}{detail} in "
            f"{s.duration:.2f}s  [{shown}]"
        )
    return out


def _evidence_lines(evidence: Any) -> list[str]:
    """Stored evidence, one key per line (compact JSON values, wrapped)."""
    if evidence in (None, {}, []):
        return []
    if not isinstance(evidence, dict):
        evidence = {"evidence": evidence}
    return ["evidence:", *_nested(evidence, "  ")]


def _nested(value: Any, indent: str, depth: int = 0) -> list[str]:
    """A mapping as ``key: value`` lines, a list as ``- item`` lines, nested by
    indentation; scalars (and what lies deeper than three levels) as compact JSON."""
    out: list[str] = []
    items = (
        [(f"{clean(k)}:", value[k]) for k in sorted(value, key=str)]
        if isinstance(value, dict)
        else [("-", item) for item in value]
    )
    for label, item in items:
        if isinstance(item, (dict, list)) and item and depth < 3:
            if (
                isinstance(item, dict)
                and label == "-"
                and not any(isinstance(v, (dict, list)) and v for v in item.values())
            ):  # a flat mapping in a list: one line
                pairs = ", ".join(f"{clean(k)}: {_scalar(item[k])}" for k in sorted(item, key=str))
                out.extend(_wrap(f"{label} {pairs}", indent))
                continue
            out.append(f"{indent}{label}")
            out.extend(_nested(item, indent + "  ", depth + 1))
        else:
            out.extend(_wrap(f"{label} {_scalar(item)}", indent))
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return clean(value)
    return clean(json.dumps(value, sort_keys=True, ensure_ascii=True))


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent,
                         subsequent_indent=indent + "    ") or [indent]  # fmt: skip


def render_flake(
    flake: Any,
    *,
    test: Any,
    steps: list[StepRow],
    comparison: Comparison | None,
    replay: str,
    group: Group | None = None,
    leaks: Mapping[str, Sequence[Any]] | None = None,
) -> str:
    """``flake`` is a :class:`~hermetic_hunt.report.model.Flake`, ``test`` its
    :class:`~hermetic_hunt.report.model.TestResult` over every run (or None);
    ``group``: its finding (parametrizations, or tests that collide over one path);
    ``leaks``: :class:`~hermetic_hunt.report.model.LeakRow` lists of the test
    and its polluters and state-setters. Every list is shown whole."""
    f = flake
    evidence = evidence_of(f)
    out = [
        f"flake {f.flake_id} · {clean(f.nodeid)}",
        _row("kinds", ", ".join(f.kinds) or "none yet"),
        _row("status", flake_state(f)),
    ]
    if test is not None and test.exposure in EXPOSURE_TEXT:
        out.append(_row("exposure", exposure_words(test.exposure, evidence.get("dates"))))
    if test is not None:
        out.append(_row("attempts", rate_text(test)))
    texts = relation_texts(f, f.flake_id, limit=None)
    for label in ("polluters", "cleaners", "state-setters"):
        out.append(_row(label, texts.get(label) or "-"))
    out.extend(_row(label, texts[label]) for label in ("collides with", "dates") if label in texts)
    if group is not None and group.others:
        grouped = "parametrizations that fail the same way"
        if group.shared is not None:
            grouped = f"tests that collide over {group.shared['resource']}"
        out.append(f"{clean(grouped)} ({len(group.tests)}, one finding):")
        for t in group.tests:
            out.append(f"  {clean(t.flake.flake_id if t.flake else '-'):<6}{clean(t.nodeid)}")
    for nodeid, rows in (leaks or {}).items():
        if rows:
            who = "it" if nodeid == f.nodeid else clean(nodeid)
            out.append(f"left behind by {who}:")
            out.extend(f"  {clean(x.describe())} in {x.attempts} attempt(s)" for x in rows)
    runs = [r for r in (f.first_run_id, f.last_run_id) if r is not None]
    if runs:
        span = f"run {runs[0]}" if min(runs) == max(runs) else f"runs {min(runs)}-{max(runs)}"
        out.append(_row("found in", span))
    repro = f.reproducer
    if repro is not None:
        hash_seed = f" · PYTHONHASHSEED={repro.hash_seed}" if repro.hash_seed is not None else ""
        out.append(f"reproducer ({len(repro.steps)} step(s), one fresh process{hash_seed}):")
        for index, step in enumerate(repro.steps, start=1):
            seed = f"seed {step.seed}" if step.seed is not None else "no seed"
            journal = f" · journal of A{step.attempt_id}" if step.attempt_id is not None else ""
            out.append(
                f"  {index}. {clean(step.nodeid)}  ({step.mode} · {seed} · now "
                f"{when(step.now)}{journal})"
            )
        sig = f"{repro.exc_type} at {repro.location}" if repro.location else repro.exc_type
        out.append(f"  expected: {clean(sig) or 'a failure'}")
    stored = f", {len(steps)} step(s) stored:" if steps else ""
    out.append(_row("isolation", f"{f.probes} probe(s) in {f.probe_seconds:.1f}s{stored}"))
    out.extend(_steps_lines(steps))
    out.extend(_evidence_lines(f.evidence))
    if f.note:
        out.append(_row("note", clean(f.note)))
    out.extend(comparison_lines(comparison))
    out.append(f"replay: {clean(replay)}")
    return "\n".join(out) + "\n"
