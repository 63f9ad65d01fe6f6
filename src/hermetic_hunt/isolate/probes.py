"""The probe runner: runs isolation probes in fresh processes, in parallel.

A probe is a short sequence of attempts (explicit seed, start time, mode) to
run in one fresh process with a given ``PYTHONHASHSEED``, never in the
hunt's workers. Where ``os.fork`` exists, one long-lived probe server per
hash seed (:mod:`hermetic_hunt.isolate.server`) forks a child per probe;
elsewhere (or with ``fork=False``) every probe is a server of its own: why,
and the limits (parallelism, timeout), in docs/isolation.md, "Fast probes".

Two probes whose tests write the same path (in the hunt, or in an earlier
probe) never run at the same time: they would collide (:mod:`.collision`);
only a probe pair (:meth:`ProbeRunner.run_together`) runs them at once, on
purpose. What a probe creates in the checkout is removed after it, so the
next probe finds the checkout as isolation found it. A probe whose
steps ran under CPU stress (``Step.stress``) runs alone, with that many busy
processes beside it (:mod:`hermetic_hunt.engine.stress`): its stress must
not spill over into other probes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout  # not builtin before 3.11
from dataclasses import dataclass
from typing import IO, Any

from hermetic_hunt import journal as journal_format
from hermetic_hunt.engine import wire as engine_wire
from hermetic_hunt.engine.files import FileWatch
from hermetic_hunt.engine.fork import fork_available
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.engine.stress import CpuStress
from hermetic_hunt.errors import HuntError
from hermetic_hunt.findings import Probe, ProbeResult
from hermetic_hunt.isolate import wire
from hermetic_hunt.isolate.collision import shared_path
from hermetic_hunt.models import DEFAULT_PROBE_TIMEOUT, Settings, Step

_PERF = time.perf_counter
#: Seconds the client waits beyond a probe's timeout before it gives up on a server.
GRACE = 30.0
#: Seconds a server may take to start and collect.
STARTUP_TIMEOUT = 600.0
#: Environment variables of the hunt's own worker processes, never inherited.
_SCRUB = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@dataclass(frozen=True)
class ProbeTarget:
    """Where and how to start probe servers: the hunt's own session, minus the hunt."""

    invocation_dir: str
    args: tuple[str, ...]
    settings: Settings


__all__ = ["ProbeRunner", "ProbeTarget", "fork_available"]


