"""Done means: every flake a hunt of the example suite finds replays from a copy of its database.

The demo's seeded ``-n 2`` hunt (every flake replayed) and a record-mode ``-n 2``
hunt of one example file per kind (every flake's command checked, one flake of
each kind replayed). Each replay is the command ``hermetic-hunt replay`` prints
for a copy of the database in another directory, run through bash in a fresh
process.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_replay import copy_db, output, query, replays, run_pytest
from test_replay_nodeids import shell

from hermetic_hunt.cli import main

#: victim, brittle, random, time (the date and the sleep), hash-order, network,
#: concurrency, self-polluting: the example files of each kind.
ONE_FILE_PER_KIND = {
    "test_settings", "test_pricing", "test_orders", "test_billing", "test_session_cache",
    "test_tags", "test_checkout", "test_health", "test_registry", "test_plugins",
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, workers",
    # The seeded -n 2 hunt is the demo's (below); a record hunt under xdist sends
    # every failing attempt's journal across the process boundary. Seeded and
    # record replays at -n 0 are tests/replay/test_replay.py's.
    [("record", "2")],
    ids=["record-n2"],
)
def test_every_flake_of_the_example_suite_replays_from_a_copied_database(
    example_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, workers: str
):
    where = example_suite.parent
    monkeypatch.chdir(where)
    # One example file per kind (record mode's journals are what this adds to the
    # demo's seeded replays): a quarter of the suite, so a quarter of the hunt.
    for path in (example_suite / "tests").glob("test_*.py"):
        if path.stem not in ONE_FILE_PER_KIND:
            path.unlink()
    hunted = run_pytest(
        where, "--hermetic-hunt=12", "--hermetic-seed=7", f"--hermetic-hunt-mode={mode}",
        "-n", workers, "shop",
    )  # fmt: skip
    assert hunted.returncode == 1, output(hunted)
    # Record mode lets real entropy through: the random and time examples
    # may or may not fail in a given hunt; the order-dependent ones always do.
    # Every flake's printed command is checked; one flake of each kind replays
    # (the demo's test below replays them all).
    replay_every_flake(
        where, where / "flakes.db", hunted.stdout, tmp_path, mode, " shop", each_kind=True
    )


@pytest.mark.slow
def test_every_flake_of_the_demo_hunt_replays_from_a_copied_database(
    demo_hunt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The seeded -n 2 case: the session's demo hunt, on a private copy.
    suite = demo_hunt.copy(tmp_path / "suite")
    monkeypatch.chdir(suite)
    replay_every_flake(suite, suite / "flakes.db", demo_hunt.stdout, tmp_path, "seeded", "")


def replay_every_flake(
    where: Path,
    hunt_db: Path,
    stdout: str,
    tmp_path: Path,
    mode: str,
    location: str,
    each_kind: bool = False,
) -> None:
    """Each flake's printed replay command, for a copy of the database, reproduces it
    (``each_kind``: the first flake of each set of kinds)."""
    flakes = query(
        hunt_db,
        "SELECT fl.flake_id, t.nodeid, fl.kinds FROM flakes fl JOIN tests t ON t.id = fl.test_id "
        "WHERE fl.reproducer IS NOT NULL ORDER BY fl.id",
    )
    assert len(flakes) >= (9 if mode == "seeded" else 6), flakes
    replayed = flakes
    if each_kind:
        firsts: dict[str, tuple[str, str, str]] = {}
        for flake in flakes:
            firsts.setdefault(flake[2], flake)
        replayed = list(firsts.values())
    # the hunt printed one replay command per flake, in the one form
    for flake_id, _, _ in flakes:
        assert f"replay: pytest --hermetic-replay-db=flakes.db::{flake_id}{location}\n" in stdout
    db = copy_db(hunt_db, tmp_path / "downloaded artifact")
    for flake_id, nodeid, kinds in replayed:
        printed = CliRunner().invoke(main, ["replay", flake_id, "--db", str(db)])
        assert printed.exit_code == 0, printed.output
        command = printed.output.strip()
        assert command.endswith((f"::{flake_id}'{location}", f"::{flake_id}{location}"))
        # "reproduced F3: ..." at the first run, "reproduced F3 in run 2 of 35: ..." later
        reproduced = re.compile(
            rf"^reproduced {flake_id}( in run \d+ of \d+)?: {re.escape(nodeid)} ", re.M
        )
        results = [shell(where, command)]
        if "concurrency" in kinds:
            # A real thread race: under its switch interval most runs lose it.
            assert "is a concurrency flake" in output(results[0])
            results.append(shell(where, command))
        assert any(reproduced.search(r.stdout) for r in results), "\n".join(map(output, results))
        assert "Traceback" not in "".join(map(output, results))
    outcomes = {target: outcome for target, _, _, outcome, _ in replays(db)}
    assert set(outcomes) == {flake_id for flake_id, _, _ in replayed}
