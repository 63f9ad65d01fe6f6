"""What isolating a victim costs, measured side by side in one run (not a test).

For generated suites of n tests (default 100, 1,000 and 5,000) with one
polluter planted at a random position (seeded, printed) and the victim
running last, prints:

* probes hermetic-hunt's search used to find and confirm the polluter
  (the whole sequence, bisection, confirmation, the check that nothing else
  pollutes) against the bound ``ceil(log2 n) + 3``;
* its wall time with probes forked from one collected server, and with one
  pytest process per probe (same search, same probes): the fork speed-up;
* an iPFlakies-style linear scan (each candidate alone before the victim,
  stopping at the polluter): with forked probes (measured), and with a
  pytest process per probe as iPFlakies does (the first 10 probes measured,
  the rest estimated);
* ``detect-test-pollution`` on the same suite when it is installed: its
  pytest runs and wall time (it runs without a sandbox, we run sandboxed).

Usage: python benchmarks/bench_isolation.py [--sizes 100,1000,5000] [--seed 3]
       [--parallel 2] [--no-subprocess] [--no-linear] [--no-dtp]
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hermetic_hunt.isolate.classifier import Probe, ProbeStep
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget, fork_available
from hermetic_hunt.isolate.search import find_culprits
from hermetic_hunt.models import Settings

PER_FILE = 100
#: Probes measured of the process-per-probe linear scan (the rest is estimated).
SAMPLE = 10
VICTIM = "test_zz_victim.py::test_victim"
ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider")


def make_suite(root: Path, n: int, polluter: int) -> list[str]:
    """``n`` tests (one of them the polluter) plus the victim; their nodeids."""
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "state.py").write_text("POLLUTED = False\n")
    nodeids = []
    for start in range(0, n, PER_FILE):
        name = f"test_m{start // PER_FILE:03d}.py"
        body = ["import state\n"]
        for i in range(start, min(n, start + PER_FILE)):
            action = "state.POLLUTED = True" if i == polluter else f"assert {i} >= 0"
            body.append(f"def test_{i:05d}():\n    {action}\n")
            nodeids.append(f"{name}::test_{i:05d}")
        (root / name).write_text("\n".join(body))
    (root / "test_zz_victim.py").write_text(
        "import state\n\ndef test_victim():\n    assert not state.POLLUTED\n"
    )
    return nodeids


def step(nodeid: str) -> ProbeStep:
    return ProbeStep(nodeid, seed=1, now=1.0e9)


def search(runner: ProbeRunner, tests: Sequence[str]) -> tuple[list[list[str]], int, float]:
    """hermetic-hunt's search: the whole sequence, then find_culprits."""
    started = time.perf_counter()

    def fails(subset: Sequence[int]) -> bool:
        steps = (*(step(tests[i]) for i in subset), step(VICTIM))
        return runner.run(Probe("search", steps, 1)).outcome == "failed"

    everything = list(range(len(tests)))
    assert fails(everything), "the planted polluter did not pollute"
    found = find_culprits(everything, fails)
    sets = [[tests[i] for i in s] for s in found.sets]
    return sets, found.probes + 1, time.perf_counter() - started


def linear(runner: ProbeRunner, tests: Sequence[str]) -> tuple[str | None, int, float]:
    """iPFlakies-style: each candidate alone before the victim, in order."""
    started = time.perf_counter()
    probes = 0
    width = runner.parallel
    for start in range(0, len(tests), width):
        batch = tests[start : start + width]
        results = runner.run_many([Probe("scan", (step(t), step(VICTIM)), 1) for t in batch])
        for test, result in zip(batch, results, strict=True):
            probes += 1
            if result.outcome == "failed":
                return test, probes, time.perf_counter() - started
    return None, probes, time.perf_counter() - started


def detect_test_pollution(root: Path) -> tuple[str, int, float] | None:
    tool = shutil.which("detect-test-pollution") or str(
        Path(sys.executable).with_name("detect-test-pollution")
    )
    if not Path(tool).exists():
        return None
    started = time.perf_counter()
    done = subprocess.run(
        [tool, "--failing-test", VICTIM, "--tests", "."],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    found = ""
    for line in done.stdout.splitlines():
        if "the polluting test is:" in line:
            found = line.rsplit(":", 1)[-1].strip() if "::" not in line else line.split(": ")[-1]
    # discovery, alone, whole suite, one run per bisection step, double check
    runs = 4 + sum(line.startswith("running step") for line in done.stdout.splitlines())
    return found, runs, elapsed


def row(label: str, probes: int | str, seconds: float, extra: str = "") -> str:
    return f"  {label:<34} {probes!s:>7} probes  {seconds:8.2f}s  {extra}"


def measure(n: int, rng: random.Random, opts: argparse.Namespace) -> None:
    polluter = rng.randrange(n)
    bound = math.ceil(math.log2(n)) + 3
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        tests = make_suite(root, n, polluter)
        print(f"\nn = {n:,}: polluter {tests[polluter]} (position {polluter + 1})")
        target = ProbeTarget(str(root), ARGS, Settings(rounds=1, budget_seconds=None, base_seed=7))
        with ProbeRunner(target, parallel=opts.parallel, fork=True) as runner:
            runner.collected(1)  # start-up and collection, once
            sets, probes, forked = search(runner, tests)
            assert sets == [[tests[polluter]]], sets
            print(row("hermetic-hunt, forked probes", probes, forked, f"bound {bound}"))
            if not opts.no_linear:
                found, scanned, scan_time = linear(runner, tests)
                assert found == tests[polluter], found
                print(
                    row("linear scan, forked probes", scanned, scan_time,
                        f"{scan_time / forked:.1f}x our time, {scanned / probes:.1f}x probes")
                )  # fmt: skip
        if not opts.no_subprocess:
            with ProbeRunner(target, parallel=opts.parallel, fork=False) as runner:
                sets, probes, spawned = search(runner, tests)
                assert sets == [[tests[polluter]]], sets
                print(
                    row("hermetic-hunt, process per probe", probes, spawned,
                        f"forking is {spawned / forked:.1f}x faster")
                )  # fmt: skip
                if not opts.no_linear:
                    # iPFlakies runs a pytest process per candidate: measure a
                    # sample, extrapolate to the polluter's position.
                    sample = tests[: min(SAMPLE, polluter + 1)]
                    _, sampled, sample_time = linear(runner, sample)
                    estimate = sample_time / sampled * (polluter + 1)
                    print(
                        row("linear scan, process per probe", polluter + 1, estimate,
                            f"estimated from {sampled} probes; {estimate / forked:.0f}x our time")
                    )  # fmt: skip
        if not opts.no_dtp:
            dtp = detect_test_pollution(root)
            if dtp is None:
                print("  detect-test-pollution: not installed (pip install detect-test-pollution)")
            else:
                found, runs, elapsed = dtp
                print(
                    row("detect-test-pollution", runs, elapsed,
                        f"found {found or '?'}; {elapsed / forked:.1f}x our forked time")
                )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--no-subprocess", action="store_true")
    parser.add_argument("--no-linear", action="store_true")
    parser.add_argument("--no-dtp", action="store_true")
    opts = parser.parse_args()
    if not fork_available():
        sys.exit("this benchmark compares forked probes with processes: it needs os.fork")
    rng = random.Random(opts.seed)
    print(f"bench_isolation: seed {opts.seed}, {opts.parallel} probes at a time, sandboxed probes")
    for n in (int(s) for s in opts.sizes.split(",")):
        measure(n, rng, opts)


if __name__ == "__main__":
    main()
