"""pytest-xdist glue: the hunt scheduler (controller) and attempt decoding (worker).

The controller decides everything. For every worker slot it sends, through
xdist's ordinary ``runtests`` command, the *attempt keys* of that slot's
share of each round: ``key = round * T + test_index`` (T = number of
collected tests). A worker's ``session.items`` is wrapped so that
``items[key]`` is the test ``key % T``; the executor reads the key xdist is
running and derives the round, hence the attempt's seed. Nothing about a
hunt travels outside xdist's own protocol, so any gateway spec works
(``-n``, ``--tx 2*popen``, ``--tx ssh=...``).

Workers whose interpreter randomises hashes are started with a
PYTHONHASHSEED derived from the base seed and their slot, so hash-order
flakes are seen across workers and can be replayed.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from hermetic_hunt.engine.executor import Slot
from hermetic_hunt.hunt.schedule import plan_round
from hermetic_hunt.seeds import worker_hash_seed

if TYPE_CHECKING:
    from hermetic_hunt.hunt.controller import HuntController

WORKERINPUT_KEY = "hermetic_hunt"
_PERF = __import__("time").perf_counter


class HuntScheduling:
    """Hands every worker slot its shuffled share of every round.

    Attributes::

    :numnodes: how many workers the session starts with (= slots).
    :node2collection: each node's collected nodeids; all must be equal.
    :node2slot: which slot a live node serves. A node that replaces a
        crashed one takes over the crashed node's slot and its unsent work.
    :node2pending: keys sent to a node and not yet completed, in the order
        the node runs them (the first one is running).
    :backlog: per slot, keys not yet sent to any node (work of a crashed
        node waiting for its replacement).
    :collection: the validated collection (None until :meth:`schedule`).
    :rounds_sent: local rounds whose keys have been handed out.

    Invariants: a key is in at most one of ``node2pending`` / ``backlog``;
    the keys of a slot are sent in round order, so a worker's sequence is a
    pure function of the base seed, the collection and the worker count.
    """

    def __init__(self, config: pytest.Config, hunt: HuntController, numnodes: int) -> None:
        self.config = config
        self.hunt = hunt
        self.numnodes = numnodes
        self.node2collection: dict[Any, list[str]] = {}
        self.node2slot: dict[Any, int] = {}
        self.node2pending: dict[Any, deque[int]] = {}
        self.backlog: dict[int, list[int]] = {}
        self.collection: list[str] | None = None
        self.rounds_sent = 0
        self._shutdown_sent: set[Any] = set()
        self._deadline: float | None = None

    # -- the Scheduling protocol ----------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        # Nodes stay in node2collection after they leave: the initial
        # collection, once complete, stays complete.
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.collection is None:
            return False
        if self._more_rounds() or any(self.backlog.values()):
            return False
        return all(len(pending) < 2 for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return any(self.node2pending.values()) or any(self.backlog.values())

    def add_node(self, node: Any) -> None:
        assert node not in self.node2pending
        used = set(self.node2slot.values())
        free = sorted(set(range(self.numnodes)) - used)
        # The initial workers gw0..gwN-1 serve slots 0..N-1 whatever order
        # they become ready in (their hash seeds follow the same order); a
        # replacement takes the slot whose work is waiting, else a free one.
        name = str(getattr(getattr(node, "gateway", None), "id", ""))
        own = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else -1
        waiting = [slot for slot in free if self.backlog.get(slot)]
        if own in free and not waiting:
            self.node2slot[node] = own
        else:
            self.node2slot[node] = (waiting or free or [len(used)])[0]
        self.node2pending[node] = deque()

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        assert node in self.node2pending
        if self.collection is not None and list(collection) != self.collection:
            self.config.hook.pytest_collectreport(
                report=pytest.CollectReport(
                    nodeid=str(node.gateway.id),
                    outcome="failed",
                    longrepr=f"hermetic-hunt: worker {node.gateway.id} collected different tests",
                    result=[],
                )
            )
            return
        self.node2collection[node] = list(collection)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        pending = self.node2pending[node]
        if pending and pending[0] == item_index:
            pending.popleft()
        else:
            pending.remove(item_index)
        self._top_up()

    def mark_test_pending(self, item: str) -> None:
        # pytest-rerunfailures asks to run a crashed test again. A crash is
        # an attempt of its own (stored as `crashed`); the next round runs
        # the test again anyway. Saying so makes rerunfailures report the
        # crash as a failure instead of a silent rerun.
        raise NotImplementedError("a hunt does not re-run crashed attempts")

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError("the hunt scheduler never steals work")

    def remove_node(self, node: Any) -> str | None:
        pending = self.node2pending.pop(node)
        slot = self.node2slot.pop(node)
        self._shutdown_sent.discard(node)
        if not pending:
            return None
        crashed = pending.popleft()
        self.backlog.setdefault(slot, [])[:0] = list(pending)
        self.hunt.crashed(str(node.gateway.id), crashed)
        assert self.collection is not None
        nodeid = self.collection[crashed % len(self.collection)]
        self._send_backlog()
        return nodeid

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            first = next(iter(self.node2collection.values()))
            for node, collection in self.node2collection.items():
                if collection != first:
                    self.config.hook.pytest_collectreport(
                        report=pytest.CollectReport(
                            nodeid=str(node.gateway.id),
                            outcome="failed",
                            longrepr="hermetic-hunt: workers collected different tests; "
                            "a hunt needs the same collection on every worker",
                            result=[],
                        )
                    )
                    return
            self.collection = list(first)
            self.hunt.set_tests(self.collection)
            if not self.collection:
                for node in self.nodes:
                    self._shutdown(node)
                return
            budget = self.hunt.settings.budget_seconds
            if budget is not None:
                self._deadline = _PERF() + budget
                self._send_round()
                self._send_round()
            else:
                while self._more_rounds():
                    self._send_round()
        self._send_backlog()
        self._maybe_shutdown()

    # -- internals ------------------------------------------------------------

    def _more_rounds(self) -> bool:
        settings = self.hunt.settings
        if settings.rounds is not None:
            return self.rounds_sent < settings.rounds
        return self._deadline is None or _PERF() < self._deadline

    def _send_round(self) -> None:
        assert self.collection is not None
        settings = self.hunt.settings
        round_no = settings.shard.global_round(self.rounds_sent)
        plan = plan_round(
            settings.base_seed, round_no, self.collection, self.numnodes, settings.order
        )
        self.hunt.round_planned(round_no, plan.strategy)
        self.rounds_sent += 1
        count = len(self.collection)
        for slot, indices in enumerate(plan.slices):
            self.backlog.setdefault(slot, []).extend(round_no * count + i for i in indices)
        self._send_backlog()

    def _send_backlog(self) -> None:
        for node, slot in list(self.node2slot.items()):
            keys = self.backlog.get(slot)
            if not keys or node in self._shutdown_sent or node not in self.node2collection:
                continue
            self.backlog[slot] = []
            self.node2pending[node].extend(keys)
            node.send_runtest_some(keys)

    def _top_up(self) -> None:
        """Time budget: start the next round when a worker runs low."""
        if self.collection is None or self.hunt.settings.budget_seconds is None:
            return
        share = max(2, len(self.collection) // max(1, self.numnodes))
        if self._more_rounds() and any(len(p) < share for p in self.node2pending.values()):
            self._send_round()
        self._maybe_shutdown()

    def _maybe_shutdown(self) -> None:
        if self._more_rounds():
            return
        for node, slot in list(self.node2slot.items()):
            if not self.backlog.get(slot) and node in self.node2collection:
                self._shutdown(node)

    def _shutdown(self, node: Any) -> None:
        if node not in self._shutdown_sent:
            self._shutdown_sent.add(node)
            node.shutdown()


class XdistController:
    """xdist hooks on the controller, registered only for a distributed hunt."""

    def __init__(self, hunt: HuntController, numnodes: int) -> None:
        self.hunt = hunt
        self.numnodes = numnodes
        self.scheduler: HuntScheduling | None = None
        self._specs_left = 0
        self._saved_hash_seed: str | None = None
        self._vary_hash_seed = "PYTHONHASHSEED" not in os.environ
        self._next_slot = 0

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> HuntScheduling:
        self.scheduler = HuntScheduling(config, self.hunt, self.numnodes)
        return self.scheduler

    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Sequence[Any]) -> None:
        self._specs_left = len(specs)
        self._set_hash_seed(0)

    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        self._specs_left -= 1
        self._next_slot += 1
        if self._specs_left > 0:
            self._set_hash_seed(self._next_slot)
        else:
            self._restore_hash_seed()

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = {
            "base_seed": self.hunt.settings.base_seed,
            "mode": self.hunt.settings.mode,
            "integration_marker": self.hunt.settings.integration_marker,
        }

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if error is not None:
            # A replacement worker is about to start: give it a fresh,
            # recorded hash seed (restored by pytest_xdist_newgateway).
            self._specs_left = 1
            self._next_slot += 1
            self._set_hash_seed(self._next_slot)

    def _set_hash_seed(self, incarnation: int) -> None:
        if not self._vary_hash_seed:
            return
        if self._saved_hash_seed is None:
            self._saved_hash_seed = os.environ.get("PYTHONHASHSEED", "")
        seed = worker_hash_seed(self.hunt.settings.base_seed, incarnation)
        os.environ["PYTHONHASHSEED"] = str(seed)

    def _restore_hash_seed(self) -> None:
        if self._saved_hash_seed is None:
            return
        if self._saved_hash_seed:
            os.environ["PYTHONHASHSEED"] = self._saved_hash_seed
        else:
            os.environ.pop("PYTHONHASHSEED", None)
        self._saved_hash_seed = None


class AttemptItems(list):  # type: ignore[type-arg]
    """A worker's ``session.items`` that also answers ``items[round * T + i]``."""

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and index >= len(self):
            index %= len(self)
        return list.__getitem__(self, index)


class XdistWorker:
    """Worker-side glue: wrap the items, find the attempt key being run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._interactor: Any = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        session.items = AttemptItems(session.items)

    def locate(self, item: pytest.Item) -> Slot | None:
        interactor = self._interactor
        if interactor is None:
            for plugin in self.config.pluginmanager.get_plugins():
                if type(plugin).__name__ == "WorkerInteractor":
                    interactor = self._interactor = plugin
                    break
        key = getattr(interactor, "item_index", None)
        count = len(item.session.items)
        if not isinstance(key, int) or not count:
            return None
        return Slot(key=key, round_no=key // count)
