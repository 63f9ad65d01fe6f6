"""Findings as CI will see them: grouped parametrizations, bounded lists,
exposure, leaks next to their polluters, the isolation's time budget."""

from __future__ import annotations

import calendar
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import hunt, one, rows

from hermetic_hunt.cli import main

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow


def glob(text: str) -> str:
    """``text`` as a literal inside an fnmatch pattern."""
    return "".join(f"[{ch}]" if ch in "[]*?" else ch for ch in text)


def cli(*args: str) -> str:
    outcome = CliRunner().invoke(main, list(args))
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), outcome.output
    return outcome.output


@pytest.fixture
def here(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeini("[pytest]\npythonpath = .\n")
    monkeypatch.chdir(pytester.path)
    return pytester


REGISTRY = """
import pytest

import state


def test_victim():
    assert not state.POLLUTED, "polluted"


def test_polluter():
    state.POLLUTED.append(1)


@pytest.mark.parametrize("n", range(76))
def test_register(n):
    assert n not in state.SEEN, "registered twice"
    state.SEEN.add(n)
"""


def test_seventy_six_parametrizations_failing_only_when_repeated_are_one_finding_below_a_victim(
    here: pytest.Pytester,
) -> None:
    here.makepyfile(state="POLLUTED = []\nSEEN = set()\n", test_mini=REGISTRY)
    result = hunt(here, "--hermetic-hunt=4")
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: isolating 77 test(s) in 2 finding(s) (76 of them "
            "parametrizations that fail alike) · *",
            "hermetic-hunt: 1 flaky · 0 broken · 0 sandbox-incompatible · 76 not idempotent · "
            "1 stable · 0 with network violations",
            "hermetic-hunt: what CI will see: 1 fails under shuffling or xdist · 1 fails only "
            "when rerun in one process (pytest-rerunfailures, --count)",
            "hermetic-hunt isolation: 77 tests in 2 findings · *",
            "  F1 test_mini.py::test_victim  victim · fails under shuffling or xdist (*",
            "  F2 test_mini.py::test_register[[]0[]]  self-polluting · fails only when rerun "
            "in one process (pytest-rerunfailures, --count) (*",
            "      and 75 more parametrizations of test_mini.py::test_register that fail the same "
            "way (75 flakes, e.g. F3, F4, F5; 3 confirmed by a probe): hermetic-hunt show F2 "
            "lists them",
        ]
    )
    db = here.path / "flakes.db"
    # The database keeps every instance, each with the kinds its representative showed.
    assert one(db, "SELECT count(*) FROM flakes") == 77
    kinds = rows(db, "SELECT DISTINCT kinds FROM flakes fl JOIN tests t ON t.id = fl.test_id "
                     "WHERE t.nodeid LIKE 'test_mini.py::test_register[%'")  # fmt: skip
    assert kinds == [('["self-polluting"]',)]
    # Isolated once: the representative's probes, and one probe per sampled instance.
    probes = [n for (n,) in rows(db, "SELECT probes FROM flakes WHERE flake_id != 'F1'")]
    assert sorted(probes, reverse=True)[:5] == [max(probes), 1, 1, 1, 0]
    text = cli("report")
    sections = [line for line in text.splitlines() if line.startswith("fails ")]
    assert sections == [
        "fails under shuffling or xdist (1 finding):",
        "fails only when rerun in one process (pytest-rerunfailures, --count) (1 finding):",
    ]
    assert "  F2  test_mini.py::test_register  (76 parametrizations that fail the same way)" in (
        text
    )
    data = json.loads(cli("report", "--format", "json"))
    (group,) = [f for f in data["findings"] if f["exposure"] == "repeat"]
    assert len(group["tests"]) == 76 and group["nodeid"] == "test_mini.py::test_register"
    assert [f["exposure"] for f in data["findings"]] == ["order", "repeat"]
    shown = cli("show", "F2")
    assert "parametrizations that fail the same way (76, one finding):" in shown
    assert sum("test_mini.py::test_register[" in line for line in shown.splitlines()) >= 76
    html = cli("report", "--format", "html", "-o", "report.html")
    assert "report.html" in html
    # ids are laid out in unbreakable pieces that may wrap between them
    page = re.sub(r"<wbr>|</?span[^>]*>", "", (here.path / "report.html").read_text())
    assert "test_mini.py::test_register (76 parametrizations)</summary>" in page


