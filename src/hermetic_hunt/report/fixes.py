"""The "suggested fixes" and "history" sections every report format shows (pure).

:func:`fix_views` pairs each flake's :class:`~hermetic_hunt.fix.suggest.Suggestion`
with the stored verification of exactly its patch (``hermetic-hunt fix``
stores one; a verification of an older patch does not count). The text
and Markdown reports lay both sections out; the HTML template and the JSON
format read the same views (:func:`fix_json`, :func:`history_json`).
Everything from the database or the source goes through the format's
escaping.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby

from hermetic_hunt import stats
from hermetic_hunt.findings import FixFacts, StoredFix
from hermetic_hunt.fix.suggest import Suggestion, suggest
from hermetic_hunt.models import DEFAULT_DB
from hermetic_hunt.report.history import History, Seen


@dataclass(frozen=True)
class FixView:
    """A flake's suggestion, its verification, and the command that verifies it.

    ``also``: the flake ids of the other tests of its finding -- the
    parametrizations of its test function that fail the same way, or the
    tests that collide over the same path (``members`` says which): one
    finding, one suggestion, shown once for the group (``function``: its name).
    """

    suggestion: Suggestion
    verification: StoredFix | None
    command: str
    also: tuple[str, ...] = ()
    function: str = ""
    members: str = "parametrizations"

    @property
    def label(self) -> str:
        """``F3`` or ``F3 (+75 parametrizations: F4-F78)``: what a report names."""
        flake_id, also = self.suggestion.flake_id, self.also
        return f"{flake_id} (+{len(also)} {self.members}: {id_span(also)})" if also else flake_id

    @property
    def nodeid(self) -> str:
        return self.function or self.suggestion.nodeid

    @property
    def status(self) -> str:
        s = self.suggestion
        if s.patch is None:
            return s.reason
        if not s.verifiable:
            return f"not verified: {s.reason.removeprefix('not run to verify it: ')}"
        if self.verification is not None:
            applied = " (applied)" if self.verification.applied else ""
            return self.verification.describe() + applied
        return f"not verified yet: {self.command} runs the reproducer on a patched copy"


def fix_views(
    facts: Sequence[FixFacts], stored: Mapping[str, Sequence[StoredFix]], db_arg: str
) -> dict[str, FixView]:
    """``{flake id: view}``: ``db_arg`` is how the commands name the database."""
    where = [] if db_arg in ("", DEFAULT_DB) else ["--db", db_arg]
    out = {}
    for fact in facts:
        suggestion = suggest(fact)
        sha = suggestion.patch.sha if suggestion.patch is not None else None
        mine = (f for f in stored.get(fact.flake_id, ()) if sha is not None and f.patch_sha == sha)
        verification = next(mine, None)  # the stored verification of exactly this patch
        out[fact.flake_id] = FixView(
            suggestion, verification, shlex.join(["hermetic-hunt", "fix", fact.flake_id, *where])
        )
    return out


def id_span(ids: Sequence[str]) -> str:
    """``F4-F6, F9``: flake ids, consecutive runs shortened."""
    numbers = sorted({int(i[1:]) for i in ids if i[1:].isdigit()})
    # consecutive numbers keep one difference from their index in the sorted list
    runs = [[n for _, n in run] for _, run in groupby(enumerate(numbers), lambda p: p[1] - p[0])]
    out = [f"F{run[0]}" if len(run) == 1 else f"F{run[0]}-F{run[-1]}" for run in runs]
    return ", ".join(out + [i for i in ids if not i[1:].isdigit()])


def trend_text(h: History) -> str:
    return ", ".join(f"run {p.run_id} {stats.percent(p.rate)}" for p in h.trend[-12:])


# -- json ------------------------------------------------------------------------------------


def fix_json(view: FixView) -> dict[str, object]:
    s, v = view.suggestion, view.verification
    return {
        "kind": s.kind,
        "summary": s.summary,
        "changes": [{"where": c.where, "what": c.what, "fix": c.fix} for c in s.changes],
        "advice": list(s.advice),
        "diff": s.diff or None,
        "verifiable": s.verifiable,
        "reason": s.reason,
        "status": view.status,
        "command": view.command,
        "verification": None
        if v is None
        else {
            "outcome": v.outcome,
            "runs": v.runs,
            "passed": v.passed,
            "control": v.control,
            "detail": v.detail,
            "at": v.created_at,
            "git_sha": v.git_sha,
            "applied": v.applied,
        },
    }


def history_json(h: History) -> dict[str, object]:
    def seen(s: Seen | None) -> object:
        if s is None:
            return None
        return {
            "run": s.run_id,
            "at": s.started_at,
            "git_sha": s.git_sha,
            "git_branch": s.git_branch,
        }

    return {
        "first_seen": seen(h.first),
        "last_seen": seen(h.last),
        "fixed": h.status or None,
        "recorded_rate": round(h.rate, 6) if h.status else None,
        "clean_attempts": h.clean,
        "more_clean_attempts_needed": h.needed,
        "later_commits": list(h.later),
        "trend": [
            {"run": p.run_id, "git_sha": p.git_sha, "attempts": p.attempts, "failed": p.failed}
            for p in h.trend
        ],
    }


# -- html ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One run in a flake's trend (SVG units): its fail rate as a bar."""

    x: int
    height: float
    title: str
    failed: bool


@dataclass(frozen=True)
class TrendRow:
    label: str
    history: History
    bars: tuple[Bar, ...]
    width: int


#: Runs drawn per trend (the newest).
TREND_RUNS = 40
TREND_HEIGHT = 24


def trend_rows(items: Sequence[tuple[str, History]]) -> list[TrendRow]:
    """The HTML report's history table: one row per flake, a bar per run."""
    out = []
    for label, h in items:
        points = h.trend[-TREND_RUNS:]
        bars = tuple(
            Bar(
                x=i * 12,
                height=round(max(1.0, p.rate * TREND_HEIGHT), 1),
                title=f"run {p.run_id}"
                + (f" ({p.git_sha[:10]})" if p.git_sha else "")
                + f": {p.failed}/{p.attempts} failed ({stats.percent(p.rate)})",
                failed=p.failed > 0,
            )
            for i, p in enumerate(points)
        )
        out.append(TrendRow(label, h, bars, max(12, len(bars) * 12)))
    return out
