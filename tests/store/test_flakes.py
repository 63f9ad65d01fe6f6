"""Tests for hermetic_hunt.store.flakes: a stored flake, read and validated once for every reader."""

from __future__ import annotations

import json

import pytest
from helpers import VICTIM, Rows

from hermetic_hunt.errors import BadDatabase
from hermetic_hunt.models import Reproducer, Step
from hermetic_hunt.replay.plan import Target, resolve
from hermetic_hunt.store import fixes, flakes
from hermetic_hunt.store.replay import ReplaySource

REPRODUCER = Reproducer(steps=(Step(VICTIM, 2, 1.1e9, attempt_id=7),), hash_seed=99,
                        exc_type="KeyError", location="shop/cart.py:42", run_id=1)  # fmt: skip


@pytest.fixture
def rows(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    rows.run()
    yield rows
    rows.close()


def test_the_report_the_replay_and_the_fix_read_one_flake_alike(rows):
    rows.flake(VICTIM, "F3", reproducer=REPRODUCER, polluters=[["t.py::p"]], cleaners=["t.py::c"])
    (flake,) = flakes.read(rows.store)
    assert (flake.flake_id, flake.nodeid, flake.kinds) == ("F3", VICTIM, ("victim",))
    assert (flake.polluters, flake.cleaners, flake.reproducer) == ((("t.py::p",),), ("t.py::c",),
                                                                   REPRODUCER)  # fmt: skip
    assert ReplaySource(rows.store).flake("F3") == flake
    facts = fixes.facts_of(rows.store, flake)
    assert (facts.flake_id, facts.polluters, facts.reproducer) == (
        "F3",
        flake.polluters,
        REPRODUCER,
    )


@pytest.mark.parametrize(
    "reproducer",
    [
        {"steps": []},
        {"steps": "rm -rf /"},
        {"steps": [{"nodeid": 3}]},
        {**REPRODUCER.to_json(), "hash_seed": "__import__('os')"},
        {**REPRODUCER.to_json(), "signature": {"exc_type": ["KeyError"]}},
    ],
)
def test_a_malformed_reproducer_is_a_bad_database(rows, reproducer):
    rows.flake(VICTIM, "F3", reproducer=json.dumps(reproducer))
    with pytest.raises(BadDatabase, match="the reproducer of F3 is malformed"):
        resolve(Target("x.db", "F3", "flake", 3), ReplaySource(rows.store))
    with pytest.raises(BadDatabase, match=r"flakes\.db: flake F3: reproducer is malformed"):
        flakes.read(rows.store)


def test_a_damaged_flake_is_left_out_of_the_verdicts_isolation_knows(rows):
    rows.flake(VICTIM, "F1", kinds=["gremlins"])
    rows.flake("t.py::other", "F2", kinds=["random"], status="partial")
    assert flakes.known_verdicts(rows.store, [VICTIM, "t.py::other"]) == {
        "t.py::other": ("partial", ["random"])
    }
