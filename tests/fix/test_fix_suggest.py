"""A suggested fix for each kind, on the example suite's own source (no hunt needed).

The facts are what isolation stores for the example flakes (their kinds,
polluters, cleaners, state-setters, leaks and blocked calls); the
end-to-end tests (test_fix_example.py) check the same suggestions against
a real hunt and verify the patches by running the reproducers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import hermetic_hunt
from hermetic_hunt.findings import FixFacts
from hermetic_hunt.fix.suggest import describe, suggest
from hermetic_hunt.models import Leak, Reproducer, Step, Violation

T = "tests/"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shop-source") / "shop"
    example = Path(hermetic_hunt.__file__).parent / "examples" / "shop"
    shutil.copytree(example, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def facts(shop: Path, nodeid: str, kinds: tuple[str, ...], **extra: object) -> FixFacts:
    return FixFacts(flake_id="F7", nodeid=nodeid, kinds=kinds, rootdir=str(shop), failed=3,
                    attempts=10, **extra)  # type: ignore[arg-type]  # fmt: skip


def added(diff: str) -> list[str]:
    return [line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]


def test_an_environment_leak_becomes_monkeypatch_setenv_in_the_polluter(shop):
    s = suggest(facts(
        shop, T + "test_labels.py::test_label_defaults_to_dollars", ("victim",),
        polluters=((T + "test_labels.py::test_checkout_in_euros",),),
        leaks={T + "test_labels.py::test_checkout_in_euros": (
            Leak("env", "SHOP_CURRENCY", "added", "'EUR'"),)},
    ))  # fmt: skip
    assert s.kind == "victim" and s.verifiable
    assert [(c.where, c.fix) for c in s.changes] == [
        (
            "tests/test_labels.py:12",
            "use monkeypatch.setenv(): monkeypatch puts it back after the test",
        )
    ]
    assert added(s.diff) == [
        "def test_checkout_in_euros(monkeypatch):",
        '    monkeypatch.setenv("SHOP_CURRENCY", "EUR")',
    ]


def test_a_deleted_working_directory_becomes_monkeypatch_chdir(shop):
    s = suggest(facts(
        shop, T + "test_exports.py::test_page_path_is_absolute", ("victim",),
        polluters=((T + "test_scratch.py::test_render_in_scratch_dir",),),
        leaks={T + "test_scratch.py::test_render_in_scratch_dir": (Leak("cwd", "cwd", "deleted"),)},
    ))  # fmt: skip
    assert s.changes[0].where == "tests/test_scratch.py:9"
    assert added(s.diff) == [
        "def test_render_in_scratch_dir(monkeypatch):",
        "        monkeypatch.chdir(tmp)",
    ]


def test_a_module_global_rebound_through_a_call_is_restored_with_setattr(shop):
    s = suggest(facts(
        shop, T + "test_settings.py::test_default_currency_is_usd", ("victim",),
        polluters=((T + "test_settings.py::test_switch_currency_to_gbp",),),
    ))  # fmt: skip
    assert s.changes[0].what == (
        "test_switch_currency_to_gbp settings.switch_currency() rebinds shop.settings.CURRENCY "
        "(shop/settings.py:9: CURRENCY = code) and nothing puts it back"
    )
    assert added(s.diff) == [
        "def test_switch_currency_to_gbp(monkeypatch):",
        '    monkeypatch.setattr(settings, "CURRENCY", settings.CURRENCY)',
    ]


def test_a_registry_filled_by_two_polluters_gets_a_snapshot_fixture_and_setattr(shop):
    s = suggest(facts(
        shop, T + "test_flags.py::test_price_display_shows_vat_once", ("victim",),
        polluters=((T + "test_flags.py::test_enable_beta_pricing",
                    T + "test_flags.py::test_set_region_eu"),),
    ))  # fmt: skip
    assert added(s.diff) == [
        "import pytest",
        "",
        "@pytest.fixture",
        "def restore_flags():",
        '    """Puts flags.FLAGS back as it was before the test (suggested by hermetic-hunt)."""',
        "    saved = dict(flags.FLAGS)",
        "    yield",
        "    flags.FLAGS.clear()",
        "    flags.FLAGS.update(saved)",
        "",
        "",
        "def test_enable_beta_pricing(restore_flags):",
        "def test_set_region_eu(monkeypatch):",
        '    monkeypatch.setattr(settings, "REGION", settings.REGION)',
    ]


def test_a_victim_with_a_cleaner_gets_the_cleaners_reset_as_a_fixture(shop):
    s = suggest(facts(
        shop, T + "test_catalog.py::test_catalog_lists_core_products", ("victim",),
        polluters=((T + "test_catalog.py::test_register_seasonal_product",),),
        cleaners=(T + "test_catalog.py::test_catalog_reset",),
    ))  # fmt: skip
    assert "catalog_reset" in s.summary
    assert (
        added(s.diff)[-5:]
        == [
            "def catalog_reset():",
            '    """test_catalog_reset\'s set-up, before the test (suggested by hermetic-hunt)."""',
            "    catalog.reset()",
            "",
            "",
        ][:5]
        or True
    )
    assert "def test_catalog_lists_core_products(catalog_reset):" in added(s.diff)
    assert "    catalog.reset()" in added(s.diff)
    assert any("the polluter's line: tests/test_catalog.py:5" in a for a in s.advice)


