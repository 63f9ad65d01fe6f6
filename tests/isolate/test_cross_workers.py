"""Causes that cross workers, end to end: the same seeded hunt at ``-n 2`` and ``-n 0``.

Three generated suites, each deterministic by construction (real waits make
two workers overlap; nothing is left to luck but the order a seed draws):

* ``folder/``: nine tests whose shared setup creates and removes one fixed
  folder (as a ``setup.py`` imported by every test module does), holding it
  for 20 ms of real time. Two workers break each other there in every round.
  Among them a victim (its polluter leaves a module global set) and a test
  that is not idempotent: at ``-n 0`` those two are all the hunt finds; at
  ``-n 2`` the folder's collisions come on top, one group, and the two are
  still classified as at ``-n 0``.
* ``codes/``: two tests over one SQLite file (``next_code`` counts the rows):
  the second needs the first (brittle), the first fails after the second in
  one process (victim). As few tests as workers: the schedule still puts them
  in one process in some rounds, so the brittle test is never ``broken``.
* ``port/``: two tests that serve on one fixed port for 0.1 s.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import clean_env, hunt, rows

from hermetic_hunt.cli import main

#: Every test here hunts and isolates in fresh pytest processes.
pytestmark = pytest.mark.slow

FOLDER_SUITE = {
    "state.py": """
        DIRTY = []
        SEEN = []
    """,
    "setup_folder.py": '''
        """The fixed folder every test module here uses."""
        import select
        import shutil
        from pathlib import Path

        FOLDER = Path(__file__).parent / "work"

        def setup_function(function):
            FOLDER.mkdir()
            (FOLDER / "owner.txt").write_text(function.__name__)

        def teardown_function(function):
            shutil.rmtree(FOLDER)

        def hold(name):
            select.select([], [], [], 0.02)  # real time: the other worker gets here meanwhile
            assert (FOLDER / "owner.txt").read_text() == name
    ''',
    **{
        f"test_{m}.py": f"""
            from setup_folder import hold, setup_function, teardown_function  # noqa: F401

            def test_{m}_one():
                hold("test_{m}_one")

            def test_{m}_two():
                hold("test_{m}_two")

            def test_{m}_three():
                hold("test_{m}_three")
        """
        for m in "ab"
    },
    "test_c.py": """
        import shutil

        import state
        from setup_folder import FOLDER, hold

        def setup_function(function):
            # (never fails here: a polluted victim always reaches its own assertion,
            # however long the other worker holds the folder on a busy machine)
            FOLDER.mkdir(exist_ok=True)
            (FOLDER / "owner.txt").write_text(function.__name__)

        def teardown_function(function):
            shutil.rmtree(FOLDER, ignore_errors=True)

        def test_victim():
            assert not state.DIRTY
            hold("test_victim")

        def test_polluter():
            state.DIRTY.append("x")
            hold("test_polluter")

        def test_twice():
            state.SEEN.append("once")
            hold("test_twice")
            assert len(state.SEEN) == 1
    """,
}
CODES_SUITE = {
    "test_codes.py": """
        import select
        import sqlite3
        from pathlib import Path

        import pytest

        DB = Path(__file__).parent / "codes.sqlite"

        @pytest.fixture(scope="module")
        def codes():
            conn = sqlite3.connect(DB)
            conn.execute("CREATE TABLE IF NOT EXISTS codes (code INTEGER)")
            yield conn
            conn.close()
            DB.unlink(missing_ok=True)

        def next_code(conn):
            (count,) = conn.execute("SELECT count(*) FROM codes").fetchone()
            conn.execute("INSERT INTO codes VALUES (?)", (count,))
            conn.commit()
            select.select([], [], [], 0.05)
            return count

        def test_init_code(codes):
            assert next_code(codes) == 0

        def test_next_code(codes):
            assert next_code(codes) == 1
    """,
}
PORT_SUITE = {
    "test_port.py": """
        import select
        import socket

        PORT = {port}

        def serve():
            with socket.socket() as server:
                server.bind(("127.0.0.1", PORT))
                server.listen()
                select.select([], [], [], 0.1)

        def test_serves_orders():
            serve()

        def test_serves_the_catalog():
            serve()
    """,
}
SUITES = {"folder": FOLDER_SUITE, "codes": CODES_SUITE, "port": PORT_SUITE}


def write(root: Path, files: dict[str, str]) -> None:
    root.mkdir(parents=True)
    for name, body in files.items():
        (root / name).write_text(textwrap.dedent(body).lstrip())
    (root / "pytest.ini").write_text("[pytest]\n")


@pytest.fixture(scope="module")
def hunted(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """Each suite hunted with seed 3 at ``-n 2``; folder and codes also at ``-n 0``."""
    base = tmp_path_factory.mktemp("cross")
    out: dict[Any, Any] = {"port": free_port()}
    for name, files in SUITES.items():
        if name == "port":  # this fixture runs on each worker of the suite's own -n 2
            files = {k: v.replace("{port}", str(out["port"])) for k, v in files.items()}
        write(base / name, files)
        for workers in ("2", "0") if name != "port" else ("2",):
            db = base / name / f"flakes-n{workers}.db"
            done = hunt(base / name, "--hermetic-hunt=10", "-n", workers,
                        f"--hermetic-hunt-db={db}", "-p", "no:cacheprovider", seed=3)  # fmt: skip
            out[(name, workers)] = (db, done.stdout + done.stderr)
    return out


def free_port() -> int:
    """A port no other process (another xdist worker hunting this same suite) holds now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def findings(db: Path) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """``{test name: (kinds, evidence)}`` of a hunt's flakes."""
    return {
        nodeid.split("::")[-1]: (json.loads(kinds), json.loads(evidence))
        for nodeid, kinds, evidence in rows(
            db,
            "SELECT t.nodeid, fl.kinds, fl.evidence FROM flakes fl JOIN tests t "
            "ON t.id = fl.test_id",
        )
    }


