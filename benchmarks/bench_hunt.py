"""What a hunt costs, measured side by side in one run (not a test).

Prints, for generated suites:

* hunt wall time / ``pytest-repeat --count=N`` wall time, same ``-n``
  (2,000 trivial tests with ~1,500 modules imported; 200 CPU-bound tests of
  ~5 ms: busy loops, since sleeps are virtual in seeded mode);
* the ``-n 2`` vs ``-n 0`` speed-up of a hunt of the 5 ms suite, and the
  same hunt over two ``--tx socket=`` gateways on loopback vs ``-n 2``;
* the controller's CPU per attempt (``resource.getrusage`` of the process
  that owns the session: xdist's controller, or the ``-n 0`` process whose
  forked rounds are its children), from the difference between a long and a
  short hunt, so start-up and collection cancel out;
* the cost of a round's fresh process (fork, barrier, exit) with ~1,500
  modules loaded: a one-test suite hunted for many rounds;
* database bytes per attempt.

Usage: python benchmarks/bench_hunt.py [--rounds N] [--quick]
Targets (issue 9): hunt / pytest-repeat <= 1.3x on the trivial suite,
controller CPU <= 50 us per attempt, -n 2 >= 1.8x faster than -n 0 on the
5 ms suite, <= 300 bytes per passing attempt.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import socket_servers

PLAIN = ["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-p", "no:rerunfailures"]


def write_modules(root: Path, count: int) -> None:
    """``count`` importable modules, one in ten holding ``from datetime import datetime``."""
    package = root / "bulk"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for i in range(count):
        body = "from datetime import datetime, date\n" if i % 10 == 0 else ""
        body += f"VALUE = {i}\n\ndef f(x):\n    return x + VALUE\n"
        (package / f"m{i:04d}.py").write_text(body)
    imports = "\n".join(f"import bulk.m{i:04d}" for i in range(count))
    (root / "conftest.py").write_text(imports + "\n")


def trivial_suite(root: Path, tests: int, modules: int) -> None:
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    write_modules(root, modules)
    per_file = 50
    for f in range(tests // per_file):
        body = "\n".join(f"def test_{i}():\n    assert {i} >= 0\n" for i in range(per_file))
        (root / f"test_t{f:03d}.py").write_text(body)


def five_ms_suite(root: Path, tests: int) -> None:
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    # CPU work, not sleep: a hunt's virtual clock would make sleep free.
    (root / "conftest.py").write_text(
        "import time\n"
        "def _calibrate():\n"
        "    n, start = 0, time.perf_counter()\n"
        "    while time.perf_counter() - start < 0.05:\n"
        "        sum(range(1000)); n += 1\n"
        "    return max(1, n // 10)\n"
        "LOOPS = _calibrate()\n"
        "def busy():\n"
        "    for _ in range(LOOPS):\n"
        "        sum(range(1000))\n"
    )
    per_file = 20
    for f in range(tests // per_file):
        body = "from conftest import busy\n\n" + "\n".join(
            f"def test_{i}():\n    busy()\n" for i in range(per_file)
        )
        (root / f"test_w{f:03d}.py").write_text(body)


DRIVER = """
import resource, sys
import pytest
code = pytest.main(sys.argv[1:])
used = resource.getrusage(resource.RUSAGE_SELF)
print(f"CONTROLLER-CPU {used.ru_utime + used.ru_stime:.6f}", file=sys.stderr)
sys.exit(code)
"""


def controller_cpu(cwd: Path, *args: str) -> float:
    """CPU seconds of the process that owns the session (not its workers or rounds)."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *PLAIN, *args],
        cwd=cwd, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    for line in done.stderr.splitlines():
        if line.startswith("CONTROLLER-CPU "):
            return float(line.split()[1])
    raise SystemExit(f"no CPU figure: {done.stdout[-2000:]} {done.stderr[-2000:]}")


def one_test_suite(root: Path, modules: int) -> None:
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    write_modules(root, modules)
    (root / "test_one.py").write_text("def test_one():\n    assert True\n")


def run(cwd: Path, *args: str) -> float:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *PLAIN, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        print(result.stdout[-2000:], result.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"pytest failed ({result.returncode}): {args}")
    return elapsed


def paired(times: int, cwd: Path, first: list[str], second: list[str]) -> tuple[float, float]:
    """Medians of ``times`` interleaved runs of two commands (drift hits both)."""
    a, b = [], []
    for _ in range(times):
        a.append(run(cwd, *first))
        b.append(run(cwd, *second))
    return statistics.median(a), statistics.median(b)


