"""What a hunt costs, measured side by side in one run (not a test).

Prints, for generated suites (200 CPU-bound tests of ~5 ms -- busy loops,
since sleeps are virtual in seeded mode -- and 2,000 trivial tests with
~1,500 modules imported), every figure a ratio of runs interleaved in this
one run (medians of ``--repeat``):

* the ``-n 2`` vs ``-n 0`` speed-up of a hunt of the 5 ms suite, next to
  plain xdist's (``pytest-repeat --count=N``) on the same tests; and where a
  hunt's ``-n 2`` time goes: its rounds, the default round 0 (one worker),
  and start-up and end (from the attempts' own times);
* hunt / ``pytest-repeat`` per attempt, from the difference between a long
  and a short run of each (start-up and collection cancel out);
* the same hunt over two ``--tx socket=`` gateways on loopback vs ``-n 2``;
* the controller's CPU per attempt (``resource.getrusage`` of the process
  that owns the session), a long hunt minus a short one;
* the cost of a round's fresh process (fork, barrier, exit) with ~1,500
  modules loaded: a one-test suite hunted for many rounds;
* database bytes per attempt.

Usage: python benchmarks/bench_hunt.py [--rounds N] [--repeat N] [--quick]
Goals (issues 9, 31): hunt / pytest-repeat <= 1.15x per attempt, -n 2 >= 1.8x
faster than -n 0 on the 5 ms suite and never below plain xdist's ratio,
controller CPU <= 50 us per attempt, <= 300 bytes per passing attempt.
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

#: Plugins of this venv that are no part of what is measured are left out (hypothesis's
#: imports hypothesis, ~1 s, at the end of every session: each xdist worker's too).
PLAIN = ["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-p", "no:rerunfailures",
         "-p", "no:hypothesispytest"]  # fmt: skip


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


def calibrate() -> int:
    """Loops of ``sum(range(1000))`` in ~5 ms (the median of a few tries)."""
    tries = []
    for _ in range(5):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.05:
            sum(range(1000))
            n += 1
        tries.append(max(1, n // 10))
    return int(statistics.median(tries))


def five_ms_suite(root: Path, tests: int) -> None:
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    # CPU work, not sleep: a hunt's virtual clock would make sleep free. Calibrated
    # once, here: a process that calibrated itself (each xdist worker) while another
    # was busy would run shorter tests than its peer, and a round waits for its
    # slowest slice.
    (root / "conftest.py").write_text(
        f"LOOPS = {calibrate()}\n"
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


def hunt_args(rounds: int, db: Path, *more: str) -> list[str]:
    return [f"--hermetic-hunt={rounds}", "--hermetic-hunt-isolate=off", "--hermetic-seed=1",
            f"--hermetic-hunt-db={db}", *more]  # fmt: skip


def where_it_goes(db: Path, wall: float) -> str:
    """A hunt's wall time split by the attempts' own (real) times: before the
    first, round 0, the other rounds, after the last."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT round, min(started), max(started + duration) FROM attempts "
            "WHERE run_id = (SELECT max(id) FROM runs) GROUP BY round ORDER BY round"
        ).fetchall()
    first, last = rows[0][1], max(r[2] for r in rows)
    zero = rows[0][2] - rows[0][1]
    ends = wall - (last - first)
    return (f"round 0 (one worker) {zero:.2f}s, rounds 1..{len(rows) - 1} "
            f"{last - first - zero:.2f}s, start-up and end {ends:.2f}s")  # fmt: skip


