"""A flake's history across runs and commits, and whether it looks fixed (pure).

From the runs (each with its commit), a test's per-run tallies and the
stored replays of its flake, :func:`history` works out:

* **first seen / last seen** -- the first and the last run (or replay)
  where it failed, with commit and date;
* the **trend** -- its fail rate run by run (the HTML report draws it);
* **fixed?** -- after its last failure, clean attempts on *later* commits
  (a commit other than the one it last failed on; runs on the same commit
  prove nothing about a fix) count towards the number that makes 95% sure
  a flake failing at its recorded rate is gone
  (:func:`~hermetic_hunt.stats.attempts_for_bound`: 29 for a 10% flake).
  ``fixed`` once there are enough, ``probably-fixed`` before that,
  ``flaky`` while none; a run without a commit cannot tell a fix from luck.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from hermetic_hunt import stats, vcs
from hermetic_hunt.errors import BadOption
from hermetic_hunt.store.history import ReplayPoint, RunPoint, Tally

#: Whether a flake looks fixed (``History.status``; "": it never failed). Not a
#: test's status in a report (:data:`hermetic_hunt.report.model.STATUSES`).
Fixed = Literal["flaky", "probably-fixed", "fixed", ""]


@dataclass(frozen=True)
class Seen:
    """Where a failure was seen: a run (or a replay: ``run_id`` None)."""

    run_id: int | None
    started_at: str
    git_sha: str | None
    git_branch: str | None = None

    def describe(self) -> str:
        what = f"run {self.run_id}" if self.run_id is not None else "a replay"
        facts = [
            f"{self.git_sha[:10]}" + (f" on {self.git_branch}" if self.git_branch else "")
            if self.git_sha
            else "no commit recorded"
        ]
        if self.started_at:
            facts.append(self.started_at[:16].replace("T", " "))
        return f"{what} ({', '.join(facts)})"


@dataclass(frozen=True)
class TrendPoint:
    run_id: int
    started_at: str
    git_sha: str | None
    attempts: int
    failed: int

    @property
    def rate(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0


@dataclass(frozen=True)
class History:
    """One test's history (see the module docstring)."""

    nodeid: str
    first: Seen | None
    last: Seen | None
    trend: tuple[TrendPoint, ...]
    status: Fixed
    rate: float
    clean: int
    needed: int
    later: tuple[str, ...]

    def status_text(self) -> str:
        if not self.status:
            return ""
        rate = stats.percent(self.rate)
        commits = ", ".join(sha[:10] for sha in self.later[:3])
        since = f" since {self.last.describe()}" if self.last else ""
        if self.status == "flaky":
            if self.last is not None and self.last.git_sha is None:
                return (
                    "still flaky: its last failure has no commit recorded, so a later clean run "
                    "cannot tell a fix from luck"
                )
            return f"still flaky: no clean run on a later commit{since}"
        clean = (
            f"0 failures in {self.clean} attempt{'s' * (self.clean != 1)} on later commits "
            f"({commits}){since}"
        )
        if self.status == "fixed":
            return f"fixed: {clean}: 95% sure a {rate} flake is gone"
        return (
            f"probably fixed: {clean}; {self.needed} more clean attempt"
            f"{'s' * (self.needed != 1)} to be 95% sure a {rate} flake is gone"
        )

    def lines(self) -> list[str]:
        out = []
        if self.first is not None and self.last is not None:
            seen = f"first seen {self.first.describe()}"
            if self.last != self.first:
                seen += f" · last seen {self.last.describe()}"
            out.append(seen)
        if text := self.status_text():
            out.append(text)
        return out


