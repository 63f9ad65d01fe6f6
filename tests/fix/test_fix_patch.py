"""Edits to a source file, their unified diff, and applying it only where it still fits."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from hermetic_hunt.fix.patch import Draft, PatchConflict, build
from hermetic_hunt.fix.source import Project


def draft_of(tmp_path: Path, text: str) -> Draft:
    (tmp_path / "test_a.py").write_text(textwrap.dedent(text).lstrip("\n"))
    module = Project(tmp_path).module("test_a.py")
    assert module is not None
    return Draft(module)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("def test_it():", "def test_it(monkeypatch, restore_x):"),
        ("def test_it(tmp_path):", "def test_it(tmp_path, monkeypatch, restore_x):"),
        ("def test_it(tmp_path,):", "def test_it(tmp_path, monkeypatch, restore_x,):"),
        (
            "def test_it(a: dict[str, int]):",
            "def test_it(a: dict[str, int], monkeypatch, restore_x):",
        ),
        ("async def test_it(*, b):", "async def test_it(*, b, monkeypatch, restore_x):"),
    ],
)
def test_parameters_are_added_after_the_existing_ones(tmp_path, header, expected):
    draft = draft_of(tmp_path, f"{header}\n    pass\n")
    func = draft.module.function((), "test_it")
    assert func is not None
    assert draft.add_param(func, "monkeypatch") and draft.add_param(func, "restore_x")
    assert draft.add_param(func, "monkeypatch")  # once only
    assert draft.result().splitlines()[0] == expected


def test_a_parameter_is_refused_where_it_would_not_be_valid_python(tmp_path):
    draft = draft_of(tmp_path, "def test_it(a=1, **kw):\n    pass\n")
    func = draft.module.function((), "test_it")
    assert func is not None and not draft.add_param(func, "monkeypatch")


def test_multiline_headers_keep_their_layout(tmp_path):
    draft = draft_of(tmp_path, """
        def test_it(
            tmp_path,
        ):
            pass
    """)  # fmt: skip
    func = draft.module.function((), "test_it")
    assert func is not None and draft.add_param(func, "monkeypatch")
    assert draft.result() == "def test_it(\n    tmp_path, monkeypatch,\n):\n    pass\n"


def test_a_rewritten_statement_drops_the_comment_that_ends_its_line_and_only_that(tmp_path):
    draft = draft_of(tmp_path, """
        import os

        def test_it():
            # set the currency
            os.environ["X"] = (  # no monkeypatch
                "EUR"
            )  # never put back
            os.environ["Y"] = "1"; assert True  # about both
    """)  # fmt: skip
    func = draft.module.function((), "test_it")
    assert func is not None
    to_x, to_y = func.body[:2]
    draft.rewrite(to_x.lineno, to_x.col_offset, to_x.end_lineno or 0, to_x.end_col_offset or 0,
                  'monkeypatch.setenv("X", "EUR")')  # fmt: skip
    draft.rewrite(to_y.lineno, to_y.col_offset, to_y.end_lineno or 0, to_y.end_col_offset or 0,
                  'monkeypatch.setenv("Y", "1")')  # fmt: skip
    assert draft.result().splitlines()[3:] == [
        "    # set the currency",
        '    monkeypatch.setenv("X", "EUR")',
        '    monkeypatch.setenv("Y", "1"); assert True  # about both',
    ]


def test_statements_go_first_after_the_docstring_and_fixtures_above_the_test(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "config.py").write_text("def go(): pass\n")
    draft = draft_of(tmp_path, '''
        """Module."""
        from app import config


        # a comment about the test
        @pytest.mark.slow
        def test_it():
            """Doc."""
            config.go()
    ''')  # fmt: skip
    func = draft.module.function((), "test_it")
    assert func is not None
    draft.prepend(func, ["first()", "second()"])
    draft.insert_above(func, ["@pytest.fixture", "def restore_x():", "    yield"])
    draft.ensure_import("import pytest", "pytest")
    draft.ensure_import("import copy", "copy")
    draft.ensure_import("import config", "config")  # bound already: nothing added
    assert draft.result() == textwrap.dedent('''\
        """Module."""
        import copy
        import pytest

        from app import config


        @pytest.fixture
        def restore_x():
            yield


        # a comment about the test
        @pytest.mark.slow
        def test_it():
            """Doc."""
            first()
            second()
            config.go()
    ''')


@pytest.mark.process
def test_the_diff_applies_with_git_apply_and_only_to_unchanged_files(tmp_path):
    draft = draft_of(tmp_path, "import os\n\n\ndef test_it():\n    os.chdir('/')\n")
    func = draft.module.function((), "test_it")
    assert func is not None
    draft.add_param(func, "monkeypatch")
    draft.replace(5, 4, 5, 17, "monkeypatch.chdir('/')")
    patch = build([draft])
    assert patch is not None and patch.paths == ["test_a.py"]
    assert patch.diff().splitlines() == [
        "--- a/test_a.py",
        "+++ b/test_a.py",
        "@@ -1,5 +1,5 @@",
        " import os",
        " ",
        " ",
        "-def test_it():",
        "-    os.chdir('/')",
        "+def test_it(monkeypatch):",
        "+    monkeypatch.chdir('/')",
    ]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    check = subprocess.run(["git", "apply", "--check", "-"], cwd=tmp_path, input=patch.diff(),
                           text=True, capture_output=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "test_a.py").write_text("something else\n")
    with pytest.raises(PatchConflict, match=r"test_a\.py changed since the patch was made"):
        patch.apply_to(copy)
    assert (copy / "test_a.py").read_text() == "something else\n"
    patch.apply_to(tmp_path)
    assert "monkeypatch.chdir('/')" in (tmp_path / "test_a.py").read_text()


def test_nothing_changed_is_no_patch(tmp_path):
    assert build([draft_of(tmp_path, "x = 1\n")]) is None
