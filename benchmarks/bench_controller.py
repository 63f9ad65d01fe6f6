"""How many attempts per second one hunt controller absorbs, and its memory (not a test).

Feeds the step lines of N fake workers -- exactly what their round children
write, as :mod:`hermetic_hunt.engine.wire` frames them, in the batches a
worker forwards -- into a real :class:`~hermetic_hunt.hunt.controller.HuntController`
and its :class:`~hermetic_hunt.store.Store` (a database in a temporary
directory), round by round with the barrier and its count check, and prints
attempts absorbed per second of the controller's own CPU (one core) --
with the indexes of ``attempts`` that a hunt into a new database builds once
at its end. Building the lines is the workers' work and is not counted.

Side by side, alternating with the controller's runs (medians of
``--repeat``), two floors on the same lines: *bare* -- each batch parsed at
once, one bare row per attempt inserted into a table of its own (no checks,
no tallies, no index): the least a controller in Python could do -- and
*schema* -- the same rows inserted into the real ``attempts`` table, with the
indexes readers need. The controller's CPU is printed as a multiple of each.

Then ``--many`` fake workers (1,000) hunt ``--many-rounds`` rounds: every
attempt must be stored, and the controller's resident memory is printed after
the first round and at the end (it must stay flat: nothing is kept per round).

Usage: python benchmarks/bench_controller.py [--workers N] [--tests N] [--rounds N]
       [--failing PERCENT] [--repeat N] [--many N] [--many-rounds N] [--profile]
Goal (issue 31): >= 100,000 attempts/s of CPU, <= 1.7x the bare floor.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import resource
import sqlite3
import statistics
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

#: The columns the floors insert (what a passing attempt carries), and its JSON keys.
COLUMNS = ("id", "run_id", "worker", "test_id", "outcome", "round", "position", "duration",
           "mode", "seed", "now", "hash_seed", "started")  # fmt: skip
KEYS = ("o", "r", "p", "d", "m", "s", "t", "h", "b")


def controller(temp: Path, workers: int, tests: int, rounds: int) -> HuntController:
    store = Store.open(temp / "flakes.db")
    settings = Settings(rounds=rounds, budget_seconds=None, base_seed=3, order="shuffle",
                        db_path=temp / "flakes.db")  # fmt: skip
    config = _prepareconfig(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(temp)])
    spec = [f"popen-{i}" for i in range(workers)]
    hunt = HuntController(config, settings, store, workers, spec)
    hunt.run_id = runs.start_run(
        store, RunInfo(uuid.uuid4().hex, [], str(temp), str(temp), settings, workers, spec, {})
    )
    hunt.set_tests([f"tests/test_m{i // 50}.py::test_{i}" for i in range(tests)])
    return hunt


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


def absorb(
    hunt: HuntController, rounds: list[tuple[int, list[tuple[str, bytes]]]], *, end: bool = True
) -> float:
    """CPU seconds the controller takes for ``rounds`` (planned already; ``end``: the last)."""
    cpu = time.process_time()
    for round_no, batches in rounds:
        for worker, payload in batches:
            hunt.ingest(payload.splitlines(keepends=True), worker, round_no)
    hunt.intake.flush()
    if end and hunt.store.indexes_deferred:  # (the hunt's end builds them: its work too)
        hunt.store.build_indexes()
    return time.process_time() - cpu


def floor(conn: sqlite3.Connection, table: str, rounds: list[tuple[int, list[tuple[str, bytes]]]],
          test_ids: dict[str, int]) -> float:  # fmt: skip
    """CPU seconds to parse each batch at once and insert one bare row per attempt."""
    insert = f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({','.join('?' * 13)})"
    (last,) = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()
    cpu = time.process_time()
    rows = []
    for _, batches in rounds:
        for worker, payload in batches:
            for message in json.loads(b"[" + b",".join(payload.splitlines()) + b"]"):
                for a in message.get("attempts") or ():
                    last += 1
                    rows.append((last, 1, worker, test_ids[a["n"]], *map(a.get, KEYS)))
            if len(rows) >= 2000:
                conn.execute("BEGIN")
                conn.executemany(insert, rows)
                conn.execute("COMMIT")
                rows = []
    conn.execute("BEGIN")
    conn.executemany(insert, rows)
    conn.execute("COMMIT")
    return time.process_time() - cpu


def rss_mb() -> float:
    """This process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def throughput(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    hunts, bare, schema = [], [], []
    attempts = args.tests * args.rounds
    for _ in range(args.repeat):  # controller, bare floor, schema floor: alternating
        with tempfile.TemporaryDirectory() as tmp:
            temp = Path(tmp)
            hunt = controller(temp, args.workers, args.tests, args.rounds)
            rounds = [(r, worker_batches(hunt, r, args.workers, args.failing / 100, rng))
                      for r in range(args.rounds)]  # fmt: skip
            profiler = cProfile.Profile() if args.profile else None
            if profiler is not None:
                profiler.enable()
            hunts.append(absorb(hunt, rounds))
            if profiler is not None:
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
            stored = hunt.store.conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
            assert hunt.intake.tallies.attempts == stored == attempts, stored
            assert not hunt.rounds.incomplete, hunt.rounds.incomplete
            ids = hunt.intake.test_ids
            conn = sqlite3.connect(temp / "floor.db", isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"CREATE TABLE bare ({', '.join(COLUMNS)})")
            bare.append(floor(conn, "bare", rounds, ids))
            conn.close()
            hunt.store.conn.execute("DELETE FROM attempts")
            schema.append(floor(hunt.store.conn, "attempts", rounds, ids))
            hunt.store.close()
    cpu, bare_cpu, schema_cpu = map(statistics.median, (hunts, bare, schema))
    print(f"controller: {attempts:,} attempts of {args.workers} workers in {args.rounds} rounds "
          f"({args.failing:g}% failing), median of {args.repeat}: {attempts / cpu:,.0f} "
          f"attempts/s of CPU ({1e6 * cpu / attempts:.1f} us each; goal >= 100,000/s)")  # fmt: skip
    print(f"  bare floor (parse, bare rows, no index):  {attempts / bare_cpu:,.0f}/s; "
          f"the controller takes {cpu / bare_cpu:.2f}x it (goal <= 1.7x)")  # fmt: skip
    print(f"  schema floor (parse, rows into attempts): {attempts / schema_cpu:,.0f}/s; "
          f"the controller takes {cpu / schema_cpu:.2f}x it")  # fmt: skip


def many(args: argparse.Namespace) -> None:
    """A hunt of ``--many`` fake workers: every attempt stored, memory flat."""
    rng = random.Random(11)
    tests = args.many * 5
    with tempfile.TemporaryDirectory() as tmp:
        hunt = controller(Path(tmp), args.many, tests, args.many_rounds)
        seen: list[float] = []
        cpu = 0.0
        for round_no in range(args.many_rounds):
            batches = worker_batches(hunt, round_no, args.many, args.failing / 100, rng)
            cpu += absorb(hunt, [(round_no, batches)], end=round_no == args.many_rounds - 1)
            del batches
            seen.append(rss_mb())
        stored = hunt.store.conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        planned = tests * args.many_rounds
        hunt.store.close()
    print(f"{args.many:,} fake workers, {args.many_rounds} rounds of {tests:,} tests: "
          f"{stored:,} of {planned:,} attempts stored, {planned / cpu:,.0f} attempts/s of CPU; "
          f"controller RSS {seen[0]:.1f} MB after round 1, {seen[-1]:.1f} MB after the last "
          f"(max {max(seen):.1f} MB)")  # fmt: skip
    assert stored == planned, (stored, planned)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--failing", type=float, default=1.0, help="percent of failing attempts")
    parser.add_argument("--repeat", type=int, default=3, help="median of N alternating runs")
    parser.add_argument("--many", type=int, default=1000, help="fake workers of the memory run")
    parser.add_argument("--many-rounds", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    throughput(args)
    if args.many:
        many(args)


if __name__ == "__main__":
    main()
