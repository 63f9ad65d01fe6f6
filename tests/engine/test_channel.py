"""The private channel between a round's child and its parent, without a pytest session."""

from __future__ import annotations

import inspect
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from hermetic_hunt.engine import fork, wire
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.models import Attempt, Step

pytestmark = pytest.mark.skipif(not fork.fork_available(), reason="needs os.fork")
#: The tests that fork (the in-process ones only feed lines to a Child).
forks = pytest.mark.process


def child(pid: int = 4242, token: str = "abc") -> fork.Child:
    job = Job((Step("t.py::test_x"), Step("t.py::test_y")))
    return fork.Child(pid, -1, job, "/nonexistent", 0.0, seal=wire.seal_prefix(token, pid))


def step(index: int) -> bytes:
    return wire.step_line(index, [Attempt("t.py::test_x", "passed", position=index)], [])


def test_only_lines_sealed_by_the_child_are_kept_and_the_rest_counted() -> None:
    c = child()
    forged = wire.end_line("completed", "forged")
    chunk = (
        wire.seal("abc", 4242, step(0))
        + forged  # a test writing to inherited descriptors: no seal
        + wire.seal("abc", 4343, step(1))  # a process the child forked: another pid
        + wire.seal("xyz", 4242, forged)  # a guessed token
    )
    assert c.feed(chunk) == [step(0)]
    assert (c.steps_done, c.rejected, c.ended) == (1, 3, False)


def test_the_childs_end_is_kept_by_the_parent_and_nothing_counts_after_it() -> None:
    c = child()
    lines = c.feed(wire.seal("abc", 4242, wire.end_line("completed")) +
                   wire.seal("abc", 4242, step(1)))  # fmt: skip
    assert lines == [] and c.ended and c.end is not None and c.end["status"] == "completed"
    assert (c.steps_done, c.rejected) == (0, 1)


def test_a_line_split_across_reads_is_kept_whole() -> None:
    c = child()
    line = wire.seal("abc", 4242, step(0))
    assert c.feed(line[:10]) == []
    assert c.feed(line[10:]) == [step(0)]


@forks
def test_the_parent_stops_at_the_childs_exit_though_a_descendant_holds_the_pipe() -> None:
    """Issue 18 item 4: an orphan holding the write end must not hold the round."""
    read_fd, write_fd = os.pipe()
    pids_r, pids_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the round's child
        try:
            held = os.dup(write_fd)  # a copy the channel does not know about
            channel = fork._Channel(write_fd, "tok")
            orphan = os.fork()
            if orphan == 0:  # keeps the copy open long after the child is gone
                time.sleep(60)
                os._exit(0)
            os.write(pids_w, f"{orphan}\n".encode())
            os.close(held)
            channel.write(step(0))
        finally:
            os._exit(0)
    os.close(write_fd)
    os.close(pids_w)
    c = fork.Child(pid, read_fd, Job((Step("t.py::test_x"),)), "/nonexistent", 0.0,
                   seal=wire.seal_prefix("tok", pid), pidfd=fork._pidfd(pid))  # fmt: skip
    got: list[bytes] = []
    orphan = int(os.read(pids_r, 64).decode().strip() or 0)
    os.close(pids_r)
    try:
        assert fork._drain(c, got.extend) is False
        assert got == [step(0)] and c.status is not None
        os.kill(orphan, 0)  # still alive, still holding the pipe: no EOF was needed
    finally:
        c.cleanup()
        if orphan:
            os.kill(orphan, signal.SIGKILL)


class _Handed(Exception):
    pass


def test_a_failing_attempts_line_is_handed_on_at_once_while_the_child_keeps_writing() -> None:
    """Lines come every millisecond (never a pause to coalesce on): only the
    failing one's urgency hands the lines on before a full batch."""
    read_fd, write_fd = os.pipe()
    never_r, never_w = os.pipe()  # a pidfd that never turns readable: the child lives on
    c = fork.Child(4242, read_fd, Job((Step("t.py::test_x"),)), "/nonexistent", 0.0,
                   seal=wire.seal_prefix("tok", 4242), pidfd=never_r)  # fmt: skip
    failing = wire.step_line(0, [Attempt("t.py::test_x", "failed", position=0)], [])
    writing = threading.Event()
    writing.set()

    def child_writes() -> None:
        os.write(write_fd, wire.seal("tok", 4242, failing))
        for _ in range(5 * fork.BATCH):
            if not writing.is_set():
                return
            os.write(write_fd, wire.seal("tok", 4242, step(1)))
            time.sleep(0.001)

    batches: list[list[bytes]] = []

    def sink(lines: Sequence[bytes]) -> None:
        batches.append(list(lines))
        raise _Handed

    writer = threading.Thread(target=child_writes)
    writer.start()
    try:
        with pytest.raises(_Handed):
            fork._drain(c, sink)
    finally:
        writing.clear()
        writer.join()
        for fd in (read_fd, write_fd, never_r, never_w):
            os.close(fd)
    assert batches[0][0] == failing and len(batches[0]) < fork.BATCH


@forks
def test_a_process_the_child_forks_has_no_channel() -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            channel = fork._Channel(write_fd, "tok")
            grandchild = os.fork()
            if grandchild == 0:
                try:
                    os.fstat(channel.fd)
                    os._exit(1)  # still open: the test fails
                except OSError:
                    channel.write(step(9))  # dropped: not the channel's process
                    os._exit(0)
            _, status = os.waitpid(grandchild, 0)
            channel.write(wire.encode({"grandchild": os.waitstatus_to_exitcode(status)}))
        finally:
            os._exit(0)
    os.close(write_fd)
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert data == wire.seal("tok", pid, wire.encode({"grandchild": 0}))


