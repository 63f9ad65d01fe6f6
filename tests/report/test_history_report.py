"""History across runs and commits: three hunts on two commits, a flake that goes away.

Runs 1 and 2 hunt commit A, where ``test_polluter`` leaves a module list
filled and ``test_victim`` fails after it; commit B fixes the polluter and
run 3 (a shard of its own, merged in like CI would) hunts it. The report
says when the flake was seen, that it is probably fixed, and how many clean
attempts are still needed to be 95% sure; ``--since B`` reports only run 3.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import hunt, rows

from hermetic_hunt import stats
from hermetic_hunt.cli import main
from hermetic_hunt.report.history import history
from hermetic_hunt.store.history import ReplayPoint, RunPoint, Tally

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

POLLUTED = """
STATE = []


def test_polluter():
    STATE.append(1)


def test_victim():
    assert not STATE
"""
FIXED = POLLUTED.replace("    STATE.append(1)\n", "    STATE.append(1)\n    STATE.clear()\n")
VICTIM = "test_state.py::test_victim"


def git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=where, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def cli(where: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The three hunts and the merged all.db, once for this module's tests (they only read)."""
    root = tmp_path_factory.mktemp("history")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / ".gitignore").write_text("*.db*\n__pycache__/\n")
    (root / "test_state.py").write_text(POLLUTED)

    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "A")
    sha_a = git(root, "rev-parse", "HEAD")
    for seed in (1, 2):
        hunt(root, "--hermetic-hunt=8", "--hermetic-hunt-db=a.db", seed=seed)
    (root / "test_state.py").write_text(FIXED)
    git(root, "commit", "-qam", "B: the polluter cleans up")
    sha_b = git(root, "rev-parse", "HEAD")
    hunt(
        root,
        "--hermetic-hunt=2",
        "--hermetic-hunt-db=b.db",
        "--hermetic-hunt-shard=2/2",
        "--hermetic-hunt-order=shuffle",
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(root)
        code, out = cli(root, "merge", "a.db", "b.db", "-o", "all.db")
    assert code == 0, out
    return {"a": sha_a, "b": sha_b, "root": root}


@pytest.fixture
def history_root(three_runs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The module's hunts' folder, as the working directory of the test."""
    root: Path = three_runs["root"]
    monkeypatch.chdir(root)
    return root


def test_a_flake_that_stops_failing_on_a_later_commit_is_probably_fixed(three_runs, history_root):
    db = history_root / "all.db"
    assert rows(db, "SELECT id, git_sha, git_branch FROM runs ORDER BY id") == [
        (1, three_runs["a"], "main"), (2, three_runs["a"], "main"), (3, three_runs["b"], "main"),
    ]  # fmt: skip
    ((failed, attempts),) = rows(
        db,
        "SELECT sum(failed), sum(attempts) FROM flake_history WHERE nodeid = ? AND run_id < 3",
        VICTIM,
    )
    clean = rows(db, "SELECT attempts, failed FROM flake_history WHERE run_id = 3")
    assert clean == [(2, 0)] and failed > 0
    rate = failed / attempts
    more = stats.attempts_for_bound(rate) - 2
    assert more > 0
    last_run = max(r for (r,) in rows(db, "SELECT run_id FROM flake_history WHERE failed > 0"))
    code, out = cli(history_root, "report", "--db", "all.db")
    assert code == 1
    lines = out[out.index("history across runs and commits:") :].splitlines()
    assert lines[1] == f"  F1 {VICTIM}"
    assert lines[2].startswith(f"      first seen run 1 ({three_runs['a'][:10]} on main, ")
    when = lines[3].split(" on main, ")[1].split(")")[0]
    assert lines[3] == (
        f"      probably fixed: 0 failures in 2 attempts on later commits ({three_runs['b'][:10]})"
        f" since run {last_run} ({three_runs['a'][:10]} on main, {when}); {more} more clean "
        f"attempts to be 95% sure a {stats.percent(rate)} flake is gone"
    )
    assert lines[4].startswith("      fail rate by run: run 1 ")
    code, out = cli(history_root, "report", "--db", "all.db", "--format", "json")
    flake = json.loads(out)["flakes"][0]
    assert flake["history"]["fixed"] == "probably-fixed"
    assert flake["history"]["more_clean_attempts_needed"] == more
    assert [p["run"] for p in flake["history"]["trend"]] == [1, 2, 3]
    code, out = cli(history_root, "report", "--db", "all.db", "--format", "html", "-o", "r.html")
    page = (history_root / "r.html").read_text()
    assert 'id="history-table"' in page and "probably fixed: 0 failures in 2 attempts" in page


def test_report_since_a_revision_or_a_date_selects_runs(three_runs, history_root):
    code, out = cli(history_root, "report", "--db", "all.db", "--since", three_runs["b"][:12])
    assert code == 0, out
    assert out.splitlines()[0].startswith(
        f"hermetic-hunt report · all.db · 1 run since {three_runs['b'][:12]} · 4 attempts"
    )
    assert "0 flaky" in out
    code, out = cli(history_root, "report", "--db", "all.db", "--since", "2000-01-01")
    assert code == 1 and "3 runs since 2000-01-01" in out.splitlines()[0]
    code, out = cli(history_root, "report", "--db", "all.db", "--since", "no-such-rev")
    assert code == 3
    assert out.strip() == (
        "Error: --since: expected a date such as 2025-01-31 or a git revision, got "
        "'no-such-rev' (not a commit in this repository)"
    )
    code, out = cli(history_root, "report", "--db", "all.db", "--since", "2999-01-01")
    assert code == 3 and "no run started since then" in out


def point(run: int, sha: str | None) -> RunPoint:
    return RunPoint(run, f"2025-01-0{run}T00:00:00+00:00", sha, None)


def test_history_rules_commits_decide_not_luck():
    runs = [point(1, "a" * 40), point(2, "a" * 40), point(3, None), point(4, "b" * 40)]
    tallies = [
        Tally("t", 1, 10, 1),
        Tally("t", 2, 10, 0),
        Tally("t", 3, 10, 0),
        Tally("t", 4, 30, 0),
    ]
    h = history("t", runs, tallies)
    assert h.rate == 0.1 and stats.runs_for_rate(0.1) == 29
    # run 2 is the same commit and run 3 has none: only run 4 counts, 30 >= 29
    assert (h.status, h.clean, h.needed, h.later) == ("fixed", 30, 0, ("b" * 40,))
    assert h.status_text().startswith("fixed: 0 failures in 30 attempts on later commits")
    same = history("t", runs[:3], tallies[:3])
    assert (same.status, same.clean) == ("flaky", 0)
    replayed = history("t", runs, tallies, [ReplayPoint("F1", "2025-01-05T00:00:00+00:00",
                                                        "reproduced", "b" * 40)])  # fmt: skip
    assert replayed.status == "flaky" and replayed.last is not None and replayed.last.run_id is None
    assert history("t", runs, [Tally("t", 1, 5, 0)]).status == ""
