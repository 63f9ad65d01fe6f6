"""What a forked child's first failure costs, measured side by side in one run (not a test).

A hunt's rounds and isolation's probes run in children forked from a
collected session (``hermetic_hunt.engine.fork``). pytest's report of a
failure looks up the module of each traceback entry (``inspect.getmodule``),
and the first lookup in a process maps every imported module's file, one
``os.lstat`` per path component -- through the sandbox's file-time ``lstat``
in a seeded attempt. The parent now fills that map before it forks
(``fork.warm_module_map``); this benchmark hunts the same generated suite
(one test that always fails, one that fails at random, the rest passing)
with the map filled and with it left empty in the parent (a ``-p`` plugin
that makes ``warm_module_map`` do nothing), alternating, and prints the
median wall and CPU time of each and their ratio.

Usage: python benchmarks/bench_fork.py [--rounds 40] [--repeats 3] [--tests 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = ["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-p", "no:rerunfailures"]
COLD = "import hermetic_hunt.engine.fork as fork\n\nfork.warm_module_map = lambda: None\n"


def make_suite(root: Path, tests: int) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "cold_map.py").write_text(COLD)
    body = ["import random\n", "def test_always_fails():\n    assert 1 == 2\n",
            "def test_sometimes():\n    assert random.random() < 0.5\n"]  # fmt: skip
    body += [f"def test_pass_{i}():\n    assert {i} >= 0\n" for i in range(tests)]
    (root / "test_suite.py").write_text("\n".join(body))


def hunt(root: Path, rounds: int, cold: bool) -> tuple[float, float]:
    """Wall and CPU seconds (this process's children) of one hunt."""
    db = root / "flakes.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    extra = ["-p", "cold_map"] if cold else []
    env = dict(os.environ, PYTHONPATH=str(root))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", *PLAIN, *extra, f"--hermetic-hunt={rounds}",
         "--hermetic-seed=3", "--hermetic-hunt-isolate=off"],
        cwd=root, env=env, capture_output=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tests", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fork-") as folder:
        root = Path(folder)
        make_suite(root, args.tests)
        hunt(root, 2, cold=False)  # bytecode, caches
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.repeats):
            for cold in (True, False):
                results[cold].append(hunt(root, args.rounds, cold))
    print(f"{args.rounds} rounds of {args.tests + 2} tests (one always fails), -n 0, "
          f"median of {args.repeats}:")  # fmt: skip
    medians = {}
    for cold, label in ((True, "map left empty (before)"), (False, "map filled before fork")):
        wall = statistics.median(w for w, _ in results[cold])
        cpu = statistics.median(c for _, c in results[cold])
        medians[cold] = (wall, cpu)
        print(f"  {label:24}  wall {wall:6.2f} s   cpu {cpu:6.2f} s")
    (cold_wall, cold_cpu), (warm_wall, warm_cpu) = medians[True], medians[False]
    print(f"  before / after: wall {cold_wall / warm_wall:.2f}x, cpu {cold_cpu / warm_cpu:.2f}x")


if __name__ == "__main__":
    main()
