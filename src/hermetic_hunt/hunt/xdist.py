"""pytest-xdist glue: the hunt scheduler (controller) and the job loop (worker).

The controller decides everything (docs/how-it-works.md, "Transports"):
round by round, it sends every worker its share as one command
(``hermetic_hunt_job``: a :class:`~hermetic_hunt.engine.runner.Job` in its
own codec, ``Job.to_json``). The worker runs the job in a child forked from
its collected, never-run session (:func:`hermetic_hunt.engine.fork.run_job`)
and forwards the child's lines in batches -- not the several messages per
test of xdist's own protocol -- through xdist's
``runtest_protocol_complete`` event, whose ``item_index`` a scheduler may
interpret as it likes (here: a batch of lines). The next round starts when
every worker finished this one: then the checkout is put back
(:mod:`.files`), as a new CI run would find it.

Workers get a PYTHONHASHSEED derived from the base seed and their slot. A
collection that differs between workers only in order (a parametrization
over a ``set`` under another hash seed) is mapped by nodeid; collections
that truly differ stop the hunt at once with a one-line error naming the
first differing test, each worker's hash seed, and the ``--collect-only``
commands that show it.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from hermetic_hunt import _compat
from hermetic_hunt.engine import wire
from hermetic_hunt.engine.engine import collection_failed, stop_on_collection_errors
from hermetic_hunt.engine.executor import process_hash_seed
from hermetic_hunt.engine.fork import ChildSetup, interrupts_deferred, prepare, run_job
from hermetic_hunt.engine.runner import Job
from hermetic_hunt.hunt.signals import Interrupts, Terminated
from hermetic_hunt.models import Failure, Settings
from hermetic_hunt.seeds import worker_hash_seed

if TYPE_CHECKING:
    from hermetic_hunt.engine.engine import Engine
    from hermetic_hunt.hunt.controller import HuntController

WORKERINPUT_KEY = "hermetic_hunt"
COMMAND = "hermetic_hunt_job"
#: Lines a worker collects before it forwards them (or :data:`FORWARD_SECONDS`).
FORWARD_LINES = 256
FORWARD_SECONDS = 0.1
_PERF = time.perf_counter


@dataclass
class _Running:
    """The job a worker runs, and how many of its steps it reported."""

    job: Job
    done: int = 0


class HuntScheduling:
    """Hands every worker slot its share of each round, one round at a time.

    Attributes::

    :numnodes: how many workers the session starts with (= slots).
    :node2collection: each node's collected nodeids; all hold the same tests
        (in any order: a job names its tests, each node runs them by nodeid).
    :node2slot: which slot a live node serves. A node that replaces a
        crashed one takes over the crashed node's slot and its unsent work.
    :running: the job each node is running (None: idle).
    :backlog: per slot, jobs not yet sent (a crashed node's rest).
    :pending: jobs of the current round not yet finished.

    Invariants: a round starts only when every slice of the previous one
    ended; which worker slot runs which tests at which position is a pure
    function of the base seed, the collection and the worker count.
    """

    def __init__(
        self,
        config: pytest.Config,
        hunt: HuntController,
        numnodes: int,
        hash_seeds: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        self.hunt = hunt
        self.numnodes = numnodes
        #: PYTHONHASHSEED each worker (gateway id) was started with ("" unknown).
        self.hash_seeds = hash_seeds if hash_seeds is not None else {}
        self.reference: Any = None
        self.node2collection: dict[Any, list[str]] = {}
        self.node2slot: dict[Any, int] = {}
        self.running: dict[Any, _Running | None] = {}
        self.backlog: dict[int, list[Job]] = {}
        self.collection: list[str] | None = None
        self.pending = 0
        self._rounds: Iterator[int] | None = None
        self._done = False

    # -- the Scheduling protocol ----------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2slot)

    @property
    def collection_is_completed(self) -> bool:
        # Nodes stay in node2collection after they leave: the initial
        # collection, once complete, stays complete.
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        return self._done and not self.has_pending

    @property
    def has_pending(self) -> bool:
        return self.pending > 0 or any(self.backlog.values())

    def add_node(self, node: Any) -> None:
        assert node not in self.node2slot
        used = set(self.node2slot.values())
        free = sorted(set(range(self.numnodes)) - used)
        # The initial workers gw0..gwN-1 serve slots 0..N-1 whatever order
        # they become ready in (their hash seeds follow the same order); a
        # replacement takes the slot whose work is waiting, else a free one.
        name = _worker(node)
        own = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else -1
        waiting = [slot for slot in free if self.backlog.get(slot)]
        self.node2slot[node] = (waiting or ([own] if own in free else free) or [len(used)])[0]
        self.running[node] = None

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        assert node in self.node2slot
        self.node2collection[node] = list(collection)
        if self.collection is not None and self._fits(node):
            self._send_backlog()

    def mark_test_complete(self, node: Any, item_index: Any, duration: float = 0) -> None:
        """A batch of lines from ``node`` (see the module docstring)."""
        current = self.running.get(node)
        if current is None or not isinstance(item_index, bytes):
            return
        lines = item_index.splitlines(keepends=True)
        ended = any(line.startswith(wire.END_PREFIX) for line in lines)
        current.done += len(lines) - ended
        self.hunt.ingest(lines, _worker(node), current.job.round_no)
        if ended:
            self.running[node] = None
            self.pending -= 1
            self._advance()

    def stop(self) -> None:
        """Start no more rounds (the session is over)."""
        self._done = True

    def mark_test_pending(self, item: str) -> None:
        # pytest-rerunfailures asks to run a crashed test again. A crash is
        # an attempt of its own (stored as `crashed`); the next round runs
        # the test again anyway.
        raise NotImplementedError("a hunt does not re-run crashed attempts")

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError("the hunt scheduler never steals work")

    def remove_node(self, node: Any) -> str | None:
        slot = self.node2slot.pop(node)
        current = self.running.pop(node, None)
        if current is None or current.done >= len(current.job.steps):
            return None
        job, done, worker = current.job, current.done, _worker(node)
        nodeid = job.steps[done].nodeid
        failure = Failure("WorkerCrashed", f"worker {worker} died while running this test", "",
                          f"worker {worker} crashed while running {nodeid}")  # fmt: skip
        lost = job.lost(done, self.hunt.settings.base_seed, worker, failure)
        self.hunt.crashed(worker, job.round_no, lost)
        rest = job.rest(done, job.start)
        if rest.steps:
            self.backlog.setdefault(slot, []).append(rest)
        else:
            self.pending -= 1
            self.hunt.ingest([wire.end_line("completed")], worker, job.round_no)
            self._advance()
        self._send_backlog()
        return nodeid

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            self._send_backlog()
            return
        if self.hunt.collection_stops():
            # A plain ``pytest -n N`` would run the rest; a hunt stops as ``-n 0``
            # does, so that every worker count hunts the same tests (the
            # controller's run loop raises pytest's Interrupted when it ends).
            self._done = True
            return
        # Slot 0's collection order is the test list (the one round 0 runs in),
        # whichever worker finished collecting first.
        firsts = [node for node, slot in self.node2slot.items() if slot == 0]
        self.reference = next((n for n in firsts if n in self.node2collection),
                              next(iter(self.node2collection)))  # fmt: skip
        self.collection = list(self.node2collection[self.reference])
        if any(node in self.node2slot and not self._fits(node) for node in self.node2collection):
            return  # (the hunt is done: _fits said why)
        self.hunt.set_tests(self.collection)
        if not self.collection:
            self._done = True
            return
        self.hunt.begin()
        self._rounds = self.hunt.rounds.numbers()
        self._advance()

    # -- internals ------------------------------------------------------------

    def _fits(self, node: Any) -> bool:
        """The node collected the same tests (in any order); else stop the hunt."""
        assert self.collection is not None
        theirs = self.node2collection[node]
        if sorted(theirs) == sorted(self.collection) and len(set(theirs)) == len(theirs):
            return True
        self.hunt.error = self._difference(node, theirs)
        self._done = True
        return False

    def _difference(self, node: Any, theirs: list[str]) -> str:
        """One line: the first test one worker has and another lacks, why, and
        how to see it with plain pytest."""
        assert self.collection is not None
        ref = self.reference
        extra = sorted(set(theirs) - set(self.collection))
        missing = sorted(set(self.collection) - set(theirs))
        if extra or missing:
            has, lacks = (node, ref) if extra else (ref, node)
            test = (extra or missing)[0]
            what = f"worker {self._name(has)} collected {test!r} and {self._name(lacks)} did not"
        else:
            what = f"worker {self._name(node)} collected a test twice"
        seeds = [self.hash_seeds.get(_worker(n), "") for n in (ref, node)]
        see = ""
        if all(seeds) and seeds[0] != seeds[1]:
            from hermetic_hunt.isolate.wire import probe_args

            given = probe_args([str(a) for a in self.config.invocation_params.args])
            args = [a for a in given if not re.fullmatch(r"-[qv]+|--quiet|--verbose", a)]
            command = shlex.join(["pytest", "--collect-only", "-q", *args])
            see = (
                f"; compare: PYTHONHASHSEED={seeds[0]} {command} "
                f"with: PYTHONHASHSEED={seeds[1]} {command}"
            )
        return (
            f"workers collected different tests: {what}. A hunt gives each worker its own "
            "PYTHONHASHSEED and this suite's collection depends on it (a parametrization "
            "built from a set or dict?): sort it, or hunt with -n 0 or PYTHONHASHSEED set"
            f"{see}"
        )

    def _name(self, node: Any) -> str:
        seed = self.hash_seeds.get(_worker(node), "")
        return f"{_worker(node)} (PYTHONHASHSEED={seed})" if seed else _worker(node)

    def _advance(self) -> None:
        if self.has_pending or self._done:
            return
        assert self._rounds is not None
        stop = self.hunt.error is not None or self.hunt.stopping()
        round_no = None if stop else next(self._rounds, None)
        if round_no is None:
            self._done = True
            return
        plan = self.hunt.rounds.plan(round_no, self.numnodes)
        for slot, indices in enumerate(plan.slices):
            if indices:  # (round 0 runs on one worker: the others are sent nothing)
                self.backlog.setdefault(slot, []).append(self.hunt.rounds.job(plan, slot))
                self.pending += 1
        self._send_backlog()

    def _send_backlog(self) -> None:
        for node, slot in list(self.node2slot.items()):
            waiting = self.backlog.get(slot)
            if waiting and self.running.get(node) is None and node in self.node2collection:
                job = waiting.pop(0)
                self.running[node] = _Running(job)
                node.sendcommand(COMMAND, job=job.to_json())


def _worker(node: Any) -> str:
    return str(getattr(getattr(node, "gateway", None), "id", None) or "main")


class XdistController:
    """xdist hooks on the controller, registered only for a distributed hunt."""

    def __init__(self, hunt: HuntController, numnodes: int) -> None:
        self.hunt = hunt
        self.numnodes = numnodes
        self.scheduler: HuntScheduling | None = None
        self._specs_left = 0
        self._vary_hash_seed = "PYTHONHASHSEED" not in os.environ
        self._next_slot = 0
        self.hash_seeds: dict[str, str] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        if self.hunt.stopped_at_collection:  # as -n 0 stops (a plain -n N runs the rest)
            stop_on_collection_errors(session)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> HuntScheduling:
        self.scheduler = HuntScheduling(config, self.hunt, self.numnodes, self.hash_seeds)
        return self.scheduler

    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Sequence[Any]) -> None:
        self._specs_left = len(specs)
        self._set_hash_seed(0)

    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        # The gateway started with the seed set right before it (or the user's).
        self.hash_seeds[str(getattr(gateway, "id", ""))] = os.environ.get("PYTHONHASHSEED", "")
        self._specs_left -= 1
        self._next_slot += 1
        if self._specs_left > 0:
            self._set_hash_seed(self._next_slot)
        elif self._vary_hash_seed:  # every worker started: unset again, as the user had it
            os.environ.pop("PYTHONHASHSEED", None)

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.hunt.settings.to_json()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """After Ctrl-C: the batches workers sent that xdist's stopped loop never read.

        Runs before the controller's own session finish (which stores them).
        """
        scheduler = self.scheduler
        if scheduler is None or not self.hunt.interrupted:
            return
        scheduler.stop()
        for node, payload in _compat.late_batches(session.config, quiet=0.2, most=2.0):
            if node is not None:
                scheduler.mark_test_complete(node, payload)

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if error is not None:
            # A replacement worker is about to start: give it a fresh,
            # recorded hash seed (unset again by pytest_xdist_newgateway).
            self._specs_left = 1
            self._next_slot += 1
            self._set_hash_seed(self._next_slot)

    def _set_hash_seed(self, incarnation: int) -> None:
        if self._vary_hash_seed:  # (else every worker runs under the user's)
            seed = worker_hash_seed(self.hunt.settings.base_seed, incarnation)
            os.environ["PYTHONHASHSEED"] = str(seed)


def worker_settings(config: pytest.Config) -> Settings | None:
    """The hunt's settings on a worker (None: a worker of a session not hunting)."""
    workerinput = getattr(config, "workerinput", None)
    facts = workerinput.get(WORKERINPUT_KEY) if isinstance(workerinput, dict) else None
    return Settings.from_json(facts) if isinstance(facts, dict) else None


class _Forwarder:
    """Collects a child's lines and sends them to the controller in batches."""

    def __init__(self, interactor: Any) -> None:
        self.interactor = interactor
        self.lines: list[bytes] = []
        self.last = _PERF()

    def add(self, lines: Sequence[bytes]) -> None:
        self.lines.extend(lines)
        urgent = any(map(wire.urgent, lines))  # a failure: never lost to a kill -9
        if urgent or len(self.lines) >= FORWARD_LINES or _PERF() - self.last >= FORWARD_SECONDS:
            self.flush()

    def tick(self) -> None:
        if self.lines and _PERF() - self.last >= FORWARD_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            # (taken and sent inside the deferral: an interrupt between the two, or a
            # message cut in half, would lose the batch)
            with interrupts_deferred():
                payload, self.lines = b"".join(self.lines), []
                self.interactor.sendevent(
                    "runtest_protocol_complete", item_index=payload, duration=0.0
                )
        self.last = _PERF()


_CLOSED = object()


class XdistWorker:
    """Worker side: runs the jobs the controller sends, each in a forked child."""

    def __init__(self, config: pytest.Config, engine: Engine) -> None:
        self.config = config
        self.engine = engine

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        interactor = _compat.worker_interactor(self.config)
        if interactor is None:
            raise pytest.UsageError(
                "hermetic-hunt: this pytest-xdist version's worker cannot be driven "
                "(no WorkerInteractor found): hunt with -n 0"
            )
        if collection_failed(session):
            return None  # xdist's own loop reports the collection errors
        commands: queue.Queue[Any] = queue.Queue()
        interactor.channel.setcallback(commands.put, endmarker=_CLOSED)
        setup = ChildSetup(
            close_fds=tuple(_compat.gateway_fds(interactor)),
            new_group=True,
            worker=str(self.config.workerinput.get("workerid", "gw?")),  # type: ignore[attr-defined]
        )
        hash_seed = process_hash_seed()
        prepare(self.engine)  # while the controller waits for the other workers' collection
        # SIGTERM/SIGHUP end this worker, not the hunt (hunt/signals.py).
        interrupts = Interrupts(controller=False).install()
        try:
            self._loop(session, commands, interactor, setup, hash_seed)
        except Terminated as signalled:
            signalled.die()
        finally:
            interrupts.uninstall()
        return True

    def _loop(self, session: pytest.Session, commands: queue.Queue[Any], interactor: Any,
              setup: ChildSetup, hash_seed: int | None) -> None:  # fmt: skip
        for name, kwargs in iter(commands.get, _CLOSED):
            if name == "shutdown":
                break
            if name != COMMAND:
                continue
            forward = _Forwarder(interactor)
            try:
                run_job(self.engine, session, Job.from_json(kwargs["job"]), setup, forward.add,
                        hash_seed, tick=forward.tick)  # fmt: skip
            finally:
                forward.flush()
