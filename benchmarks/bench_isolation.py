"""What isolation costs, measured side by side in one run (not a test).

Part 1, ``--suites`` (issue 13's target): a whole hunt of the example suite,
of a generated 2,000-test suite with planted flakes (victims of a module
global and of an environment variable, a brittle test, random, time and
hash-order tests, a parametrized test that fails only when run twice in one
process) and of a sleep-heavy suite modelled on yamicache (tests that sleep,
threads that sleep for real, a victim behind them), each at the default
isolation budget; prints the rounds' wall time, the isolation's wall time,
their ratio (target: <= 1) and which planted flakes the hunt saw and
isolation classified as planted (target: all); for the sleep-heavy suite
also a plain ``pytest`` run's wall time, and the rounds' per round (issue
31's target: a round costs no more than the plain suite).

Part 2, the polluter search: for generated suites of n tests (default 100,
1,000 and 5,000) with one polluter planted at a random position (seeded,
printed) and the victim running last, prints:

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

Usage: python benchmarks/bench_isolation.py --suites [--only sleepy] [--rounds 10]
       [--hunt-seed 11]
       python benchmarks/bench_isolation.py [--sizes 100,1000,5000] [--seed 3]
       [--parallel 2] [--no-subprocess] [--no-linear] [--no-dtp]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import hermetic_hunt
from hermetic_hunt.findings import Probe
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget, fork_available
from hermetic_hunt.isolate.search import find_culprits
from hermetic_hunt.models import Settings, Step

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


def step(nodeid: str) -> Step:
    return Step(nodeid, seed=1, now=1.0e9)


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


# -- part 1: whole hunts at the default budget ---------------------------------------

#: The example suite's flakes and their kinds (see examples/shop/README.md).
EXAMPLE = {
    "tests/" + nodeid: set(kinds.split())
    for nodeid, kinds in {
        "test_settings.py::test_default_currency_is_usd": "victim",
        "test_flags.py::test_price_display_shows_vat_once": "victim",
        "test_catalog.py::test_catalog_lists_core_products": "victim",
        "test_pricing.py::test_convert_to_eur": "brittle",
        "test_plugins.py::test_register_builtin_plugins": "self-polluting",
        "test_orders.py::test_order_ids_are_unique": "random",
        "test_billing.py::test_next_billing_date": "time",
        "test_tags.py::test_tags_are_listed_in_order": "hash-order",
        "test_checkout.py::test_checkout_reports_metrics": "random network",
        "test_health.py::test_health_check_degrades_gracefully": "network",
        "test_session_cache.py::test_session_survives_until_its_ttl": "time",
        "test_receipts.py::test_receipt_is_stamped_in_the_second_it_was_ordered": "time",
        "test_courier.py::test_quote_arrives_within_the_checkout_timeout": "time",
        "test_registry.py::test_registry_is_loaded_once_by_concurrent_first_users": "concurrency",
        "test_routes.py::TestRoutes::test_hub_has_two_routes": "victim",
        "test_routes.py::TestRoutes::test_east_route_is_open": "brittle",
        "test_ledger.py::test_ledger_starts_empty": "victim",
        "test_ledger.py::test_ledger_totals_one_sale": "brittle",
        "test_labels.py::test_label_defaults_to_dollars": "victim",
        "test_quotes.py::test_quote_in_euros": "victim",
        "test_exports.py::test_page_path_is_absolute": "victim",
        "test_exports.py::test_export_directory_is_known": "victim",
    }.items()
}
PLANTED_FILES = {
    "test_f07_victim.py": (
        "import state\n\ndef test_victim_of_a_global():\n    assert not state.FLAGS\n"
    ),
    "test_f23_polluter.py": (
        "import state\n\ndef test_sets_a_flag():\n    state.FLAGS.append('on')\n"
    ),
    "test_f11_env_victim.py": (
        "import os\n\ndef test_reads_the_currency():\n"
        "    assert os.environ.get('BENCH_CURRENCY', 'USD') == 'USD'\n"
    ),
    "test_f31_env_polluter.py": (
        "import os\n\ndef test_switches_the_currency():\n    os.environ['BENCH_CURRENCY'] = 'GBP'\n"
    ),
    "test_f15_brittle.py": (
        "import state\n\ndef test_converts_with_the_rates():\n    assert state.RATES['EUR'] > 0\n"
    ),
    "test_f03_setter.py": (
        "import state\n\ndef test_loads_the_rates():\n    state.RATES['EUR'] = 0.9\n"
    ),
    "test_f19_random.py": (
        "import random\n\ndef test_draws_low():\n    assert random.random() < 0.7\n"
    ),
    "test_f27_time.py": (
        "from datetime import date\n\ndef test_tomorrow_exists():\n    today = date.today()\n"
        "    assert date(today.year, today.month, today.day + 1) > today\n"
    ),
    "test_f35_hash.py": (
        "def test_tags_in_order():\n    assert ','.join({'organic', 'fair-trade'}) == "
        "'organic,fair-trade'\n"
    ),
    "test_f39_register.py": (
        "import pytest\n\nimport state\n\n@pytest.mark.parametrize('n', range(20))\n"
        "def test_registers_once(n):\n    assert n not in state.SEEN\n    state.SEEN.add(n)\n"
    ),
}
PLANTED = {
    "test_f07_victim.py::test_victim_of_a_global": {"victim"},
    "test_f11_env_victim.py::test_reads_the_currency": {"victim"},
    "test_f15_brittle.py::test_converts_with_the_rates": {"brittle"},
    "test_f19_random.py::test_draws_low": {"random"},
    "test_f27_time.py::test_tomorrow_exists": {"time"},
    "test_f35_hash.py::test_tags_in_order": {"hash-order"},
    **{f"test_f39_register.py::test_registers_once[{n}]": {"self-polluting"} for n in range(20)},
}


#: A sleep-heavy suite modelled on yamicache: sleeps a seeded hunt makes virtual, threads
#: that sleep for real while they run (a test's sleep beside them is real too), and a
#: victim of a module global whose polluter runs after the sleepers.
SLEEPY_FILES = {
    "state.py": "CACHE = {}\n",
    "test_a_victim.py": "import state\n\ndef test_cache_starts_empty():\n"
                        "    assert state.CACHE == {}\n",
    **{f"test_sleeps_{i}.py": "import time\n\ndef test_expires():\n    start = time.time()\n"
       "    time.sleep(1.0)\n    assert time.time() - start >= 1.0\n" for i in range(10)},
    **{f"test_threads_{i}.py": (
        "import threading\nimport time\n\ndef test_collects_in_the_background():\n"
        "    done = []\n    workers = [threading.Thread(target=lambda: (time.sleep(0.3), "
        "done.append(1))) for _ in range(3)]\n    for w in workers:\n        w.start()\n"
        "    time.sleep(0.1)\n    for w in workers:\n        w.join()\n    assert len(done) == 3\n"
    ) for i in range(3)},
    "test_z_polluter.py": "import state\n\ndef test_caches_a_value():\n"
                          "    state.CACHE['k'] = 1\n",
}  # fmt: skip
SLEEPY = {"test_a_victim.py::test_cache_starts_empty": {"victim"}}


def sleepy_suite(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    for name, body in SLEEPY_FILES.items():
        (root / name).write_text(body)


def planted_suite(root: Path, tests: int = 2000) -> None:
    """``tests`` tests: filler modules of 50 trivial tests, and the planted flakes."""
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "state.py").write_text("FLAGS = []\nRATES = {}\nSEEN = set()\n")
    for name, body in PLANTED_FILES.items():
        (root / name).write_text(body)
    planted = 9 + 20
    for f in range((tests - planted) // 50 + 1):
        count = min(50, tests - planted - 50 * f)
        if count <= 0:
            break
        body = "\n".join(f"def test_{i}():\n    assert {i} >= 0\n" for i in range(count))
        (root / f"test_f{f:02d}_filler.py").write_text(body)


def _seconds(text: str) -> float:
    """``1m15s`` / ``12.3s`` / ``1h`` -> seconds (what format_seconds prints)."""
    total = 0.0
    for value, unit in re.findall(r"([0-9.]+)([hms])", text):
        total += float(value) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def hunt_suite(label: str, root: Path, args: Sequence[str], expected: dict[str, set[str]], *,
               plain: bool = False) -> None:  # fmt: skip
    """A hunt of ``root`` (``plain``: first a plain ``pytest`` run of it, timed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HERMETIC_HUNT"))}
    env.pop("PYTHONHASHSEED", None)
    for old in root.glob("flakes.db*"):  # (each hunt reads its own run's flakes)
        old.unlink()
    plain_s = 0.0
    if plain:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-q"], cwd=root,
                       env=env, capture_output=True, check=False)  # fmt: skip
        plain_s = time.perf_counter() - started
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", *args],
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    rounds = re.search(r"hermetic-hunt: run \d+ · \d+ round\(s\) · (.+?) in (\S+) ·", done.stdout)
    isolation = re.search(r"hermetic-hunt isolation: .* in (\S+)$", done.stdout, re.M)
    if rounds is None:
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"{label}: the hunt did not finish")
    rounds_s = _seconds(rounds.group(2))
    isolation_s = _seconds(isolation.group(1)) if isolation else 0.0
    with sqlite3.connect(root / "flakes.db") as conn:
        found = {
            nodeid: (set(json.loads(kinds)), status)
            for nodeid, kinds, status in conn.execute(
                "SELECT t.nodeid, fl.kinds, fl.status FROM flakes fl "
                "JOIN tests t ON t.id = fl.test_id"
            )
        }  # fmt: skip
        probes = conn.execute("SELECT coalesce(sum(probes), 0) FROM flakes").fetchone()[0]
    seen = [n for n in expected if n in found]
    right = [n for n in seen if found[n][0] == expected[n] and found[n][1] == "isolated"]
    extra = sorted(set(found) - set(expected))
    print(f"\n{label}: {rounds.group(1)}, hunt wall time {wall:.1f}s")
    print(f"  rounds                 {rounds_s:8.1f}s")
    print(f"  isolation              {isolation_s:8.1f}s  ({probes} probes)")
    print(f"  isolation / rounds     {isolation_s / max(rounds_s, 1e-9):8.2f}   (target <= 1)")
    if plain:
        count = int(re.search(r"--hermetic-hunt=(\d+)", " ".join(args)).group(1))  # type: ignore[union-attr]
        print(f"  plain pytest run       {plain_s:8.1f}s; a round costs "
              f"{rounds_s / count / plain_s:.2f}x it (target <= 1)")  # fmt: skip
    print(f"  planted flakes seen    {len(seen)}/{len(expected)}")
    print(f"  classified as planted  {len(right)}/{len(seen)}   (target: all seen)")
    for nodeid in seen:
        if nodeid not in right:
            kinds, status = found[nodeid]
            print(f"    {nodeid}: {sorted(kinds)} [{status}], planted {sorted(expected[nodeid])}")
    for nodeid in extra:
        print(f"    not planted, flagged anyway: {nodeid} {sorted(found[nodeid][0])}")