class _Server:
    """One probe server process and the thread that reads its answers."""

    def __init__(
        self, target: ProbeTarget, hash_seed: int, fork: bool, collect_at: float | None = None
    ) -> None:
        self.fork = fork
        self.collected: frozenset[str] | None = None
        self.detail = ""
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._dead = False
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in quit()
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        spec = {
            "requests": req_r, "responses": resp_w, "fork": fork,
            "settings": target.settings.to_json(),
        }  # fmt: skip
        if collect_at is not None:
            spec["collect_at"] = collect_at
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env.update({"PYTHONHASHSEED": str(hash_seed), wire.ENV: json.dumps(spec)})
        addopts = os.environ.get("PYTEST_ADDOPTS")
        if addopts:
            env["PYTEST_ADDOPTS"] = shlex.join(wire.probe_args(shlex.split(addopts)))
        # pytest's cache (last failures, pytest-randomly's seed) goes to a folder of the
        # server's own: a probe never writes into the checkout or changes what --lf reruns.
        self._cache = tempfile.TemporaryDirectory(prefix="hermetic-hunt-probe-cache-")
        argv = [
            sys.executable, "-m", "pytest", *target.args,
            *wire.cache_args(target.args, env.get("PYTEST_ADDOPTS", ""), self._cache.name),
            "-p", "hermetic_hunt.isolate.server",
        ]  # fmt: skip
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=target.invocation_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=(req_r, resp_w),
                start_new_session=True,
            )
        finally:
            os.close(req_r)
            os.close(resp_w)
        self._requests = os.fdopen(req_w, "wb", buffering=0)
        self._responses = os.fdopen(resp_r, "rb")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- reading -----------------------------------------------------------------

    def _read(self) -> None:
        try:
            for line in self._responses:
                message = wire.decode(line)
                if message.get("op") == "ready":
                    collected = message.get("collected")
                    if isinstance(collected, list):
                        self.collected = frozenset(str(n) for n in collected)
                    self._ready.set()
                elif message.get("op") == "result":
                    with self._lock:
                        future = self._pending.pop(int(message["id"]), None)
                    if future is not None:
                        future.set_result(message)
        except (ValueError, OSError) as exc:
            self.detail = f"unreadable answer from the probe server: {exc}"
        finally:
            self._died()

    def _died(self) -> None:
        with self._lock:
            self._dead = True
            pending, self._pending = self._pending, {}
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        if not self.detail:
            self.detail = self.stderr_tail() or f"the probe server exited ({self.proc.returncode})"
        for future in pending.values():
            if not future.done():
                future.set_result({"status": "error", "detail": self.detail})
        self._ready.set()

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return "\n".join(lines[-8:])[-limit:]

    def wait_ready(self, timeout: float) -> bool:
        self._ready.wait(timeout)
        return self.collected is not None and not self._dead

    # -- requests ----------------------------------------------------------------

    def request(self, messages: Sequence[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
        """Send every message, then wait for each answer (a probe, or a probe pair's members)."""
        with self._lock:
            if self._dead:
                return self._gone(len(messages))
            futures: list[Future[dict[str, Any]]] = [Future() for _ in messages]
            self._pending.update({int(m["id"]): f for m, f in zip(messages, futures, strict=True)})
        try:
            self._requests.write(b"".join(engine_wire.encode(m) for m in messages))
        except OSError:
            with self._lock:
                for message in messages:
                    self._pending.pop(int(message["id"]), None)
            return self._gone(len(messages))
        answers = []
        for future in futures:
            try:
                answers.append(future.result(timeout=timeout + (GRACE if self.fork else 0.0)))
            except FutureTimeout:
                # One-shot mode has no server-side timeout; a fork server that
                # does not answer is wedged. Either way: stop it.
                self.kill()
                answers.append({"status": "timeout", "detail": f"stopped after {timeout:g}s"})
        return answers

    def _gone(self, count: int) -> list[dict[str, Any]]:
        detail = self.detail or "the probe server is gone"
        return [{"status": "error", "detail": detail} for _ in range(count)]

    def quit(self) -> None:
        with contextlib.suppress(OSError):
            self._requests.write(engine_wire.encode({"op": "quit"}))
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(timeout=5)
        if not self._reader.is_alive():
            self._responses.close()
        self._stderr.close()
        self._cache.cleanup()

    def terminate(self) -> None:
        """Ask the server to stop now: it kills its probes and exits."""
        with contextlib.suppress(OSError):
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)


class ProbeRunner:
    """Runs :class:`~hermetic_hunt.findings.Probe` objects; thread-safe.

    ``journals(attempt_id)`` supplies the stored journal a record-mode step
    replays (the runner itself never reads the database).
    """

    def __init__(
        self,
        target: ProbeTarget,
        *,
        parallel: int = 1,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
        fork: bool | None = None,
        journals: Callable[[int], bytes | None] | None = None,
        writes: Mapping[str, Iterable[str]] | None = None,
        checkout: FileWatch | None = None,
    ) -> None:
        self.target = target
        #: The checkout as isolation found it: what a probe creates there is removed
        #: after it (a probe runs in a fresh process on a clean checkout, as a round does).
        self.checkout = checkout
        self._tidying = threading.Lock()
        self.parallel = max(1, parallel)
        self.timeout = timeout
        self.fork = fork_available() if fork is None else (fork and fork_available())
        self.journals = journals or (lambda attempt_id: None)
        #: Paths each test writes (the hunt's record, then what probes showed).
        self._writes: dict[str, set[str]] = {n: set(p) for n, p in (writes or {}).items()}
        self._held: list[set[str]] = []  # the paths of the probes running now
        self._paths_free = threading.Condition()
        self.started_servers = 0
        self.startup_error = ""
        self.closed = False
        self._servers: dict[int, _Server] = {}
        self._collected: dict[int, frozenset[str] | None] = {}
        self._failed: dict[int, str] = {}  # hash seeds whose server did not start
        self._oneshots: set[_Server] = set()  # process-per-probe servers running now
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.parallel)
        self._exclusive = threading.Lock()  # held while a stress probe gathers every slot
        self._ids = iter(range(1, 1 << 62))
        self._pool = ThreadPoolExecutor(max_workers=self.parallel)

    def __enter__(self) -> ProbeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(
        self, hash_seed: int, collect_at: float | None = None, unforked: bool = False
    ) -> _Server:
        self.started_servers += 1
        return _Server(self.target, hash_seed, self.fork and not unforked, collect_at)

    def _server(self, hash_seed: int) -> _Server | None:
        """A ready fork server for ``hash_seed`` (None: it could not start)."""
        with self._lock:
            if hash_seed in self._failed:
                return None
            server = self._servers.get(hash_seed)
            if server is not None and server._dead:
                server.quit()  # died after it was ready (a wedged server we killed)
                server = None
            if server is None:
                server = self._servers[hash_seed] = self._start(hash_seed)
        if server.wait_ready(STARTUP_TIMEOUT):
            return server
        with self._lock:
            self._failed[hash_seed] = server.detail
            self.startup_error = server.detail
        return None

    def collected(self, hash_seed: int | None) -> frozenset[str] | None:
        """Nodeids a server with ``hash_seed`` collects (None: it did not start)."""
        seed = hash_seed if hash_seed is not None else 0
        if seed in self._collected:
            return self._collected[seed]
        if self.fork:
            ready = self._server(seed)
            result = ready.collected if ready is not None else None
        else:
            server = self._start(seed)
            result = server.collected if server.wait_ready(STARTUP_TIMEOUT) else None
            if result is None:
                self.startup_error = server.detail
            server.quit()
        self._collected[seed] = result
        return result

    @contextlib.contextmanager
    def _slot(self, stress: int) -> Iterator[None]:
        """One of the ``parallel`` slots; all of them, and busy processes, for stress."""
        with self._every_slot() if stress else self._slots, CpuStress(stress):
            yield

    @contextlib.contextmanager
    def _every_slot(self) -> Iterator[None]:
        """Every slot: no other probe runs meanwhile."""
        with self._exclusive:
            for _ in range(self.parallel):
                self._slots.acquire()
        try:
            yield
        finally:
            for _ in range(self.parallel):
                self._slots.release()

    def run(self, probe: Probe) -> ProbeResult:
        if self.closed:
            return ProbeResult("error", detail="isolation was stopped")
        try:
            job = self._job(probe)
        except HuntError as exc:  # a stored journal that cannot be replayed
            return ProbeResult("error", detail=str(exc))
        with self._slot(max((s.stress for s in probe.steps), default=0)), self._paths(probe):
            started = _PERF()
            message = self._requests([job])[0]
            if self.fork and probe.collect_at is None and not probe.unforked:
                ready = self._server(probe.hash_seed)
                if ready is None:
                    answer = {"status": "error", "detail": self._failed[probe.hash_seed]}
                else:
                    answer = ready.request([message], self.timeout)[0]
            else:
                # no fork, a process of its own on another date, or the collecting
                # process itself: a server per probe
                server = self._start(probe.hash_seed, probe.collect_at, probe.unforked)
                with self._lock:
                    self._oneshots.add(server)
                if server.wait_ready(STARTUP_TIMEOUT):
                    answer = server.request([message], self.timeout)[0]
                else:
                    answer = {"status": "error", "detail": server.detail}
                server.quit()
                with self._lock:
                    self._oneshots.discard(server)
            return self._results(probe.steps, [answer], started)[0]

    def _results(
        self, steps: Sequence[Step], answers: Sequence[dict[str, Any]], started: float
    ) -> list[ProbeResult]:
        """The answers as results. The paths their tests wrote are learned, and what
        the probe created in the checkout is removed: the paths its tests wrote, in
        the hunt and in it (only those: other probes may be running)."""
        for answer in answers:
            answer.setdefault("duration", _PERF() - started)
        results = [wire.result_from(answer) for answer in answers]
        with self._lock:
            for attempt in (a for result in results for a in result.steps if a.writes):
                self._writes.setdefault(attempt.nodeid, set()).update(attempt.writes)
        if self.checkout is None:
            return results
        with self._lock:
            paths = {p for s in steps for p in self._writes.get(s.nodeid, ())}
        paths.update(p for result in results for a in result.steps for p in a.writes)
        if paths:
            with self._tidying:
                self.checkout.tidy(sorted(paths))
        return results

    @contextlib.contextmanager
    def _paths(self, probe: Probe) -> Iterator[None]:
        """Wait until no running probe writes a path this one's tests write."""
        with self._lock:
            paths = {p for s in probe.steps for p in self._writes.get(s.nodeid, ())}
        if not paths:
            yield
            return
        with self._paths_free:
            while any(shared_path(list(paths), list(held)) for held in self._held):
                self._paths_free.wait()
            self._held.append(paths)
        try:
            yield
        finally:
            with self._paths_free:
                self._held.remove(paths)
                self._paths_free.notify_all()

    def run_together(self, probes: Sequence[Probe], after: str = "") -> list[ProbeResult]:
        """Run ``probes`` (one hash seed) each in its own process, started at the same
        moment by their fork server, with no other probe running beside them
        (``after``: the first starts once that path exists: the others hold it)."""
        if self.closed:
            return [ProbeResult("error", detail="isolation was stopped") for _ in probes]
        if not self.fork or len({p.hash_seed for p in probes}) != 1:
            why = "a probe pair needs os.fork and one hash seed"
            return [ProbeResult("error", detail=why) for _ in probes]
        with self._every_slot():
            started = _PERF()
            ready = self._server(probes[0].hash_seed)
            if ready is None:
                detail = self._failed[probes[0].hash_seed]
                return [ProbeResult("error", detail=detail) for _ in probes]
            try:
                jobs = [self._job(probe) for probe in probes]
            except HuntError as exc:  # a stored journal that cannot be replayed
                return [ProbeResult("error", detail=str(exc)) for _ in probes]
            requests = self._requests(jobs)
            messages = [wire.grouped(request, str(requests[0]["id"]), len(probes),
                                     after if index == 0 else "")
                        for index, request in enumerate(requests)]  # fmt: skip
            answers = ready.request(messages, self.timeout)
            return self._results([s for probe in probes for s in probe.steps], answers, started)

    def _requests(self, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        with self._lock:
            ids = [next(self._ids) for _ in jobs]
        return [wire.probe_request(i, job, self.timeout) for i, job in zip(ids, jobs, strict=True)]

    def _job(self, probe: Probe) -> Job:
        """The probe's job, with the stored journals its record-mode steps replay
        (:class:`~hermetic_hunt.errors.BadJournal` when one cannot be)."""
        journals = {
            step.attempt_id: journal_format.decode(
                data, where=f"the journal of A{step.attempt_id}", expect_test=step.nodeid
            )
            for step in probe.steps
            if step.mode == "record" and step.attempt_id is not None
            and (data := self.journals(step.attempt_id)) is not None
        }  # fmt: skip
        return Job(probe.steps, journals=journals)

    def run_many(self, probes: Sequence[Probe]) -> list[ProbeResult]:
        """Run ``probes`` in parallel (up to ``parallel``); results in order."""
        return list(self._pool.map(self.run, probes))

    def abort(self) -> None:
        """Stop every probe now (Ctrl-C): servers kill their probes and exit."""
        self.closed = True
        with self._lock:
            servers = list(self._servers.values())
            oneshots = list(self._oneshots)
        for server in servers:
            server.terminate()
        for server in oneshots:
            server.kill()  # it runs its probe itself: its process group is all there is

    def close(self) -> None:
        self.closed = True
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.quit()
        self._pool.shutdown(wait=True)