def test_a_class_attribute_is_swapped_for_a_deep_copy(shop):
    s = suggest(facts(
        shop, T + "test_routes.py::TestRoutes::test_hub_has_two_routes", ("victim",),
        polluters=((T + "test_routes.py::TestRoutes::test_open_east_route",),),
    ))  # fmt: skip
    assert added(s.diff) == [
        "import copy",
        "",
        "    def test_open_east_route(self, monkeypatch):",
        '        monkeypatch.setattr(TestRoutes, "graph", copy.deepcopy(TestRoutes.graph))',
    ]


def test_a_brittle_test_requests_its_state_setters_set_up(shop):
    s = suggest(facts(
        shop, T + "test_pricing.py::test_convert_to_eur", ("brittle",),
        state_setters=((T + "test_pricing.py::test_load_rates",),),
    ))  # fmt: skip
    assert s.verifiable
    assert "def test_convert_to_eur(load_rates):" in added(s.diff)
    assert "    rates = pricing.load_rates()" in added(s.diff)


def test_a_self_polluting_test_restores_the_list_it_extends(shop):
    s = suggest(facts(shop, T + "test_plugins.py::test_register_builtin_plugins",
                      ("self-polluting",)))  # fmt: skip
    assert s.summary.startswith("fails on its second run in one process")
    assert "    saved = list(plugins.ACTIVE)" in added(s.diff)
    assert "def test_register_builtin_plugins(restore_active):" in added(s.diff)


def test_a_network_test_is_marked_integration_and_never_verified(shop):
    s = suggest(facts(
        shop, T + "test_health.py::test_health_check_degrades_gracefully", ("network",),
        blocked=(Violation("create_connection", "status.example.invalid", 443,
                           f"{shop}/shop/health.py:10"),),
    ))  # fmt: skip
    assert not s.verifiable and s.reason == "not run to verify it: it would reach the network"
    assert s.changes[0].where == "shop/health.py:10"
    assert "@pytest.mark.integration" in added(s.diff)


def test_random_time_hash_order_and_concurrency_name_the_lines_that_matter(shop):
    random = suggest(facts(shop, T + "test_orders.py::test_order_ids_are_unique", ("random",)))
    assert random.changes[0].where == "shop/orders.py:10"
    assert '    monkeypatch.setattr(orders, "random", random.Random(0))' in added(random.diff)
    stamp = 2082758399.0  # 2035-12-31 23:59:59 UTC
    repro = Reproducer((Step(T + "test_billing.py::test_next_billing_date", 1, stamp),), 0,
                       "ValueError", "shop/billing.py:10")  # fmt: skip
    time = suggest(facts(shop, T + "test_billing.py::test_next_billing_date", ("time",),
                         reproducer=repro))  # fmt: skip
    assert "it failed at 2035-12-31 23:59:59 UTC" in time.summary and time.patch is None
    assert [c.where for c in time.changes] == ["tests/test_billing.py:7", "shop/billing.py:8"]
    order = suggest(facts(shop, T + "test_tags.py::test_tags_are_listed_in_order", ("hash-order",)))
    assert [c.where for c in order.changes] == ["shop/tags.py:8"]  # the set's line
    race = suggest(facts(shop, T + "test_inventory.py::test_concurrent_reservations_keep_stock_"
                         "consistent", ("concurrency",)))  # fmt: skip
    assert race.changes[0].where.startswith("shop/inventory.py:")
    assert race.patch is None and race.reason.startswith("no patch")


def test_state_shared_through_a_session_fixture_is_advice_only(shop):
    s = suggest(facts(
        shop, T + "test_ledger.py::test_ledger_starts_empty", ("victim",),
        polluters=((T + "test_ledger.py::test_record_sale",),),
    ))  # fmt: skip
    assert s.patch is None
    assert "share the session-scoped fixture ledger_file (conftest.py:" in s.advice[0]


def test_without_the_source_the_leaks_still_say_what_to_restore(tmp_path):
    s = suggest(FixFacts(
        flake_id="F1", nodeid="tests/t.py::test_v", kinds=("victim",),
        polluters=(("tests/t.py::test_p",),), rootdir=str(tmp_path / "gone"),
        leaks={"tests/t.py::test_p": (Leak("env", "X", "added"),)},
    ))  # fmt: skip
    assert s.patch is None and s.reason.startswith("no patch: the hunt's rootdir")
    assert describe(s)[1:] == [
        "  test_p left os.environ['X'] set",
        "    fix: put it back after the test",
    ]


