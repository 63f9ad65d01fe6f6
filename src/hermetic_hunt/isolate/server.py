"""The probe server: a pytest session that collects once and forks a child per probe.

How it is started and why (docs/isolation.md, "Fast probes"): by
:class:`hermetic_hunt.isolate.probes.ProbeRunner`, with ``PYTHONHASHSEED``
set and its settings in ``$HERMETIC_HUNT_PROBE`` (JSON: the request and
response pipe descriptors, whether to fork, the hunt's settings and, for a
probe of the whole process on another date, ``collect_at``: epoch seconds
its clock is shifted to at import). It collects, says ``ready`` and serves
probe requests (:mod:`.wire`) instead of running tests: in fork mode each
in a child forked from the collected, never-run session
(:func:`hermetic_hunt.engine.fork.spawn`, the engine a hunt's rounds run
in), killing a child's whole process group that outlives its timeout; in
one-shot mode it runs one request itself and exits, and the client enforces
the timeout. It never finishes its session normally (``os._exit``).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import sys
import time
from typing import Any

import pytest

from hermetic_hunt.engine import fork
from hermetic_hunt.engine import wire as engine_wire
from hermetic_hunt.engine.engine import Engine
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.errors import HuntError
from hermetic_hunt.isolate import wire
from hermetic_hunt.models import Attempt, Settings
from hermetic_hunt.untrusted import is_number

_PERF = time.perf_counter
_READ = 65536


def _shift_if_asked() -> None:
    """A server for a probe of the whole process on another date (``collect_at``):
    shift its clock now, at import -- before the initial conftests and the test
    modules are imported (:mod:`hermetic_hunt.sandbox.shift`)."""
    try:
        at = json.loads(os.environ.get(wire.ENV, "{}")).get("collect_at")
    except (ValueError, AttributeError):
        return
    if is_number(at):
        from hermetic_hunt.engine.engine import shift_process

        shift_process(float(at))


_shift_if_asked()


#: A probe server's options, whatever the ini's addopts say (those its plugins
#: define): no xdist, no early stop, no reruns, no pdb. A probe needs the
#: failure's signature (type, location, first line), not its traceback: the
#: line style keeps the signature and costs a fraction of the long style
#: (which reads every frame's source).
_OPTIONS = {
    "numprocesses": 0, "distload": False, "dist": "no", "maxfail": 0, "tbstyle": "line",
    "showlocals": False, "usepdb": False, "trace": False, "stepwise": False,
    "stepwise_skip": False, "lf": False, "failedfirst": False, "newfirst": False,
    "looponfail": False, "reruns": 0,
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    for name, value in _OPTIONS.items():
        if hasattr(config.option, name):
            setattr(config.option, name, value)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    spec = json.loads(os.environ[wire.ENV])
    settings = Settings.from_json(spec.get("settings"))
    server = Server(spec, Engine(config, settings))
    config.pluginmanager.register(server, "hermetic-hunt-probe-server")


class _Probe:
    """A request being answered: its child and the first execution of each step."""

    def __init__(self, request_id: int, child: fork.Child, timeout: float) -> None:
        self.request_id = request_id
        self.child = child
        self.deadline = child.started + timeout
        self.timeout = timeout
        self.attempts: list[Attempt] = []
        self.status = ""
        self.detail = ""

    def next_deadline(self) -> float:
        """When the probe, or the step it runs now, must end."""
        step = self.child.deadline
        return self.deadline if step is None or self.child.timed_out else min(self.deadline, step)

    def take(self, lines: list[bytes]) -> None:
        for line in lines:
            try:
                message = engine_wire.decode(line)
            except ValueError:
                continue
            if message.get("op") == engine_wire.END:
                self.ended(message)
                continue
            self.attempts.extend(a for a in engine_wire.attempts_in(message) if a.execution == 1)

    def ended(self, message: dict[str, Any]) -> None:
        """The child's end message."""
        status = message.get("status")
        self.status = "completed" if status == "completed" else "error"
        if status != "completed":
            self.detail = str(message.get("detail") or status)


