"""The network guard stays on between a job's attempts (a thread a test leaves).

Runs in a forked child: the guard between attempts is for the rest of a
process. The real ``connect`` is a spy (never a packet, never a lookup).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from typing import Any

import pytest

from hermetic_hunt.sandbox import NetworkBlocked, Sandbox, SandboxSpec, netguard
from hermetic_hunt.sandbox.attempt import guard_between_attempts

NOW = 1_700_000_000.0


def _child() -> dict[str, Any]:
    reached: list[object] = []
    netguard.REAL["connect"] = lambda sock, address: reached.append(address)
    guard_between_attempts()
    out: dict[str, Any] = {}
    sock = socket.socket()
    try:
        sock.connect(("192.0.2.1", 80))
        out["outside"] = "connected"
    except NetworkBlocked:
        out["outside"] = "blocked"
    go, done = threading.Event(), threading.Event()

    def later() -> None:
        go.wait()
        with socket.socket() as left, contextlib.suppress(NetworkBlocked):
            left.connect(("192.0.2.2", 443))
        done.set()

    engine = Sandbox()
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::test_starts_a_thread"))
    threading.Thread(target=later, daemon=True).start()
    engine.exit()
    go.set()  # no attempt open: the left thread reaches for the network
    done.wait(10)
    engine.enter(SandboxSpec(seed=2, now=NOW, test_id="t.py::test_next"))
    facts = engine.exit()
    out["next"] = [(v.host, v.port, v.detail.split(":")[0]) for v in facts.violations]
    engine.enter(SandboxSpec(seed=3, now=NOW, test_id="t.py::t_off", network="off"))
    sock.connect(("192.0.2.3", 80))  # the attempt allows it: the spy is reached
    engine.exit()
    out["reached"] = [list(a) for a in reached]  # type: ignore[call-overload]
    return out


@pytest.mark.process
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_left_threads_call_between_attempts_is_blocked_and_named_in_the_next_attempt() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, json.dumps(_child()).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        out = json.loads(pipe.read())
    assert out["outside"] == "blocked"
    assert out["next"] == [["192.0.2.2", 443, "a thread left by t.py"]]
    assert out["reached"] == [["192.0.2.3", 80]]  # only the network="off" attempt's


@pytest.mark.process
def test_the_processes_an_attempt_starts_are_counted_the_guard_not_reaching_them() -> None:
    import subprocess
    import sys

    engine = Sandbox()
    engine.enter(SandboxSpec(seed=4, now=NOW, test_id="t.py::test_runs_a_program"))
    try:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    finally:
        facts = engine.exit()
    assert facts.counts.get("processes") == 2
    engine.enter(SandboxSpec(seed=5, now=NOW, test_id="t.py::test_quiet"))
    assert "processes" not in engine.exit().counts
