"""Done means: one hunt of the example suite classifies every flake exactly right.

The seeded demo's hunt (``pytest --hermetic-hunt=30 -n 2 --hermetic-seed=7``
of a copy of ``examples/shop``, shared by the session's tests): every flaky example gets the kind its README names, the
exact polluter / cleaner / state-setter sets, no stable test is flagged, and
every reproducer fails again when run by hand.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import clean_env

from hermetic_hunt.demo import DEFAULT_ROUNDS, DEFAULT_SEED, hunt_argv
from hermetic_hunt.findings import Probe
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget
from hermetic_hunt.isolate.wire import probe_args
from hermetic_hunt.models import Reproducer, Settings

T = "tests/"
#: nodeid -> (kinds, polluters, cleaners, state-setters), from the suite's README.
EXPECTED = {
    T + "test_settings.py::test_default_currency_is_usd": (
        ["victim"], [[T + "test_settings.py::test_switch_currency_to_gbp"]], [], []),
    T + "test_flags.py::test_price_display_shows_vat_once": (
        ["victim"],
        [sorted([T + "test_flags.py::test_enable_beta_pricing", T + "test_flags.py::test_set_region_eu"])],
        [], []),
    T + "test_catalog.py::test_catalog_lists_core_products": (
        ["victim"], [[T + "test_catalog.py::test_register_seasonal_product"]],
        [T + "test_catalog.py::test_catalog_reset"], []),
    T + "test_pricing.py::test_convert_to_eur": (
        ["brittle"], [], [], [[T + "test_pricing.py::test_load_rates"]]),
    T + "test_plugins.py::test_register_builtin_plugins": (["self-polluting"], [], [], []),
    T + "test_orders.py::test_order_ids_are_unique": (["random"], [], [], []),
    T + "test_billing.py::test_next_billing_date": (["time"], [], [], []),
    T + "test_tags.py::test_tags_are_listed_in_order": (["hash-order"], [], [], []),
    T + "test_checkout.py::test_checkout_reports_metrics": (["random", "network"], [], [], []),
    T + "test_health.py::test_health_check_degrades_gracefully": (["network"], [], [], []),
    T + "test_session_cache.py::test_session_survives_until_its_ttl": (["time"], [], [], []),
    T + "test_receipts.py::test_receipt_is_stamped_in_the_second_it_was_ordered": (
        ["time"], [], [], []),
    T + "test_courier.py::test_quote_arrives_within_the_checkout_timeout": (["time"], [], [], []),
    T + "test_tokens.py::test_token_survives_most_of_its_ttl": (["time"], [], [], []),
    T + "test_registry.py::test_registry_is_loaded_once_by_concurrent_first_users": (
        ["concurrency"], [], [], []),
    T + "test_routes.py::TestRoutes::test_hub_has_two_routes": (
        ["victim"], [[T + "test_routes.py::TestRoutes::test_open_east_route"]], [], []),
    T + "test_routes.py::TestRoutes::test_east_route_is_open": (
        ["brittle"], [], [], [[T + "test_routes.py::TestRoutes::test_open_east_route"]]),
    T + "test_ledger.py::test_ledger_starts_empty": (
        ["victim"], [[T + "test_ledger.py::test_record_sale"]], [], []),
    T + "test_ledger.py::test_ledger_totals_one_sale": (
        ["brittle"], [], [], [[T + "test_ledger.py::test_record_sale"]]),
    T + "test_labels.py::test_label_defaults_to_dollars": (
        ["victim"], [[T + "test_labels.py::test_checkout_in_euros"]], [], []),
    T + "test_quotes.py::test_quote_in_euros": (
        ["victim"], [[T + "test_quotes.py::test_start_rate_refresher"]], [], []),
    T + "test_exports.py::test_page_path_is_absolute": (
        ["victim"], [[T + "test_scratch.py::test_render_in_scratch_dir"]], [], []),
    T + "test_exports.py::test_export_directory_is_known": (
        ["victim"], [[T + "test_scratch.py::test_render_in_scratch_dir"]], [], []),
    T + "test_archive.py::test_archive_orders": (["collision"], [], [], []),
}  # fmt: skip
#: The collision's partner (another worker, at the same time) and the folder they share.
PARTNER, FOLDER = T + "test_backup.py::test_backup_catalog", "tests/_archive"
#: The demo's hunt (``hermetic-hunt demo -n 2``, the session's shared hunt).
ARGS = tuple(hunt_argv(DEFAULT_ROUNDS, DEFAULT_SEED, "2")[3:])


def flakes(root: Path) -> dict[str, dict]:
    with closing(sqlite3.connect(root / "flakes.db")) as conn, conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT fl.*, t.nodeid FROM flakes fl JOIN tests t ON t.id = fl.test_id"
        ).fetchall()
    return {row["nodeid"]: dict(row) for row in rows}


@pytest.mark.slow
def test_one_hunt_classifies_every_example_exactly_and_its_reproducers_fail_again(
    demo_hunt: Any, tmp_path: Path, safety_net: list
) -> None:
    # One hunt (the session's), five checks on a private copy (they run tests);
    # every flake's replay command is tests/replay/test_replay_example.py's.
    root, stdout = demo_hunt.copy(tmp_path), demo_hunt.stdout
    every_flaky_example_gets_its_kind_and_exact_sets(root)
    the_summary_lists_each_flake_with_its_kinds_sets_and_command(root, stdout)
    every_reproducer_fails_again_when_run_by_hand(root)
    every_order_dependent_finding_shows_in_plain_pytest(root)
    the_replay_command_reproduces_the_collision_pair(root)
    assert safety_net == []


def every_flaky_example_gets_its_kind_and_exact_sets(root: Path) -> None:
    found = flakes(root)
    assert sorted(found) == sorted(EXPECTED)  # no stable test flagged, no flake dropped
    for nodeid, (kinds, polluters, cleaners, setters) in EXPECTED.items():
        row = found[nodeid]
        got = (
            json.loads(row["kinds"]),
            [sorted(s) for s in json.loads(row["polluters"])],
            json.loads(row["cleaners"]),
            json.loads(row["state_setters"]),
        )
        assert got == (kinds, polluters, cleaners, setters), nodeid
        assert row["status"] == "isolated", (nodeid, row["note"])
        assert row["confirmed"] == 1, nodeid
        repro = Reproducer.from_json(json.loads(row["reproducer"]))
        if "collision" in kinds:
            assert ([s.nodeid for s in repro.together], repro.resource) == ([PARTNER], FOLDER)
        else:
            assert repro.together == (), nodeid


def the_summary_lists_each_flake_with_its_kinds_sets_and_command(root: Path, stdout: str) -> None:
    found = flakes(root)
    lines = stdout.splitlines()
    assert any(
        line.startswith(f"hermetic-hunt isolation: {len(EXPECTED)} tests · ") for line in lines
    )
    for nodeid, row in found.items():
        header = f"  {row['flake_id']} {nodeid}  {', '.join(json.loads(row['kinds']))} · "
        (index,) = [i for i, line in enumerate(lines) if line.startswith(header)]
        block = []
        for line in lines[index + 1 :]:
            if not line.startswith("      "):
                break
            block.append(line.strip())
        assert f"replay: pytest --hermetic-replay-db=flakes.db::{row['flake_id']}" in block
        for members in json.loads(row["polluters"]):
            (line,) = [line for line in block if line.startswith("polluters: ")]
            assert all(member in line for member in members), line
        if "collision" in json.loads(row["kinds"]):
            shown = f"collides with: {PARTNER} over {FOLDER}, at the same time on another worker"
            assert shown in block


def every_reproducer_fails_again_when_run_by_hand(root: Path) -> None:
    target = ProbeTarget(
        str(root),
        tuple(probe_args(list(ARGS))),
        Settings(rounds=1, budget_seconds=None, base_seed=7),
    )
    with ProbeRunner(target, parallel=2) as runner:
        for nodeid, row in flakes(root).items():
            repro = Reproducer.from_json(json.loads(row["reproducer"]))
            steps = tuple(replace(s, attempt_id=None) for s in repro.steps)
            probe = Probe("by hand", steps, repro.hash_seed or 0)
            if repro.together:  # a collision: the pair together, the partner holding the folder
                partner = Probe("by hand", repro.together, repro.hash_seed or 0)
                pair = runner.run_together([probe, partner], str(root / repro.resource))
                assert any(a.failed for result in pair for a in result.steps), nodeid
                continue
            # A thread race shows in most runs under its switch interval: give it four.
            tries = 4 if "concurrency" in json.loads(row["kinds"]) else 1
            results = [runner.run(probe) for _ in range(tries)]
            if repro.exc_type:
                assert any(
                    r.last
                    and (r.last.exc_type, r.last.location) == (repro.exc_type, repro.location)
                    for r in results
                ), nodeid
            else:  # the network example passes: its blocked call is the finding
                assert results[0].last and results[0].last.violations, nodeid


def plain(root: Path, *nodeids: str) -> dict[str, str]:
    """Plain ``pytest NODEID...`` in a fresh process (in that order): outcome per test."""
    env = clean_env()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-rA",
         "-q", *nodeids],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    outcomes = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR"):
            outcomes[rest.split(" - ")[0]] = word
    return outcomes


def every_order_dependent_finding_shows_in_plain_pytest(root: Path) -> None:
    """A user can confirm each victim and brittle test with plain pytest, fresh processes."""
    for nodeid, (kinds, polluters, _, setters) in EXPECTED.items():
        if "victim" in kinds:
            for members in polluters:
                assert plain(root, nodeid)[nodeid] == "PASSED", nodeid
                assert plain(root, *members, nodeid)[nodeid] == "FAILED", (members, nodeid)
        if "brittle" in kinds:
            for members in setters:
                assert plain(root, nodeid)[nodeid] == "FAILED", nodeid
                assert plain(root, *members, nodeid)[nodeid] == "PASSED", (members, nodeid)


def the_replay_command_reproduces_the_collision_pair(root: Path) -> None:
    flake_id = flakes(root)[T + "test_archive.py::test_archive_orders"]["flake_id"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"--hermetic-replay-db=flakes.db::{flake_id}"],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert f"and {PARTNER} at the same time in a second process" in done.stdout
    reproduced = f"reproduced {flake_id}: {T}test_archive.py::test_archive_orders "
    assert reproduced in done.stdout, done.stdout[-3000:]
    assert f"the collision over {FOLDER}" in done.stdout
    assert not (root / FOLDER).exists()  # the pair cleaned up after itself
