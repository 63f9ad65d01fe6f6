"""Done means: the example suite's timing flakes, found, classified and replayed.

The session's demo hunt (``hermetic-hunt demo``: ``--hermetic-hunt=30 -n 2
--hermetic-seed=7`` of the whole example suite) read for the example's timing
files (a TTL racing a sleep, a second-boundary comparison, an asyncio timeout
race, and their stable neighbours): every flaky one is found under the default
mix and classified ``time``, no stable one is flagged, the report says under
which conditions each failed, and each reproducer is a seeded step that replays
by seed (tests/replay/test_replay_example.py replays every flake of this hunt
from a copied database; tests/hunt/test_conditions.py classifies a generated
thread race and replays its interval).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import rows

from hermetic_hunt.cli import main

FILES = ["test_session_cache.py", "test_receipts.py", "test_courier.py"]
EXPECTED = {
    "tests/test_session_cache.py::test_session_survives_until_its_ttl": "time",
    "tests/test_receipts.py::test_receipt_is_stamped_in_the_second_it_was_ordered": "time",
    "tests/test_courier.py::test_quote_arrives_within_the_checkout_timeout": "time",
}
#: The stable neighbours (2x margins) that must never be flagged.
STABLE = 6


def _in_files(nodeid: str) -> bool:
    return nodeid.split("::")[0] in {f"tests/{name}" for name in FILES}


@pytest.mark.slow
def test_the_timing_examples_are_found_classified_and_replayed_by_seed(demo_hunt: Any) -> None:
    db = demo_hunt.db
    flaky = {nodeid for (nodeid,) in rows(db, "SELECT nodeid FROM flaky_tests")}
    assert {n for n in flaky if _in_files(n)} == set(EXPECTED)  # no stable neighbour flagged
    tests = {nodeid for (nodeid,) in rows(db, "SELECT nodeid FROM tests")}
    assert len({n for n in tests if _in_files(n)}) == len(EXPECTED) + STABLE

    found = {
        nodeid: (json.loads(kinds), json.loads(reproducer), status)
        for nodeid, kinds, reproducer, status in rows(
            db,
            "SELECT t.nodeid, fl.kinds, fl.reproducer, fl.status FROM flakes fl "
            "JOIN tests t ON t.id = fl.test_id",
        )
        if _in_files(nodeid)
    }
    assert {nodeid: kinds for nodeid, (kinds, _, _) in found.items()} == {
        nodeid: [kind] for nodeid, kind in EXPECTED.items()
    }
    assert {status for *_, status in found.values()} == {"isolated"}
    for _, reproducer, _ in found.values():
        (step,) = reproducer["steps"]  # replays by seed: the seeded step, its seed, its clock
        assert step["mode"] == "seeded" and step["seed"] is not None
        assert step["profile"] in ("exact", "jitter", "slow")

    text = CliRunner().invoke(main, ["report", "--db", str(db)]).stdout
    ttl = text.split("test_session_survives_until_its_ttl", 1)[1].split("replay:", 1)[0]
    assert "timing: " in ttl and "exact 0/" in ttl
    assert "fails when sleeps last ≥ " in ttl
