"""Faults during a hunt: what is stored is exactly what finished, and the run says how it ended.

A test that kills its own process (``os._exit``, SIGKILL, a segfault) is in
``test_hunt.py`` (``test_a_test_that_kills_its_process_costs_only_its_attempt``);
here: a full disk (a real one on a small tmpfs when the tests run as root,
else a simulated ``sqlite3.OperationalError``), ``kill -9`` of an xdist
worker, another signal to one worker, and Ctrl-C (SIGINT to the hunt's process group), SIGTERM and SIGHUP. Every test that
can, runs at ``-n 0`` and ``-n 2``.

"Finished" is counted by the suites themselves: each test appends a line to
``finished.log`` as its last statement (the file exists before the hunt, so
the round barrier never removes it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import one, rows

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

WORKERS = pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])

LOGGED = """
import os, signal, sqlite3
from pathlib import Path

HERE = Path(__file__).parent
LOG = HERE / "finished.log"
COUNTER = HERE / "runs.txt"


def finished(name):
    with LOG.open("a") as log:
        log.write(name + "\\n")


def third_run():
    runs = int(COUNTER.read_text())
    COUNTER.write_text(str(runs + 1))
    return runs == {when}
"""


def logged_suite(pytester: pytest.Pytester, body: str, when: int = 2) -> None:
    pytester.makepyfile(test_suite=LOGGED.replace("{when}", str(when)) + body)
    (pytester.path / "runs.txt").write_text("0")
    (pytester.path / "finished.log").write_text("")


def finished(pytester: pytest.Pytester) -> int:
    return len((pytester.path / "finished.log").read_text().splitlines())


def clean_output(output: str) -> None:
    assert "Traceback" not in output, output
    assert "INTERNALERROR" not in output, output


def hunt_in_group(
    where: Path, *args: str, wrapper: list[str] = ()
) -> subprocess.CompletedProcess[str]:
    """A hunt in its own process group (as a terminal starts it: Ctrl-C, SIGTERM and
    SIGHUP not ignored, even when this suite runs in the background of a shell or under
    ``nohup``), pytest-randomly off."""
    return subprocess.run(
        [*wrapper, sys.executable, "-m", "pytest", "-p", "no:randomly", "--hermetic-seed=2",
         "--hermetic-hunt-isolate=off", *args],
        cwd=where, capture_output=True, text=True, check=False, start_new_session=True,
        timeout=600, preexec_fn=_ctrl_c_as_a_terminal_sends_it,
    )  # fmt: skip


def _ctrl_c_as_a_terminal_sends_it() -> None:
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


# -- Ctrl-C ---------------------------------------------------------------------

CTRL_C = """
def test_a():
    finished("a")

def test_b():
    finished("b")

def test_c():
    finished("c")

def test_presses_ctrl_c_on_its_third_run():
    if third_run():
        # What is sent (SENDS) goes to the hunt's group or its controller: a round
        # runs in a process group of its own, the hunt's is its parent's (whose
        # leader is the controller: hunt_in_group starts it in a new session).
        HUNT_GROUP = os.getpgid(os.getppid())
        {send}
    finished("ctrl-c")
"""

#: How each signal is sent. To the group: what a terminal sends on Ctrl-C
#: or hang-up, and a CI runner on cancel (the controller, the workers, the
#: processes running the rounds). To the controller alone (the session
#: leader: ``hunt_in_group`` starts it in a session of its own): what
#: ``timeout`` and ``docker stop`` send. Twice: the second arrives while the
#: first is being handled.
SENDS = {
    "sigint-group": "os.killpg(HUNT_GROUP, signal.SIGINT)",
    "sigterm-group-twice": "os.killpg(HUNT_GROUP, signal.SIGTERM); "
    "os.killpg(HUNT_GROUP, signal.SIGTERM)",
    "sighup-controller": "os.kill(HUNT_GROUP, signal.SIGHUP)",
}


@WORKERS
@pytest.mark.parametrize("send", list(SENDS))
def test_ctrl_c_sigterm_and_sighup_keep_every_finished_attempt_and_mark_the_run_interrupted(
    pytester, workers, send
):
    logged_suite(pytester, CTRL_C.replace("{send}", SENDS[send]))
    result = hunt_in_group(pytester.path, "--hermetic-hunt=10", *workers)
    output = result.stdout + result.stderr
    db = pytester.path / "flakes.db"
    assert result.returncode == 2, output
    # (a KeyboardInterrupt may land in a finalizer of any process: Python
    # prints "Exception ignored in ..." for it, as in any pytest run)
    assert "INTERNALERROR" not in output, output
    status, rounds_done, counted = one(db, "SELECT status, rounds_done, attempts FROM runs")
    stored = one(db, "SELECT count(*) FROM attempts")
    assert status == "interrupted"
    assert counted == stored
    assert 2 <= rounds_done < 10
    # the interrupted attempt is not one; every attempt that finished is stored
    done = finished(pytester)
    if workers and send.endswith("controller"):
        # the workers were not signalled: they run on until the controller
        # has stored what reached it and shuts them down
        assert stored <= done, (done, stored)
    else:
        # each process running a round (one per worker) may be stopped between a
        # test's last statement and the end of its attempt (its teardown): that
        # attempt did not finish
        running = int(workers[1]) if workers else 1
        assert done - running <= stored <= done, (done, stored)
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome != 'passed'") == 0
    # the indexes of its attempts, built at the end of a hunt into a new database
    assert one(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                   "AND name IN ('attempts_test', 'attempts_place')") == 2  # fmt: skip


# -- kill -9 of an xdist worker --------------------------------------------------

KILL_WORKER = """
def test_steady():
    finished("steady")

