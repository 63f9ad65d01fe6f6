"""Quarantine: the list a database writes, and a session it keeps green."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from helpers import (
    BROKEN,
    INCOMPATIBLE,
    LONELY,
    POLLUTER,
    VICTIM,
    VIOLATOR,
    Rows,
    sample,
    victim_reproducer,
)

from hermetic_hunt.cli import main
from hermetic_hunt.errors import BadOption
from hermetic_hunt.quarantine.listfile import Entry, entry_for, parse, render

SUITE = """
import pytest

def test_flaky():
    assert False, "the known flake"

def test_fine():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n == 1
"""
LIST = """\
# a reviewed list
test_suite.py::test_flaky  # F3 victim 80%: fails after test_suite.py::test_other
test_suite.py::test_param  # F4 random
"""


def test_a_quarantined_failure_does_not_fail_the_session_and_is_named(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".txt", quarantine=LIST)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-quarantine=quarantine.txt"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: 2 quarantined tests from quarantine.txt (their failures do not fail "
            "the session)",
            "*= hermetic-hunt quarantine (quarantine.txt) =*",
            "3 quarantined test(s) ran: 2 failed without failing the session, 1 passed",
            "  QUARANTINED FAILURE test_suite.py::test_flaky (F3 victim): AssertionError: the "
            "known flake",
            "  QUARANTINED FAILURE test_suite.py::test_param[2] (F4 random): assert 2 == 1",
            "*1 passed, 2 xfailed, 1 xpassed*",
        ]
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-rx",
                                           "--hermetic-quarantine=quarantine.txt")  # fmt: skip
    result.stdout.fnmatch_lines(
        ["XFAIL test_suite.py::test_flaky - quarantined: F3 victim (quarantine.txt)"]
    )


def test_a_line_holding_a_file_path_quarantines_every_test_of_that_file(pytester):
    # The path as the test ids spell it; another spelling of it matches no test.
    pytester.makepyfile(test_suite=SUITE, test_other="def test_other():\n    assert False\n")
    pytester.makefile(".txt", quarantine="test_suite.py  # by hand\n./test_other.py\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-quarantine=quarantine.txt"
    )
    assert result.ret == 1  # test_other.py is not quarantined by './test_other.py'
    result.stdout.fnmatch_lines(
        [
            "4 quarantined test(s) ran: 2 failed without failing the session, 2 passed",
            "  QUARANTINED FAILURE test_suite.py::test_flaky (quarantined by hand): "
            "AssertionError: the known flake",
            "  QUARANTINED FAILURE test_suite.py::test_param[2] (quarantined by hand): "
            "assert 2 == 1",
            "FAILED test_other.py::test_other - assert False",
        ]
    )


def test_the_same_session_under_xdist(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".txt", quarantine=LIST)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-n", "2",
                                           "--hermetic-quarantine=quarantine.txt")  # fmt: skip
    assert result.ret == 0
    result.stdout.fnmatch_lines(["  QUARANTINED FAILURE test_suite.py::test_flaky (F3 victim)*"])


def test_a_test_that_passed_enough_times_in_a_row_is_told_it_can_leave(pytester):
    pytester.makepyfile(test_suite="def test_flaky():\n    pass\n")
    pytester.makefile(".txt", quarantine=LIST)
    args = ("-p", "no:randomly", "--hermetic-quarantine=quarantine.txt")
    first = pytester.runpytest_subprocess(*args)
    assert "warning:" not in first.stdout.str()  # at 80%, 2 passes in a row are needed
    second = pytester.runpytest_subprocess(*args)
    second.stdout.fnmatch_lines(
        ["  warning: test_suite.py::test_flaky (F3 victim) passed 2 times in a row: 95% sure it "
         "no longer flakes at its recorded 80% fail rate; remove line 2 of quarantine.txt to "
         "release it"]
    )  # fmt: skip


def test_a_missing_or_malformed_list_is_a_one_line_usage_error(pytester):
    pytester.makepyfile(test_suite="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--hermetic-quarantine=nope.txt")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --hermetic-quarantine: nope.txt does not exist: write "
                                 "one with 'hermetic-hunt quarantine -o nope.txt'"])  # fmt: skip
    pytester.makefile(".txt", bad="just words\n")
    result = pytester.runpytest_subprocess("--hermetic-quarantine=bad.txt")
    assert result.ret == 4 and "Traceback" not in result.stderr.str()
    result.stderr.fnmatch_lines(["ERROR: --hermetic-quarantine: bad.txt, line 1: expected a test "
                                 "id such as tests/test_x.py::test_y, got 'just words'"])  # fmt: skip


def test_the_list_file_round_trips_and_covers_parametrizations():
    entries = [
        Entry("t.py::test_a", "F1", ("victim", "network"), 0.25, "fails after\nt.py::test_b"),
        Entry("t.py::test_b[x # y]"),
    ]
    text = render(entries, ["header"])
    assert (
        text.splitlines()[2] == "t.py::test_a  # F1 victim, network 25%: fails after t.py::test_b"
    )
    back = parse(text)
    assert [(e.nodeid, e.flake_id, e.kinds, e.rate, e.line) for e in back] == [
        ("t.py::test_a", "F1", ("victim", "network"), 0.25, 3),
        ("t.py::test_b[x # y]", None, (), None, 4),
    ]
    assert entry_for(back, "t.py::test_a[1]") is back[0]
    assert entry_for(back, "t.py::test_ab") is None
    assert back[0].release_after == 11 and Entry("t.py::x").release_after == 20
    with pytest.raises(BadOption, match="line 1"):
        parse("not a test\n")
    whole = parse("t.py  # every test of the file\n")
    assert entry_for(whole, "t.py::test_a[1]") is whole[0]
    assert entry_for(whole, "t.py::TestX::test_a") is whole[0]
    assert entry_for(whole, "t.pyx::test_a") is None


def test_a_session_without_the_cache_plugin_is_quarantined_too(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".txt", quarantine="test_suite.py\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--hermetic-quarantine=quarantine.txt"
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*4 quarantined test(s) ran: 2 failed without failing*"])


def test_hermetic_hunt_quarantine_writes_every_test_that_failed(tmp_path, monkeypatch):
    rows = sample(tmp_path / "flakes.db")
    rows.flake(POLLUTER, "F2", kinds=["random"], confirmed=0,
               reproducer=victim_reproducer(POLLUTER, VICTIM))  # fmt: skip
    rows.close()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["quarantine", "-o", "ci/quarantine.txt"])
    assert result.exit_code == 0, result.output
    assert result.output == "wrote ci/quarantine.txt: 4 quarantined tests\n"
    text = (tmp_path / "ci" / "quarantine.txt").read_text()
    assert text.splitlines()[0] == (
        "# hermetic-hunt quarantine list: pytest --hermetic-quarantine=ci/quarantine.txt"
    )
    # the test that fails only under the sandbox is left out; the one that only made
    # blocked calls never failed outside a violation
    assert f"# {INCOMPATIBLE}: fails only under the sandbox (plain runs pass it)" in text
    assert VIOLATOR not in text
    assert [(e.nodeid, e.flake_id, e.kinds, e.reason) for e in parse(text)] == [
        (VICTIM, "F1", ("victim",), f"fails after {POLLUTER} (reproducer confirmed)"),
        (POLLUTER, "F2", ("random",), "depends on random draws (reproducer not confirmed)"),
        (BROKEN, None, ("broken",), "fails every time (not isolated)"),
        (LONELY, None, ("flaky",), "failed in the hunt (not isolated)"),
    ]
    result = CliRunner().invoke(main, ["quarantine", "--confirmed-only"])
    assert [e.flake_id for e in parse(result.output)] == ["F1"]
    assert f"# F2 {POLLUTER}: reproducer not confirmed (--confirmed-only)" in result.output


THREAD_RACE = """
import threading

