"""Fuzzing the readers: any value, of any SQLite type, in any column of a real hunt database.

A database handed over by CI is untrusted input. Starting from the database
of a real hunt (with isolation, a replay, a violation, a journal, a leak and a
``sandbox-off`` check, so every table has rows), Hypothesis writes arbitrary
values into arbitrary cells -- NULL where the schema says NOT NULL, text where
a number belongs, blobs, text that is not UTF-8, JSON nested 100,000 deep,
newlines and terminal escapes -- or deletes rows, and then every reader runs:
``report`` in its four formats, ``list``, ``show``, ``replay``, ``merge`` (the
database as input and as output) and ``pytest --hermetic-replay-db``.

Each must print its output or one line of error with a documented exit status
(docs/cli.md, docs/replay.md): never a traceback, a hang (a watchdog) or
memory past a bound (tracemalloc in this process; an address-space limit on
the replay's pytest). Text outputs never contain a control character, so no
value can forge a line of ours.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import tracemalloc
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermetic_hunt.cli import main
from hermetic_hunt.untrusted import MAX_JSON_DEPTH

SUITE = """
import os
import socket

STATE = []


def test_polluter():
    STATE.append("dirty")


def test_victim():
    assert STATE == []


def test_always_fails():
    assert 1 == 2


def test_swallows_a_blocked_call():
    try:
        socket.getaddrinfo("api.example.invalid", 443)
    except OSError:
        pass


def test_leaves_a_variable_set():
    os.environ["HERMETIC_HUNT_FUZZ"] = "1"
"""
TABLES = (
    "runs", "tests", "attempts", "failures", "violations", "journals", "flakes",
    "isolation_steps", "test_checks", "replays", "leaks",
)  # fmt: skip
#: Exit statuses the CLI documents (docs/cli.md): 0 nothing found, 1 found, 3 bad input.
CLI_STATUSES = {0, 1, 3}
#: pytest's (docs/replay.md): 0 passed, 1 failed, 4 usage error (a bad database).
REPLAY_STATUSES = {0, 1, 4}
#: Peak memory a reader may allocate (Python objects) on this small database.
MEMORY_BOUND = 256 * 2**20
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _pytest(cwd: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=cwd, capture_output=True, text=True, check=False, **kwargs,
    )  # fmt: skip


@pytest.fixture(scope="module")
def hunted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real hunt's database (every table with rows), relaxed so any cell can hold NULL."""
    root = tmp_path_factory.mktemp("fuzz")
    suite = root / "suite"
    suite.mkdir()
    (suite / "test_app.py").write_text(SUITE)
    hunt = _pytest(suite, "--hermetic-seed=3", "--hermetic-hunt=4", "--hermetic-hunt-order=shuffle")
    assert hunt.returncode == 1, hunt.stdout[-3000:] + hunt.stderr[-3000:]
    replay = _pytest(suite, "--hermetic-replay-db=flakes.db::F1")
    assert replay.returncode in (0, 1), replay.stdout[-3000:] + replay.stderr[-3000:]
    base = root / "base.db"
    shutil.copy(suite / "flakes.db", base)
    with closing(sqlite3.connect(base)) as conn, conn:
        for table in TABLES:
            (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert count, f"the hunt left {table} empty"
        # What a crafted file can do: drop the NOT NULL constraints from its schema.
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'"
        )
    conn.close()
    with closing(sqlite3.connect(base)) as conn, conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    # Another machine's hunt of the same suite: merging combines the flakes.
    other = root / "other.db"
    shutil.copy(base, other)
    with closing(sqlite3.connect(other)) as conn, conn:
        for (run_id,) in conn.execute("SELECT id FROM runs").fetchall():
            conn.execute("UPDATE runs SET uuid = ? WHERE id = ?", (uuid.uuid4().hex, run_id))
    conn.close()
    return {"suite": suite, "base": base, "other": other}


def _cells(db: Path) -> list[tuple[str, str, int, str]]:
    """Every cell of the database: ``(table, column, rowid, declared type)``."""
    out = []
    with closing(sqlite3.connect(db)) as conn, conn:
        for table in TABLES:
            columns = [(row[1], row[2]) for row in conn.execute(f"PRAGMA table_info({table})")]
            for (rowid,) in conn.execute(f"SELECT rowid FROM {table}"):
                out.extend((table, column, rowid, declared) for column, declared in columns)
    conn.close()
    return out


class NotUtf8(bytes):
    """Bytes stored as TEXT (SQLite accepts them; Python cannot decode them)."""


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


NASTY_TEXT = st.sampled_from(
    [
        "",
        "\nFORGED: all tests passed",
        "F1\nFORGED",
        "\x1b[2J\x1b[31mred",
        "\u202eevil",
        "\t\r\x00",
        "-1",
        "1e999",
        "F1",
        "A1",
        "null",
        "[]",
        "{}",
        '["--hermetic-hunt=3"]',
        '{"python": "3.11.7"}',
        '{"steps": []}',
        '{"steps": [{"nodeid": "test_app.py::test_victim", "seed": -1, "now": 1e308}]}',
        '{"steps": [{"nodeid": "test_app.py::test_victim"}], "hash_seed": 5}',
        '{"rounds": -3, "shard": [2, 1], "base_seed": -5, "probe_timeout": 0}',
        '{"time": -1, "random": 1e308}',
        _deep(MAX_JSON_DEPTH + 1),
        _deep(900),
        _deep(100_000),
        "[" * 100_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
    ]
)
#: Keys the readers look for in stored JSON.
KEYS = ["steps", "nodeid", "seed", "now", "attempt_id", "run_id", "attempts", "runs", "mode",
        "signature", "hash_seed", "x"]  # fmt: skip
JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(KEYS),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
).map(json.dumps)
VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 1, 2**31, 2**32, 2**63 - 1, -(2**63)]),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.text(alphabet=st.characters(max_codepoint=0x30), max_size=20),
    st.binary(max_size=40),
    st.binary(min_size=1, max_size=20).map(NotUtf8),
    NASTY_TEXT,
    JSON_TEXT,
)


def _mutate(db: Path, mutations: list[tuple[str, tuple[str, str, int, str], Any]]) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        for action, (table, column, rowid, _), value in mutations:
            try:
                if action == "delete":
                    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
                elif isinstance(value, NotUtf8):
                    conn.execute(
                        f'UPDATE {table} SET "{column}" = CAST(? AS TEXT) WHERE rowid = ?',
                        (bytes(value), rowid),
                    )
                else:
                    conn.execute(
                        f'UPDATE {table} SET "{column}" = ? WHERE rowid = ?', (value, rowid)
                    )
            except sqlite3.IntegrityError:
                pass  # a UNIQUE or primary key collision: this cell keeps its value
    conn.close()


class Hang(Exception):
    pass


@contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) when a reader does not finish."""

    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no answer in {seconds}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _check_cli(name: str, result: Any, *, text: bool) -> None:
    import traceback

    if result.exception is not None and not isinstance(result.exception, SystemExit):
        trace = "".join(traceback.format_exception(result.exception))
        pytest.fail(f"{name}: {type(result.exception).__name__}\n{trace}")
    assert result.exit_code in CLI_STATUSES, (name, result.exit_code, result.output)
    assert "Traceback" not in result.output, (name, result.output)
    if result.exit_code == 3:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (name, result.stderr)
        assert not _CONTROL.search(result.stderr), (name, result.stderr)
    if text:
        forged = _CONTROL.search(result.stdout)
        assert forged is None, (name, forged, result.stdout)
        assert "\nFORGED" not in result.stdout, (name, result.stdout)


def _address_space_limit() -> None:
    limit = 4 * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


#: Values of the column's own type get past the type check: they test what readers do
#: with what they expect (a negative count, a huge seed, a nodeid with a newline).
OF_TYPE = {
    "INTEGER": st.one_of(
        st.sampled_from([0, -1, 1, 2, 3, 2**31, 2**32, 2**63 - 1, -(2**63)]),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
    ),
    "REAL": st.one_of(st.floats(allow_nan=False), st.integers(-(2**63), 2**63 - 1)),
    "TEXT": st.one_of(NASTY_TEXT, JSON_TEXT, st.text(max_size=40)),
    "BLOB": st.one_of(st.binary(max_size=200), NASTY_TEXT),
}


def _mutation(data: Any, cells: list[tuple[str, str, int, str]]) -> tuple[str, Any, Any]:
    # a table first, then one of its cells: the small tables (runs, flakes) get
    # as much attention as the attempts
    table = data.draw(st.sampled_from(TABLES), label="table")
    cell = data.draw(st.sampled_from([c for c in cells if c[0] == table]), label="cell")
    action = data.draw(st.sampled_from(["update"] * 9 + ["delete"]), label="action")
    typed = OF_TYPE.get(cell[3].upper(), VALUES)
    value = data.draw(st.one_of(typed, typed, VALUES), label="value")
    return action, cell, value


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_reader_survives_any_value_in_any_column(hunted, data):
    cells = _cells(hunted["base"])
    count = data.draw(st.integers(1, 4), label="mutations")
    mutations = [_mutation(data, cells) for _ in range(count)]
    attempt = next(
        (rowid for _, (table, _, rowid, _), _ in mutations if table == "attempts"),
        data.draw(st.integers(1, 20), label="attempt"),
    )
    with tempfile.TemporaryDirectory(prefix="hermetic-hunt-fuzz-") as folder:
        case = Path(folder)
        db = case / "flakes.db"
        shutil.copy(hunted["base"], db)
        _mutate(db, mutations)
        runner = CliRunner()

        def cli(*args: str, text: bool = True) -> None:
            result = runner.invoke(main, list(args), catch_exceptions=True)
            _check_cli(" ".join(args), result, text=text)

        tracemalloc.start()
        try:
            with watchdog(120):
                for fmt in ("text", "markdown", "json"):
                    cli("report", "--db", str(db), "--format", fmt, text=fmt == "text")
                cli("report", "--db", str(db), "--format", "html", "-o", str(case / "r.html"))
                cli("list", "--db", str(db))
                for ref in ("F1", "A1", f"A{attempt}"):
                    cli("show", ref, "--db", str(db))
                    cli("replay", ref, "--db", str(db))
                cli("merge", str(db), "-o", str(case / "merged.db"))
                shutil.copy(hunted["other"], case / "into.db")
                cli("merge", str(db), "-o", str(case / "into.db"))
                cli("merge", str(hunted["other"]), "-o", str(db))
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < MEMORY_BOUND, f"readers allocated {peak:,} bytes"
        ref = data.draw(st.sampled_from(["F1", f"A{attempt}"]), label="replayed")
        shutil.copy(hunted["base"], db)
        _mutate(db, mutations)
        replay = _pytest(
            hunted["suite"], f"--hermetic-replay-db={db}::{ref}",
            timeout=300, preexec_fn=_address_space_limit,
        )  # fmt: skip
        output = replay.stdout + replay.stderr
        assert replay.returncode in REPLAY_STATUSES, output[-5000:]
        assert "Traceback" not in output and "INTERNALERROR" not in output, output[-5000:]
        if replay.returncode == 4:
            errors = [line for line in replay.stderr.splitlines() if line.startswith("ERROR:")]
            assert len(errors) == 1 and not _CONTROL.search(errors[0]), replay.stderr
