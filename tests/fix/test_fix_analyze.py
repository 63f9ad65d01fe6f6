"""Reading what a test changes from the source: every effect kind, through calls."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hermetic_hunt.fix.analyze import Analyzer
from hermetic_hunt.fix.source import NodeName, Project


def write(root: Path, files: dict[str, str]) -> Project:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return Project(root)


APP = {
    "app/__init__.py": "",
    "app/config.py": """
        import os

        MODE = "prod"
        REGISTRY: dict[str, int] = {}
        HOOKS = []

        def set_mode(mode):
            global MODE
            MODE = mode

        def register(name):
            REGISTRY[name] = 1
            _hook(name)

        def _hook(name):
            HOOKS.append(name)

        def configure_env():
            os.environ["APP_ENV"] = "test"

        def local_only():
            REGISTRY = {}
            REGISTRY["x"] = 1
            return REGISTRY
    """,
}


def effects(root: Path, test: str, nodeid: str = "tests/test_a.py::test_it") -> list[tuple]:
    project = write(root, {**APP, "tests/test_a.py": test})
    found = Analyzer(project).test(nodeid)
    assert found is not None
    return [
        (e.kind, e.origin, e.via, e.holder.label if e.holder else e.key, e.deep,
         e.rewrite.text if e.rewrite else None)
        for e in found.effects
    ]  # fmt: skip


def test_a_direct_environment_write_is_found_with_its_monkeypatch_rewrite(tmp_path):
    found = effects(tmp_path, """
        import os

        def test_it():
            os.environ["KEY"] = "v"
            del os.environ["OTHER"]
            os.environ.pop("THIRD", None)
    """)  # fmt: skip
    assert found == [
        ("env", "tests/test_a.py:5", "", "KEY", False, 'monkeypatch.setenv("KEY", "v")'),
        ("env", "tests/test_a.py:6", "", "OTHER", False, 'monkeypatch.delenv("OTHER")'),
        ("env", "tests/test_a.py:7", "", "THIRD", False,
         'monkeypatch.delenv("THIRD", raising=False)'),
    ]  # fmt: skip


def test_chdir_and_sys_path_in_the_test_are_rewritten(tmp_path):
    found = effects(tmp_path, """
        import os, sys
        from os import chdir

        def test_it(tmp_path):
            os.chdir(tmp_path)
            chdir("/")
            sys.path.insert(0, str(tmp_path))
    """)  # fmt: skip
    assert found == [
        ("cwd", "tests/test_a.py:6", "", None, False, "monkeypatch.chdir(tmp_path)"),
        ("cwd", "tests/test_a.py:7", "", None, False, 'monkeypatch.chdir("/")'),
        ("sys.path", "tests/test_a.py:8", "", None, False,
         "monkeypatch.syspath_prepend(str(tmp_path))"),
    ]  # fmt: skip


def test_globals_and_registries_changed_through_project_calls_are_found(tmp_path):
    found = effects(tmp_path, """
        from app import config
        from app.config import register

        def test_it():
            config.set_mode("dev")
            register("a")
            config.configure_env()
            config.local_only()
            config.MODE = "x"
    """)  # fmt: skip
    assert found == [
        ("rebind", "app/config.py:10", "config.set_mode", "MODE", False, None),
        ("mutate", "app/config.py:13", "register", "REGISTRY", False, None),
        ("mutate", "app/config.py:17", "register", "HOOKS", False, None),
        ("env", "app/config.py:20", "config.configure_env", "APP_ENV", False, None),
        ("rebind", "tests/test_a.py:10", "", "MODE", False,
         'monkeypatch.setattr(config, "MODE", "x")'),
    ]  # fmt: skip


def test_a_class_attribute_changed_through_self_is_a_deep_change_of_the_class(tmp_path):
    found = effects(
        tmp_path,
        """
        class TestThing:
            table = {"a": [1]}

            def test_it(self):
                self.table["a"].append(2)
                self.mine = 3
        """,
        "tests/test_a.py::TestThing::test_it",
    )
    assert found == [("mutate", "tests/test_a.py:6", "", "TestThing.table", True, None)]


def test_locals_named_like_globals_are_not_state(tmp_path):
    found = effects(tmp_path, """
        from app import config

        HOOKS = []

        def test_it():
            HOOKS = [1]
            HOOKS.append(2)
            config.local_only()
    """)  # fmt: skip
    assert found == []


def test_randomness_clock_threads_and_sets_are_noted_for_advice(tmp_path):
    found = effects(tmp_path, """
        import random, threading, time
        from datetime import date

        def test_it():
            random.choice("ab")
            date.today()
            time.time()
            threading.Thread(target=print)
            assert {1, 2}
    """)  # fmt: skip
    assert [f[0] for f in found] == ["random", "clock", "clock", "thread", "set"]


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/t.py::test_x", NodeName("tests/t.py", (), "test_x")),
        ("tests/t.py::TestA::test_x[1-a b]", NodeName("tests/t.py", ("TestA",), "test_x")),
        ("tests/t.py", None),
        ("tests/t.py::not an id", None),
    ],
)
def test_nodeids_are_taken_apart_or_refused(nodeid, expected):
    assert NodeName.parse(nodeid) == expected


def test_a_relative_import_past_the_filesystems_root_is_unknown_not_a_crash(tmp_path):
    depth = len(tmp_path.parts) + 2  # more dots than there are folders above the file
    project = write(tmp_path, {"tests/test_a.py": f"from {'.' * depth} import x\n"})
    module = project.module("tests/test_a.py")
    assert module is not None
    assert module.imports["x"].path is None


def test_files_outside_the_rootdir_or_unparsable_are_unknown(tmp_path):
    project = write(tmp_path / "root", {"tests/test_a.py": "def test_it(:\n"})
    (tmp_path / "outside.py").write_text("X = 1\n")
    assert Project(tmp_path / "root").module(tmp_path / "outside.py") is None
    assert project.module("tests/test_a.py") is None
    assert Analyzer(project).test("tests/test_a.py::test_it") is None