def test_kills_its_worker_on_its_third_run():
    if third_run():
        # The worker is the parent of the process running this round.
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    finished("killer")
"""


def test_kill_9_of_a_worker_costs_only_the_attempt_it_ran(pytester):
    logged_suite(pytester, KILL_WORKER)
    # two tests, two workers: each worker runs one test a round
    result = hunt_in_group(pytester.path, "--hermetic-hunt=6", "--hermetic-hunt-order=shuffle",
                           "-n", "2")  # fmt: skip
    output = result.stdout + result.stderr
    db = pytester.path / "flakes.db"
    assert result.returncode == 1, output
    assert "INTERNALERROR" not in output
    assert one(db, "SELECT status, rounds_done FROM runs") == ("complete", 6)
    assert one(db, "SELECT attempts FROM runs") == one(db, "SELECT count(*) FROM attempts") == 12
    crashed = rows(
        db,
        "SELECT t.nodeid, a.round, f.exc_type FROM attempts a JOIN tests t ON t.id = a.test_id "
        "JOIN failures f ON f.attempt_id = a.id WHERE a.outcome = 'crashed'",
    )
    assert crashed == [
        ("test_suite.py::test_kills_its_worker_on_its_third_run", 2, "WorkerCrashed")
    ]
    assert finished(pytester) == 11  # every other attempt finished, and is stored as passed
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome = 'passed'") == 11


# -- a signal to one xdist worker ------------------------------------------------

SIGNAL_WORKER = """
import select

def test_a():
    finished("a")

def test_b():
    finished("b")

def test_c():
    finished("c")

def test_signals_its_worker_on_its_third_run():
    if third_run():
        # The worker is the parent of the process running this round; it ends
        # this process too (the select waits for that, in real time).
        os.kill(os.getppid(), signal.{signal})
        select.select([], [], [])
    finished("signaller")
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP", "SIGUSR1"])
def test_a_signal_to_one_worker_ends_that_worker_not_the_hunt(pytester, name):
    """The worker hands on what its round finished, dies of the signal, and is replaced."""
    logged_suite(pytester, SIGNAL_WORKER.replace("{signal}", name))
    # four tests, two workers: each worker runs two tests a round, so the
    # signalled worker may have finished a step of the round it loses
    result = hunt_in_group(pytester.path, "--hermetic-hunt=6", "--hermetic-hunt-order=shuffle",
                           "-n", "2")  # fmt: skip
    output = result.stdout + result.stderr
    db = pytester.path / "flakes.db"
    assert result.returncode == 1, output
    clean_output(output)
    assert "replacing crashed worker" in output
    assert one(db, "SELECT status, rounds_done FROM runs") == ("complete", 6)
    assert one(db, "SELECT attempts FROM runs") == one(db, "SELECT count(*) FROM attempts") == 24
    crashed = rows(
        db,
        "SELECT t.nodeid, a.round, f.exc_type FROM attempts a JOIN tests t ON t.id = a.test_id "
        "JOIN failures f ON f.attempt_id = a.id WHERE a.outcome = 'crashed'",
    )
    assert crashed == [
        ("test_suite.py::test_signals_its_worker_on_its_third_run", 2, "WorkerCrashed")
    ]
    # every other attempt finished once, and is stored as passed: none was lost
    # or run twice by the replacement
    assert finished(pytester) == 23
    assert one(db, "SELECT count(*) FROM attempts WHERE outcome = 'passed'") == 23
    per_round = rows(db, "SELECT round, count(*), count(DISTINCT test_id) FROM attempts "
                         "GROUP BY round")  # fmt: skip
    assert per_round == [(r, 4, 4) for r in range(6)]


# -- a full disk ------------------------------------------------------------------

FILL_DISK = """
def test_one():
    finished("one")

def test_two():
    finished("two")

def test_fills_the_disk_on_its_third_run():
    if third_run():
        db = Path(os.environ["HUNT_DB"])
        conn = sqlite3.connect(db)
        try:
            (stored,) = conn.execute("SELECT count(*) FROM attempts").fetchone()
        finally:
            conn.close()
        # outside the checkout: the hunt removes the files a round created there
        (Path(os.environ["SAVED"]) / "stored-before.txt").write_text(str(stored))
        with open(db.with_name("ballast"), "wb") as ballast:
            try:
                while True:
                    ballast.write(bytes(65536))
                    ballast.flush()
            except OSError:
                pass
    finished("filler")
"""


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def _whole_rounds(db: Path, tests: int) -> int:
    per_round = rows(db, "SELECT round, count(*), max(repeat) FROM attempts GROUP BY round")
    for _round, attempts, repeat in per_round:
        assert attempts == tests * (2 if repeat else 1), per_round
    return len(per_round)