counter = {"n": 0}


def _bump(both_read):
    value = counter["n"]
    both_read.wait()  # the other thread read the same value: one update is lost
    counter["n"] = value + 1


def test_two_threads_count_to_two():
    both_read = threading.Barrier(2)
    threads = [threading.Thread(target=_bump, args=(both_read,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter["n"] == 2


def test_fine():
    pass
"""


def test_a_thread_race_whose_reproducer_was_not_confirmed_is_quarantined(pytester, tmp_path):
    race = "test_race.py::test_two_threads_count_to_two"
    rows = Rows(pytester.path / "flakes.db")
    run = rows.run()
    rows.attempts(run, race, "PFFPF")
    rows.attempts(run, "test_race.py::test_fine", "PPPPP")
    rows.flake(race, "F1", kinds=["concurrency"], confirmed=0,
               reproducer=victim_reproducer(race, race))  # fmt: skip
    rows.close()
    pytester.makepyfile(test_race=THREAD_RACE)
    result = CliRunner().invoke(main, ["quarantine", "--db", str(pytester.path / "flakes.db")])
    assert result.exit_code == 0, result.output
    (entry,) = parse(result.output)
    assert (entry.nodeid, entry.kinds) == (race, ("concurrency",))
    assert entry.reason == "races between threads (reproducer not confirmed)"
    pytester.makefile(".txt", quarantine=result.output)
    # the race loses an update in every plain run (a barrier makes it lose): quarantined, it does not fail the session
    plain = pytester.runpytest_subprocess("-p", "no:randomly")
    assert plain.ret == pytest.ExitCode.TESTS_FAILED
    kept = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-quarantine=quarantine.txt"
    )
    assert kept.ret == pytest.ExitCode.OK, kept.stdout.str()
    kept.stdout.fnmatch_lines(
        ["1 quarantined test(s) ran: 1 failed without failing the session, 0 passed",
         f"  QUARANTINED FAILURE {race} (F1 concurrency): *"]
    )  # fmt: skip


def test_quarantine_is_refused_by_a_hunt_and_changed_by_a_replay(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".txt", quarantine=LIST)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-quarantine=quarantine.txt", "--hermetic-hunt=2"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --hermetic-quarantine applies to plain pytest sessions*"])
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-replay-db=flakes.db::F1", "--hermetic-hunt-changed"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --hermetic-hunt-changed only applies to a hunt*"])


def test_a_left_out_past_dates_flake_prints_its_crafted_test_id_escaped(tmp_path, monkeypatch):
    crafted = "tests/test_time.py::test_x[\n\x1b[2J]"
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    rows.attempts(run, crafted, "PPPPFPPPPP")
    rows.flake(
        crafted, "F1", kinds=["time"], evidence={"runs": [run], "dates": {"past_only": True}}
    )
    rows.close()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["quarantine"])
    assert result.exit_code == 0, result.output
    # escaped as every other left-out line is (not a line break folded into a blank)
    assert "# F1 tests/test_time.py::test_x[\\x0a\\x1b[2J]: past dates only\n" in result.output
    assert "\x1b" not in result.output
