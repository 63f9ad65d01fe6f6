"""The example suite, hunted with -n 2 in each sandbox mode: seeded (the session's
demo hunt), record, off."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import hunt, one, rows

HEALTH = "tests/test_health.py::test_health_check_degrades_gracefully"
CHECKOUT = "tests/test_checkout.py::test_checkout_reports_metrics"
ROUNDS = 5
#: The demo's rounds (hermetic-hunt demo: --hermetic-hunt=30).
DEMO_ROUNDS = 30


def hunt_in_mode(
    suite: Path, mode: str, rounds: int, *args: str
) -> subprocess.CompletedProcess[str]:
    result: subprocess.CompletedProcess[str] = hunt(
        suite, f"--hermetic-hunt={rounds}", "-n", "2", f"--hermetic-hunt-mode={mode}",
        "--hermetic-hunt-isolate=off", "-p", "no:cacheprovider", *args, seed=7,
    )  # fmt: skip
    return result


def violations(db: Path) -> dict[str, set[tuple[str, str, int]]]:
    found: dict[str, set[tuple[str, str, int]]] = {}
    for nodeid, op, host, port in rows(
        db,
        "SELECT t.nodeid, v.op, v.host, v.port FROM violations v "
        "JOIN attempts a ON a.id = v.attempt_id JOIN tests t ON t.id = a.test_id",
    ):
        found.setdefault(nodeid, set()).add((op, host, port))
    return found


def attempts_with_violations(db: Path, nodeid: str) -> int:
    return int(
        one(
            db,
            "SELECT count(*) FROM attempts a JOIN tests t ON t.id = a.test_id "
            "WHERE t.nodeid = ? AND a.violations > 0 AND a.repeat < 2",
            nodeid,
        )
    )


def check_complete(
    db: Path, mode: str, rounds: int, result: subprocess.CompletedProcess[str]
) -> int:
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "INTERNALERROR" not in result.stdout + result.stderr
    return check_stored(db, mode, rounds)


def check_stored(db: Path, mode: str, rounds: int) -> int:
    """Every round of the run complete, every test in each, all in ``mode``."""
    status, done, tests, run_mode = one(db, "SELECT status, rounds_done, tests, mode FROM runs")
    assert (status, done, run_mode) == ("complete", rounds, mode)
    assert one(db, "SELECT count(*) FROM attempts WHERE repeat < 2") == rounds * tests
    assert rows(db, "SELECT DISTINCT mode FROM attempts") == [(mode,)]
    return int(tests)


@pytest.mark.slow
def test_a_seeded_hunt_records_both_network_examples_as_violations(demo_hunt: Any) -> None:
    # The session's demo hunt is the seeded one: 30 rounds, -n 2, the whole suite.
    db = demo_hunt.db
    assert demo_hunt.returncode == 0, demo_hunt.stdout[-3000:] + demo_hunt.stderr[-3000:]
    check_stored(db, "seeded", DEMO_ROUNDS)
    # Health swallows its blocked call and passes: still found, in every round.
    # Checkout sends one call in four (seeded: the same attempts every time).
    assert violations(db) == {
        HEALTH: {("create_connection", "status.example.invalid", 443)},
        CHECKOUT: {("create_connection", "metrics.example.invalid", 80)},
    }
    assert attempts_with_violations(db, HEALTH) == DEMO_ROUNDS
    assert one(db, "SELECT count(*) FROM attempts WHERE seed IS NULL") == 0
    billing = rows(
        db,
        "SELECT DISTINCT a.counts FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = 'tests/test_billing.py::test_next_billing_date'",
    )
    assert [json.loads(counts) for (counts,) in billing] == [{"time": 2}]  # date.today() x2


@pytest.mark.slow
def test_a_record_hunt_records_both_network_examples_as_violations(example_suite: Path) -> None:
    db = example_suite / "flakes.db"
    check_complete(db, "record", ROUNDS, hunt_in_mode(example_suite, "record", ROUNDS))
    assert set(violations(db)) >= {HEALTH}
    assert attempts_with_violations(db, HEALTH) == ROUNDS
    failing = one(
        db,
        "SELECT count(*) FROM attempts a LEFT JOIN journals j ON j.attempt_id = a.id "
        "WHERE a.outcome = 'failed' AND j.format = 'record/1'",
    )
    assert failing == one(db, "SELECT count(*) FROM attempts WHERE outcome = 'failed'") > 0
    # Checkout samples one call in four from a real-entropy stream: hunt it alone,
    # long enough that missing it is a one-in-ten-million event (0.75 ** 60).
    focused = example_suite / "focused.db"
    result = hunt_in_mode(example_suite, "record", 60, f"--hermetic-hunt-db={focused}", CHECKOUT)
    check_complete(focused, "record", 60, result)
    assert violations(focused) == {CHECKOUT: {("create_connection", "metrics.example.invalid", 80)}}


@pytest.mark.slow
def test_a_hunt_with_the_sandbox_off_records_no_violations(example_suite: Path) -> None:
    db = example_suite / "flakes.db"
    check_complete(db, "off", ROUNDS, hunt_in_mode(example_suite, "off", ROUNDS))
    assert violations(db) == {}
    assert rows(db, "SELECT DISTINCT seed, now, counts FROM attempts") == [(None, None, None)]
    # The example's own safety net stopped the calls instead: health degraded and passed.
    assert rows(
        db,
        "SELECT DISTINCT a.outcome FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ?",
        HEALTH,
    ) == [("passed",)]
