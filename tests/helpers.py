"""Helpers shared by the tests: running a hunt, reading its database, building one.

* :func:`hunt` runs ``pytest --hermetic-hunt`` in a pytester directory (or
  any directory) in a fresh process, the way a user would.
* :func:`rows`, :func:`one`, :func:`sequences` read a database.
* :class:`Rows` builds a database row by row for the report, list, show and
  merge tests: runs and attempts through the real write path
  (:class:`~hermetic_hunt.store.Store`); flakes, isolation steps and
  ``sandbox-off`` checks as the isolation phase stores them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import site
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hermetic_hunt.journal import Journal, encode
from hermetic_hunt.models import (
    Attempt,
    Failure,
    Reproducer,
    RunInfo,
    Settings,
    Shard,
    Step,
    Violation,
    as_mode,
)
from hermetic_hunt.store import Store, real_now_iso, runs

#: What the pytest sessions a test starts get in PYTEST_ADDOPTS: the test
#: dependencies' pytest plugins are off, so a generated session loads what a
#: project with only hermetic-hunt installed loads. Each costs every session
#: (and every worker and probe server it starts) its import: pytest-asyncio and
#: anyio's together about half a second, Hypothesis's about a second at the
#: session's end, pytest-randomly would shuffle a plain session's order. A test
#: that needs one turns it back on with ``-p NAME`` (pytest unblocks it; with
#: pytest-asyncio back, the session's ini sets its loop scope, or it warns).
_TEST_PLUGINS = {
    "hypothesispytest": "_hypothesis_pytestplugin",
    "asyncio": "pytest_asyncio",
    "anyio": "anyio",
    "randomly": "pytest_randomly",
    "repeat": "pytest_repeat",
    "rerunfailures": "pytest_rerunfailures",
}
_QUIET_ADDOPTS = [
    f"-p no:{name}"
    for name, module in _TEST_PLUGINS.items()
    if importlib.util.find_spec(module) is not None
]
QUIET_PLUGINS = {"PYTEST_ADDOPTS": " ".join(_QUIET_ADDOPTS)} if _QUIET_ADDOPTS else {}


def hunt(
    where: pytest.Pytester | Path,
    *args: str,
    seed: int | None = 2,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> Any:
    """``pytest --hermetic-seed=SEED ARGS`` in a fresh process, pytest-randomly off.

    With a :class:`pytest.Pytester`, its ``RunResult``; with a directory, the
    ``subprocess.CompletedProcess`` (text, ``returncode``, ``stdout``), started
    with :func:`clean_env` plus ``env`` (so a module- or session-scoped fixture
    may call it too: nothing of this session's environment leaks in).
    """
    argv = ["-p", "no:randomly", *([f"--hermetic-seed={seed}"] if seed is not None else []), *args]
    if isinstance(where, pytest.Pytester):
        return where.runpytest_subprocess(*argv, timeout=timeout)
    full_env = clean_env(**(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "pytest", *argv],
        cwd=where,
        capture_output=True,
        text=True,
        check=False,
        env=full_env,
        timeout=timeout,
    )


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything of the pytest session running these tests
    (its ``PYTEST_*``, ``HERMETIC_HUNT*`` and hash seed), with :data:`QUIET_PLUGINS`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "HERMETIC_HUNT")) and key != "PYTHONHASHSEED"
    }
    env.update(QUIET_PLUGINS)
    env.update(extra)
    return env


def unset(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Remove ``names`` from the environment for this test, and remove them again after it.

    ``monkeypatch.delenv`` of an absent variable records nothing, so a value the
    code under test sets would outlive the test; a ``setenv`` first records it.
    """
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(sql, params).fetchall()


def one(db: Path, sql: str, *params: Any) -> Any:
    result = rows(db, sql, *params)
    assert len(result) == 1, result
    return result[0][0] if len(result[0]) == 1 else result[0]


def sequences(db: Path, run_id: int) -> dict[str, list[tuple[int, str]]]:
    """Each worker's sequence of (round, nodeid), in the order it ran them."""
    out: dict[str, list[tuple[int, str]]] = {}
    for worker, round_no, nodeid in rows(
        db,
        "SELECT a.worker, a.round, t.nodeid FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE a.run_id = ? AND a.execution = 1 ORDER BY a.worker, a.round, a.position",
        run_id,
    ):
        out.setdefault(worker, []).append((round_no, nodeid))
    return out


OUTCOMES = {"P": "passed", "F": "failed", "S": "skipped", "C": "crashed"}


class Rows:
    """A hermetic-hunt database under construction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = Store.open(path)
        self.rootdir = str(path.parent)
        self.positions = 0

    def close(self) -> None:
        self.store.close()

    def run(
        self, *, rounds: int = 10, seed: int = 7, shard: str = "1/1", mode: str = "seeded"
    ) -> int:
        index, count = (int(p) for p in shard.split("/"))
        settings = Settings(
            rounds=rounds,
            budget_seconds=None,
            base_seed=seed,
            mode=as_mode(mode),
            shard=Shard(index, count),
        )
        info = RunInfo(
            uuid=uuid.uuid4().hex,
            argv=[f"--hermetic-hunt={rounds}"],
            invocation_dir=self.rootdir,
            rootdir=self.rootdir,
            settings=settings,
            workers=1,
            worker_spec=["main"],
            environment={"python": "3.11.7"},
        )
        run_id = runs.start_run(self.store, info)
        runs.finish_run(self.store, run_id, status="complete", rounds_done=rounds, exit_status=1)
        return run_id

    def attempts(
        self,
        run_id: int,
        nodeid: str,
        outcomes: str,
        *,
        failure: Failure | None = None,
        violations: list[Violation] | None = None,
        counts: dict[str, int] | None = None,
        pass_counts: dict[str, int] | None = None,
        journal: bool = False,
        first_round: int = 0,
        repeat: int = 0,
    ) -> list[int]:
        """One attempt per letter of ``outcomes`` (P passed, F failed, S skipped,
        C crashed), round after round; failing ones get ``failure``, ``counts``
        and (with ``journal``) a journal; passing ones ``pass_counts``;
        ``repeat``: the run of a twice round (2: the repeated one)."""
        records = []
        for offset, letter in enumerate(outcomes):
            outcome = OUTCOMES[letter]
            failing = outcome in ("failed", "crashed")
            records.append(
                Attempt(
                    run_id=run_id,
                    round_no=first_round + offset,
                    worker="main",
                    position=self.positions + offset,
                    nodeid=nodeid,
                    execution=1,
                    repeat=repeat,
                    outcome=outcome,
                    phase="call" if failing else None,
                    duration=0.01,
                    seed=1000 + offset,
                    now=1_700_000_000.0 + offset,
                    mode="seeded",
                    hash_seed=0,
                    counts=counts if failing or pass_counts is None else pass_counts,
                    violations=list(violations or []),
                    failure=(
                        failure or Failure("AssertionError", "assert 1 == 2", "t.py:3", "E  boom")
                    )
                    if failing
                    else None,
                    journal=self._journal(nodeid, counts) if journal and failing else None,
                    journal_format="seeded/1" if journal and failing else None,
                )
            )
        self.positions += len(records)
        ids = self.store.test_ids([nodeid])
        return self.store.add_attempts(records, ids)

    def _journal(self, nodeid: str, counts: dict[str, int] | None) -> bytes:
        return encode(
            Journal(
                test=nodeid,
                mode="seeded",
                seed=1,
                now=1_700_000_000.0,
                random_seed=None,
                config={},
                events={"time": [1.0] * (counts or {}).get("time", 0)},
                counts=dict(counts or {}),
            )
        )

    def test_row(self, nodeid: str) -> int:
        return self.store.test_ids([nodeid])[nodeid]

    def flake(
        self,
        nodeid: str,
        flake_id: str = "F1",
        *,
        kinds: Any = ("victim",),
        polluters: Any = (),
        cleaners: Any = (),
        state_setters: Any = (),
        reproducer: Reproducer | str | None = None,
        confirmed: int | None = 1,
        status: str = "isolated",
        run_id: int | None = 1,
        probes: int = 4,
        evidence: Any = None,
        note: str = "",
    ) -> int:
        def dump(value: Any) -> str:
            return (
                value
                if isinstance(value, str)
                else json.dumps([list(v) if isinstance(v, tuple) else v for v in value])
            )

        if isinstance(reproducer, Reproducer):
            stored: str | None = json.dumps(reproducer.to_json())
        else:
            stored = reproducer
        cursor = self.store.conn.execute(
            "INSERT INTO flakes (flake_id, test_id, first_run_id, last_run_id, kinds, status, "
            "evidence, reproducer, polluters, cleaners, state_setters, confirmed, probes, "
            "probe_seconds, note, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                flake_id, self.test_row(nodeid), run_id, run_id, dump(kinds), status,
                json.dumps(evidence if evidence is not None else {"runs": [run_id]}), stored,
                dump(polluters), dump(cleaners), dump(state_setters), confirmed, probes,
                0.5 * probes, note, real_now_iso(), real_now_iso(),
            ),
        )  # fmt: skip
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def step(
        self,
        flake_row: int,
        run_id: int,
        step: int,
        purpose: str,
        sequence: list[str],
        outcome: str,
    ) -> None:
        self.store.conn.execute(
            "INSERT INTO isolation_steps (flake_id, run_id, step, purpose, sequence, environment, "
            "outcome, detail, duration, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                flake_row,
                run_id,
                step,
                purpose,
                json.dumps(sequence),
                "{}",
                outcome,
                "",
                0.2,
                real_now_iso(),
            ),
        )

    def check(self, run_id: int, nodeid: str, outcome: str, name: str = "sandbox-off") -> None:
        self.store.conn.execute(
            "INSERT INTO test_checks (run_id, test_id, check_name, outcome, detail, created_at) "
            "VALUES (?,?,?,?,?,?)",
            (run_id, self.test_row(nodeid), name, outcome, "", real_now_iso()),
        )


def victim_reproducer(
    polluter: str, victim: str, run_id: int = 1, attempt_id: int | None = None
) -> Reproducer:
    return Reproducer(
        steps=(
            Step(polluter, 11, 1_700_000_000.0),
            Step(victim, 12, 1_700_000_001.0, attempt_id=attempt_id),
        ),
        hash_seed=0,
        exc_type="AssertionError",
        location="tests/test_settings.py:10",
        message="assert False",
        run_id=run_id,
    )


VICTIM = "tests/test_settings.py::test_default_currency_is_usd"
POLLUTER = "tests/test_settings.py::test_switch_currency_to_gbp"
CLEANER = "tests/test_catalog.py::test_catalog_reset"
STABLE = "tests/test_cart.py::test_cart_total_adds_lines"
BROKEN = "tests/test_broken.py::test_always_fails"
INCOMPATIBLE = "tests/test_fs.py::test_needs_real_clock"
LONELY = "tests/test_orders.py::test_order_ids_are_unique"  # flaky, not isolated
VIOLATOR = "tests/test_health.py::test_health_check_degrades_gracefully"


def sample(path: Path) -> Rows:
    """A database with one of everything a report shows (one run, 10 rounds)."""
    rows = Rows(path)
    run = rows.run()
    victim_attempts = rows.attempts(
        run, VICTIM, "PFFPFFFFPF", counts={"time": 2}, pass_counts={"time": 1}, journal=True,
        failure=Failure("AssertionError", "assert False", "tests/test_settings.py:10", "E assert False"),
    )  # fmt: skip
    rows.attempts(run, POLLUTER, "PPPPPPPPPP")
    rows.attempts(run, CLEANER, "PPPPPPPPPP")
    rows.attempts(run, STABLE, "PPPPPPPPPP")
    rows.attempts(run, BROKEN, "FFFFFFFFFF")
    rows.attempts(run, INCOMPATIBLE, "FFFFFFFFFF")
    rows.attempts(run, LONELY, "PPPPPPPPFP")
    rows.attempts(run, "tests/test_skip.py::test_never_runs", "SSSSSSSSSS")
    rows.attempts(
        run, VIOLATOR, "PPPPPPPPPP",
        violations=[Violation("create_connection", "status.example.invalid", 443, "health.py:10")],
    )  # fmt: skip
    rows.check(run, BROKEN, "failed")
    rows.check(run, INCOMPATIBLE, "passed")
    row = rows.flake(
        VICTIM, "F1", kinds=["victim"], polluters=[[POLLUTER]], cleaners=[CLEANER],
        reproducer=victim_reproducer(POLLUTER, VICTIM, run, victim_attempts[1]),
        evidence={"attempts": victim_attempts[1:3], "runs": [run]},
    )  # fmt: skip
    rows.step(row, run, 1, "alone", [VICTIM], "passed")
    rows.step(row, run, 2, "after its worker's sequence", [POLLUTER, CLEANER, VICTIM], "failed")
    return rows


# -- the one hunt of the example suite that many tests read ------------------------------


class DemoHunt:
    """``hermetic-hunt demo -n 2`` of the bundled example suite, run once per test
    session (once for all xdist workers, see :func:`shared_once`): the hunt the demo,
    isolation, replay and example tests read.

    ``root`` is the demo's directory (the example suite, its ``flakes.db``): read it,
    never write to it; a test that runs tests or writes takes :meth:`copy`.
    """

    def __init__(self, root: Path, result: dict[str, Any]) -> None:
        self.root = root
        self.returncode: int = result["returncode"]
        self.stdout: str = result["stdout"]
        self.stderr: str = result["stderr"]
        #: The folder the demo's ``hermetic_hunt`` was imported from (helpers.run_demo_hunt).
        self.installed: str = result["installed"]

    @property
    def db(self) -> Path:
        return self.root / "flakes.db"

    def copy(self, where: Path) -> Path:
        """A private copy of the suite and its database in ``where``; its path."""
        target = where / self.root.name
        shutil.copytree(self.root, target, ignore=shutil.ignore_patterns("flakes.db*", "reports"))
        # SQLite's backup: a consistent copy even while other tests read the original.
        with (
            closing(sqlite3.connect(self.db)) as src,
            closing(sqlite3.connect(target / "flakes.db")) as dst,
        ):
            src.backup(dst)
        return target


#: The machine's local package index: with setuptools in it, the demo hunt runs
#: from a fresh venv (``pip install -e .`` offline), as the README's first command.
LOCAL_INDEX = Path("/opt/pypi/simple")


def demo_install(where: Path) -> Path:
    """The folder beside the demo's ``where`` that holds its fresh venv and project copy."""
    return where.parent / f"{where.name}-install"


def run_demo_hunt(where: Path) -> dict[str, Any]:
    """``hermetic-hunt demo -n 2 --dir WHERE`` in a fresh process, started in another folder.

    As the README's first command runs it: from a fresh venv with this checkout
    ``pip install -e``-ed into it, where the machine has the local package index
    (:func:`fresh_venv`); else with this environment's interpreter. ``installed``
    in the result is the folder the command's ``hermetic_hunt`` came from.
    """
    home = demo_install(where)
    elsewhere = home / "elsewhere"
    elsewhere.mkdir(parents=True)
    env = clean_env()
    if (LOCAL_INDEX / "setuptools").is_dir():
        venv = fresh_venv(home)
        for name in ("VIRTUAL_ENV", "PYTHONPATH"):
            env.pop(name, None)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        python = str(venv / "bin" / "python")
        command = [str(venv / "bin" / "hermetic-hunt")]
    else:
        python = sys.executable
        command = [python, "-c", "from hermetic_hunt.cli import main; main()"]
    done = subprocess.run(
        [*command, "demo", "-n", "2", "--dir", str(where)],
        cwd=elsewhere, capture_output=True, text=True, timeout=1200, check=False, env=env,
    )  # fmt: skip
    installed = subprocess.run(
        [python, "-c", "import hermetic_hunt, os; print(os.path.dirname(hermetic_hunt.__file__))"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return {
        "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
        "installed": installed,
    }  # fmt: skip


def fresh_venv(root: Path) -> Path:
    """A new venv in ``root`` with hermetic-hunt installed from a copy of this checkout.

    ``pip install -e .`` as the README says (this environment's pip, pointed at
    the venv's interpreter with ``--python``), but offline: dependencies come
    from this environment (a .pth file points at a directory of links to its
    site-packages, hermetic-hunt itself excluded), the build backend from the
    machine's local package index (:data:`LOCAL_INDEX`).
    """
    project = Path(__file__).resolve().parent.parent
    copy = root / "project"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (copy / name).write_bytes((project / name).read_bytes())
    shutil.copytree(
        project / "src", copy / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache"),
    )  # fmt: skip
    venv = root / "venv"
    # Without pip of its own (ensurepip costs ~6 s of CPU): this environment's pip
    # installs into it (``pip --python``).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)  # fmt: skip
    deps = root / "deps"
    deps.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if "hermetic_hunt" not in entry.name:
            (deps / entry.name).symlink_to(entry)
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    (site_packages / "zz-test-dependencies.pth").write_text(f"{deps}\n")
    # --isolated: no pip configuration or PIP_* variable may add a remote index;
    # the build backend (setuptools) comes from the local index, nothing else is fetched.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--isolated",
         "--disable-pip-version-check", "install", "--quiet", "--no-deps", "--index-url",
         LOCAL_INDEX.as_uri(), "-e", str(copy)],
        check=True, timeout=600,
    )  # fmt: skip
    return venv


def shared_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Any) -> tuple[Path, Any]:
    """``make(directory)`` once per test session, whichever xdist worker asks first.

    The other workers wait on a lock file and read the JSON it returned. Without
    xdist the directory is this session's own.
    """
    import fcntl

    base = tmp_path_factory.getbasetemp()
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = base.parent / f"shared-{run}" if run else base / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    where, result = shared / name, shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            result.write_text(json.dumps(make(where)))
    return where, json.loads(result.read_text())


