"""A hunt without xdist (``-n 0``, ``-p no:xdist``): rounds forked from this process.

The session collects once and runs nothing itself: each round runs in a
child forked from it (:func:`hermetic_hunt.engine.fork.run_job`), whose
lines go straight to the controller.
"""

from __future__ import annotations

from functools import partial

import pytest

from hermetic_hunt.engine.engine import Engine, stop_on_collection_errors
from hermetic_hunt.engine.executor import process_hash_seed
from hermetic_hunt.engine.fork import ChildSetup, run_job
from hermetic_hunt.hunt.controller import HuntController

WORKER = "main"


class LocalLoop:
    """pytest plugin: the run loop of a hunt in one process."""

    def __init__(self, hunt: HuntController, engine: Engine) -> None:
        self.hunt = hunt
        self.engine = engine

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.hunt.set_tests([item.nodeid for item in items])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        hunt = self.hunt
        hunt.collection_stops()  # names what failed; the next line raises
        if not stop_on_collection_errors(session) or not session.items:
            return True
        hunt.set_tests([item.nodeid for item in session.items])
        hunt.begin()
        setup = ChildSetup(worker=WORKER, protect=hunt.store.own_files(), new_group=True)
        hash_seed = process_hash_seed()
        for round_no in hunt.rounds.numbers():
            job = hunt.rounds.job(hunt.rounds.plan(round_no, 1), 0)
            sink = partial(hunt.ingest, worker=WORKER, round_no=round_no)
            run_job(self.engine, session, job, setup, sink, hash_seed=hash_seed,
                    stop=lambda: hunt.stopping() or hunt.error is not None)  # fmt: skip
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
            if hunt.error is not None:
                break
        return True