def test_the_parent_maps_module_files_so_a_childs_first_failure_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module imported after the last map: pytest's failure report in a child
    # would stat every component of its path (and of every other module's).
    (tmp_path / "freshly_imported.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "freshly_imported", raising=False)
    module = __import__("freshly_imported")
    try:
        absfile = inspect.getabsfile(module)
        assert absfile not in inspect.modulesbyfile
        fork.warm_module_map()
        assert inspect.modulesbyfile[absfile] == "freshly_imported"
    finally:
        sys.modules.pop("freshly_imported", None)


DUMP = """Timeout (0:01:00)!
Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/proj/src/app/server.py", line 12 in serve

Thread 0x00007f0000000002 (most recent call first):
  File "/venv/lib/python3.11/site-packages/bottle.py", line 584 in get_undecorated_callback
  File "/proj/tests/test_routes.py", line 73 in test_mount
  File "/venv/lib/python3.11/site-packages/_pytest/runner.py", line 118 in pytest_runtest_protocol
  File "/proj/src/hermetic_entry.py", line 6 in <module>
"""


def test_a_hang_is_located_in_the_tests_thread_at_its_innermost_frame_of_the_project() -> None:
    from hermetic_hunt.failures import own_location

    frames = fork.hang_frames(DUMP)
    assert frames[0] == ("/proj/src/hermetic_entry.py", 6)  # outermost first
    assert frames[-1] == ("/venv/lib/python3.11/site-packages/bottle.py", 584)
    assert own_location(frames, "/proj") == "tests/test_routes.py:73"
    # no thread in pytest's protocol: the last one; nothing readable: no frames
    assert fork.hang_frames(DUMP.split("\n\n")[0]) == [
        ("/proj/src/app/server.py", 12), ("/usr/lib/python3.11/threading.py", 320)
    ]  # fmt: skip
    assert fork.hang_frames("") == [] and fork.hang_frames("garbage\n  File") == []


def test_a_step_that_outlives_its_limit_is_killed_once_and_each_finished_step_resets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(fork, "_PERF", lambda: now[0])
    killed: list[int] = []
    monkeypatch.setattr(fork.Child, "kill", lambda self: killed.append(self.pid))
    watched = child()
    watched.watch(5.0)
    now[0] = 105.5
    assert not watched.overdue()  # the grace for the child's own dump
    watched.feed(wire.seal_prefix("abc", 4242) + step(0))
    now[0] = 111.0
    assert not watched.overdue()  # the limit counts from the step that finished
    now[0] = 111.6
    assert watched.overdue() and watched.timed_out and killed == [4242]
    now[0] = 200.0
    assert not watched.overdue() and killed == [4242]


def test_a_steps_end_rearms_the_hang_timer_only_once_it_is_old_and_clears_a_stale_dump(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Re-arming faulthandler's timer restarts its thread: a step's end does it only
    once the timer is ``slack`` old, so the dump still comes before the parent's
    deadline; a dump of a step that ended after all is gone when it is re-armed."""
    now = [100.0]
    monkeypatch.setattr(fork, "_PERF", lambda: now[0])
    armed: list[float] = []
    monkeypatch.setattr(fork.faulthandler, "dump_traceback_later",
                        lambda limit, file: armed.append(limit))  # fmt: skip
    hang = fork._HangDump(str(tmp_path), 10.0, every_step=False)
    assert hang.slack == 0.5
    hang.arm()
    now[0] = 100.4
    hang.arm()  # a step that took 0.4 s: the timer (10 s from 100.0) still stands
    assert armed == [10.0]
    os.write(hang.fd, b"Thread 0x1 (most recent call first):\n")  # a slow step's dump
    now[0] = 110.2
    hang.arm()
    assert armed == [10.0, 10.0]
    assert (tmp_path / fork.HANG_DUMP).read_bytes() == b""
    os.write(hang.fd, b"Current thread")  # the next dump starts at the file's beginning
    assert (tmp_path / fork.HANG_DUMP).read_bytes() == b"Current thread"
    os.close(hang.fd)


def test_under_pytests_faulthandler_timeout_every_step_rearms_the_hang_timer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pytest's faulthandler plugin cancels the timer after each test it armed it for."""
    monkeypatch.setattr(fork, "_PERF", lambda: 100.0)
    armed: list[float] = []
    monkeypatch.setattr(fork.faulthandler, "dump_traceback_later",
                        lambda limit, file: armed.append(limit))  # fmt: skip

    class Config:
        def __init__(self, value: object) -> None:
            self.value = value

        def getini(self, name: str) -> object:
            if self.value is None:
                raise ValueError(f"unknown configuration value: {name!r}")
            return self.value

    assert fork._faulthandler_timer(Config(5.0))
    assert not fork._faulthandler_timer(Config(0.0))
    assert not fork._faulthandler_timer(Config(None))  # -p no:faulthandler
    hang = fork._HangDump(str(tmp_path), 10.0, every_step=fork._faulthandler_timer(Config("2")))
    hang.arm()
    hang.arm()
    assert armed == [10.0, 10.0]
    os.close(hang.fd)