class Server:
    """Serves probe requests from the collected session."""

    def __init__(self, spec: dict[str, Any], engine: Engine) -> None:
        self.engine = engine
        self.requests = int(spec["requests"])
        self.responses = int(spec["responses"])
        self.fork = bool(spec["fork"])
        self.probes: dict[int, _Probe] = {}
        #: Requests of a probe pair still waiting for the rest of their group.
        self.groups: dict[str, list[dict[str, Any]]] = {}
        self._buffer = bytearray()
        self._closed = False

    def send(self, message: dict[str, Any]) -> None:
        data = engine_wire.encode(message)
        while data:
            written = os.write(self.responses, data)
            data = data[written:]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        self.send({"op": "ready", "collected": [item.nodeid for item in session.items]})
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
        while not (self._closed and not self.probes):
            readers = [] if self._closed else [self.requests]
            readers += list(self.probes)
            deadline = min((p.next_deadline() for p in self.probes.values()), default=None)
            wait = None if deadline is None else max(0.0, deadline - _PERF())
            ready, _, _ = select.select(readers, [], [], wait)
            for fd in ready:
                if fd == self.requests:
                    self._read_requests(session)
                else:
                    self._read_child(self.probes[fd])
            now = _PERF()
            for probe in list(self.probes.values()):
                probe.child.overdue()  # a step that hangs: killed, a Timeout (_read_child)
            for probe in [p for p in self.probes.values() if p.deadline <= now]:
                probe.child.kill()
                probe.status, probe.detail = "timeout", f"stopped after {probe.timeout:g}s"
                self._finish(probe)

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
            elif message.get("op") == "probe" and self.fork and wire.group_of(message)[0]:
                self._gather(session, message)
            elif message.get("op") == "probe":
                self._start(session, message)

    def _start(self, session: pytest.Session, message: dict[str, Any]) -> None:
        request_id = int(message["id"])
        timeout = float(message.get("timeout") or 120.0)
        try:
            job = Job.from_json(message.get("job"))
            runner = self.engine.runner_for(job)
            runner.select(session.items)
        except (HuntError, ValueError, KeyError, TypeError) as exc:
            self.send(wire.result(request_id, "error", str(exc)))
            return
        if not self.fork:
            started = _PERF()
            attempts: list[Attempt] = []

            def on_step(index: int, found: list[Attempt], reports: Any) -> None:
                attempts.extend(a for a in found if a.execution == 1)

            runner = self.engine.runner_for(job, on_step=on_step)
            outcome = self.engine.run(session, job, runner=runner)
            status = "completed" if outcome.status == "completed" else "error"
            self.send(wire.result(request_id, status, outcome.detail, attempts, _PERF() - started))
            self._closed = True
            return
        self._spawn(session, request_id, job, timeout)

    def _spawn(
        self,
        session: pytest.Session,
        request_id: int,
        job: Job,
        timeout: float,
        gate: tuple[int, ...] = (),
    ) -> None:
        """Fork a child for the job (``gate``: the read end it waits on, then the
        descriptors it must close -- its own gate's read end is kept)."""
        keep = gate[0] if gate else None
        extra = tuple(fd for fd in gate[1:] if fd != keep)
        close = (self.requests, self.responses, *self.probes, *extra)
        setup = fork.ChildSetup(close, new_group=True, gate=keep)
        child = fork.spawn(self.engine, session, job, setup)
        child.watch(self.engine.settings.test_timeout)
        self.probes[child.fd] = _Probe(request_id, child, timeout)

    def _gather(self, session: pytest.Session, message: dict[str, Any]) -> None:
        """A probe of a pair: once its whole group is here, fork every member behind
        one gate and open it, so they start at the same moment."""
        group, size = wire.group_of(message)
        waiting = self.groups.setdefault(group, [])
        waiting.append(message)
        if len(waiting) < size:
            return
        del self.groups[group]
        ids = [int(member["id"]) for member in waiting]
        try:
            jobs = [
                (Job.from_json(m.get("job")), float(m.get("timeout") or 120.0)) for m in waiting
            ]
        except (HuntError, ValueError, KeyError, TypeError) as exc:
            for request_id in ids:
                self.send(wire.result(request_id, "error", str(exc)))
            return
        gates = [os.pipe() for _ in jobs]
        others = tuple(fd for gate in gates for fd in gate)  # no child holds another's gate
        try:
            for request_id, (job, timeout), (read_end, _) in zip(ids, jobs, gates, strict=True):
                self._spawn(session, request_id, job, timeout, (read_end, *others))
        finally:
            for read_end, _ in gates:
                os.close(read_end)
            # End of file on a gate starts its member: the ones that wait for
            # nothing now, each other one once its path exists.
            members = zip(gates, waiting, strict=True)
            order = sorted(members, key=lambda item: bool(wire.after_of(item[1])))
            for (_, write_end), member in order:
                if wire.after_of(member):
                    _wait_for(wire.after_of(member), wire.AFTER_WAIT)
                os.close(write_end)

    def _read_child(self, probe: _Probe) -> None:
        chunk = os.read(probe.child.fd, _READ)
        if chunk:
            probe.take(probe.child.feed(chunk))
            if probe.child.end is not None and not probe.status:
                probe.ended(probe.child.end)
            return
        if not probe.status and probe.child.timed_out:
            # The step that hung is the probe's answer (its Timeout attempt);
            # any step after it did not run (_finish says so).
            probe.attempts.append(fork.crashed(probe.child, self.engine.settings, "main", None))
            probe.status = "completed"
        if not probe.status:
            code = probe.child.reap()
            tail = probe.child.stderr_tail().splitlines()[-1:] or [""]
            probe.status = "error"
            probe.detail = f"the probe process died ({fork.describe_exit(code)}) {tail[0]}".strip()
        self._finish(probe)

    def _finish(self, probe: _Probe) -> None:
        del self.probes[probe.child.fd]
        probe.child.reap()
        probe.child.cleanup()
        status = probe.status or "error"
        if status == "completed" and len(probe.attempts) < len(probe.child.job.steps):
            status = "error"
            probe.detail = f"{len(probe.attempts)} of {len(probe.child.job.steps)} steps ran"
        self.send(wire.result(probe.request_id, status, probe.detail, probe.attempts,
                              _PERF() - probe.child.started))  # fmt: skip

    def shutdown(self) -> None:
        for probe in list(self.probes.values()):
            probe.child.kill()
            probe.child.reap()
            probe.child.cleanup()
        self.probes.clear()


def _wait_for(path: str, seconds: float) -> None:
    until = _PERF() + seconds
    while not os.path.exists(path) and _PERF() < until:
        time.sleep(0.002)


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