CLEANERS = 50
#: The victim runs first in file order, the polluter right after it, then
#: fifty tests that each put the state back: the reverse of the collection
#: order runs the polluter right before the victim.
CLEANED = """
import state


def test_victim():
    assert not state.POLLUTED, "polluted"


def test_polluter():
    state.POLLUTED.append(1)
""" + "".join(
    f"\n\ndef test_reset_{i:02d}():\n    state.POLLUTED.clear()\n" for i in range(CLEANERS)
)


def test_a_flake_with_fifty_cleaners_shows_a_few_and_the_count_and_show_lists_all(
    here: pytest.Pytester,
) -> None:
    here.makepyfile(state="POLLUTED = []\n", test_mini=CLEANED)
    # A reversed round (the victim fails), then the collection order (it passes).
    # An explicit time: the cleaner search must not depend on the machine's load.
    result = hunt(
        here, "--hermetic-hunt=2", "--hermetic-hunt-order=reversed",
        "--hermetic-hunt-isolate-budget=200,10m",
    )  # fmt: skip
    bounded = (
        "cleaners: 50 cleaners, e.g. test_mini.py::test_reset_00, test_mini.py::test_reset_01, "
        "test_mini.py::test_reset_02; hermetic-hunt show F1 lists all"
    )
    summary = [line.strip() for line in result.outlines if line.strip().startswith("cleaners")]
    assert summary == [bounded], result.stdout.str()[-3000:]
    assert f"      {bounded}" in cli("report").splitlines()
    markdown = cli("report", "--format", "markdown")
    assert "50 cleaners, e.g. " in markdown and "test\\_reset\\_49" not in markdown
    data = json.loads(cli("report", "--format", "json"))
    assert len(data["flakes"][0]["cleaners"]) == CLEANERS
    shown = cli("show", "F1")
    (line,) = [line for line in shown.splitlines() if line.startswith("cleaners:")]
    assert line.count("test_reset_") == CLEANERS
    cli("report", "--format", "html", "-o", "report.html")
    page = (here.path / "report.html").read_text()
    assert "<details><summary>50 cleaners</summary>" in page


#: Two victims of one polluter, each failing only after it; every run of a
#: test costs 50 ms of CPU time, so their isolation (about 20 probes each)
#: cannot fit in one second.
BUSY = """
import time

import state


def busy():
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass


def test_polluter():
    state.POLLUTED.append(1)
""" + "".join(
    f"""

def test_victim_{i}():
    busy()
    assert not state.POLLUTED, "polluted"
"""
    for i in range(2)
)


def test_an_isolation_over_its_time_budget_stops_stores_what_it_has_and_says_so(
    here: pytest.Pytester,
) -> None:
    here.makepyfile(state="POLLUTED = []\n", test_busy=BUSY)
    result = hunt(here, "--hermetic-hunt=4", "--hermetic-hunt-isolate-budget=1s")
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: isolating * test(s) in * finding(s) · budget 200 probes "
            "each, 1s in all",
            "hermetic-hunt isolation: * tests · * probes * in *",
            "  time budget of 1s reached: * not (fully) isolated; finish with: hermetic-hunt "
            "isolate (--hermetic-hunt-isolate-budget sets it)",
        ]
    )
    db = here.path / "flakes.db"
    statuses = {status for (status,) in rows(db, "SELECT status FROM flakes")}
    assert statuses & {"pending", "partial"}
    notes = [note for (note,) in rows(db, "SELECT note FROM flakes WHERE status = 'pending'")]
    assert all("isolation time budget of 1s reached" in note for note in notes)
    # The budget is stored with the run, and `hermetic-hunt isolate` may lift it.
    settings = json.loads(one(db, "SELECT settings FROM runs"))
    assert settings["isolate_seconds"] == 1.0
    finished = cli("isolate", "--budget", "200,10m")
    assert "time budget" not in finished
    assert {status for (status,) in rows(db, "SELECT status FROM flakes")} == {"isolated"}


