"""The report: what it says, in each format, from rows stored the way hunts store them."""

from __future__ import annotations

import json
import re
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import (
    BROKEN,
    CLEANER,
    INCOMPATIBLE,
    LONELY,
    POLLUTER,
    STABLE,
    VICTIM,
    VIOLATOR,
    Rows,
    sample,
)

from hermetic_hunt.errors import BadDatabase, UnknownId
from hermetic_hunt.models import Failure, Violation
from hermetic_hunt.report import model, render
from hermetic_hunt.report.html import bars, breakable, command, folded
from hermetic_hunt.report.load import load_report
from hermetic_hunt.report.model import Report
from hermetic_hunt.report.text import list_lines
from hermetic_hunt.report.words import calendar_text, rate_text


@pytest.fixture
def db(tmp_path: Path) -> Path:
    rows = sample(tmp_path / "flakes.db")
    rows.close()
    return tmp_path / "flakes.db"


def report_of(db: Path, run: int | None = None) -> Report:
    from hermetic_hunt.store import Store

    with Store.open(db, create=False) as store:
        return load_report(store, run, str(db.parent))


def test_each_test_gets_its_status_from_its_attempts_and_its_sandbox_off_check(db):
    statuses = {t.nodeid: t.status for t in report_of(db).tests}
    assert statuses == {
        VICTIM: "flaky",
        LONELY: "flaky",
        POLLUTER: "stable",
        CLEANER: "stable",
        STABLE: "stable",
        VIOLATOR: "stable",
        BROKEN: "broken",
        INCOMPATIBLE: "sandbox-incompatible",
        "tests/test_skip.py::test_never_runs": "skipped",
    }


def test_the_text_report_explains_a_flake_and_ends_in_a_replay_command(db):
    text = render(report_of(db), "text")
    assert (
        "what CI will see: 1 fails in normal runs · 2 fail under shuffling or xdist · 1 fails "
        "only under the sandbox\n"
    ) in text
    block = text.split("fails under shuffling or xdist (2 findings):\n", 1)[1]
    assert block.startswith(
        f"  F1  {VICTIM}\n"
        "      victim · isolated · reproducer confirmed\n"
        "      failed 7 of 10 attempts: 70% (95% CI 40%–89%)\n"
        f"      polluters: {POLLUTER}\n"
        f"      cleaners: {CLEANER}\n"
        "      failure: AssertionError: assert False at tests/test_settings.py:10\n"
        "      replay: pytest --hermetic-replay-db=flakes.db::F1\n"
        f"  -   {LONELY}\n"
        "      not isolated\n"
        "      failed 1 of 10 attempts: 10% (95% CI 1.8%–40%)\n"
    )
    assert re.search(r"replay: pytest --hermetic-replay-db=flakes\.db::A\d+\n", block)
    assert "(not isolated: the hunt ran with --hermetic-hunt-isolate=off" in text


def test_the_text_report_lists_broken_incompatible_violating_stable_and_skipped_tests(db):
    text = render(report_of(db), "text")
    assert (
        text.splitlines()[0] == "hermetic-hunt report · flakes.db · 1 run · 90 attempts of 9 tests"
    )
    assert (
        "2 flaky · 1 broken · 1 sandbox-incompatible · 4 stable · 1 skipped · 1 with network violations"
        in text
    )
    broken = text.split("fails in normal runs (1 finding):\n")[1]
    assert broken.startswith(
        f"  -   {BROKEN}\n      broken: failed in every attempt, with and without the sandbox\n"
        "      failed 10 of 10 attempts"
    )
    incompatible = text.split("fails only under the sandbox (1 finding):\n")[1]
    assert incompatible.startswith(
        f"  -   {INCOMPATIBLE}\n      sandbox-incompatible: fails under the sandbox, passes "
        "without it\n"
    )
    assert (
        f"  {VIOLATOR}\n      create_connection status.example.invalid:443 in 10 attempt(s), first A"
        in text
    )
    assert (
        "never failed (how sure that is):\n"
        "  4 tests: 0/10 failures: flake rate < 26% at 95%; 289 more clean attempts each "
        "would tighten it to < 1%\n"
    ) in text
    assert "skipped in every attempt (1):\n  tests/test_skip.py::test_never_runs\n" in text


