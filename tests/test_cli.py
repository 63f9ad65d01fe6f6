"""``hermetic-hunt report / list / show``: output, files, exit statuses, one-line errors."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import CLEANER, LONELY, POLLUTER, STABLE, VICTIM, Rows, sample

from hermetic_hunt.cli import main

FOUND, BAD_INPUT, USAGE = 1, 3, 2


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def db(here: Path) -> Path:
    sample(here / "flakes.db").close()
    return here / "flakes.db"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def one_line_error(code: int, stderr: str, expected: int, text: str) -> None:
    assert code == expected, stderr
    assert stderr.startswith("Error: "), stderr
    assert stderr.count("\n") == 1, stderr
    assert text in stderr


def test_report_prints_text_and_exits_1_when_something_was_found(db):
    code, out, _ = invoke("report")
    assert code == FOUND
    assert out.startswith("hermetic-hunt report · flakes.db · 1 run · ")
    assert "replay: pytest --hermetic-replay-db=flakes.db::F1" in out
    assert invoke("report", "--exit-zero")[0] == 0


def test_report_exits_0_when_every_test_is_stable(here):
    rows = Rows(here / "flakes.db")
    rows.attempts(rows.run(), STABLE, "PPPP")
    rows.close()
    code, out, _ = invoke("report")
    assert code == 0
    assert "0 flaky · 0 broken · 0 sandbox-incompatible · 1 stable" in out
    assert "1 test: 0/4 failures: flake rate < 53% at 95%" in out


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_report_formats_go_to_stdout_or_to_a_file(db, here, fmt):
    code, out, _ = invoke("report", "--format", fmt)
    assert code == FOUND
    code, written, _ = invoke("report", "--format", fmt, "-o", f"out/report.{fmt}")
    assert code == FOUND
    assert written.startswith(f"wrote out/report.{fmt} · 2 flaky · 1 broken")
    assert (here / "out" / f"report.{fmt}").read_text() == out


def test_md_is_taken_as_markdown_wherever_a_format_is(db, here):
    from hermetic_hunt.report import ALIASES, FORMATS, render

    assert invoke("report", "--format", "md") == invoke("report", "--format", "markdown")
    code, written, _ = invoke("report", "--format", "md", "-o", "summary.md")
    assert (code, written.split(" · ")[0]) == (FOUND, "wrote summary.md")
    assert (here / "summary.md").read_text() == invoke("report", "--format", "markdown")[1]
    choices = next(p for p in main.commands["report"].params if p.name == "fmt").type.choices
    assert sorted(choices) == sorted([*FORMATS, *ALIASES])
    with pytest.raises(ValueError, match="expected one of text, markdown, html, json, md"):
        render(None, "pdf")  # type: ignore[arg-type]


def test_report_json_is_the_documented_structure(db):
    data = json.loads(invoke("report", "--format", "json")[1])
    assert (data["format"], data["version"]) == ("hermetic-hunt-report", 1)
    assert [f["id"] for f in data["flakes"]] == ["F1"]


def test_report_html_goes_to_reports_by_default(db, here):
    code, out, _ = invoke("report", "--format", "html")
    assert code == FOUND
    assert out == (
        "wrote reports/hermetic-hunt.html · 2 flaky · 1 broken · 1 sandbox-incompatible · "
        "4 stable · 1 skipped · 1 with network violations\n"
    )
    page = (here / "reports" / "hermetic-hunt.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert invoke("report", "--format", "html", "-o", "x.html")[1].startswith("wrote x.html")


def test_report_selects_one_run(db):
    code, out, _ = invoke("report", "--run", "1")
    assert code == FOUND
    assert out.startswith("hermetic-hunt report · flakes.db · run 1 · ")
    code, _, err = invoke("report", "--run", "2")
    one_line_error(code, err, BAD_INPUT, "run 2 is not in flakes.db (it holds only run 1)")


def test_list_prints_one_line_per_flake(db):
    code, out, _ = invoke("list")
    assert code == FOUND
    lines = out.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(
        rf"F1   victim +70% \(7/10\) +{re.escape(VICTIM)}  "
        r"pytest --hermetic-replay-db=flakes\.db::F1",
        lines[0],
    )
    assert re.fullmatch(
        rf"-    not isolated +10% \(1/10\) +{re.escape(LONELY)}  "
        r"pytest --hermetic-replay-db=flakes\.db::A\d+",
        lines[1],
    )


def test_list_of_a_database_without_flakes_exits_0(here):
    rows = Rows(here / "flakes.db")
    rows.attempts(rows.run(), STABLE, "PP")
    rows.close()
    assert invoke("list") == (0, "no flakes in flakes.db (1 tests)\n", "")


def test_show_a_flake_prints_everything_stored_and_the_journal_comparison(db):
    code, out, _ = invoke("show", "F1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"flake F1 · {VICTIM}"
    assert "kinds:         victim" in lines
    assert "status:        isolated · reproducer confirmed" in lines
    assert "attempts:      failed 7 of 10 attempts: 70% (95% CI 40%–89%)" in lines
    assert f"polluters:     {POLLUTER}" in lines
    assert f"cleaners:      {CLEANER}" in lines
    assert "state-setters: -" in lines
    assert "reproducer (2 step(s), one fresh process · PYTHONHASHSEED=0):" in lines
    assert any(
        line.startswith(f"  1. {POLLUTER}  (seeded · seed 11 · now 2023-11-14T22:13:20")
        for line in lines
    )
    assert "  expected: AssertionError at tests/test_settings.py:10" in lines
    assert "isolation:     4 probe(s) in 2.0s, 2 step(s) stored:" in lines
    assert any(
        re.match(r"\s+2\. after its worker's sequence: failed in 0\.20s  \[", line)
        for line in lines
    )
    assert "evidence:" in lines
    comparison = next(i for i, line in enumerate(lines) if line.startswith("journal comparison"))
    assert re.fullmatch(
        r"journal comparison \(failing A\d+ vs passing A\d+, by read counts\):", lines[comparison]
    )
    assert (
        lines[comparison + 1]
        == "  time: read 2 time(s) in the failing attempt, 1 in the passing one"
    )
    assert lines[-1] == "replay: pytest --hermetic-replay-db=flakes.db::F1"


def test_show_an_attempt_prints_its_sandbox_failure_journal_and_replay(db):
    with closing(sqlite3.connect(db)) as conn, conn:
        (failing,) = conn.execute(
            "SELECT min(a.id) FROM attempts a JOIN tests t ON t.id = a.test_id "
            "WHERE t.nodeid = ? AND a.outcome = 'failed'",
            (VICTIM,),
        ).fetchone()
    code, out, _ = invoke("show", f"a{failing}")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"attempt A{failing} · {VICTIM}"
    assert lines[1] == "where:         run 1 · round 1 · worker main · position 1 · execution 1"
    assert lines[2] == "outcome:       failed (call) in 0.010s"
    assert lines[3].startswith(
        "sandbox:       mode seeded · seed 1001 · now 2023-11-14T22:13:21.000Z"
    )
    assert "reads:         time 2" in lines
    assert "failure:       AssertionError: assert False at tests/test_settings.py:10" in lines
    assert "journal:       seeded/1 · " in out and "events: time 2" in out
    assert "  time: read 2 time(s) in the failing attempt, 1 in the passing one" in lines
    assert lines[-1] == f"replay: pytest --hermetic-replay-db=flakes.db::A{failing}"


def test_show_a_passing_attempt_compares_it_with_the_nearest_failing_one(db):
    code, out, _ = invoke("show", "A1")
    assert code == 0
    assert "outcome:       passed in 0.010s" in out
    assert "journal comparison (failing A2 vs passing A1, by read counts):" in out


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            "F9",
            "flake F9 is not in flakes.db (it holds only F1): hermetic-hunt list shows the flake ids",
        ),
        ("A99999", "attempt A99999 is not in flakes.db (it holds A1-A90)"),
        ("X1", "expected a flake id like F3 or an attempt id like A1207, got 'X1'"),
    ],
)
def test_show_refuses_an_unknown_or_malformed_id_in_one_line(db, ref, message):
    code, _, err = invoke("show", ref)
    one_line_error(code, err, BAD_INPUT, message)


@pytest.mark.parametrize("command", [["report"], ["list"], ["show", "F1"]])
def test_a_missing_database_is_one_line_with_the_fix(here, command):
    code, _, err = invoke(*command, "--db", "nope.db")
    one_line_error(
        code, err, BAD_INPUT, "nope.db does not exist: run a hunt first (pytest --hermetic-hunt=N)"
    )


def test_a_file_that_is_not_a_database_is_refused(here):
    (here / "notes.db").write_text("hello")
    code, _, err = invoke("report", "--db", "notes.db")
    one_line_error(code, err, BAD_INPUT, "notes.db is not an SQLite database")


def test_an_unwritable_output_path_is_refused(db, here):
    (here / "adir").mkdir()
    code, _, err = invoke("report", "--format", "json", "-o", "adir")
    one_line_error(code, err, BAD_INPUT, "-o adir: is a directory; pass a file path")


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--format", "pdf"],
        ["report", "--run", "0"],
        ["show"],
        ["merge", "-o", "x.db"],
        ["bogus"],
    ],
)
def test_usage_errors_exit_2(db, args):
    code, _, err = invoke(*args)
    assert code == USAGE
    assert "Error:" in err


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_has_help_with_examples(command):
    code, out, _ = invoke(command, "--help")
    assert code == 0
    assert f"Usage: main {command}" in out or f"Usage: hermetic-hunt {command}" in out
    assert "Examples:" in out
    examples = out.split("Examples:", 1)[1]
    assert "hermetic-hunt" in examples or "pytest" in examples


def test_the_group_help_lists_every_command_and_the_version():
    code, out, _ = invoke("--help")
    assert code == 0
    for command in ("report", "list", "show", "merge", "demo", "replay"):
        assert re.search(rf"^  {command}\b", out, re.M), command
    assert invoke("--version")[1].startswith("hermetic-hunt, version ")


MINI = """
import random
import socket


