"""--hermetic-hunt-changed: a pull request hunts only the tests its change touches.

Each test builds a git repository in its pytester directory: a base commit
on ``main``, then a branch that changes a module and adds a test.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import hunt, rows

from hermetic_hunt import vcs

#: Every test here hunts, isolates or replays in fresh pytest processes.
pytestmark = pytest.mark.slow

FILES = {
    "pkg/__init__.py": "",
    "pkg/util.py": "VALUE = 1\n",
    "pkg/other.py": "OTHER = 1\n",
    "pkg/middle.py": "from pkg import util\n\nTWICE = util.VALUE * 2\n",
    "tests/test_util.py": "from pkg import util\n\n\ndef test_util():\n    assert util.VALUE\n",
    "tests/test_middle.py": "from pkg.middle import TWICE\n\n\ndef test_middle():\n"
    "    assert TWICE\n",
    "tests/test_other.py": "from pkg import other\n\n\ndef test_other():\n    assert other.OTHER\n",
    "tests/test_plain.py": "def test_plain():\n    pass\n",
}


def git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=where, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    root = pytester.path
    pytester.makeini("[pytest]\npythonpath = .\n")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".gitignore").write_text("*.db*\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "checkout", "-qb", "feature")
    (root / "pkg" / "util.py").write_text("VALUE = 2\n")  # committed below
    git(root, "commit", "-qam", "change util")
    (root / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")  # untracked
    return root


def hunted(db: Path) -> list[str]:
    return sorted(n for (n,) in rows(db, "SELECT DISTINCT t.nodeid FROM attempts a JOIN tests t "
                                         "ON t.id = a.test_id"))  # fmt: skip


CHANGED = ["tests/test_middle.py::test_middle", "tests/test_new.py::test_new",
           "tests/test_util.py::test_util"]  # fmt: skip


@pytest.mark.parametrize("workers", [["-p", "no:xdist"], ["-n", "2"]])
def test_only_tests_of_changed_files_and_importers_of_changed_modules_are_hunted(
    pytester, repo, workers
):
    result = hunt(pytester, "--hermetic-hunt=2", "--hermetic-hunt-changed", *workers)
    assert result.ret == 0, result.stdout.str()
    base = git(repo, "merge-base", "HEAD", "main")
    result.stdout.fnmatch_lines(
        [f"hermetic-hunt: hunting the tests changed since the merge base with main ({base[:12]})"]
    )
    assert hunted(repo / "flakes.db") == CHANGED


def test_an_explicit_base_and_a_change_that_touches_no_test(pytester, repo):
    result = hunt(pytester, "--hermetic-hunt=2", "--hermetic-hunt-changed=HEAD")
    assert result.ret == 0
    assert hunted(repo / "flakes.db") == ["tests/test_new.py::test_new"]  # untracked only
    (repo / "tests" / "test_new.py").unlink()
    (repo / "flakes.db").unlink()
    result = hunt(pytester, "--hermetic-hunt=2", "--hermetic-hunt-changed=HEAD")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["hermetic-hunt: no test changed since HEAD (*): nothing to hunt"])


def test_a_changed_conftest_selects_the_tests_below_it(pytester, repo):
    (repo / "tests" / "conftest.py").write_text("")
    result = hunt(pytester, "--hermetic-hunt=1", "--hermetic-hunt-changed=HEAD")
    assert result.ret == 0
    assert len(hunted(repo / "flakes.db")) == 5


def test_a_base_that_is_not_a_commit_is_a_usage_error(pytester, repo):
    result = hunt(pytester, "--hermetic-hunt=2", "--hermetic-hunt-changed=tests/")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: --hermetic-hunt-changed: 'tests/' is not a commit here (write "
         "--hermetic-hunt-changed=BASE with a branch, tag or sha; test paths go before the "
         "option)"]
    )  # fmt: skip
    result = pytester.runpytest_subprocess("--hermetic-hunt-changed")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--hermetic-hunt-changed only applies to a hunt*"])


def test_outside_a_repository_it_says_so(pytester):
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = hunt(pytester, "--hermetic-hunt=1", "--hermetic-hunt-changed")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: * is not in a git repository: --hermetic-hunt-changed "
                                 "needs one"])  # fmt: skip


def test_git_questions(repo):
    head = git(repo, "rev-parse", "HEAD")
    assert vcs.commit_of("HEAD", repo) == head
    assert vcs.commit_of("--all", repo) is None and vcs.commit_of("nope", repo) is None
    assert vcs.default_branch(repo) == "main"
    assert vcs.is_ancestor(git(repo, "rev-parse", "main"), head, repo)
    assert not vcs.is_ancestor(head, git(repo, "rev-parse", "main"), repo)
    changed = vcs.changed_files(git(repo, "rev-parse", "main"), repo)
    assert sorted(p.relative_to(repo.resolve()).as_posix() for p in changed) == [
        "pkg/util.py",
        "tests/test_new.py",
    ]