# -- crafted replay databases (tests/replay, tests/engine) --------------------------


def record(nodeid: str, outcome: str = "failed", **changes: Any) -> Attempt:
    """An attempt of round 0 on worker ``main``, failing by default (``changes``: other fields)."""
    values: dict[str, Any] = dict(
        run_id=0, round_no=0, worker="main", position=0, nodeid=nodeid, execution=1,
        outcome=outcome, phase="call" if outcome == "failed" else None, duration=0.01, seed=7,
        now=1.0e9, mode="seeded", hash_seed=None,
        failure=Failure("AssertionError", "boom", "test_suite.py:2", "E boom")
        if outcome == "failed" else None,
    )  # fmt: skip
    values.update(changes)
    return Attempt(**values)


def build_db(path: Path, records: list[Attempt]) -> list[int]:
    """A hermetic-hunt database with one run holding ``records`` (their attempt ids):
    what a replay reads, without a hunt."""
    info = RunInfo(
        uuid=uuid.uuid4().hex, argv=[], invocation_dir=str(path.parent),
        rootdir=str(path.parent), settings=Settings(rounds=1, budget_seconds=None, base_seed=1),
        workers=1, worker_spec=["main"], environment={},
    )  # fmt: skip
    with Store.open(path) as store:
        run_id = runs.start_run(store, info)
        records = [replace(r, run_id=run_id) for r in records]
        ids = store.test_ids(r.nodeid for r in records)
        return store.add_attempts(records, ids)


