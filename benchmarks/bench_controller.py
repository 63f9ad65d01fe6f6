"""How many attempts per second one hunt controller absorbs (not a test).

Feeds the step lines of N fake workers -- exactly what their round children
write, as :mod:`hermetic_hunt.engine.wire` frames them, in the batches a
worker forwards -- into a real :class:`~hermetic_hunt.hunt.controller.HuntController`
and its :class:`~hermetic_hunt.store.Store` (a database in a temporary
directory), round by round with the count check at each barrier, and prints
attempts absorbed per second of the controller's own CPU (one core) and of
wall time. Building the lines is the workers' work and is not counted.

Usage: python benchmarks/bench_controller.py [--workers N] [--tests N] [--rounds N]
       [--failing PERCENT] [--profile]
Also prints the *floor* measured beside it: the same lines parsed a batch
at a time and inserted as bare rows (no checks, no tallies, one table) --
the least a controller in Python could do on this machine -- and the
controller's CPU as a multiple of it.
Goal (issue 18): >= 100,000 attempts/s, so one controller keeps up with 100
workers running 1 ms tests.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

from _pytest.config import _prepareconfig

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.controller import HuntController
from hermetic_hunt.hunt.xdist import FORWARD_LINES
from hermetic_hunt.models import Attempt, Failure, RunInfo, Settings
from hermetic_hunt.store import Store, runs


def worker_batches(
    hunt: HuntController, round_no: int, workers: int, failing: float, rng: random.Random
) -> list[tuple[str, bytes]]:
    """Each worker's lines for ``round_no``, in forwarded batches, interleaved."""
    plan = hunt.rounds.plan(round_no, workers)
    per_worker: list[list[tuple[str, bytes]]] = []
    for slot in range(workers):
        if not plan.slices[slot]:
            continue  # (round 0 runs on one worker: the others are sent nothing)
        job = hunt.rounds.job(plan, slot)
        lines = []
        for index, step in enumerate(job.steps):
            failed = rng.random() < failing
            attempt = Attempt(
                step.nodeid, "failed" if failed else "passed", round_no=round_no,
                position=index, phase="call" if failed else None,
                duration=rng.random() / 1000, seed=rng.getrandbits(63),
                now=1.7e9 + index, mode="seeded", hash_seed=slot, started=1.7e9 + index / 1000,
                failure=Failure("AssertionError", "assert 1 == 2", "t.py:3", "E  assert 1 == 2")
                if failed else None,
            )  # fmt: skip
            lines.append(wire.step_line(index, [attempt], []))
        lines.append(wire.end_line("completed", steps=len(job.steps)))
        name = f"gw{slot}"
        per_worker.append(
            [
                (name, b"".join(lines[i : i + FORWARD_LINES]))
                for i in range(0, len(lines), FORWARD_LINES)
            ]
        )
    out: list[tuple[str, bytes]] = []
    for i in range(max(map(len, per_worker))):
        out.extend(batches[i] for batches in per_worker if i < len(batches))
    return out


def _floor(temp: str, payloads: list[bytes]) -> float:
    """CPU seconds for the least a controller in Python must do with these lines:
    parse them, and insert one bare row per attempt (same columns, one table)."""
    conn = sqlite3.connect(Path(temp, "floor.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE a (n, o, r, p, d, m, s, t, h, b)")
    keys = ("n", "o", "r", "p", "d", "m", "s", "t", "h", "b")
    cpu = time.process_time()
    rows = []
    for payload in payloads:
        for message in json.loads(b"[" + b",".join(payload.splitlines()) + b"]"):
            for a in message.get("attempts") or ():
                rows.append(tuple(a.get(k) for k in keys))
        if len(rows) >= 500:
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO a VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            conn.execute("COMMIT")
            rows = []
    if rows:
        conn.executemany("INSERT INTO a VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    cpu = time.process_time() - cpu
    conn.close()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--failing", type=float, default=1.0, help="percent of failing attempts")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as temp:
        store = Store.open(Path(temp, "flakes.db"))
        settings = Settings(rounds=args.rounds, budget_seconds=None, base_seed=3,
                            order="shuffle", db_path=Path(temp, "flakes.db"))  # fmt: skip
        config = _prepareconfig(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", temp])
        spec = [f"popen-{i}" for i in range(args.workers)]
        hunt = HuntController(config, settings, store, args.workers, spec)
        hunt.run_id = runs.start_run(
            store, RunInfo(uuid.uuid4().hex, [], temp, temp, settings, args.workers, spec, {})
        )
        hunt.set_tests([f"tests/test_m{i // 50}.py::test_{i}" for i in range(args.tests)])
        rounds = [
            (r, worker_batches(hunt, r, args.workers, args.failing / 100, rng))
            for r in range(args.rounds)
        ]
        profiler = cProfile.Profile() if args.profile else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        for round_no, batches in rounds:  # (planned above, as the rounds start)
            for worker, payload in batches:
                hunt.ingest(payload.splitlines(keepends=True), worker, round_no)
        hunt.intake.flush()
        if profiler is not None:
            profiler.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        attempts = hunt.intake.tallies.attempts
        stored = store.conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        assert attempts == stored == args.tests * args.rounds, (attempts, stored)
        assert not hunt.rounds.incomplete, hunt.rounds.incomplete
        print(
            f"controller: {attempts:,} attempts of {args.workers} workers in "
            f"{args.rounds} rounds: {attempts / cpu:,.0f} attempts/s of CPU "
            f"({attempts / wall:,.0f}/s wall; {1e6 * cpu / attempts:.1f} us each; "
            f"goal >= 100,000/s: {attempts / cpu / 100_000:.2f}x of it)"
        )
        floor = _floor(temp, [payload for _, batches in rounds for _, payload in batches])
        print(
            f"floor (parse each batch, insert bare rows, no checks): {attempts / floor:,.0f} "
            f"attempts/s of CPU; the controller takes {cpu / floor:.2f}x the floor"
        )
        store.close()
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
