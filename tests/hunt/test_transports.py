"""Transport parity: for one seed and one worker count, every way of running a hunt gives the same hunt.

``-n 2``, ``--tx 2*popen`` and ``--tx`` to two execnet socket servers on
127.0.0.1 (started here) run the same per-worker sequences with the same
seeds and outcomes; ``-n 0`` sees the same outcomes per test and round; four
shards merged hold the attempts of the same hunt unsharded. The suite's
flaky test is seeded randomness, so its outcome is a function of the
attempt's seed alone, wherever it runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import hunt, rows, socket_servers

from hermetic_hunt.cli import main

pytestmark = pytest.mark.slow

SUITE = """
import random

STATE = []

def test_seeded_coin():
    assert random.random() < 0.5

def test_one():
    STATE.append(1)

def test_two():
    assert 1 + 1 == 2

def test_three():
    pass
"""

ARGS = ("--hermetic-hunt=4", "--hermetic-hunt-order=shuffle", "--hermetic-hunt-isolate=off")
#: What must agree between transports: each worker's sequence, seeds, outcomes.
ATTEMPTS = (
    "SELECT a.worker, a.round, a.position, t.nodeid, a.seed, a.outcome "
    "FROM attempts a JOIN tests t ON t.id = a.test_id ORDER BY a.worker, a.round, a.position"
)


def _attempts(db: Path) -> list[tuple[object, ...]]:
    return rows(db, ATTEMPTS)


def _run(pytester: pytest.Pytester, name: str, *args: str) -> Path:
    db = pytester.path / f"{name}.db"
    result = hunt(pytester, *ARGS, f"--hermetic-hunt-db={db}", *args)
    output = result.stdout.str()
    assert result.ret in (0, 1), output
    assert "INTERNALERROR" not in output, output
    return db


def test_n2_tx_popen_and_socket_gateways_run_the_same_hunt_and_n0_sees_the_same_outcomes(
    pytester,
):
    pytester.makepyfile(test_suite=SUITE)
    n2 = _attempts(_run(pytester, "n2", "-n", "2"))
    assert {row[0] for row in n2} == {"gw0", "gw1"}
    assert len(n2) == 16
    popen = _attempts(_run(pytester, "popen", "--tx", "2*popen", "--dist", "load"))
    assert popen == n2
    # The hunt's scheduler decides who runs what, whatever --dist says.
    for dist in ("loadscope", "loadfile", "worksteal"):
        assert _attempts(_run(pytester, dist, "-n", "2", "--dist", dist)) == n2, dist
    with socket_servers(pytester.path, 2) as specs:
        db = _run(pytester, "sockets", "--tx", specs[0], "--tx", specs[1], "--dist", "load")
    assert _attempts(db) == n2
    # One worker sees other orders, the same seeds: the same outcome per test and round.
    n0 = _attempts(_run(pytester, "n0", "-p", "no:xdist"))
    by_test = sorted((r[1], r[3], r[4], r[5]) for r in n0)
    assert by_test == sorted((r[1], r[3], r[4], r[5]) for r in n2)
    outcomes = {r[5] for r in n2 if r[3].endswith("test_seeded_coin")}
    assert outcomes == {"passed", "failed"}  # the coin is flaky: both runs call it so


def test_four_shards_merged_hold_the_same_hunt_as_one_unsharded(pytester):
    pytester.makepyfile(test_suite=SUITE)
    whole = _attempts(_run(pytester, "whole", "-n", "2"))
    shards = [
        _run(pytester, f"shard{k}", "-n", "2", "--hermetic-hunt=1", f"--hermetic-hunt-shard={k}/4")
        for k in range(1, 5)
    ]
    merged = pytester.path / "merged.db"
    done = CliRunner().invoke(main, ["merge", *map(str, shards), "-o", str(merged)])
    assert done.exit_code == 0, done.output
    assert sorted(_attempts(merged)) == sorted(whole)