# -- crafted databases (tests/store/test_untrusted*.py) ---------------------------

POLLUTING = """\
import os


def test_sets_the_env():
    os.environ["APP_MODE"] = "debug"
    assert os.environ["APP_MODE"] == "debug"
"""
VICTIM_SOURCE = """\
import os


def test_reads_the_env():
    assert os.environ.get("APP_MODE", "prod") == "prod"
"""


def tree_digest(*folders: Path) -> dict[str, str]:
    """Every file under ``folders`` (links as their target text) -> a hash of its bytes."""
    out = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_symlink():
                out[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# -- remote xdist workers (tests/hunt/test_transports.py, benchmarks/bench_hunt.py) ------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def socket_servers(where: Path, count: int) -> Iterator[list[str]]:
    """``count`` execnet socket servers on 127.0.0.1; their ``--tx`` specs."""
    import execnet

    script = Path(execnet.__file__).parent / "script" / "socketserver.py"
    servers, specs = [], []
    try:
        for _ in range(count):
            port = free_port()
            servers.append(
                subprocess.Popen(
                    [sys.executable, str(script), f"127.0.0.1:{port}"],
                    cwd=where,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            specs.append(f"socket=127.0.0.1:{port}//chdir={where}")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.05)
        # (each probe connection above was one the server then served and
        # dropped: it loops back to accept the hunt's)
        yield specs
    finally:
        for server in servers:
            server.kill()
            server.wait()
