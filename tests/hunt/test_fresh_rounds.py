"""Every round is a fresh run: nothing crosses rounds, state flows inside one as in pytest."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import hunt, one, rows

from hermetic_hunt.cli import main

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

WORKERS = [[], ["-n", "2"]]
IDS = ["n0", "n2"]


@pytest.mark.parametrize("workers", WORKERS, ids=IDS)
def test_module_globals_and_class_attributes_start_fresh_in_every_round(pytester, workers):
    pytester.makepyfile(
        test_fresh="""
        CALLS = []

        class TestShared:
            seen = []

            def test_a_module_global_is_new(self):
                CALLS.append(1)
                assert CALLS == [1]

            def test_a_class_attribute_is_new(self):
                self.seen.append(1)
                assert self.seen == [1]

        def test_plain():
            assert True
        """
    )
    result = hunt(
        pytester, "--hermetic-hunt=6", "--hermetic-hunt-order=shuffle",
        "--hermetic-hunt-isolate=off", *workers,
    )  # fmt: skip
    db = pytester.path / "flakes.db"
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome != 'passed'") == 0
    assert one(db, "SELECT rounds_done FROM runs") == 6


@pytest.mark.parametrize("workers", WORKERS, ids=IDS)
def test_a_session_fixture_is_set_up_once_per_round_on_each_worker(pytester, workers):
    pytester.makeconftest(
        """
        import pytest
        from pathlib import Path

        @pytest.fixture(scope="session")
        def server():
            with Path(__file__).with_name("calls.txt").open("a") as f:
                f.write("up\\n")
            yield "ready"
        """
    )
    pytester.makepyfile(
        test_server="\n".join(f"def test_{i}(server):\n    assert server\n" for i in range(6))
    )
    (pytester.path / "calls.txt").write_text("")  # there before the hunt: kept between rounds
    result = hunt(
        pytester, "--hermetic-hunt=4", "--hermetic-hunt-order=shuffle",
        "--hermetic-hunt-isolate=off", *workers,
    )  # fmt: skip
    assert result.ret == 0
    # round 0 (the default round) runs in one process; the other rounds on every worker
    per_round = 2 if workers else 1
    assert (pytester.path / "calls.txt").read_text().count("up") == 1 + 3 * per_round


ORDER = """
import os

def test_victim():
    assert os.environ.get("HH_REGION", "US") == "US"

def test_polluter():
    os.environ["HH_REGION"] = "EU"

def test_bystander():
    pass
"""


def test_state_a_test_leaves_breaks_later_tests_of_its_round_and_only_those(pytester):
    pytester.makepyfile(test_order=ORDER)
    hunt(pytester, "--hermetic-hunt=8", "--hermetic-hunt-order=shuffle",
         "--hermetic-hunt-isolate=off")  # fmt: skip
    db = pytester.path / "flakes.db"
    order: dict[int, list[tuple[str, str]]] = {}
    for round_no, nodeid, outcome in rows(
        db,
        "SELECT a.round, t.nodeid, a.outcome FROM attempts a JOIN tests t ON t.id = a.test_id "
        "ORDER BY a.round, a.position",
    ):
        order.setdefault(round_no, []).append((nodeid.split("::")[1], outcome))
    victims = 0
    for sequence in order.values():
        names = [name for name, _ in sequence]
        outcome = dict(sequence)["test_victim"]
        polluted = names.index("test_polluter") < names.index("test_victim")
        assert outcome == ("failed" if polluted else "passed"), sequence
        victims += polluted
    assert 0 < victims < 8  # both orders were met


LEAKS = """
import asyncio, locale, logging, os, signal, socket, subprocess, sys, tempfile, threading
import time, warnings
from pathlib import Path

import pytest

HERE = Path(__file__).parent
KEEP = []


def test_env_added():
    os.environ["HH_ADDED"] = "x"

def test_env_changed():
    os.environ["HH_CHANGED"] = "after"

def test_env_removed():
    del os.environ["HH_REMOVED"]

def test_cwd_deleted():
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)

def test_tz():
    os.environ["TZ"] = "JST-9"
    time.tzset()

def test_sys_path():
    sys.path.append("/hh/nowhere")

def test_project_module():
    import helper_mod

def test_warnings_filter():
    warnings.simplefilter("ignore", UserWarning)

def test_logging_handler():
    logging.getLogger().addHandler(logging.NullHandler())

def test_signal_handler():
    signal.signal(signal.SIGUSR1, lambda *a: None)

def test_thread():
    stop = threading.Event()
    threading.Thread(target=stop.wait, name="hh-lingering", daemon=True).start()
    KEEP.append(stop)

def test_child_process():
    KEEP.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))

def test_open_file():
    KEEP.append(open(__file__))

def test_socket_timeout():
    socket.setdefaulttimeout(3)

def test_recursion_limit():
    sys.setrecursionlimit(sys.getrecursionlimit() + 7)

def test_switch_interval():
    sys.setswitchinterval(0.0042)

class CustomPolicy(asyncio.DefaultEventLoopPolicy):
    pass

