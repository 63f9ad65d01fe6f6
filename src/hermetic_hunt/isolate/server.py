"""The probe server: a pytest session that collects once and forks a child per probe.

Started by :class:`hermetic_hunt.isolate.probes.ProbeRunner` as
``python -m pytest <the hunt's arguments> -p hermetic_hunt.isolate.server``
with ``PYTHONHASHSEED`` set and its settings in ``$HERMETIC_HUNT_PROBE``
(JSON: the request and response pipe descriptors, base seed, mode,
integration marker, whether to fork). It collects, says ``ready`` (with the
collected nodeids) and serves probe requests instead of running tests:

* fork mode: each request forks a child from the collected, never-run
  session. The child runs the probe's steps through
  :class:`~hermetic_hunt.engine.sequence.SequenceRunner` (same executor and sandbox
  as a hunt), writes its result to a pipe and leaves with ``os._exit``. The
  server kills a child (its whole process group) that outlives its timeout.
* one-shot mode (no ``fork`` on this platform): the server runs one request
  itself and exits; the client enforces the timeout.

The server never finishes its session normally (``os._exit``): no cache,
junit or coverage file is written on behalf of a probe.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from hermetic_hunt import journal as journal_format
from hermetic_hunt.engine.sequence import SequenceRunner, Step
from hermetic_hunt.errors import HuntError
from hermetic_hunt.isolate import wire

_PERF = time.perf_counter
_READ = 65536


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Whatever the ini's addopts say: no xdist, no early stop, no reruns, no pdb.
    option = config.option
    if hasattr(option, "numprocesses"):
        option.numprocesses = 0
        option.distload = False
        option.dist = "no"
    option.maxfail = 0
    # A probe needs the failure's signature (type, location, first line),
    # not its traceback: the line style keeps the signature and costs a
    # fraction of the long style (which reads every frame's source).
    option.tbstyle = "line"
    option.showlocals = False
    option.usepdb = False
    option.trace = False
    for name in ("stepwise", "stepwise_skip", "lf", "failedfirst", "newfirst", "looponfail"):
        if hasattr(option, name):
            setattr(option, name, False)
    if hasattr(option, "reruns"):
        option.reruns = 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from hermetic_hunt.engine.executor import AttemptExecutor, ExecSettings
    from hermetic_hunt.plugin import _hand_seeding_to_the_hunt, _register_executor

    spec = json.loads(os.environ[wire.ENV])
    _hand_seeding_to_the_hunt(config)
    server = Server(config, spec)
    config.pluginmanager.register(server, "hermetic-hunt-probe-server")
    executor = AttemptExecutor(
        ExecSettings(int(spec["base_seed"]), str(spec["mode"]), str(spec["marker"])),
        server.locate,
    )
    _register_executor(config, executor)
    config.addinivalue_line("markers", f"{spec['marker']}: keeps real network during a hunt")


@dataclass
class _Child:
    pid: int
    request_id: int
    fd: int
    deadline: float
    started: float
    temp: str
    data: bytearray = field(default_factory=bytearray)


class Server:
    """Serves probe requests from the collected session."""

    def __init__(self, config: pytest.Config, spec: dict[str, Any]) -> None:
        self.config = config
        self.requests = int(spec["requests"])
        self.responses = int(spec["responses"])
        self.fork = bool(spec["fork"])
        self.items: list[pytest.Item] = []
        self.runner: SequenceRunner | None = None
        self.children: dict[int, _Child] = {}
        self.temp = tempfile.mkdtemp(prefix="hermetic-hunt-probes-")
        self._buffer = bytearray()
        self._closed = False

    def locate(self, item: pytest.Item) -> Any:
        return self.runner.locate(item) if self.runner is not None else None

    def send(self, message: dict[str, Any]) -> None:
        data = wire.encode(message)
        while data:
            written = os.write(self.responses, data)
            data = data[written:]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        self.items = list(session.items)
        self.send(
            {
                "op": "ready",
                "collected": [item.nodeid for item in self.items],
                "hash_seed": os.environ.get("PYTHONHASHSEED"),
                "fork": self.fork,
                "pid": os.getpid(),
            }
        )
        try:
            self.serve(session)
        except SystemExit:
            pass  # SIGTERM: the runner aborts
        finally:
            self.shutdown()
            sys.stdout.flush()
            os._exit(0)

    # -- the loop ----------------------------------------------------------------

    def serve(self, session: pytest.Session) -> None:
        # The runner's abort(): stop now, kill the probes (see shutdown()).
        signal.signal(signal.SIGTERM, _stop)
        if self.fork:
            # Move everything collected so far out of the collector's reach: a
            # child's garbage collections then never write to (and copy) the
            # pages it shares with this server.
            gc.collect()
            gc.freeze()
        while not (self._closed and not self.children):
            readers = [] if self._closed else [self.requests]
            readers += [child.fd for child in self.children.values()]
            deadline = min((c.deadline for c in self.children.values()), default=None)
            wait = None if deadline is None else max(0.0, deadline - _PERF())
            ready, _, _ = select.select(readers, [], [], wait)
            for fd in ready:
                if fd == self.requests:
                    self._read_requests(session)
                else:
                    self._read_child(self.children[fd])
            now = _PERF()
            for child in [c for c in self.children.values() if c.deadline <= now]:
                self._kill(child)

    def _read_requests(self, session: pytest.Session) -> None:
        chunk = os.read(self.requests, _READ)
        if not chunk:
            self._closed = True
            return
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, _, rest = bytes(self._buffer).partition(b"\n")
            self._buffer = bytearray(rest)
            message = wire.decode(line)
            if message.get("op") == "quit":
                self._closed = True
            elif message.get("op") == "probe":
                self._start(session, message)

    def _start(self, session: pytest.Session, message: dict[str, Any]) -> None:
        request_id = int(message["id"])
        timeout = float(message.get("timeout") or 120.0)
        temp = tempfile.mkdtemp(dir=self.temp)
        if not self.fork:
            started = _PERF()
            result = self.run_probe(session, message, temp)
            result.update(id=request_id, duration=_PERF() - started)
            self.send(result)
            self._closed = True
            return
        read_fd, write_fd = os.pipe()
        started = _PERF()
        # No SIGTERM between the fork and the child's registration: an abort
        # must find every child to kill.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        pid = os.fork()
        if pid == 0:  # the child
            os.close(read_fd)
            self._child(session, message, write_fd, temp)
        os.close(write_fd)
        self.children[read_fd] = _Child(pid, request_id, read_fd, started + timeout, started, temp)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    def _read_child(self, child: _Child) -> None:
        chunk = os.read(child.fd, _READ)
        if chunk:
            child.data += chunk
            return
        _, status = os.waitpid(child.pid, 0)
        try:
            result = wire.decode(bytes(child.data))
        except ValueError:
            code = os.waitstatus_to_exitcode(status)
            result = {"status": "error", "detail": f"the probe process died (exit status {code})"}
        self._finish(child, result)

    def _kill(self, child: _Child) -> None:
        for target in (-child.pid, child.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGKILL)
        os.waitpid(child.pid, 0)
        limit = child.deadline - child.started
        self._finish(child, {"status": "timeout", "detail": f"stopped after {limit:g}s"})

    def _finish(self, child: _Child, result: dict[str, Any]) -> None:
        del self.children[child.fd]
        os.close(child.fd)
        shutil.rmtree(child.temp, ignore_errors=True)
        result.update(op="result", id=child.request_id, duration=_PERF() - child.started)
        self.send(result)

    def shutdown(self) -> None:
        for child in list(self.children.values()):
            self._kill(child)
        shutil.rmtree(self.temp, ignore_errors=True)

    # -- running a probe ---------------------------------------------------------

    def _child(self, session: pytest.Session, message: dict[str, Any], fd: int, temp: str) -> None:
        code = 0
        try:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            for inherited in (self.requests, self.responses, *self.children):
                os.close(inherited)
            result = self.run_probe(session, message, temp)
            data = wire.encode(result)
            while data:
                data = data[os.write(fd, data) :]
        except BaseException:  # a child must never return into pytest
            code = 70
        finally:
            os._exit(code)

    def run_probe(
        self, session: pytest.Session, message: dict[str, Any], temp: str
    ) -> dict[str, Any]:
        """Run the request's steps in this process; a result message (without id)."""
        # Each probe gets its own pytest temporary directory root.
        os.environ["PYTEST_DEBUG_TEMPROOT"] = temp
        capture = self.config.pluginmanager.getplugin("capturemanager")
        if self.fork and capture is not None and capture.is_globally_capturing():
            # Fresh capture files: the server's are shared with every child.
            capture.stop_global_capturing()
            capture.start_global_capturing()
        try:
            steps = [_step(raw) for raw in message.get("steps") or []]
            runner = SequenceRunner(steps, str(self.config.rootpath), deselect_others=False)
            runner.select(self.items)
        except (HuntError, ValueError, KeyError, TypeError) as exc:
            return {"op": "result", "status": "error", "detail": str(exc), "steps": []}
        self.runner = runner
        self.config.pluginmanager.register(runner, "hermetic-hunt-probe-sequence")
        status, detail = "completed", ""
        try:
            runner.run(session)
        except (session.Failed, session.Interrupted) as exc:
            status, detail = "error", f"the session stopped: {exc}"
        if status == "completed" and len(runner.records) < len(steps):
            status, detail = "error", f"{len(runner.records)} of {len(steps)} steps ran"
        return {
            "op": "result",
            "status": status,
            "detail": detail,
            "steps": [wire.step_result_json(record) for record in runner.records],
        }


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _step(raw: Any) -> Step:
    if not isinstance(raw, dict) or not isinstance(raw.get("nodeid"), str):
        raise ValueError("each step needs a nodeid")
    data = raw.get("journal")
    journal = None
    if isinstance(data, str):
        journal = journal_format.decode(
            wire._unb64(data) or b"", where=f"the journal for {raw['nodeid']}",
            expect_test=raw["nodeid"],
        )  # fmt: skip
    seed, now = raw.get("seed"), raw.get("now")
    return Step(
        nodeid=raw["nodeid"],
        seed=int(seed) if isinstance(seed, int) else None,
        now=float(now) if isinstance(now, (int, float)) else None,
        mode=str(raw.get("mode") or "seeded"),
        journal=journal,
    )