def history(
    nodeid: str,
    runs: Sequence[RunPoint],
    tallies: Iterable[Tally],
    replays: Iterable[ReplayPoint] = (),
) -> History:
    """The history of ``nodeid`` (its ``tallies`` and its flake's ``replays``)."""
    by_run = {r.run_id: r for r in runs}
    mine = [
        t for t in sorted(tallies, key=lambda t: t.run_id)
        if t.nodeid == nodeid and t.run_id in by_run and (t.attempts or t.repeated_failed)
    ]  # fmt: skip
    trend = tuple(
        TrendPoint(
            t.run_id, by_run[t.run_id].started_at, by_run[t.run_id].git_sha, t.attempts, t.failed
        )
        for t in mine
        if t.attempts
    )
    # Events in time: (started_at, order, seen, attempts, failed, failed in a repeated run)
    events: list[tuple[str, int, Seen, int, int, int]] = []
    for tally in mine:
        run = by_run[tally.run_id]
        seen = Seen(run.run_id, run.started_at, run.git_sha, run.git_branch)
        point = (tally.attempts, tally.failed, tally.repeated_failed)
        events.append((run.started_at, run.run_id, seen, *point))
    for replay in replays:
        if replay.outcome not in ("reproduced", "not-reproduced"):
            continue
        seen = Seen(None, replay.started_at, replay.git_sha)
        events.append((replay.started_at, 1 << 40, seen, 1, int(replay.outcome == "reproduced"), 0))
    events.sort(key=lambda e: (e[0], e[1]))
    failing = [e for e in events if e[4] or e[5]]  # a failed repeated run is no clean run
    if not failing:
        return History(nodeid, None, None, trend, "", 0.0, 0, 0, ())
    first, last = failing[0], failing[-1]
    until = [e for e in events if (e[0], e[1]) <= (last[0], last[1]) and e[2].run_id is not None]
    attempts, failed = sum(e[3] for e in until), sum(e[4] for e in until)
    if not failed:  # it failed only when repeated: the rate of those runs
        attempts, failed = attempts + sum(e[5] for e in until), sum(e[5] for e in until)
    rate = failed / attempts if attempts else 1.0
    after = [e for e in events if (e[0], e[1]) > (last[0], last[1])]
    sha = last[2].git_sha
    later = [e for e in after if sha is not None and e[2].git_sha not in (None, sha)]
    clean = sum(e[3] for e in later)
    total = stats.runs_for_rate(rate)  # clean attempts that make 95% sure it is gone
    status: Fixed = "flaky" if not clean else "fixed" if clean >= total else "probably-fixed"
    commits = tuple(dict.fromkeys(e[2].git_sha for e in later if e[2].git_sha))
    return History(
        nodeid, first[2], last[2], trend, status, rate, clean, max(0, total - clean), commits
    )


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?")


def runs_since(since: str, runs: Sequence[RunPoint], places: Sequence[str]) -> list[int]:
    """Ids of the runs ``since`` a date (``2025-01-31``, ``2025-01-31T12:00``) or a git
    revision (runs on that commit or a descendant of it). ``places``: directories to
    look the revision up in (the current one first). BadOption when nothing matches.
    """
    text = since.strip()
    span = f"{runs[0].started_at[:10]} to {runs[-1].started_at[:10]}" if runs else "none"
    if _DATE.fullmatch(text):
        start = text.replace(" ", "T")
        chosen = [r.run_id for r in runs if r.started_at >= start]
        if not chosen:
            raise BadOption(
                f"--since {since}: no run started since then (the runs are from {span})"
            )
        return chosen
    for place in places:
        sha = vcs.commit_of(text, place)
        if sha is None:
            continue
        shas = dict.fromkeys(run.git_sha for run in runs if run.git_sha is not None)
        later = {other for other in shas if vcs.is_ancestor(sha, other, place)}
        chosen = [run.run_id for run in runs if run.git_sha in later]
        if not chosen:
            raise BadOption(
                f"--since {since}: no run on {sha[:10]} or a later commit (runs "
                "without a commit, or on commits this repository does not have, "
                "do not count)"
            )
        return chosen
    raise BadOption(
        f"--since: expected a date such as 2025-01-31 or a git revision, got {since!r} (not a "
        "commit in this repository)"
    )