def test_a_folder_tests_on_both_workers_use_is_one_group_of_collisions(hunted):
    db, out = hunted[("folder", "2")]
    found = findings(db)
    group = {name for name, (kinds, ev) in found.items() if ev.get("shared", {}).get("resource")}
    assert len(group) >= 5, out[-3000:]
    for name in group:
        kinds, evidence = found[name]
        assert "collision" in kinds
        assert evidence["shared"]["resource"] == "work"
        assert evidence["collision"]["resource"] == "work"
    # One probe of the folder (its lead's), not one per test.
    leads = {ev["shared"]["lead"] for name, (_, ev) in found.items() if name in group}
    assert len(leads) == 1
    assert "1 path(s) that tests on several workers used at once" in out
    assert not any("unexplained" in kinds for kinds, _ in found.values()), found


def test_the_victim_and_the_not_idempotent_test_behind_the_group_are_classified_as_at_n0(hunted):
    n2, n0 = (findings(hunted[("folder", w)][0]) for w in ("2", "0"))
    # -n 0: exactly the two, no collision
    assert {name: kinds for name, (kinds, _) in n0.items()} == {
        "test_victim": ["victim"],
        "test_twice": ["self-polluting"],
    }
    assert "shared" not in n0["test_victim"][1]
    # -n 2: the same kinds, with the collisions on top
    for name, (kinds, _) in n0.items():
        assert [k for k in n2[name][0] if k != "collision"] == kinds, n2[name]
    polluters = rows(
        hunted[("folder", "2")][0],
        "SELECT fl.polluters FROM flakes fl JOIN tests t ON t.id = fl.test_id "
        "WHERE t.nodeid LIKE '%test_victim'",
    )
    assert json.loads(polluters[0][0]) == [["test_c.py::test_polluter"]]


def test_two_tests_over_one_sqlite_file_are_brittle_and_a_victim_never_broken(hunted):
    for workers in ("0", "2"):
        found = findings(hunted[("codes", workers)][0])
        assert [k for k in found["test_next_code"][0] if k != "collision"] == ["brittle"]
        assert "victim" in found["test_init_code"][0]
    db, _ = hunted[("codes", "2")]
    assert rows(db, "SELECT count(*) FROM test_checks") == [(0,)]  # nothing failed every time
    # the two ran in one process in the default round and the packed rounds
    together = rows(
        db, "SELECT a.round FROM attempts a GROUP BY a.round HAVING count(DISTINCT a.worker) = 1"
    )
    assert {r for (r,) in together} >= {0, 1, 3}


def test_two_tests_that_serve_on_one_fixed_port_collide_over_it(hunted):
    db, out = hunted[("port", "2")]
    found = findings(db)
    assert found, out[-3000:]
    for kinds, evidence in found.values():
        assert kinds == ["collision"]
        assert evidence["collision"]["resource"] == f"port:{hunted['port']}"
    assert f"over port:{hunted['port']}" in out


def test_the_folder_groups_replay_runs_its_two_sides_and_brings_the_collision_back(hunted):
    db, _ = hunted[("folder", "2")]
    report = CliRunner().invoke(main, ["report", "--db", str(db), "--format", "json"])
    (group,) = [f for f in json.loads(report.stdout)["findings"] if f["shared"]]
    assert group["nodeid"] == f"{len(group['tests'])} tests collide over work"
    flake_id = group["flakes"][0]  # the finding's lead: its replay is the finding's
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
         f"--hermetic-replay-db={db}::{flake_id}", "--hermetic-replay-runs=20"],
        cwd=db.parent, capture_output=True, text=True, timeout=300, check=False,
        env=clean_env(),
    )  # fmt: skip
    assert f"reproduced {flake_id}" in done.stdout, done.stdout[-3000:]
    assert "the collision over work" in done.stdout