def db_bytes_per_attempt(db: Path) -> tuple[float, int]:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        attempts = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    return pages * size / max(1, attempts), attempts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="median of N runs per figure")
    parser.add_argument("--quick", action="store_true", help="smaller suites")
    opts = parser.parse_args()
    rounds = opts.rounds
    trivial_tests, modules, slow_tests = (2000, 1500, 200) if not opts.quick else (500, 300, 60)
    with tempfile.TemporaryDirectory(prefix="hh-bench-") as tmp:
        root = Path(tmp)
        trivial = root / "trivial"
        trivial_suite(trivial, trivial_tests, modules)
        slow = root / "five_ms"
        five_ms_suite(slow, slow_tests)
        hunt = [f"--hermetic-hunt={rounds}", "--hermetic-hunt-isolate=off", "--hermetic-seed=1"]
        count = [f"--count={rounds}"]
        print(
            f"rounds={rounds}; trivial suite: {trivial_tests} tests, {modules} modules; "
            f"5 ms suite: {slow_tests} tests; median of {opts.repeat}"
        )
        rows = []
        for label, suite in (("trivial", trivial), ("5 ms", slow)):
            for workers in ("0", "2"):
                db = suite / f"bench-{workers}.db"
                hunt_s, repeat_s = paired(
                    opts.repeat,
                    suite,
                    ["-n", workers, *hunt, f"--hermetic-hunt-db={db}"],
                    ["-n", workers, *count],
                )
                rows.append((label, workers, hunt_s, repeat_s))
                print(
                    f"{label:8s} -n {workers}: hunt {hunt_s:7.2f}s  pytest-repeat {repeat_s:7.2f}s"
                    f"  ratio {hunt_s / repeat_s:5.2f}x"
                )
        hunt_n0 = next(r[2] for r in rows if r[0] == "5 ms" and r[1] == "0")
        hunt_n2 = next(r[2] for r in rows if r[0] == "5 ms" and r[1] == "2")
        repeat_n0 = next(r[3] for r in rows if r[0] == "5 ms" and r[1] == "0")
        repeat_n2 = next(r[3] for r in rows if r[0] == "5 ms" and r[1] == "2")
        print(
            f"5 ms suite: hunt -n 2 is {hunt_n0 / hunt_n2:.2f}x faster than -n 0 "
            f"(pytest-repeat: {repeat_n0 / repeat_n2:.2f}x)"
        )
        # Remote workers: two execnet socket servers on loopback against -n 2.
        with socket_servers(slow, 2) as specs:
            tx = [arg for spec in specs for arg in ("--tx", spec)]
            local_s, remote_s = paired(
                opts.repeat, slow,
                ["-n", "2", *hunt, f"--hermetic-hunt-db={slow / 'local.db'}"],
                [*tx, "--dist", "load", *hunt, f"--hermetic-hunt-db={slow / 'remote.db'}"],
            )  # fmt: skip
        print(f"5 ms suite: --tx socket x2 {remote_s:7.2f}s vs -n 2 {local_s:7.2f}s: "
              f"{remote_s / local_s:.2f}x per attempt")  # fmt: skip
        # The controller's CPU per attempt: a long hunt minus a short one.
        short, long = 2, rounds * 2
        for workers in ("0", "2"):
            base = ["--hermetic-hunt-isolate=off", "--hermetic-seed=1", "-n", workers,
                    "--hermetic-hunt-order=shuffle"]  # fmt: skip
            cpu_short = statistics.median(
                controller_cpu(trivial, *base, f"--hermetic-hunt={short}",
                               f"--hermetic-hunt-db={trivial / 'cpu.db'}")
                for _ in range(opts.repeat)
            )  # fmt: skip
            cpu_long = statistics.median(
                controller_cpu(trivial, *base, f"--hermetic-hunt={long}",
                               f"--hermetic-hunt-db={trivial / 'cpu.db'}")
                for _ in range(opts.repeat)
            )  # fmt: skip
            per = (cpu_long - cpu_short) / ((long - short) * trivial_tests) * 1e6
            print(f"controller CPU per attempt at -n {workers}: {per:.1f} us "
                  f"({long - short} rounds x {trivial_tests} tests)")  # fmt: skip
        # A round's fresh process: one test, many rounds, ~1,500 modules loaded.
        one = root / "one"
        one_test_suite(one, modules)
        few, many = 5, 5 + rounds * 10
        base = ["--hermetic-hunt-isolate=off", "--hermetic-seed=1", "-n", "0",
                "--hermetic-hunt-order=shuffle"]  # fmt: skip
        t_few, t_many = paired(opts.repeat, one, [*base, f"--hermetic-hunt={few}"],
                               [*base, f"--hermetic-hunt={many}"])  # fmt: skip
        print(f"a round's fresh process (fork, barrier, exit) with {modules} modules loaded: "
              f"{(t_many - t_few) / (many - few) * 1000:.1f} ms per round")  # fmt: skip
        per_attempt, attempts = db_bytes_per_attempt(trivial / "bench-0.db")
        print(
            f"database: {per_attempt:.0f} bytes per attempt ({attempts:,} attempts, "
            f"best-of runs accumulate in one file)"
        )


if __name__ == "__main__":
    main()
