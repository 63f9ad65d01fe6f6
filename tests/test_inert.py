"""Installed but not asked: hermetic-hunt changes nothing about a pytest run."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

CORE_MODULES = [
    "hermetic_hunt.seeds",
    "hermetic_hunt.hunt.schedule",
    "hermetic_hunt.models",
    "hermetic_hunt.timing",
    "hermetic_hunt.options",
    "hermetic_hunt.errors",
    "hermetic_hunt.journal",
    "hermetic_hunt.hunt.progress",
    "hermetic_hunt.pasteable",
    "hermetic_hunt.failures",
    "hermetic_hunt.untrusted",
]

SUITE = """
import os, random, time

def test_a(tmp_path):
    (tmp_path / "f").write_text("x")

def test_b():
    assert time.time() > 1_700_000_000  # the real clock
    random.random()

def test_c():
    assert False, "a plain failure"
"""


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


def _plain_run(folder, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *extra],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )


def _same_apart_from_times(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if line.startswith(("plugins:", "hermetic: base seed")):
            continue  # the plugin list names hermetic-hunt; the base seed is random
        lines.append(re.sub(r" in \d+\.\d+s.*", "", line))
    return lines


@pytest.mark.process
@pytest.mark.parametrize("verbosity", ["-q", "-v"])
def test_a_plain_run_creates_no_file_and_prints_what_it_prints_without_the_plugin(
    tmp_path, verbosity
):
    runs = {}
    for name, extra in (("with", []), ("without", ["-p", "no:hermetic_hunt"])):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "test_plain.py").write_text(SUITE)
        result = _plain_run(folder, verbosity, *extra)
        runs[name] = (result, _tree(folder))
    (with_plugin, with_tree), (without, without_tree) = runs["with"], runs["without"]
    assert with_tree == without_tree == ["test_plain.py"]
    assert with_plugin.returncode == without.returncode == 1
    assert with_plugin.stdout.splitlines()[-1].strip("= ").split(" in ")[0] == "1 failed, 2 passed"
    mine, theirs = (
        _same_apart_from_times(r.stdout.replace(str(tmp_path), "")) for r in (with_plugin, without)
    )
    assert [line.replace("/with", "/X") for line in mine] == [
        line.replace("/without", "/X") for line in theirs
    ]
    assert with_plugin.stderr == without.stderr
    assert "hermetic-hunt" not in with_plugin.stdout.replace("hermetic-hunt-", "")


@pytest.mark.process
@pytest.mark.parametrize("asyncio", [[], ["-p", "no:asyncio"]], ids=["with", "without"])
def test_the_example_suite_prints_no_warning_with_or_without_pytest_asyncio(
    tmp_path, monkeypatch, asyncio
):
    from hermetic_hunt.demo import prepare

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)  # as a user runs it
    target = prepare(tmp_path / "shop")
    result = _plain_run(target, "--collect-only", "-q", *asyncio)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr


def test_the_plugin_registers_only_its_options_until_asked(pytester: pytest.Pytester):
    pytester.makeconftest(
        """
        def pytest_sessionfinish(session):
            names = sorted(n for n, p in session.config.pluginmanager.list_name_plugin()
                           if n and n.startswith("hermetic-hunt"))
            print("HUNT-PLUGINS:", names)
        """
    )
    pytester.makepyfile(test_one="def test_one(): pass")
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["*HUNT-PLUGINS: []*"])


def test_a_hunt_option_without_a_hunt_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_one="def test_one(): pass")
    result = pytester.runpytest_subprocess("--hermetic-hunt-mode=record")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*--hermetic-hunt-mode only applies to a hunt: add --hermetic-hunt=N*"]
    )
    assert "Traceback" not in result.stderr.str()


@pytest.mark.process
@pytest.mark.parametrize("module", CORE_MODULES)
def test_the_pure_core_imports_no_framework(module: str):
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = [m for m in ('pytest', '_pytest', 'click', 'sqlite3', 'sqlite_utils', 'hermetic', "
        "'xdist') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