def speedup(opts: argparse.Namespace, slow: Path) -> None:
    """-n 2 vs -n 0: a hunt's, next to plain xdist's on the same tests, interleaved."""
    rounds = opts.rounds
    runs: dict[str, list[float]] = {}
    for _ in range(opts.repeat):
        for workers in ("0", "2"):
            db = slow / f"speed-{workers}.db"
            runs.setdefault(f"hunt {workers}", []).append(run(slow, "-n", workers,
                                                              *hunt_args(rounds, db)))  # fmt: skip
            if workers == "2":
                split = where_it_goes(db, runs["hunt 2"][-1])
            runs.setdefault(f"repeat {workers}", []).append(
                run(slow, "-n", workers, f"--count={rounds}")
            )
    med = {key: statistics.median(values) for key, values in runs.items()}
    hunt_ratio, plain_ratio = med["hunt 0"] / med["hunt 2"], med["repeat 0"] / med["repeat 2"]
    print(f"5 ms suite, {rounds} rounds: hunt -n 0 {med['hunt 0']:.2f}s, "
          f"-n 2 {med['hunt 2']:.2f}s: {hunt_ratio:.2f}x faster; plain xdist + pytest-repeat "
          f"-n 0 {med['repeat 0']:.2f}s, "
          f"-n 2 {med['repeat 2']:.2f}s: {plain_ratio:.2f}x "
          f"(the hunt's / plain xdist's: {hunt_ratio / plain_ratio:.2f})")  # fmt: skip
    print(f"  the last -n 2 hunt: {split}")
    ideal = rounds / (1 + (rounds - 1) / 2)
    print(f"  round 0 runs on one worker: at -n 2 the rounds of a {rounds}-round hunt are at "
          f"most {ideal:.2f}x faster than at -n 0")  # fmt: skip


def per_attempt(opts: argparse.Namespace, suite: Path, label: str, tests: int) -> None:
    """hunt / pytest-repeat per attempt: (long - short) / attempts, at -n 0."""
    short, long = 2, 2 + opts.rounds
    db = suite / "per-attempt.db"
    order = "--hermetic-hunt-order=shuffle"  # (no twice round: as many attempts as pytest-repeat)
    times: dict[str, list[float]] = {}
    for _ in range(opts.repeat):
        for rounds in (short, long):
            times.setdefault(f"hunt {rounds}", []).append(
                run(suite, "-n", "0", *hunt_args(rounds, db, order))
            )
            times.setdefault(f"repeat {rounds}", []).append(
                run(suite, "-n", "0", f"--count={rounds}")
            )
    med = {key: statistics.median(values) for key, values in times.items()}
    attempts = (long - short) * tests
    hunt = (med[f"hunt {long}"] - med[f"hunt {short}"]) / attempts
    repeat = (med[f"repeat {long}"] - med[f"repeat {short}"]) / attempts
    print(f"{label}: per attempt, hunt {hunt * 1000:.2f} ms, pytest-repeat {repeat * 1000:.2f} ms: "
          f"{hunt / repeat:.2f}x (goal <= 1.15x); start-up and end: hunt "
          f"{med[f'hunt {short}'] - short * tests * hunt:.2f}s, pytest-repeat "
          f"{med[f'repeat {short}'] - short * tests * repeat:.2f}s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="median of N runs per figure")
    parser.add_argument("--quick", action="store_true", help="smaller suites, the first figures")
    opts = parser.parse_args()
    rounds = opts.rounds
    trivial_tests, modules, slow_tests = (2000, 1500, 200) if not opts.quick else (500, 300, 200)
    with tempfile.TemporaryDirectory(prefix="hh-bench-") as tmp:
        root = Path(tmp)
        trivial = root / "trivial"
        trivial_suite(trivial, trivial_tests, modules)
        slow = root / "five_ms"
        five_ms_suite(slow, slow_tests)
        print(f"rounds={rounds}; 5 ms suite: {slow_tests} tests; trivial suite: {trivial_tests} "
              f"tests, {modules} modules; medians of {opts.repeat}, runs interleaved")  # fmt: skip
        speedup(opts, slow)
        per_attempt(opts, slow, "5 ms suite", slow_tests)
        per_attempt(opts, trivial, "trivial suite", trivial_tests)
        if opts.quick:
            return
        # Remote workers: two execnet socket servers on loopback against -n 2.
        with socket_servers(slow, 2) as specs:
            tx = [arg for spec in specs for arg in ("--tx", spec)]
            local_s, remote_s = paired(
                opts.repeat, slow,
                ["-n", "2", *hunt_args(rounds, slow / "local.db")],
                [*tx, "--dist", "load", *hunt_args(rounds, slow / "remote.db")],
            )  # fmt: skip
        print(f"5 ms suite: --tx socket x2 {remote_s:7.2f}s vs -n 2 {local_s:7.2f}s: "
              f"{remote_s / local_s:.2f}x")  # fmt: skip
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
        per_attempt_bytes, attempts = db_bytes_per_attempt(slow / "speed-0.db")
        print(f"database: {per_attempt_bytes:.0f} bytes per attempt ({attempts:,} attempts, "
              f"runs accumulate in one file)")  # fmt: skip


if __name__ == "__main__":
    main()