def test_the_bound_of_fifty_clean_attempts_is_six_percent(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run(rounds=50)
    rows.attempts(run, STABLE, "P" * 50)
    rows.close()
    report = report_of(tmp_path / "flakes.db")
    assert not report.findings
    assert (
        "  1 test: 0/50 failures: flake rate < 6% at 95%; 249 more clean attempts each would "
        "tighten it to < 1%" in render(report, "text")
    )


def test_the_html_table_rounds_a_bound_up_as_its_sentence_does(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run(rounds=50)
    rows.attempts(run, STABLE, "P" * 50)
    rows.close()
    html = render(report_of(tmp_path / "flakes.db"), "html")
    assert "flake rate &lt; 6% at 95%" in html  # the sentence above the table
    cells = re.findall(r'<td class="num" data-sort="[0-9.e-]+">&lt; ([^<]+)</td>', html)
    assert cells == ["6%"], cells


def test_findings_are_flaky_broken_or_incompatible_tests_or_violations(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    rows.attempts(run, STABLE, "PPP")
    rows.close()
    assert not report_of(tmp_path / "flakes.db").findings
    rows = Rows(tmp_path / "flakes.db")
    rows.attempts(run, BROKEN, "FFF")
    rows.close()
    assert report_of(tmp_path / "flakes.db").findings


def test_flaky_tests_are_ranked_by_how_surely_they_fail(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    rows.attempts(run, "t.py::one_of_two", "PF")
    rows.attempts(run, "t.py::often", "PPPPPFFFFFFFFFFFFFFF")
    rows.attempts(run, "t.py::rarely", "PPPPPPPPPPPPPPPPPPPF")
    rows.close()
    ranked = [t.nodeid for t in report_of(tmp_path / "flakes.db").with_status("flaky")]
    # 1/2 fails at 50% but says little: its interval starts at 9%.
    assert ranked == ["t.py::often", "t.py::one_of_two", "t.py::rarely"]


def test_a_run_can_be_reported_alone(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    first = rows.run()
    rows.attempts(first, VICTIM, "PFPF")
    second = rows.run()
    rows.attempts(second, VICTIM, "PPPPPP")
    rows.close()
    only = report_of(tmp_path / "flakes.db", second)
    assert [(t.nodeid, t.status, t.attempts) for t in only.tests] == [(VICTIM, "stable", 6)]
    assert [r.id for r in only.runs] == [second]
    both = report_of(tmp_path / "flakes.db")
    assert [(t.status, t.attempts, t.failures) for t in both.tests] == [("flaky", 10, 2)]
    with pytest.raises(UnknownId, match=r"run 9 is not in flakes\.db \(it holds runs 1-2\)"):
        report_of(tmp_path / "flakes.db", 9)


def test_an_empty_database_says_to_run_a_hunt_first(tmp_path):
    Rows(tmp_path / "flakes.db").close()
    with pytest.raises(BadDatabase, match=r"holds no runs yet: run a hunt first"):
        report_of(tmp_path / "flakes.db")


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("polluters", '"tests/a.py::t"', "polluters must be a JSON list of sets of test ids"),
        ("cleaners", "[1, 2]", "cleaners must be a JSON list of test ids"),
        ("kinds", '["gremlins"]', "unknown flake kind 'gremlins'"),
        ("kinds", "{not json", "kinds is not valid JSON"),
        ("reproducer", '{"steps": []}', "reproducer is malformed"),
    ],
)
def test_a_malformed_flake_row_is_named_in_one_line(db, column, value, message):
    import sqlite3

    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(f"UPDATE flakes SET {column} = ?", (value,))
    with pytest.raises(BadDatabase) as info:
        report_of(db)
    assert message in str(info.value)
    assert str(info.value).startswith("flakes.db: flake F1: ")
    assert "\n" not in str(info.value)


def test_the_json_report_keeps_the_documented_keys(db):
    data = json.loads(render(report_of(db), "json"))
    assert data["format"] == "hermetic-hunt-report"
    assert data["version"] == 1
    assert {"runs", "tests", "flakes"} <= set(data)
    run = data["runs"][0]
    assert run["id"] == 1
    # one count everywhere: the run's attempts split as the text says them
    assert run["plain_attempts"] + run["repeated"] == run["attempts"] and run["repeated"] >= 0
    tests = {t["nodeid"]: t for t in data["tests"]}
    victim = tests[VICTIM]
    assert {"nodeid", "attempts", "failures", "rate", "interval", "status"} <= set(victim)
    assert (victim["attempts"], victim["failures"], victim["rate"], victim["status"]) == (
        10, 7, 0.7, "flaky",
    )  # fmt: skip
    assert victim["interval"] == [pytest.approx(0.3968, abs=1e-4), pytest.approx(0.8922, abs=1e-4)]
    assert tests[STABLE]["interval"] == [0.0, pytest.approx(0.2775, abs=1e-4)]
    assert tests[STABLE]["bound"] == pytest.approx(0.2589, abs=1e-4)
    assert {t["status"] for t in data["tests"]} == {
        "flaky", "stable", "broken", "sandbox-incompatible", "skipped",
    }  # fmt: skip
    (flake,) = data["flakes"]
    assert {
        "id", "nodeid", "kinds", "polluters", "state_setters", "cleaners", "reproducer",
        "confirmed", "replay",
    } <= set(flake)  # fmt: skip
    assert flake["id"] == "F1"
    assert flake["nodeid"] == VICTIM
    assert flake["kinds"] == ["victim"]
    assert flake["polluters"] == [[POLLUTER]]
    assert flake["state_setters"] == []
    assert flake["cleaners"] == [CLEANER]
    assert flake["confirmed"] is True
    assert flake["replay"] == "pytest --hermetic-replay-db=flakes.db::F1"
    assert [s["nodeid"] for s in flake["reproducer"]["steps"]] == [POLLUTER, VICTIM]
    assert data["violations"][0]["host"] == "status.example.invalid"


def test_the_markdown_report_fits_a_step_summary(db):
    text = render(report_of(db), "markdown")
    assert text.startswith(
        "## hermetic-hunt: 2 flaky · 1 broken · 1 sandbox-incompatible · 4 stable · "
        "1 skipped · 1 with network violations\n\n"
        "**what CI will see: 1 fails in normal runs · 2 fail under shuffling or xdist · 1 fails "
        "only under the sandbox**\n"
    )
    sections = [line for line in text.splitlines() if line.startswith("### ")]
    assert sections[:3] == [
        "### Will break CI: fails in normal runs (1)",
        "### Fails under shuffling or xdist (order-dependent) (2)",
        "### Fails only under the sandbox (sandbox-incompatible) (1)",
    ]
    row = next(line for line in text.splitlines() if line.startswith("| F1 |"))
    assert f"`{VICTIM}`" in row
    assert "70% (40%–89%)" in row
    assert "`pytest --hermetic-replay-db=flakes.db::F1`" in row
    broken = next(line for line in text.splitlines() if BROKEN.replace("_", "\\_") in line
                  or f"`{BROKEN}`" in line)  # fmt: skip
    assert "broken: failed in every attempt, with and without the sandbox" in broken
    assert "### Network violations (blocked outbound calls)" in text
    assert "- 4 tests: 0/10 failures: flake rate &lt; 26% at 95%" in text


def hostile(tmp_path: Path) -> Path:
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    nodeid = "tests/test_x.py::test_y[<script>alert(1)</script>|`x`]"
    rows.attempts(
        run, nodeid, "PFPF",
        failure=Failure("AssertionError", "<img src=x onerror=alert(2)> **bold** [a](http://x.invalid)",
                        "tests/test_x.py:1", "<script>alert(3)</script>"),
    )  # fmt: skip
    rows.close()
    return tmp_path / "flakes.db"


def test_markdown_escapes_test_ids_and_failure_text(tmp_path):
    text = render(report_of(hostile(tmp_path)), "markdown")
    # Markdown passes HTML through, except inside code spans (shown literally).
    outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)
    assert "<" not in outside_code.replace("<br>", "")
    assert "&lt;img src=x onerror=alert(2)&gt; \\*\\*bold\\*\\* \\[a\\](http://x.invalid)" in text
    row = next(line for line in text.splitlines() if "test_y" in line)
    # Pipes inside the code span are escaped, so the table keeps its columns.
    assert row.count(" | ") == 7
    assert "`` tests/test_x.py::test_y[<script>alert(1)</script>\\|`x`] ``" in row


def test_control_characters_in_stored_text_never_reach_the_terminal(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    rows.attempts(
        run, "tests/t.py::test_\x1b[2Jclear", "PF",
        failure=Failure("AssertionError", "bell\x07 and \u202eevil", "t.py:1", ""),
    )  # fmt: skip
    rows.close()
    text = render(report_of(tmp_path / "flakes.db"), "text")
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "tests/t.py::test_\\x1b[2Jclear" in text
    assert "bell\\x07 and \\u202eevil" in text


def test_the_html_report_escapes_everything_from_the_database(tmp_path):
    html = render(report_of(hostile(tmp_path)), "html")
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    # The page's own script is the only one, and it is the sorting code.
    assert html.count("<script") == 1


def test_the_html_report_is_self_contained(db):
    html = render(report_of(db), "html")
    for remote in ("http://", "https://", "//cdn", "@import", "url(", "<link", " src="):
        assert remote not in html
    assert "Content-Security-Policy" in html
    assert "default-src 'none'" in html


def test_the_html_report_has_the_charts_and_sortable_tables(db):
    html = render(report_of(db), "html")
    assert '<h2 id="chart">Fail rates, with 95% intervals</h2>' in html
    assert '<h2 id="rounds">Outcome by round</h2>' in html
    assert html.count('<rect class="bar"') == 4  # flaky, broken and incompatible tests
    assert html.count('class="whisker"') == 12
    # One column per round; the victim's row shows its passes and failures in order.
    victim_row = html.split(f'<td class="mono nodeid">{breakable(VICTIM)}</td>', 1)[1]
    victim_row = victim_row.split("</tr>", 1)[0]
    cells = re.findall(r'<rect class="(pass|fail|mixed|skip)"', victim_row)
    assert "".join(c[0] for c in cells) == "pffpffffpf"
    # runs, flaky, broken, sandbox-incompatible, violations, suggested fixes, all tests
    assert html.count('class="sortable') == 7
    assert 'id="fixes-table"' in html
    assert "F1" in html and "reproducer confirmed" in html
    assert "pytest --hermetic-replay-db=flakes.db::F1" in re.sub(r"<[^>]+>", "", html)


def test_each_html_finding_links_its_fix_its_rounds_and_its_replay_and_back(db):
    html = render(report_of(db), "html")
    row = html.split('<tr id="F1">', 1)[1].split("</tr>", 1)[0]
    assert 'href="#fix-F1"' in row and 'href="#round-F1"' in row
    assert '<span class="tok">--hermetic-replay-db=flakes.db::F1</span>' in row
    assert '<button type="button" class="copy"' in row
    fix = html.split('<tr id="fix-F1">', 1)[1].split("</tr>", 1)[0]
    assert 'href="#F1"' in fix
    grid = html.split('<tr id="round-F1">', 1)[1].split("</tr>", 1)[0]
    assert '<a href="#F1" title="' in grid
    # every link points at an id of the page
    ids = set(re.findall(r' id="([^"]+)"', html))
    assert {href for href in re.findall(r'href="#([^"]+)"', html)} <= ids


def test_the_html_chart_labels_its_groups_and_sorts_within_them(db):
    report = report_of(db)
    html = render(report, "html")
    headings = re.findall(r'<text class="heading" x="0" y="\d+">([^<]+)</text>', html)
    assert headings and all(re.fullmatch(r".+ \(\d+\)", h) for h in headings)
    chart, drawn, _ = bars(
        [(level, [g.lead for g in groups]) for level, groups in report.by_exposure()]
    )
    assert [h.text.rsplit(" (", 1)[0] for h in drawn] == [
        level for level, _ in report.by_exposure()
    ]
    for level, groups in report.by_exposure():
        mine = [b for b in chart if b.nodeid in {g.lead.nodeid for g in groups}]
        rates = [float(b.rate.rstrip("%<> ") or 0) for b in mine]
        assert rates == sorted(rates, reverse=True), level


def _time_flake(test: model.TestResult, dates: dict[str, object] | None) -> model.TestResult:
    """``test`` as a time flake, with its ``dates`` fact (None: not replayed at dates)."""
    assert test.flake is not None
    evidence = {"dates": dates} if dates is not None else {}
    flake = replace(test.flake, kinds=("time",), evidence=evidence)
    return replace(test, flake=flake, exposure=model.test_exposure(test.status, flake))


COMING = {"fails_now": False, "next_failure": "2026-12-31T00:00:00.250+00:00",
          "checked_from": "2026-12-05T08:54:38+00:00"}  # fmt: skip
DAILY = {"fails_now": True, "daily": True, "next_failure": "2026-12-05T11:12:18.991+00:00"}


def test_the_html_chart_draws_a_flake_the_calendar_decides_as_its_dates_not_a_rate(db):
    # Its share of the hunt's attempts (70% here) is how often the hunt's clock hit
    # its dates: the chart shows when it fails instead, in the report's own words.
    report = report_of(db)
    (victim,) = [t for t in report.tests if t.nodeid == VICTIM]
    coming, daily, noisy = (_time_flake(victim, d) for d in (COMING, DAILY, None))
    assert (coming.exposure, daily.exposure, noisy.exposure) == ("dates", "normal", "normal")
    assert calendar_text(coming) == (
        "next real failure: 2026-12-31 00:00:00.250 (replayed at the coming dates)"
    )
    assert calendar_text(daily).startswith("fails every day at 11:12:18.991 UTC")
    assert calendar_text(noisy) == ""  # a clock that runs slow fails any day: its rate stands
    chart, _, _ = bars(
        [("Fails in normal runs", [daily, noisy]), ("Fails on 2026-12-31", [coming])]
    )
    assert [(b.width, b.low, b.high, b.dates) for b in chart] == [
        (chart[0].width, chart[0].low, chart[0].high, ""),
        (0.0, 0.0, 0.0, calendar_text(daily)),
        (0.0, 0.0, 0.0, calendar_text(coming)),
    ]
    assert chart[0].width > 0 and chart[0].rate == chart[1].rate == "70%"
    flakes = [replace(t, flake=coming.flake, exposure="dates") if t.nodeid == VICTIM else t
              for t in report.tests]  # fmt: skip
    html = render(replace(report, tests=tuple(flakes), groups=model.rank_groups(flakes)), "html")
    row = html.split('<a href="#F1"><text', 1)[1].split("</g>", 1)[0]
    assert '<text class="dates" x="240"' in row and calendar_text(coming) in row
    assert "<rect" not in row and "whisker" not in row and ">70%<" not in row
    assert html.count('<rect class="bar"') == 3  # the other findings keep their bars
    (width,) = re.findall(r'aria-label="fail rate per test" width="(\d+)"', html)
    assert int(width) >= 240 + len(calendar_text(coming)) * 7


def test_text_list_and_markdown_give_a_flake_the_calendar_decides_no_rate(db):
    # Its 70% is the hunt clock's: every place that would print it says its dates decide.
    report = report_of(db)
    flakes = [_time_flake(t, COMING) if t.nodeid == VICTIM else t for t in report.tests]
    dated = replace(report, tests=tuple(flakes), groups=model.rank_groups(flakes))
    (victim,) = [t for t in dated.tests if t.nodeid == VICTIM]
    assert rate_text(victim) == (
        f"failed {victim.failures} of {victim.attempts} attempts, at the dates the hunt's clock "
        "drew: the calendar decides, not a rate (its dates below)"
    )
    text = render(dated, "text")
    assert rate_text(victim) in text and calendar_text(victim) in text and "70%" not in text
    (line,) = [x for x in list_lines(dated) if VICTIM in x]
    assert f" dates ({victim.failures}/{victim.attempts}) " in line
    markdown = render(dated, "markdown")
    assert "dates (the calendar decides)" in markdown and "70%" not in markdown
    # the same test as an ordinary flake keeps its rate everywhere
    assert "70%" in render(report, "text") and "70%" in render(report, "markdown")


@pytest.mark.parametrize(
    "nodeid",
    ["tests/test_labels.py::test_label_defaults_to_dollars", "a/b.py::C::test[x-1,y]"],
)
def test_ids_wrap_only_between_tokens(nodeid):
    text = str(breakable(nodeid))
    pieces = re.findall(r'<span class="tok">(.*?)</span>', text)
    assert text == "<wbr>".join(f'<span class="tok">{p}</span>' for p in pieces)
    assert "".join(pieces) == nodeid
    assert all(p.endswith(("/", "::", "[", ",", " ")) for p in pieces[:-1]), pieces
    assert str(command("pytest --hermetic-replay-db=flakes.db::F1")).count("<span") == 2


def test_long_failure_messages_fold_under_their_first_line():
    short = "AssertionError: assert 1 == 2 at t.py:3"
    assert folded(short) == (short, "")
    long = "OSError: blocked\n" + "\n".join(f"  line {n}" for n in range(12))
    first, whole = folded(long)
    assert first == "OSError: blocked" and whole == long
    one_long_line = "URLError: " + "x" * 400
    first, whole = folded(one_long_line)
    assert first.endswith("…") and len(first) <= 101 and whole == one_long_line


def test_the_markdown_folds_its_fixes_one_row_each(db):
    text = render(report_of(db), "markdown")
    fixes = text.split("### Suggested fixes (", 1)[1].split("\n### ", 1)[0]
    assert fixes.count("<details><summary>") == 1 and fixes.rstrip().endswith("</details>")
    assert "```" not in fixes  # the patches are hermetic-hunt fix's to print
    rows = [line for line in fixes.splitlines() if line.startswith("| F")]
    assert len(rows) == int(fixes.split(")", 1)[0])


def test_a_long_markdown_table_is_folded(tmp_path):
    from hermetic_hunt.report.markdown import FOLD_ROWS, _folded, _table

    short = _folded("t", _table(["a"], [["x"]] * FOLD_ROWS))
    long = _folded("t", _table(["a"], [["x"]] * (FOLD_ROWS + 1)))
    assert "<details>" not in "\n".join(short)
    assert (
        long[3] == f"<details><summary>{FOLD_ROWS + 1} rows</summary>" and long[-1] == "</details>"
    )


def _parametrized(tmp_path: Path, count: int) -> Path:
    from helpers import Rows

    (tmp_path / "tests").mkdir(parents=True)
    (tmp_path / "tests" / "test_idem.py").write_text(
        "import pytest\n\nSEEN = []\n\n\n"
        f"@pytest.mark.parametrize('n', range({count}))\n"
        "def test_idem(n):\n    SEEN.append(n)\n    assert SEEN.count(n) == 1\n"
    )
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    failure = Failure("AssertionError", "assert 2 == 1", "tests/test_idem.py:9", "E assert")
    for n in range(count):
        nodeid = f"tests/test_idem.py::test_idem[{n}]"
        rows.attempts(run, nodeid, "PPPPPPPPPF", failure=failure)
        rows.flake(nodeid, f"F{n + 1}", kinds=["self-polluting"])
    rows.store.conn.commit()
    rows.close()
    return tmp_path / "flakes.db"


def test_76_parametrizations_give_one_suggested_fix_and_a_report_as_long_as_two(tmp_path):
    many = report_of(_parametrized(tmp_path / "many", 76))
    (view,) = many.fix_views()
    assert view.label == "F1 (+75 parametrizations: F2-F76)"
    assert view.nodeid == "tests/test_idem.py::test_idem"
    text = render(many, "text")
    fixes = text.split("suggested fixes", 1)[1]
    assert fixes.count("tests/test_idem.py::test_idem") == 1
    assert fixes.count(view.suggestion.summary) == 1
    two = render(report_of(_parametrized(tmp_path / "two", 2)), "text")
    assert len(text.splitlines()) == len(two.splitlines())
    markdown = render(many, "markdown")
    assert "### Suggested fixes (1)" in markdown
    assert markdown.count("<summary>patch</summary>") <= 1
    assert "Suggested fixes (1)</h2>" in render(many, "html")


def test_the_round_grid_numbers_its_rounds_and_a_failed_repeated_run_makes_a_cell_both(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run(rounds=10)
    rows.attempts(run, LONELY, "PFPPPPPPPP")
    rows.attempts(run, LONELY, "F", repeat=2, first_round=3)  # round 4's repeated run failed
    rows.close()
    html = render(report_of(tmp_path / "flakes.db"), "html")
    start = html.index('<table class="strips">')
    grid = html[start : html.index("</table>", start)]
    assert re.findall(r'<text class="tick"[^>]*>(\d+)</text>', grid) == ["1", "5", "10"]
    cells = re.findall(r'<rect class="(pass|fail|mixed|skip)"', grid)
    assert cells == ["pass", "fail", "pass", "mixed", *["pass"] * 6]


def test_a_passing_test_whose_finding_is_a_blocked_call_has_its_flake_in_the_violations(tmp_path):
    rows = sample(tmp_path / "flakes.db")
    rows.flake(VIOLATOR, "F9", kinds=["network"])
    rows.close()
    html = render(report_of(tmp_path / "flakes.db"), "html")
    section = html[html.index('<h2 id="violations">') : html.index('<h2 id="tests">')]
    assert "flake <strong>F9</strong>: network" in section


def test_a_test_with_two_blocked_calls_names_its_flake_once_after_both(tmp_path):
    rows = sample(tmp_path / "flakes.db")
    run = rows.run()
    calls = [Violation("create_connection", "status.example.invalid", 443, "health.py:10"),
             Violation("getaddrinfo", "metrics.example.invalid", 80, "health.py:12")]  # fmt: skip
    rows.attempts(run, VIOLATOR, "PPPP", violations=calls)
    rows.flake(VIOLATOR, "F9", kinds=["network"])
    rows.close()
    text = render(report_of(tmp_path / "flakes.db"), "text")
    section = text[text.index("network violations") :]
    assert section.count("flake F9: network") == 1
    block = section.split(f"  {VIOLATOR}\n")[1].splitlines()
    assert [line.split(" in ")[0].strip() for line in block[:3]] == [
        "create_connection status.example.invalid:443",
        "getaddrinfo metrics.example.invalid:80",
        "flake F9: network",
    ]


def _collided(tmp_path: Path, count: int) -> Path:
    """``count`` tests that only collide over one folder (isolation probed it once,
    through the first) and one victim that also collides over it."""
    from helpers import Rows

    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    failure = Failure("FileExistsError", "File exists", "tests/setup.py:27", "E FileExistsError")
    names = [f"tests/test_{n}.py::test_uses_the_folder" for n in range(count)]
    shared = {"resource": "tests/work", "tests": count, "files": count, "lead": names[0],
              "locations": ["tests/setup.py:27"], "representative": "F1"}  # fmt: skip
    for n, nodeid in enumerate(names):
        rows.attempts(run, nodeid, "PPPFPPPFPP", failure=failure)
        rows.flake(nodeid, f"F{n + 1}", kinds=["collision"],
                   evidence={"shared": {**shared, "explained": 2}, "exposure": "order"})  # fmt: skip
    rows.attempts(run, "tests/test_v.py::test_victim", "PPFPPPPPPP", failure=failure)
    rows.flake("tests/test_v.py::test_victim", f"F{count + 1}", kinds=["victim", "collision"],
               evidence={"shared": {**shared, "explained": 1}, "exposure": "order"})  # fmt: skip
    rows.store.conn.commit()
    rows.close()
    return tmp_path / "flakes.db"


def test_tests_that_only_collide_over_one_path_are_one_finding_with_the_fix(tmp_path):
    """Issue 29: "46 tests collide over fs/tests/test_dir", not 46 findings."""
    report = report_of(_collided(tmp_path, 5))
    assert len(report.groups) == 2  # the five collisions, and the victim apart
    group = next(g for g in report.groups if g.shared is not None)
    assert group.nodeid == "5 tests collide over tests/work" and group.members == "tests"
    assert group.lead.flake is not None and group.lead.flake.flake_id == "F1"
    text = render(report, "text")
    assert "F1  5 tests collide over tests/work" in text
    assert "parametrizations" not in text
    assert (
        "failing at tests/setup.py:27 (in 5 test files): each test is fine alone; two workers "
        "using tests/work at once break each other -- give each its own (tmp_path, or "
        "worker_id in the name)"
    ) in text
    assert "tests/test_v.py::test_victim" in text  # its own finding: it is a victim too
    markdown = render(report, "markdown")
    assert "5 tests collide over tests/work" in markdown
    (finding,) = [g for g in json.loads(render(report, "json"))["findings"] if g["shared"]]
    assert finding["shared"]["resource"] == "tests/work" and len(finding["tests"]) == 5
    html = re.sub(r"<[^>]+>", "", render(report, "html"))  # the words, not the markup
    assert "5 tests collide over tests/work" in html and "5 parametrizations" not in html
