"""``hermetic-hunt demo``: the bundled example suite, hunted end to end."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import LOCAL_INDEX, demo_install

from hermetic_hunt.cli import main
from hermetic_hunt.demo import hunt_argv, prepare
from hermetic_hunt.examples import SHOP

#: The flaky tests of the example suite and the kinds isolation must find
#: (src/hermetic_hunt/examples/shop/README.md).
EXPECTED = {
    "tests/test_settings.py::test_default_currency_is_usd": {"victim"},
    "tests/test_flags.py::test_price_display_shows_vat_once": {"victim"},
    "tests/test_catalog.py::test_catalog_lists_core_products": {"victim"},
    "tests/test_pricing.py::test_convert_to_eur": {"brittle"},
    "tests/test_plugins.py::test_register_builtin_plugins": {"self-polluting"},
    "tests/test_orders.py::test_order_ids_are_unique": {"random"},
    "tests/test_billing.py::test_next_billing_date": {"time"},
    "tests/test_tags.py::test_tags_are_listed_in_order": {"hash-order"},
    "tests/test_checkout.py::test_checkout_reports_metrics": {"network"},
    "tests/test_health.py::test_health_check_degrades_gracefully": {"network"},
    "tests/test_routes.py::TestRoutes::test_hub_has_two_routes": {"victim"},
    "tests/test_routes.py::TestRoutes::test_east_route_is_open": {"brittle"},
    "tests/test_ledger.py::test_ledger_starts_empty": {"victim"},
    "tests/test_ledger.py::test_ledger_totals_one_sale": {"brittle"},
    "tests/test_labels.py::test_label_defaults_to_dollars": {"victim"},
    "tests/test_quotes.py::test_quote_in_euros": {"victim"},
    "tests/test_exports.py::test_page_path_is_absolute": {"victim"},
    "tests/test_exports.py::test_export_directory_is_known": {"victim"},
    "tests/test_session_cache.py::test_session_survives_until_its_ttl": {"time"},
    "tests/test_receipts.py::test_receipt_is_stamped_in_the_second_it_was_ordered": {"time"},
    "tests/test_courier.py::test_quote_arrives_within_the_checkout_timeout": {"time"},
    "tests/test_tokens.py::test_token_survives_most_of_its_ttl": {"time"},
    "tests/test_registry.py::test_registry_is_loaded_once_by_concurrent_first_users": {
        "concurrency"
    },
    "tests/test_archive.py::test_archive_orders": {"collision"},
}
#: The collision's partner (it passes itself) and the folder the two share.
COLLISION = {"partner": "tests/test_backup.py::test_backup_catalog", "resource": "tests/_archive"}
PASSING_VIOLATOR = "tests/test_health.py::test_health_check_degrades_gracefully"
#: Fails only when run twice in one process: never in a plain run, so not "flaky".
NOT_IDEMPOTENT = "tests/test_plugins.py::test_register_builtin_plugins"


def check_demo_database(db: Path) -> None:
    """Every flaky example found, classified as its README says, with its reproducer."""
    result = CliRunner().invoke(main, ["report", "--db", str(db), "--format", "json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    statuses = {t["nodeid"]: t["status"] for t in data["tests"]}
    flaky = {nodeid for nodeid, status in statuses.items() if status == "flaky"}
    assert flaky == set(EXPECTED) - {PASSING_VIOLATOR, NOT_IDEMPOTENT}
    assert statuses[NOT_IDEMPOTENT] == "not-idempotent"
    assert {s for s in statuses.values()} == {"flaky", "not-idempotent", "stable"}
    flakes = {f["nodeid"]: f for f in data["flakes"]}
    assert set(flakes) == set(EXPECTED)
    for nodeid, kinds in EXPECTED.items():
        assert kinds <= set(flakes[nodeid]["kinds"]), (nodeid, flakes[nodeid]["kinds"])
        assert flakes[nodeid]["replay"].startswith("pytest --hermetic-replay-db=")
    flags = flakes["tests/test_flags.py::test_price_display_shows_vat_once"]
    assert sorted(flags["polluters"][0]) == [
        "tests/test_flags.py::test_enable_beta_pricing",
        "tests/test_flags.py::test_set_region_eu",
    ]
    catalog = flakes["tests/test_catalog.py::test_catalog_lists_core_products"]
    assert catalog["cleaners"] == ["tests/test_catalog.py::test_catalog_reset"]
    archive = flakes["tests/test_archive.py::test_archive_orders"]
    assert archive["collides_with"] == COLLISION
    assert statuses[COLLISION["partner"]] == "stable"
    pricing = flakes["tests/test_pricing.py::test_convert_to_eur"]
    assert pricing["state_setters"] == [["tests/test_pricing.py::test_load_rates"]]
    assert {v["nodeid"] for v in data["violations"]} == {
        PASSING_VIOLATOR,
        "tests/test_checkout.py::test_checkout_reports_metrics",
    }


def test_the_demo_copy_is_a_fresh_example_suite(tmp_path):
    target = prepare(tmp_path / "demo")
    assert (target / "pytest.ini").is_file()
    assert sorted(p.name for p in (target / "tests").glob("test_*.py")) == sorted(
        p.name for p in (SHOP / "tests").glob("test_*.py")
    )
    assert not list(target.rglob("__pycache__"))


def test_the_demo_hunt_is_deterministic_by_default():
    argv = hunt_argv(30, 7, "auto")
    assert argv[:3] == [sys.executable, "-m", "pytest"]
    assert {"--hermetic-hunt=30", "--hermetic-seed=7", "--hermetic-hunt-db=flakes.db"} <= set(argv)
    assert argv[argv.index("-n") + 1] == "auto"


def test_the_demo_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    result = CliRunner().invoke(main, ["demo", "--dir", str(tmp_path / "full")])
    assert result.exit_code == 3
    assert result.stderr == (
        f"Error: --dir {tmp_path / 'full'}: exists and is not an empty directory; pass a new "
        "path (the demo copies the example suite into it)\n"
    )
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


@pytest.mark.process
def test_the_demo_exits_1_when_the_hunt_itself_fails(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--dir", str(tmp_path / "d"), "-n", "many"])
    assert result.exit_code == 1
    assert "hermetic-hunt demo: the hunt did not run to the end (pytest exit status 4)" in (
        result.stderr
    )


@pytest.mark.slow
def test_the_demo_finds_and_classifies_every_flake_of_the_example_suite(demo_hunt):
    assert demo_hunt.returncode == 0, demo_hunt.stdout[-3000:] + demo_hunt.stderr[-3000:]
    out = demo_hunt.stdout
    assert out.startswith(f"hermetic-hunt demo: hunting the example suite in {demo_hunt.root}\n")
    # 30 rounds of 74 tests; the twice round runs each test twice: its first runs are
    # plain attempts, its second runs are counted apart (30 x 74 plain + 74 repeated).
    header = re.search(r"hermetic-hunt report · flakes.db · 1 run · (.+) of 74 tests\n", out)
    assert header is not None, out
    counted = header.group(1)
    assert counted == "2,220 plain attempts + 74 repeated", counted
    assert f"30/30 rounds · {counted} · 74 tests" in out
    assert "22 flaky · 0 broken · 0 sandbox-incompatible · 1 not idempotent · 51 stable" in out
    assert f"collides with: {COLLISION['partner']} over tests/_archive" in out
    # A hard-coded past instant asserted to be in the past: stable, shown nowhere.
    assert "test_billing_started_in_the_past" not in out
    assert f"  cd {demo_hunt.root}\n" in out
    for nodeid in EXPECTED:
        assert nodeid in out
    check_demo_database(demo_hunt.db)


@pytest.mark.slow
def test_pip_install_and_hermetic_hunt_demo_work_in_a_fresh_venv(demo_hunt):
    # The README's first command: the session's demo hunt ran from a fresh venv
    # (helpers.run_demo_hunt), started in another folder.
    if not (LOCAL_INDEX / "setuptools").is_dir():
        pytest.skip("needs a local package index with setuptools to build offline")
    assert demo_hunt.returncode == 0, demo_hunt.stdout[-3000:] + demo_hunt.stderr[-3000:]
    assert f"hermetic-hunt demo: hunting the example suite in {demo_hunt.root}" in demo_hunt.stdout
    # The command and the example suite came from the fresh install.
    project = demo_install(demo_hunt.root) / "project" / "src"
    assert Path(demo_hunt.installed).is_relative_to(project)
    check_demo_database(demo_hunt.db)
