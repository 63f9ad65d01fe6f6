"""A crafted database changes nothing outside the project and imports nothing: a property.

Hypothesis writes arbitrary strings -- ``..``, absolute paths, newlines,
U+2028, option-shaped text -- into every column ``fix``, ``isolate``,
``replay`` and ``quarantine`` read (``runs.argv``, ``runs.rootdir``,
``runs.invocation_dir``, the flake's nodeid, its polluters, its reproducer's
steps), runs each command in a temporary project, and checks that no file
outside the project changed (a decoy folder beside it holds a test a
polluter nodeid can point at), that no module outside the suite was imported
(a marker module writes a file when imported) and that the exit status is
one the docs give. The commands that start processes (``isolate``, ``fix``
with its verification, ``replay --run``) run once, on the most hostile
database, in the slow test at the end.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import POLLUTING, VICTIM_SOURCE, Rows, tree_digest, victim_reproducer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hermetic_hunt.cli import main

#: Exit statuses docs/guarantees.md gives the commands (3: bad input, one line).
DOCUMENTED = {0, 1, 3}
MARKER_MODULE = "hh_untrusted_marker"
MARKER_SOURCE = (
    "import pathlib\n"
    "pathlib.Path(__file__).with_name('IMPORTED').write_text('imported')\n"
)  # fmt: skip
POLLUTER = "tests/test_env.py::test_sets_the_env"
VICTIM = "tests/test_env.py::test_reads_the_env"

HOSTILE = [
    "..", "../decoy/test_x.py::test_sets_the_env", "{decoy}/test_x.py::test_sets_the_env",
    "tests/../../decoy/test_x.py::test_sets_the_env", "tests/test_env.py\n::test_reads_the_env",
    "tests/test_env.py\u2028::test_reads_the_env", "tests/test_env.py", "-p", MARKER_MODULE,
    f"-p{MARKER_MODULE}", "--debug={decoy}/debug.log", "--log-file={decoy}/log.txt",
    "-o", "log_file={decoy}/ini.log", "--junitxml={decoy}/j.xml", "--rootdir={decoy}",
    "--confcutdir={decoy}", "-c", "{decoy}/evil.ini", "--basetemp={decoy}/bt", "{decoy}",
    "/", "", POLLUTER, VICTIM,
]  # fmt: skip
text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=20))


def make_project(base: Path) -> tuple[Path, Path]:
    project, decoy = base / "project", base / "decoy"
    (project / "tests").mkdir(parents=True)
    decoy.mkdir()
    (project / "tests" / "test_env.py").write_text(POLLUTING + "\n\n" + VICTIM_SOURCE)
    (project / f"{MARKER_MODULE}.py").write_text(MARKER_SOURCE)
    (decoy / f"{MARKER_MODULE}.py").write_text(MARKER_SOURCE)
    (decoy / "test_x.py").write_text(POLLUTING)
    (decoy / "log.txt").write_text("a log the hunt must not truncate\n")
    (decoy / "evil.ini").write_text(f"[pytest]\naddopts = -p {MARKER_MODULE}\n")
    return project, decoy


def craft(project: Path, decoy: Path, values: dict[str, object]) -> None:
    def fill(value: str) -> str:
        return value.replace("{decoy}", str(decoy))

    victim, polluter = fill(str(values["victim"])), fill(str(values["polluter"]))
    rows = Rows(project / "flakes.db")
    run = rows.run()
    rows.attempts(run, polluter, "PPPP")
    rows.attempts(run, victim, "PFPF")
    steps = [fill(str(s)) for s in values["steps"]]  # type: ignore[attr-defined]
    reproducer = victim_reproducer(steps[0] if steps else polluter, victim, run)
    rows.flake(victim, "F1", kinds=["victim"], polluters=[[polluter]], reproducer=reproducer)
    rows.close()
    argv = [fill(str(a)) for a in values["argv"]]  # type: ignore[attr-defined]
    with closing(sqlite3.connect(project / "flakes.db")) as conn, conn:
        conn.execute(
            "UPDATE runs SET argv = ?, rootdir = ?, invocation_dir = ?",
            (json.dumps(argv), fill(str(values["rootdir"])), fill(str(values["invocation"]))),
        )


def run_in(project: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(project)
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in DOCUMENTED, (args, result.exit_code, result.output)
    if result.exit_code == 3:
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    return result.exit_code


def no_trace(decoy: Path, before: dict[str, str], project: Path) -> None:
    assert tree_digest(decoy) == before
    assert not (decoy / "IMPORTED").exists() and not (project / "IMPORTED").exists()
    assert MARKER_MODULE not in sys.modules


def _known(column: str, value: str) -> dict[str, object]:
    """A database of the defects found by hand (issue 19), always tried first."""
    values: dict[str, object] = {"victim": VICTIM, "polluter": POLLUTER, "steps": [],
                                 "argv": [], "rootdir": "{decoy}", "invocation": "{decoy}"}  # fmt: skip
    values[column] = value
    return values


@pytest.mark.process  # fix runs git to name the commit it would patch
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    values=st.fixed_dictionaries(
        {
            "victim": st.one_of(st.just(VICTIM), text),
            "polluter": st.one_of(st.just(POLLUTER), text),
            "steps": st.lists(text, max_size=2),
            "argv": st.lists(text, max_size=6),
            "rootdir": st.one_of(st.just("{decoy}"), text),
            "invocation": st.one_of(st.just("{decoy}"), text),
        }
    )
)
@example(_known("polluter", "../decoy/test_x.py::test_sets_the_env"))
@example(_known("polluter", "{decoy}/test_x.py::test_sets_the_env"))
@example(_known("victim", "tests/test_env.py\n::test_reads_the_env"))
@example(_known("victim", "tests/test_env.py\u2028::test_reads_the_env"))
def test_the_readers_and_fix_on_a_crafted_database_change_nothing_outside_the_project(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    values: dict[str, object],
) -> None:
    project, decoy = make_project(tmp_path_factory.mktemp("crafted"))
    craft(project, decoy, values)
    before = tree_digest(decoy)
    for command in (
        ("fix", "F1", "--no-verify", "--apply"),
        ("fix", "F1", "--diff"),
        ("quarantine", "-o", "q.txt"),
        ("quarantine",),
        ("replay", "F1"),
        ("report",),
        ("show", "F1"),
    ):
        run_in(project, monkeypatch, *command)
        no_trace(decoy, before, project)
    written = project / "q.txt"
    if written.exists():
        lines = [line for line in written.read_text().splitlines() if line and line[0] != "#"]
        assert all("::" in line.split("  #")[0] for line in lines), lines


@pytest.mark.slow
def test_isolate_fix_and_replay_run_on_the_most_hostile_database_change_nothing_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, decoy = make_project(tmp_path)
    argv = [h for h in HOSTILE if h.startswith("-") or h == MARKER_MODULE or "{decoy}" in h]
    craft(
        project,
        decoy,
        {"victim": VICTIM, "polluter": POLLUTER, "steps": [POLLUTER], "argv": argv,
         "rootdir": "{decoy}", "invocation": "{decoy}"},
    )  # fmt: skip
    before = tree_digest(decoy)
    project_before = tree_digest(project / "tests")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    assert run_in(project, monkeypatch, "isolate", "--budget", "12") == 0
    no_trace(decoy, before, project)
    assert not (project / ".pytest_cache").exists()  # the probe servers' cache is their own
    assert run_in(project, monkeypatch, "fix", "F1", "--runs", "5") in (0, 1)
    no_trace(decoy, before, project)
    assert tree_digest(project / "tests") == project_before  # verified on a copy only
    result = CliRunner().invoke(main, ["replay", "F1", "--run"])
    assert result.exit_code in (0, 1), result.output
    no_trace(decoy, before, project)