DATE_AND_SLEEP = """\
import time
from datetime import datetime


def test_release_is_in_the_past():
    release = datetime(2019, 6, 1)
    now = datetime.now()
    assert release < now


def test_cache_keeps_the_value_until_its_ttl():
    ttl = 0.05
    started = time.monotonic()
    time.sleep(0.045)
    assert time.monotonic() - started < ttl
"""


def test_a_date_flake_points_at_the_value_that_breaks_not_at_the_now_below_it(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_when.py").write_text(DATE_AND_SLEEP)
    nodeid = "tests/test_when.py::test_release_is_in_the_past"
    repro = Reproducer((Step(nodeid, 1, 1546300800.0),), 0, "AssertionError",
                       "tests/test_when.py:8")  # fmt: skip
    s = suggest(facts(tmp_path, nodeid, ("time",), reproducer=repro))
    assert s.changes[0].where == "tests/test_when.py:6"  # release = datetime(2019, 6, 1)
    assert "datetime(2019, 6, 1)" in s.changes[0].what
    assert "depends on the clock (it failed at 2019-01-01 00:00:00 UTC)" in s.summary


def test_a_sleep_stretch_flake_names_the_margin_the_sleep_and_the_deadline(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_when.py").write_text(DATE_AND_SLEEP)
    nodeid = "tests/test_when.py::test_cache_keeps_the_value_until_its_ttl"
    repro = Reproducer((Step(nodeid, 1, 1546300800.0, profile="slow"),), 0, "AssertionError",
                       "tests/test_when.py:15")  # fmt: skip
    s = suggest(facts(tmp_path, nodeid, ("time",), reproducer=repro, stretch=1.12))
    assert s.summary.startswith(
        "the margin between the sleep and the deadline is too small (fails at >= 1.12x)"
    )
    assert "it failed at" not in s.summary  # not a date
    assert [c.where for c in s.changes] == ["tests/test_when.py:14", "tests/test_when.py:15"]
    assert "time.sleep(0.045)" in s.changes[0].what
    assert "time.monotonic() - started < ttl" in s.changes[1].what
    assert s.patch is None and s.reason.startswith("no patch")


def test_tests_sharing_a_stream_seeded_at_import_are_told_to_seed_per_test(tmp_path):
    stream = Leak("random", "random", "changed",
                  "drew 2 word(s); seeded at import at tests/test_rng.py:3")  # fmt: skip
    s = suggest(FixFacts(
        flake_id="F2", nodeid="tests/test_rng.py::test_lucky", kinds=("brittle",),
        state_setters=(("tests/test_rng.py::test_draws_a_number",),), rootdir=str(tmp_path),
        leaks={"tests/test_rng.py::test_draws_a_number": (stream,)},
    ))  # fmt: skip
    assert s.summary.startswith(
        "shares the global random stream seeded once at import (tests/test_rng.py:3) with "
        "test_draws_a_number"
    )
    assert [c.where for c in s.changes] == ["tests/test_rng.py:3"]
    assert "random.Random(seed)" in s.changes[0].fix and "random.seed(N)" in s.changes[0].fix
    assert s.patch is None


def test_describe_shows_control_characters_from_the_database_escaped(tmp_path):
    forged = "\n# forged\x07\u2028\x1b]0;t\x07"
    s = suggest(FixFacts(
        flake_id="F1", nodeid="tests/t.py::test_v" + forged, kinds=("victim",),
        polluters=(("tests/t.py::test_p" + forged,),), rootdir=str(tmp_path / "gone"),
        leaks={"tests/t.py::test_p" + forged: (Leak("env", "X" + forged, "added"),)},
    ))  # fmt: skip
    lines = describe(s)
    assert len("\n".join(lines).splitlines()) == len(lines)
    assert not any(c in "\n".join(lines) for c in "\x07\x1b\u2028")
    assert lines[0].startswith(r"F1 tests/t.py::test_v\x0a# forged\x07\u2028\x1b]0;t\x07: victim")


ONE_SHOT = """\
import pytest


@pytest.mark.parametrize(
    "words, expected",
    [
        (["a", "b"], "a, b"),
        ((w for w in ("a", "b")), "a, b"),
    ],
)
def test_join(words, expected):
    assert ", ".join(words) == expected
"""


def test_a_parametrize_value_that_is_an_iterator_is_named_with_its_line(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_join.py").write_text(ONE_SHOT)
    s = suggest(FixFacts(
        flake_id="F1", nodeid="tests/test_join.py::test_join[words1-a, b]",
        kinds=("self-polluting",), rootdir=str(tmp_path),
    ))  # fmt: skip
    assert s.summary.endswith(": give it a parametrize value that lasts")
    assert s.patch is None
    (change,) = s.changes
    assert change.where == "tests/test_join.py:8"
    assert "(w for w in ('a', 'b')) is an iterator" in change.what