def _check_full_disk_run(pytester: pytest.Pytester, db: Path, output: str) -> None:
    clean_output(output)
    assert "the hunt stopped early: cannot write to" in output
    assert "the disk is full" in output
    status, rounds_done, planned, counted = one(
        db, "SELECT status, rounds_done, rounds_planned, attempts FROM runs"
    )
    stored = one(db, "SELECT count(*) FROM attempts")
    assert status == "interrupted"
    assert rounds_done < planned
    assert counted == stored
    # whole rounds only: a round counts once all of its attempts are stored
    assert _whole_rounds(db, 3) == rounds_done


@WORKERS
def test_a_full_disk_stops_the_hunt_with_one_line_and_keeps_what_was_written(
    pytester, workers, tmp_path
):
    if not _can_mount_tmpfs():
        pytest.skip("needs root and unshare -m to mount a small tmpfs")
    logged_suite(pytester, FILL_DISK)
    disk, saved = tmp_path / "disk", tmp_path / "saved"
    disk.mkdir()
    saved.mkdir()
    db = disk / "flakes.db"
    script = (
        'mount -t tmpfs -o size=1m tmpfs "$DISK" || exit 99; "$@"; code=$?; '
        'cp "$DISK"/flakes.db* "$SAVED"/; exit $code'
    )
    env = dict(os.environ, DISK=str(disk), SAVED=str(saved), HUNT_DB=str(db))
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "_", sys.executable, "-m", "pytest", "-p",
         "no:randomly", "--hermetic-seed=2", "--hermetic-hunt-isolate=off",
         "--hermetic-hunt=500", f"--hermetic-hunt-db={db}", *workers],
        cwd=pytester.path, capture_output=True, text=True, check=False, env=env, timeout=600,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode not in (0, 99), output
    kept = saved / "flakes.db"
    _check_full_disk_run(pytester, kept, output)
    before = int((saved / "stored-before.txt").read_text())
    assert before > 0
    assert one(kept, "SELECT count(*) FROM attempts") >= before  # nothing written was lost


SIMULATED = """
import sqlite3

import pytest

from hermetic_hunt.store import Store

REAL = Store.add_attempts


def add_attempts(self, records, test_ids):
    (done,) = self.conn.execute("SELECT max(rounds_done) FROM runs").fetchone()
    if done < 3:
        return REAL(self, records, test_ids)
    with self.transaction():  # the disk is full from round 3 on
        raise sqlite3.OperationalError("database or disk is full")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller writes the database
        Store.add_attempts = add_attempts
"""


@WORKERS
def test_a_simulated_full_disk_stops_the_hunt_the_same_way(pytester, workers):
    logged_suite(pytester, "def test_one():\n    pass\n\ndef test_two():\n    pass\n\n"
                 "def test_three():\n    pass\n")  # fmt: skip
    pytester.makeconftest(SIMULATED)
    result = hunt_in_group(pytester.path, "--hermetic-hunt=20", *workers)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output  # pytest's internal error: the hunt could not go on
    db = pytester.path / "flakes.db"
    _check_full_disk_run(pytester, db, output)
    # three rounds were written; the fourth (a twice round: 6 attempts) failed
    assert one(db, "SELECT rounds_done, attempts FROM runs") == (3, 9)
    assert "hermetic-hunt: 9 of the 15 attempts are in the database (3 whole round(s))" in output


# -- the database removed or replaced by a test ----------------------------------

TAKES_THE_DATABASE = """
def test_a():
    finished("a")

def test_takes_the_database_on_its_third_run():
    if third_run():
        {action}
    finished("takes")
"""

ACTIONS = {
    "removed": 'os.remove(HERE / "flakes.db")',
    "replaced": '(HERE / "flakes.db").unlink(); (HERE / "flakes.db").write_bytes(b"not mine")',
}


@pytest.mark.parametrize("how", list(ACTIONS))
def test_a_database_removed_or_replaced_during_the_hunt_loses_nothing(pytester, how):
    logged_suite(pytester, TAKES_THE_DATABASE.replace("{action}", ACTIONS[how]))
    result = hunt_in_group(
        pytester.path, "--hermetic-hunt=5", "--hermetic-hunt-order=shuffle", "-n", "2"
    )
    output = result.stdout + result.stderr
    clean_output(output)
    assert result.returncode == 0, output
    lines = [line for line in output.splitlines() if "during the hunt" in line]
    assert lines == [
        f"hermetic-hunt: flakes.db was {how} during the hunt (by a test?); what was recorded "
        "is in flakes.recovered.db, and the hunt goes on writing there"
    ], output
    recovered = pytester.path / "flakes.recovered.db"
    status, rounds_done, counted = one(recovered, "SELECT status, rounds_done, attempts FROM runs")
    assert (status, rounds_done) == ("complete", 5)
    assert counted == one(recovered, "SELECT count(*) FROM attempts") == finished(pytester) == 10
    if how == "replaced":
        assert (pytester.path / "flakes.db").read_bytes() == b"not mine"
