"""Done means: a fix for each kind on the example suite, verified where it can be.

One hunt of a private copy of ``examples/shop`` (the isolation example's
arguments), then ``hermetic-hunt fix`` for every flake: the environment,
working-directory, module-global, registry, class-attribute, cleaner,
brittle, self-polluting and random fixes are verified by re-running their
reproducers on a patched copy of the rootdir; the user's files are
untouched until ``--apply``, after which plain pytest confirms the fix.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import clean_env

from hermetic_hunt.cli import main

pytestmark = pytest.mark.slow
T = "tests/"
#: nodeid -> the line the fix must contain (every one verified).
VERIFIED = {
    T + "test_labels.py::test_label_defaults_to_dollars": 'monkeypatch.setenv("SHOP_CURRENCY"',
    T + "test_exports.py::test_page_path_is_absolute": "monkeypatch.chdir(tmp)",
    T
    + "test_settings.py::test_default_currency_is_usd": 'monkeypatch.setattr(settings, "CURRENCY"',
    T + "test_flags.py::test_price_display_shows_vat_once": "def restore_flags():",
    T + "test_catalog.py::test_catalog_lists_core_products": "def catalog_reset():",
    T + "test_quotes.py::test_quote_in_euros": "def restore_refreshers():",
    T + "test_routes.py::TestRoutes::test_hub_has_two_routes": "copy.deepcopy(TestRoutes.graph)",
    T + "test_pricing.py::test_convert_to_eur": "def load_rates():",
    T + "test_plugins.py::test_register_builtin_plugins": "def restore_active():",
    T + "test_orders.py::test_order_ids_are_unique": "random.Random(0)",
}
#: nodeid -> what the advice-only (or unverifiable) suggestion says.
ADVICE = {
    T + "test_billing.py::test_next_billing_date": "time: depends on the clock",
    T + "test_tags.py::test_tags_are_listed_in_order": "hash-order: depends on set or dict order",
    T + "test_health.py::test_health_check_degrades_gracefully": "not verified: not run to verify "
    "it: it would reach the network",
    T + "test_ledger.py::test_ledger_starts_empty": "share the session-scoped fixture ledger_file",
}


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermetic-hunt ARGS`` typed in ``cwd``, run in this process (its verifications
    start their own pytest processes)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(cwd)
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def hunted(demo_hunt: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the session's demo hunt (seed 7, 30 rounds, -n 2)."""
    assert "hermetic-hunt isolation:" in demo_hunt.stdout, demo_hunt.stdout[-3000:]
    return demo_hunt.copy(tmp_path_factory.mktemp("fix-example"))  # type: ignore[no-any-return]


def flake_ids(root: Path) -> dict[str, str]:
    with closing(sqlite3.connect(root / "flakes.db")) as conn, conn:
        rows = conn.execute(
            "SELECT t.nodeid, f.flake_id FROM flakes f JOIN tests t ON t.id = f.test_id"
        ).fetchall()
    return dict(rows)


def test_every_kind_gets_a_fix_the_patches_pass_their_reproducers_and_apply(hunted):
    ids = flake_ids(hunted)
    before = digest(hunted)
    for nodeid, line in VERIFIED.items():
        done = cli(hunted, "fix", ids[nodeid])
        assert done.returncode == 0, (nodeid, done.stdout, done.stderr)
        assert line in done.stdout, (nodeid, done.stdout)
        verdict = [text for text in done.stdout.splitlines() if text.startswith("verified: ")]
        assert verdict and verdict[0].startswith("verified: the reproducer passes "), done.stdout
        runs = verdict[0].split("passes ")[1].split("/")
        assert runs[0] == runs[1].split(" ")[0] and int(runs[0]) >= 5
        assert "control: the reproducer fails without the patch" in done.stdout
    for nodeid, text in ADVICE.items():
        done = cli(hunted, "fix", ids[nodeid])
        assert done.returncode == 0 and text in done.stdout, (nodeid, done.stdout)
    assert digest(hunted) == before  # nothing written without --apply
    with closing(sqlite3.connect(hunted / "flakes.db")) as conn, conn:
        outcomes = conn.execute("SELECT outcome, count(*) FROM fixes GROUP BY outcome").fetchall()
    assert outcomes == [("verified", len(VERIFIED))]
    # --apply, and plain pytest agrees: the polluter first, the victim passes now.
    victim = T + "test_labels.py::test_label_defaults_to_dollars"
    polluter = T + "test_labels.py::test_checkout_in_euros"
    order = ["-p", "no:randomly", "-p", "no:cacheprovider", polluter, victim]
    plain = subprocess.run([sys.executable, "-m", "pytest", *order], cwd=hunted,
                           env=clean_env(), capture_output=True, text=True, check=False)  # fmt: skip
    assert plain.returncode == 1  # the flake, in plain pytest: polluter first, victim fails
    done = cli(hunted, "fix", ids[victim], "--apply")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied to tests/test_labels.py" in done.stdout
    plain = subprocess.run([sys.executable, "-m", "pytest", *order], cwd=hunted,
                           env=clean_env(), capture_output=True, text=True, check=False)  # fmt: skip
    assert plain.returncode == 0, plain.stdout