LEAKY = """
import os


def test_reads_the_currency():
    assert os.environ.get("SHOP_CURRENCY", "USD") == "USD"


def test_sets_the_currency():
    os.environ["SHOP_CURRENCY"] = "GBP"
""" + "".join(f"\n\ndef test_other_{i}():\n    pass\n" for i in range(12))


def test_a_polluter_that_leaks_a_variable_is_tried_first_and_named_with_what_it_left(
    here: pytest.Pytester,
) -> None:
    here.makepyfile(test_env=LEAKY)
    result = hunt(here, "--hermetic-hunt=3")
    left = "left os.environ['SHOP_CURRENCY'] set"
    result.stdout.fnmatch_lines(
        [
            "  F1 test_env.py::test_reads_the_currency  victim · *",
            f"      polluters: test_env.py::test_sets_the_currency ({left} ('GBP'))",
            "tests that leave state behind (1), even where nothing failed yet:",
            "  test_env.py::test_sets_the_currency",
            f"      {glob(left)} ('GBP') in * attempt(s), first A*",
        ]
    )
    db = here.path / "flakes.db"
    purposes = [p for (p,) in rows(db, "SELECT purpose FROM isolation_steps ORDER BY step")]
    sequences = [p for p in purposes if p.startswith("preceding sequence")]
    assert sequences[0] == "preceding sequence (tests that leaked state)"
    assert len(sequences) == 1  # the leaking test was enough: no whole replay
    evidence = json.loads(one(db, "SELECT evidence FROM flakes WHERE flake_id = 'F1'"))
    assert evidence["polluter_leaks"] == {
        "test_env.py::test_sets_the_currency": [f"{left} ('GBP')"]
    }
    report = cli("report")
    assert "tests that leave state behind (1), even where nothing failed yet:" in report
    data = json.loads(cli("report", "--format", "json"))
    assert [(x["nodeid"], x["description"]) for x in data["leaks"]] == [
        ("test_env.py::test_sets_the_currency", f"{left} ('GBP')")
    ]
    markdown = cli("report", "--format", "markdown")
    assert "### Tests that leave state behind (1)" in markdown
    attempt = one(
        db,
        "SELECT min(l.attempt_id) FROM leaks l WHERE l.name = 'SHOP_CURRENCY' AND persisted = 1",
    )
    assert f"left:          {left} ('GBP')" in cli("show", f"A{attempt}")
    shown = cli("show", "F1")
    assert "left behind by test_env.py::test_sets_the_currency:" in shown


MONTH_END = """
from datetime import date


def next_day(today):
    return date(today.year, today.month, today.day + 1)


def test_next_day_is_later():
    today = date.today()
    assert next_day(today) > today
"""


def test_a_date_bound_flake_gets_the_next_real_date_it_fails(here: pytest.Pytester) -> None:
    here.makepyfile(test_dates=MONTH_END)
    hunt(here, "--hermetic-hunt=30")
    db = here.path / "flakes.db"
    evidence = json.loads(one(db, "SELECT evidence FROM flakes WHERE flake_id = 'F1'"))
    assert json.loads(one(db, "SELECT kinds FROM flakes WHERE flake_id = 'F1'")) == ["time"]
    dates = evidence["dates"]
    now = datetime.now(timezone.utc)
    last = calendar.monthrange(now.year, now.month)[1]
    if now.day == last:
        pytest.skip("the machine's clock is on a month's last day: the next failure is now")
    assert dates["next_failure"].startswith(f"{now.year:04d}-{now.month:02d}-{last:02d}")
    assert evidence["exposure"] == "dates"
    report = cli("report")
    days = (datetime.fromisoformat(dates["next_failure"]).date() - now.date()).days
    ahead = f"in {days} day{'s' if days != 1 else ''}"
    assert f"fails on {dates['next_failure'][:10]} ({ahead}) (1 finding):" in report
    assert f"      next real failure: {dates['next_failure'][:10]} " in report


