"""What each timing condition costs against exact seeded rounds, side by side in one run.

Prints two tables (ratios, not timings, are the result; every row is
measured in the same run, interleaved):

1. Clock readings in-process: the cost of ``time.monotonic()`` /
   ``time.time()`` / ``time.sleep(0)`` inside a sandbox under each clock
   profile, as a ratio to the exact profile.
2. Hunts of a generated suite (clock-reading tests, sleeping tests, CPU-bound
   tests with busy loops, threaded tests, asyncio tests): the summed attempt
   durations of rounds run under each condition, as a ratio to exact rounds
   of the same mode (``stress`` is a record-mode condition: it is compared
   with calm record rounds). Rounds before the fourth always run exact, so
   each hunt runs 4 + N rounds and only the last N are compared.

Usage: python benchmarks/bench_profiles.py [--rounds N] [--repeats K] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PERF = time.perf_counter  # real: captured before any sandbox patches time
PLAIN = ["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-p", "no:rerunfailures"]
CALM_ROUNDS = 4

SUITE = {
    "conftest.py": """
import time

def _calibrate():
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.05:
        sum(range(1000)); n += 1
    return max(1, n // 25)

LOOPS = _calibrate()  # about 2 ms of CPU work

def busy():
    for _ in range(LOOPS):
        sum(range(1000))
""",
    "test_clock.py": """
import datetime
import time

def test_reads_the_clock_a_lot():
    start = time.monotonic()
    for _ in range(2000):
        time.monotonic(); time.perf_counter(); time.time()
    assert time.monotonic() - start < 60

def test_reads_datetimes():
    days = {datetime.datetime.now().date() for _ in range(500)}
    assert len(days) <= 2
""",
    "test_sleeps.py": """
import time

def test_sleeps():
    for _ in range(50):
        time.sleep(0.01)

def test_short_ttl_with_margin():
    start = time.monotonic()
    time.sleep(0.05)
    assert time.monotonic() - start < 0.5
""",
    "test_cpu.py": """
from conftest import busy

def test_cpu_a():
    busy()

def test_cpu_b():
    busy(); busy()
""",
    "test_threads.py": """
import threading

def test_locked_counter():
    lock, box = threading.Lock(), [0]
    def work():
        for _ in range(20000):
            with lock:
                box[0] += 1
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert box[0] == 80000
""",
    "test_async.py": """
import asyncio

def test_async_sleeps():
    async def main():
        await asyncio.gather(*(asyncio.sleep(0.05 * i) for i in range(20)))
        return await asyncio.wait_for(asyncio.sleep(0.01, 7), timeout=1.0)
    assert asyncio.run(main()) == 7
""",
}


def make_suite(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    for name, body in SUITE.items():
        (root / name).write_text(body.lstrip())


def hunt(root: Path, db: str, mode: str, time_mix: str, rounds: int, workers: str) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    path = root / db
    path.unlink(missing_ok=True)
    subprocess.run(
        [
            sys.executable, "-m", "pytest", *PLAIN, f"--hermetic-hunt={rounds}",
            "--hermetic-seed=11", f"--hermetic-hunt-mode={mode}", "-n", workers,
            f"--hermetic-hunt-time={time_mix}", f"--hermetic-hunt-db={db}",
            "--hermetic-hunt-isolate=off",
        ],
        cwd=root, env=env, capture_output=True, check=False,
    )  # fmt: skip
    return path


def seconds_per_round(db: Path, tests: str = "%") -> list[float]:
    """Summed attempt durations of each round after the calm ones (of ``tests``: a LIKE)."""
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "SELECT a.round, sum(a.duration) FROM attempts a JOIN tests t ON t.id = a.test_id "
            "WHERE a.round >= ? AND a.repeat = 0 AND t.nodeid LIKE ? "
            "GROUP BY a.round ORDER BY a.round",
            (CALM_ROUNDS, tests),
        ).fetchall()
    return [float(total) for _, total in found]


def clock_costs(reads: int, repeats: int) -> dict[str, float]:
    """Median seconds per reading (and per zero sleep) under each profile."""
    from hermetic_hunt.sandbox import Sandbox, SandboxSpec

    sandbox = Sandbox()
    samples: dict[str, list[float]] = {"exact": [], "jitter": [], "slow": []}
    for _ in range(repeats):
        for profile in samples:
            sandbox.enter(SandboxSpec(seed=5, now=1.7e9, profile=profile, spin_limit=0))
            monotonic, wall, sleep = time.monotonic, time.time, time.sleep
            start = _PERF()
            for _ in range(reads):
                monotonic()
                wall()
                sleep(0.0)
            took = _PERF() - start
            sandbox.exit()
            samples[profile].append(took / reads)
    return {profile: statistics.median(values) for profile, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds under each condition")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    args = parser.parse_args()
    rounds, repeats = (3, 1) if args.quick else (args.rounds, args.repeats)

    costs = clock_costs(20_000 if args.quick else 100_000, repeats * 3)
    print("1. one clock reading + time() + sleep(0) inside a sandbox, vs the exact profile")
    for profile, cost in costs.items():
        print(f"   {profile:<7} {cost * 1e6:6.2f} µs   {cost / costs['exact']:.2f}x")

    # (label, mode, --hermetic-hunt-time, baseline label)
    cases = [
        ("exact", "seeded", "exact", None),
        ("jitter", "seeded", "jitter=100", "exact"),
        ("slow", "seeded", "slow=100", "exact"),
        ("switch", "seeded", "switch=100", "exact"),
        ("default mix", "seeded", "default", "exact"),
        ("calm (record)", "record", "exact", None),
        ("stress (record)", "record", "stress=100", "calm (record)"),
    ]
    per_round: dict[str, list[float]] = {label: [] for label, *_ in cases}
    cpu_bound: dict[str, list[float]] = {label: [] for label, *_ in cases}
    with tempfile.TemporaryDirectory(prefix="bench-profiles-") as tmp:
        root = Path(tmp) / "suite"
        make_suite(root)
        for _ in range(repeats):
            for label, mode, mix, _ in cases:  # interleaved: load drifts hit every case
                db = hunt(root, "bench.db", mode, mix, CALM_ROUNDS + rounds, "2")
                per_round[label] += seconds_per_round(db)
                cpu_bound[label] += seconds_per_round(db, "test_cpu.py::%")
    print(
        f"\n2. a hunt of {len(SUITE) - 1} files of mixed tests, -n 2, rounds after the 4th "
        f"({rounds} per hunt, {repeats} hunt(s) per condition), summed attempt time per round"
    )
    medians = {label: statistics.median(values) for label, values in per_round.items() if values}
    for label, _, _, baseline in cases:
        if label not in medians:
            continue
        ratio = f"{medians[label] / medians[baseline]:.2f}x {baseline}" if baseline else "1.00x"
        print(f"   {label:<16} {medians[label] * 1000:8.1f} ms/round   {ratio}")
    cpu = {label: statistics.median(values) for label, values in cpu_bound.items() if values}
    print("   of which the CPU-bound tests (busy loops):")
    for label, _, _, baseline in cases:
        if label in cpu and label in ("exact", "calm (record)", "stress (record)", "switch"):
            ratio = f"{cpu[label] / cpu[baseline]:.2f}x {baseline}" if baseline else "1.00x"
            print(f"   {label:<16} {cpu[label] * 1000:8.1f} ms/round   {ratio}")


if __name__ == "__main__":
    main()
