"""Done means: the example suite's timing flakes, found, classified and replayed.

One ``pytest --hermetic-hunt=30 -n 2 --hermetic-seed=7`` of the example's
timing files (a TTL racing a sleep, a second-boundary comparison, an asyncio
timeout race, and their stable neighbours): every flaky one is found under
the default mix and classified ``time``, no stable one is flagged, the
report says under which conditions each failed, and they replay by seed.

The thread race (``test_registry.py``) is not hunted here: a switch-interval
round shows it only while its threads get a CPU, which a machine busy with
this suite's other hunts does not promise in three rounds of thirty. The
demo's hunt (tests/isolate/test_isolation_example.py) and the generated race
of tests/hunt/test_conditions.py classify it and replay its interval.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import clean_env, rows

import hermetic_hunt
from hermetic_hunt.cli import main

FILES = ["test_session_cache.py", "test_receipts.py", "test_courier.py"]
EXPECTED = {
    "tests/test_session_cache.py::test_session_survives_until_its_ttl": "time",
    "tests/test_receipts.py::test_receipt_is_stamped_in_the_second_it_was_ordered": "time",
    "tests/test_courier.py::test_quote_arrives_within_the_checkout_timeout": "time",
}
#: The stable neighbours (2x margins) that must never be flagged.
STABLE = 6


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_timing_examples_are_found_classified_and_replayed_by_seed(tmp_path: Path) -> None:
    example = Path(hermetic_hunt.__file__).parent / "examples" / "shop"
    root = tmp_path / "shop"
    shutil.copytree(example, root, ignore=shutil.ignore_patterns("__pycache__"))
    hunted = run(root, "--hermetic-hunt=30", "-n", "2", "--hermetic-seed=7",
                 *(f"tests/{name}" for name in FILES))  # fmt: skip
    assert hunted.returncode == 1, hunted.stdout[-3000:] + hunted.stderr[-3000:]
    db = root / "flakes.db"

    flaky = {nodeid for (nodeid,) in rows(db, "SELECT nodeid FROM flaky_tests")}
    assert flaky == set(EXPECTED)  # every one found, no stable neighbour flagged
    assert len(rows(db, "SELECT id FROM tests")) == len(EXPECTED) + STABLE

    found = {
        nodeid: (flake_id, json.loads(kinds), json.loads(reproducer), status)
        for flake_id, nodeid, kinds, reproducer, status in rows(
            db,
            "SELECT fl.flake_id, t.nodeid, fl.kinds, fl.reproducer, fl.status FROM flakes fl "
            "JOIN tests t ON t.id = fl.test_id",
        )
    }
    assert {nodeid: kinds for nodeid, (_, kinds, _, _) in found.items()} == {
        nodeid: [kind] for nodeid, kind in EXPECTED.items()
    }
    assert {status for *_, status in found.values()} == {"isolated"}
    for _, _, reproducer, _ in found.values():
        (step,) = reproducer["steps"]
        assert step["mode"] == "seeded" and step["seed"] is not None
        assert step["profile"] in ("exact", "jitter", "slow")

    text = CliRunner().invoke(main, ["report", "--db", str(db)]).stdout
    ttl = text.split("test_session_survives_until_its_ttl", 1)[1].split("replay:", 1)[0]
    assert "timing: " in ttl and "exact 0/" in ttl
    assert "fails when sleeps last ≥ " in ttl

    # The timing flakes replay by seed: the recorded failure comes back.
    for nodeid, (flake_id, kinds, _, _) in found.items():
        if kinds != ["time"]:
            continue
        replayed = run(root, f"--hermetic-replay-db=flakes.db::{flake_id}")
        assert f"reproduced {flake_id}: {nodeid} " in replayed.stdout, replayed.stdout[-3000:]