def test_random():
    assert random.random() < 0.6


def test_ok():
    pass


def test_broken():
    assert 1 == 2


def test_network():
    try:
        socket.create_connection(("api.example.invalid", 443), timeout=1)
    except OSError:
        pass
"""


@pytest.mark.slow
def test_the_commands_read_what_a_real_hunt_stored(pytester, monkeypatch, safety_net):
    pytester.makepyfile(test_mini=MINI)
    result = pytester.runpytest_subprocess(
        "--hermetic-hunt=10",
        "--hermetic-hunt-order=shuffle",
        "--hermetic-seed=1",
        "--hermetic-hunt-isolate=off",
        "-p",
        "no:randomly",
    )
    assert result.ret == 1
    monkeypatch.chdir(pytester.path)

    code, out, _ = invoke("report")
    assert code == FOUND
    assert (
        "1 flaky · 1 broken · 0 sandbox-incompatible · 2 stable · 1 with network violations" in out
    )
    flaky = out.split("fails under shuffling or xdist (1 finding):\n")[1]
    assert flaky.startswith(
        "  -   test_mini.py::test_random\n      not isolated\n      failed 4 of 10 attempts: 40% (95% CI 17%–69%)\n"
    )
    replay = re.search(r"replay: (pytest --hermetic-replay-db=flakes\.db::(A\d+))", flaky)
    assert replay is not None
    assert (
        "  test_mini.py::test_network\n      create_connection api.example.invalid:443 in 10 attempt(s)"
        in out
    )

    code, out, _ = invoke("show", replay.group(2))
    assert code == 0
    assert out.splitlines()[0] == f"attempt {replay.group(2)} · test_mini.py::test_random"
    assert re.search(
        r"^failure: +AssertionError: assert 0\.\d+ < 0\.6 at test_mini\.py:6$", out, re.M
    )
    assert out.splitlines()[-1] == f"replay: {replay.group(1)}"

    tests = {t["nodeid"]: t for t in json.loads(invoke("report", "--format", "json")[1])["tests"]}
    assert tests["test_mini.py::test_broken"]["status"] == "broken"
    assert tests["test_mini.py::test_ok"]["status"] == "stable"
    assert tests["test_mini.py::test_random"]["replay"] == replay.group(1)
    assert safety_net == []


@pytest.mark.slow
def test_the_report_of_a_hunt_with_isolation_has_flakes_and_sandbox_off_checks(
    pytester, monkeypatch
):
    pytester.makepyfile(
        test_mini=MINI
        + """