def test_asyncio_policy():
    asyncio.run(asyncio.sleep(0))  # asyncio's own default policy: no leak
    asyncio.set_event_loop_policy(CustomPolicy())

def test_file_in_checkout():
    (HERE / "made" / "out.txt").parent.mkdir(exist_ok=True)
    (HERE / "made" / "out.txt").write_text("x")

def test_file_changed():
    (HERE / "kept.txt").write_text("changed")

def test_temp_file():
    fd, name = tempfile.mkstemp(prefix="hh-leak-")
    os.close(fd)


@pytest.fixture(scope="module")
def module_env():
    os.environ["HH_MODULE"] = "1"
    yield
    del os.environ["HH_MODULE"]

def test_uses_a_module_fixture(module_env):
    pass
"""
#: resource -> (the test that leaked it, its name in the leaks table or None: any)
EXPECTED = {
    ("env", "HH_ADDED"): "test_env_added",
    ("env", "HH_CHANGED"): "test_env_changed",
    ("env", "HH_REMOVED"): "test_env_removed",
    ("cwd", "cwd"): "test_cwd_deleted",
    ("tz", "timezone"): "test_tz",
    ("sys.path", "/hh/nowhere"): "test_sys_path",
    ("module", "helper_mod"): "test_project_module",
    ("logging", "NullHandler"): "test_logging_handler",
    ("signal", "SIGUSR1"): "test_signal_handler",
    ("thread", "hh-lingering"): "test_thread",
    ("socket-timeout", "socket-timeout"): "test_socket_timeout",
    ("recursion-limit", "recursion-limit"): "test_recursion_limit",
    ("switch-interval", "switch-interval"): "test_switch_interval",
    ("asyncio-policy", "asyncio-policy"): "test_asyncio_policy",
    ("file", "made/out.txt"): "test_file_in_checkout",
    ("file", "kept.txt"): "test_file_changed",
}


@pytest.mark.parametrize("workers", WORKERS, ids=IDS)
def test_every_kind_of_leak_is_recorded_against_the_test_that_left_it(
    pytester, workers, monkeypatch
):
    pytester.makepyfile(test_leaky=LEAKS, helper_mod="VALUE = 1\n")
    (pytester.path / "kept.txt").write_text("original")
    monkeypatch.setenv("HH_CHANGED", "before")
    monkeypatch.setenv("HH_REMOVED", "before")
    monkeypatch.setenv("TZ", "UTC0")
    result = hunt(
        pytester, "--hermetic-hunt=2", "--hermetic-hunt-order=shuffle",
        "--hermetic-hunt-isolate=off", "-p", "no:asyncio", *workers,
    )  # fmt: skip
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT status FROM runs") == "complete", result.stdout.str()[-3000:]
    found = {
        (resource, name): (nodeid or "").split("::")[-1]
        for resource, name, nodeid in rows(
            db, "SELECT resource, name, nodeid FROM leaks_view WHERE persisted = 1"
        )
    }
    for key, test in EXPECTED.items():
        assert found.get(key) == test, (key, sorted(found))
    assert any(r == "process" and t == "test_child_process" for (r, _), t in found.items())
    assert any(r == "fd" and t == "test_open_file" for (r, _), t in found.items())
    # the round's private temp folder: its entries are exactly its own tests'
    assert {t for (r, n), t in found.items() if r == "tempfile"} == {"test_temp_file"}
    # a module fixture that set and unset a variable left nothing behind, and
    # pytest itself puts the warnings filters back after every test
    assert ("env", "HH_MODULE") not in found
    assert ("warnings", "filters") not in found
    # files a round made in the checkout are gone; a file that was there is never touched
    assert not (pytester.path / "made").exists()
    assert (pytester.path / "kept.txt").read_text() == "changed"
    detail = one(
        db, "SELECT detail FROM leaks WHERE resource = 'env' AND name = 'HH_ADDED' LIMIT 1"
    )
    assert detail == "'x'"
    cwd = rows(db, "SELECT change FROM leaks WHERE resource = 'cwd'")
    assert {c for (c,) in cwd} == {"deleted"}


def test_secret_looking_values_are_masked_in_leaks(pytester):
    pytester.makepyfile(
        test_secret="import os\n\ndef test_sets_a_token():\n    os.environ['HH_API_TOKEN'] = 'hunter2'\n"
    )
    hunt(pytester, "--hermetic-hunt=1", "--hermetic-hunt-isolate=off")
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT detail FROM leaks WHERE name = 'HH_API_TOKEN'") == "***"


CLOCK = """
import time
from datetime import datetime, timezone

import pytest

@pytest.fixture(scope="module")
def opened():
    return datetime.now(timezone.utc), time.monotonic()

def test_first(opened):
    time.sleep(3)

def test_second(opened):
    wall, mono = opened
    assert time.monotonic() >= mono
    assert 0 <= (datetime.now(timezone.utc) - wall).total_seconds() < 60

def test_third(opened):
    wall, mono = opened
    assert time.monotonic() >= mono
    assert 0 <= (datetime.now(timezone.utc) - wall).total_seconds() < 60