PAST_AND_STREAM = {
    "test_release": """
from datetime import datetime


def test_the_release_is_in_the_past():
    assert datetime(2019, 6, 1) < datetime.now()
""",
    "test_stream": """
import random

random.seed(1234)  # once, at import: one stream for the whole session


def test_draws_a_number():
    assert random.random() >= 0.0


def test_lucky():
    # passes only after a draw: the seeded stream's first value is 0.966
    assert random.random() < 0.5
""",
}


def test_a_failure_only_before_today_is_past_dates_only_and_a_stream_seeded_at_import_is_order(
    here: pytest.Pytester,
) -> None:
    here.makepyfile(**PAST_AND_STREAM)
    result = hunt(
        here, "--hermetic-hunt=8", "--hermetic-hunt-today=2019-01-01",
        "--hermetic-hunt-horizon=1y", seed=3,
    )  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: what CI will see: 1 fails under shuffling or xdist · apart: 1 past "
            "dates only (failed only before today)",
            "  F* test_release.py::test_the_release_is_in_the_past  time · past dates only (*",
            "      failed only at dates before *; no failure from * through * (* instants "
            "replayed): not a CI risk",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "  F* test_stream.py::test_lucky  brittle · fails under shuffling or xdist (*",
            "      state-setters: test_stream.py::test_draws_a_number (moved the global random "
            "stream on (drew 2 word(s); seeded at import at test_stream.py:3))",
        ]
    )
    data = json.loads(cli("report", "--format", "json"))
    exposures = {f["nodeid"]: f["exposure"] for f in data["findings"]}
    assert exposures == {
        "test_release.py::test_the_release_is_in_the_past": "past",
        "test_stream.py::test_lucky": "order",
    }
    report = cli("report")
    assert "past dates only, not what CI will see (1 finding):" in report
    # Never quarantined; the list keeps the order-dependent one.
    listed = cli("quarantine")
    assert "test_the_release_is_in_the_past: past dates only" in listed
    assert "test_stream.py::test_lucky  #" in listed


def test_a_hunt_whose_only_failures_are_past_dates_exits_zero(here: pytest.Pytester) -> None:
    here.makepyfile(test_release=PAST_AND_STREAM["test_release"])
    result = hunt(
        here, "--hermetic-hunt=6", "--hermetic-hunt-today=2019-01-01",
        "--hermetic-hunt-horizon=1y", seed=3,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    db = here.path / "flakes.db"
    assert one(db, "SELECT exit_status FROM runs") == 0
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome = 'failed'") > 0
    outcome = CliRunner().invoke(main, ["report"])
    assert outcome.exit_code == 0, outcome.output


COLLECTED_PID = """
import os

PID = os.getpid()  # at collection: a plain run's tests run in this very process


def test_runs_where_it_was_collected():
    assert os.getpid() == PID


def test_always_fails():
    assert False, "always"
"""


def test_a_test_that_needs_the_collecting_process_is_checked_in_it_not_called_broken(
    here: pytest.Pytester,
) -> None:
    # Every round forks from one collection, so the hunt always fails it; its
    # sandbox-off check runs where a plain run would (the collecting process).
    here.makepyfile(test_pid=COLLECTED_PID)
    result = hunt(here, "--hermetic-hunt=2")
    result.stdout.fnmatch_lines(
        ["hermetic-hunt: 0 flaky · 1 broken · 1 sandbox-incompatible · 0 stable · *"]
    )
    checks = dict(
        rows(
            here.path / "flakes.db",
            "SELECT t.nodeid, c.outcome FROM test_checks c JOIN tests t ON t.id = c.test_id",
        )
    )
    assert checks == {
        "test_pid.py::test_runs_where_it_was_collected": "passed",
        "test_pid.py::test_always_fails": "failed",
    }


def test_old_stored_settings_without_a_time_budget_still_read(tmp_path: Path) -> None:
    from hermetic_hunt.models import Settings

    settings = Settings.from_json({"rounds": 3, "base_seed": 5, "isolate_budget": 50})
    assert (settings.isolate_budget, settings.isolate_seconds) == (50, None)
    again = Settings.from_json({**settings.to_json(), "isolate_seconds": 90.0})
    assert again.isolate_seconds == 90.0
    assert Settings.from_json({"isolate_seconds": "soon"}).isolate_seconds is None