def test_real_clock():
    import time

    assert abs(time.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 0.5
"""
    )
    result = pytester.runpytest_subprocess(
        "--hermetic-hunt=10",
        "--hermetic-hunt-order=shuffle",
        "--hermetic-seed=1",
        "-p",
        "no:randomly",
    )
    assert result.ret == 1
    monkeypatch.chdir(pytester.path)
    code, out, _ = invoke("report")
    assert code == FOUND
    assert (
        "1 flaky · 1 broken · 1 sandbox-incompatible · 2 stable · 1 with network violations" in out
    )
    normal = out.split("fails in normal runs (2 findings):\n")[1].split("\n\n")[0]
    assert re.match(
        r"  -   test_mini\.py::test_broken\n"
        r"      broken: failed in every attempt, with and without the sandbox\n"
        r"      failed 10 of 10 attempts",
        normal,
    )
    assert re.search(
        r"  (F\d+) +test_mini\.py::test_random\n"
        r"      random · isolated · reproducer confirmed\n"
        r"      failed 4 of 10 attempts: 40% \(95% CI 17%–69%\)\n",
        normal,
    )
    incompatible = out.split("fails only under the sandbox (1 finding):\n")[1]
    assert incompatible.startswith(
        "  -   test_mini.py::test_real_clock\n"
        "      sandbox-incompatible: fails under the sandbox, passes without it\n"
    )
    code, listed, _ = invoke("list")
    assert code == FOUND
    assert [line.split()[1] for line in listed.splitlines()] == ["random", "network"]