def suites(opts: argparse.Namespace) -> None:
    wanted = set(opts.only.split(",")) if opts.only else {"example", "planted", "sleepy"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "example" in wanted:
            example = Path(hermetic_hunt.__file__).parent / "examples" / "shop"
            ignore = shutil.ignore_patterns("__pycache__", ".scheduler-hint")
            shutil.copytree(example, root / "example" / "shop", ignore=ignore)
            hunt_suite("example suite (30 rounds, -n 2)", root / "example",
                       ["--hermetic-hunt=30", "-n", "2", "--hermetic-seed=7", "shop"],
                       EXAMPLE)  # fmt: skip
        if "planted" in wanted:
            planted_suite(root / "planted")
            hunt_suite(f"generated 2,000-test suite ({opts.rounds} rounds, -n 2)",
                       root / "planted", [f"--hermetic-hunt={opts.rounds}", "-n", "2",
                                          f"--hermetic-seed={opts.hunt_seed}"],
                       PLANTED)  # fmt: skip
        if "sleepy" in wanted:
            sleepy_suite(root / "sleepy")
            for workers in ("2", "0"):
                hunt_suite(f"sleep-heavy suite (20 rounds, -n {workers})", root / "sleepy",
                           ["--hermetic-hunt=20", "-n", workers,
                            f"--hermetic-seed={opts.hunt_seed}", "-p", "no:cacheprovider"],
                           SLEEPY, plain=workers == "2")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", action="store_true", help="part 1: whole hunts")
    parser.add_argument("--only", default="", help="part 1: example,planted,sleepy (default all)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--hunt-seed", type=int, default=11)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--no-subprocess", action="store_true")
    parser.add_argument("--no-linear", action="store_true")
    parser.add_argument("--no-dtp", action="store_true")
    opts = parser.parse_args()
    if opts.suites:
        suites(opts)
        return
    if not fork_available():
        sys.exit("this benchmark compares forked probes with processes: it needs os.fork")
    rng = random.Random(opts.seed)
    print(f"bench_isolation: seed {opts.seed}, {opts.parallel} probes at a time, sandboxed probes")
    for n in (int(s) for s in opts.sizes.split(",")):
        measure(n, rng, opts)


if __name__ == "__main__":
    main()
