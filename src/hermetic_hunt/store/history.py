"""The SQL of history: runs with their commits, per-run tallies, replays.

What :mod:`hermetic_hunt.report.history` turns into first seen / last seen,
a trend and a *fixed?* status per flake; and the run selection behind
``report --since DATE|REV``. Values are checked for type (a database from
CI is untrusted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hermetic_hunt.models import PLAIN_SQL
from hermetic_hunt.store.core import Store
from hermetic_hunt.store.rows import FAIL_SQL, PASS_SQL, chunks
from hermetic_hunt.untrusted import json_or, text_or


@dataclass(frozen=True)
class RunPoint:
    """A run: when it started, on which commit and branch (None: unknown)."""

    run_id: int
    started_at: str
    git_sha: str | None
    git_branch: str | None


@dataclass(frozen=True)
class Tally:
    """One test's plain attempts in one run, and its repeated runs that failed."""

    nodeid: str
    run_id: int
    attempts: int
    failed: int
    #: Failures of a twice round's repeated run: not in the rate, but such a run is no clean run.
    repeated_failed: int = 0


@dataclass(frozen=True)
class ReplayPoint:
    """A stored replay of a flake: when, on which commit, and whether it failed again."""

    flake_id: str
    started_at: str
    outcome: str
    git_sha: str | None


def runs(store: Store) -> list[RunPoint]:
    rows = store.conn.execute("SELECT id, started_at, git_sha, git_branch FROM runs ORDER BY id")
    return [
        RunPoint(run_id, text_or(started_at), text_or(sha) or None, text_or(branch) or None)
        for run_id, started_at, sha, branch in rows
        if isinstance(run_id, int)
    ]


def tallies(store: Store, nodeids: Sequence[str]) -> list[Tally]:
    """Per run, the plain attempts of each of ``nodeids`` that counted (passed or
    failed), and its repeated runs that failed."""
    plain = f"({PLAIN_SQL})"
    return [
        Tally(str(nodeid), run_id, int(counted or 0), int(failed or 0), int(repeated or 0))
        for chunk, marks in chunks(dict.fromkeys(nodeids))
        for nodeid, run_id, counted, failed, repeated in store.conn.execute(
            f"SELECT t.nodeid, a.run_id, sum({plain} AND (a.outcome IN {PASS_SQL} "  # noqa: S608
            f"OR a.outcome IN {FAIL_SQL})), sum({plain} AND a.outcome IN {FAIL_SQL}), "
            f"sum(NOT {plain} AND a.outcome IN {FAIL_SQL}) "
            "FROM attempts a JOIN tests t ON t.id = a.test_id "
            f"WHERE t.nodeid IN ({marks}) "
            "GROUP BY t.nodeid, a.run_id ORDER BY t.nodeid, a.run_id",
            chunk,
        )
        if isinstance(run_id, int)
    ]


def replays(store: Store) -> list[ReplayPoint]:
    """Replays of flakes, oldest first, with the commit each ran on."""
    out = []
    rows = store.conn.execute(
        "SELECT fl.flake_id, r.started_at, r.outcome, r.environment FROM replays r "
        "JOIN flakes fl ON fl.id = r.flake_id ORDER BY r.id"
    ).fetchall()
    for flake_id, started_at, outcome, environment in rows:
        env = json_or(environment, {})
        sha = env.get("git_sha") if isinstance(env, dict) else None
        out.append(ReplayPoint(str(flake_id), text_or(started_at), text_or(outcome),
                               text_or(sha) or None))  # fmt: skip
    return out