"""


@pytest.mark.parametrize("workers", WORKERS, ids=IDS)
def test_a_round_runs_on_one_timeline_so_fixtures_agree_with_their_tests(pytester, workers):
    pytester.makepyfile(test_clock=CLOCK)
    result = hunt(pytester, "--hermetic-hunt=6", "--hermetic-hunt-isolate=off", *workers)
    assert result.ret == 0, result.stdout.str()[-2000:]
    db = pytester.path / "flakes.db"
    # each attempt's start is stored: its place on the round's timeline
    for worker, round_no, nows in [
        (w, r, json.loads(n))
        for w, r, n in rows(
            db,
            "SELECT worker, round, json_group_array(now) FROM "
            "(SELECT * FROM attempts ORDER BY position) GROUP BY worker, round, repeat",
        )
    ]:
        assert nows == sorted(nows), (worker, round_no)


NOT_IDEMPOTENT = """
REGISTERED = []

def test_register_once():
    REGISTERED.append("card")
    assert REGISTERED == ["card"]

def test_other():
    pass
"""


def test_a_test_that_fails_only_when_run_twice_is_found_apart_and_not_flaky(pytester):
    pytester.makepyfile(test_twice=NOT_IDEMPOTENT)
    result = hunt(pytester, "--hermetic-hunt=4")
    db = pytester.path / "flakes.db"
    result.stdout.fnmatch_lines(
        [
            "hermetic-hunt: 0 flaky · 0 broken · 0 sandbox-incompatible · 1 not idempotent · "
            "1 stable *",
            "hermetic-hunt: what CI will see: 1 fails only when rerun in one process "
            "(pytest-rerunfailures, --count)",
            "  F1 test_twice.py::test_register_once  self-polluting · fails only when rerun "
            "in one process (pytest-rerunfailures, --count) *",
        ]
    )
    assert one(db, "SELECT count(*) FROM attempts WHERE repeat = 0 AND outcome = 'failed'") == 0
    kinds, reproducer = one(db, "SELECT kinds, reproducer FROM flakes")
    assert json.loads(kinds) == ["self-polluting"]
    steps = [s["nodeid"] for s in json.loads(reproducer)["steps"]]
    assert steps == ["test_twice.py::test_register_once"] * 2


DOCTESTED = '''
def double(x):
    """
    >>> double(2)
    4
    """
    return 2 * x
'''


def test_a_twice_round_runs_test_functions_twice_but_a_doctest_once(pytester):
    # A doctest's namespace is cleared after its run: run again in the same
    # process it fails with a NameError no plain pytest run can show.
    pytester.makepyfile(test_twice=NOT_IDEMPOTENT, calc=DOCTESTED)
    result = hunt(pytester, "--hermetic-hunt=4", "--doctest-modules")
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome = 'failed'") == 1, (
        result.stdout.str()
    )
    runs = dict(
        rows(
            db,
            "SELECT t.nodeid, group_concat(a.repeat) FROM attempts a JOIN tests t "
            "ON t.id = a.test_id WHERE a.repeat > 0 GROUP BY t.nodeid",
        )
    )
    assert sorted(runs["calc.py::calc.double"].split(",")) == ["1"]
    assert sorted(runs["test_twice.py::test_other"].split(",")) == ["1", "2"]
    result.stdout.fnmatch_lines(
        ["*0 flaky · 0 broken · 0 sandbox-incompatible · 1 not idempotent*"]
    )


FAILS_ON_ITS_FOURTH_RUN = """
from pathlib import Path

RUNS = Path({counter!r})

def test_flaky():
    runs = int(RUNS.read_text()) + 1 if RUNS.exists() else 1
    RUNS.write_text(str(runs))
    assert runs != 4  # the fourth round is the twice round: its first run

def test_other():
    pass
"""


def test_a_failure_in_a_twice_rounds_first_run_is_a_plain_attempt_and_makes_the_test_flaky(
    pytester,
):
    # Rounds 1-3 run test_flaky once each; the fourth (the twice round) runs
    # it twice in one process: the first of those fails, the second passes.
    counter = pytester.path.parent / f"{pytester.path.name}-runs"
    pytester.makepyfile(test_first=FAILS_ON_ITS_FOURTH_RUN.format(counter=str(counter)))
    result = hunt(pytester, "--hermetic-hunt=4", "--hermetic-hunt-isolate=off")
    db = pytester.path / "flakes.db"
    assert counter.read_text() == "5"
    assert rows(
        db,
        "SELECT a.repeat, a.outcome FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid LIKE '%test_flaky' AND a.round = 3 ORDER BY a.position",
    ) == [(1, "failed"), (2, "passed")]
    result.stdout.fnmatch_lines(["hermetic-hunt: 1 flaky · 0 broken *"])
    assert one(
        db, "SELECT attempts, passed, failed FROM test_stats WHERE nodeid LIKE '%test_flaky'"
    ) == (4, 3, 1)
    assert one(db, "SELECT count(*) FROM flaky_tests") == 1
    report = CliRunner().invoke(main, ["report", "--format", "json", "--db", str(db)])
    test = next(t for t in json.loads(report.stdout)["tests"] if "test_flaky" in t["nodeid"])
    assert (test["status"], test["failures"], test["attempts"]) == ("flaky", 1, 4)
