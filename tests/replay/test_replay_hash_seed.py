"""A hash seed from the database outside PYTHONHASHSEED's range: one line, exit 4, no restart."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from helpers import build_db, record
from test_replay_errors import insert_flake, usage_error

from hermetic_hunt.models import MAX_HASH_SEED, Reproducer

BAD_SEEDS = [-1, 2**40, 2**63 - 1]
REPRO_STEP = {"nodeid": "test_suite.py::test_one", "seed": 7, "mode": "seeded"}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite="def test_one():\n    assert False, 'boom'\n")
    return pytester


@pytest.mark.parametrize("bad", BAD_SEEDS)
def test_an_attempts_out_of_range_hash_seed_is_refused_without_restarting(suite, bad):
    db = suite.path / "flakes.db"
    build_db(db, [record("test_suite.py::test_one", hash_seed=1)])
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE attempts SET hash_seed = ?", (bad,))
    # A subprocess: started from pytest's command line, so it would restart itself.
    result = suite.runpytest_subprocess("-p", "no:randomly", "--hermetic-replay-db=flakes.db::A1")
    usage_error(
        result,
        f"--hermetic-replay-db: A1 has hash seed {bad} stored, outside PYTHONHASHSEED's range "
        f"0..{MAX_HASH_SEED}: the database is damaged or was edited; run a new hunt",
    )
    text = result.stdout.str() + result.stderr.str()
    assert "restarting" not in text and "Fatal Python error" not in text


@pytest.mark.parametrize("bad", BAD_SEEDS)
def test_a_reproducers_out_of_range_hash_seed_is_refused_without_restarting(suite, bad):
    db = suite.path / "flakes.db"
    build_db(db, [record("test_suite.py::test_one")])
    insert_flake(db, "F1", "test_suite.py::test_one", {"steps": [REPRO_STEP], "hash_seed": 1})
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "UPDATE flakes SET reproducer = json_set(reproducer, '$.hash_seed', ?)", (bad,)
        )
    result = suite.runpytest_subprocess("-p", "no:randomly", "--hermetic-replay-db=flakes.db::F1")
    usage_error(
        result,
        f"--hermetic-replay-db: the reproducer of F1 is malformed (hash seed {bad} is outside "
        f"PYTHONHASHSEED's range 0..{MAX_HASH_SEED}): the database is damaged or was edited; "
        "run a new hunt",
    )
    text = result.stdout.str() + result.stderr.str()
    assert "restarting" not in text and "Fatal Python error" not in text


@pytest.mark.parametrize("bad", [*BAD_SEEDS, MAX_HASH_SEED + 1])
def test_reproducer_from_json_rejects_an_out_of_range_hash_seed(bad):
    with pytest.raises(ValueError, match=f"hash seed {bad} is outside"):
        Reproducer.from_json({"steps": [REPRO_STEP], "hash_seed": bad})


@pytest.mark.parametrize("good", [None, 0, MAX_HASH_SEED])
def test_reproducer_from_json_keeps_an_in_range_hash_seed(good):
    assert Reproducer.from_json({"steps": [REPRO_STEP], "hash_seed": good}).hash_seed == good
