"""The fix walkthrough, the quarantine page and the PR recipe are kept honest.

Every ``hermetic-hunt ...`` and ``pytest ...`` command these pages show
parses with the real CLI and the real pytest options; the numbers and
sentences they quote are what the code computes and prints; the quarantine
lines they show are what the list file reads and writes back; links to a
heading find it. The slow test runs the walkthrough's first steps on a
copy of the example suite and compares ``hermetic-hunt fix F9`` with the
output the page shows.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import clean_env

from hermetic_hunt import options
from hermetic_hunt.cli import main
from hermetic_hunt.demo import DEFAULT_ROUNDS, DEFAULT_SEED, hunt_argv
from hermetic_hunt.errors import BadOption
from hermetic_hunt.fix.verify import MIN_RUNS, Verification, runs_needed
from hermetic_hunt.quarantine.listfile import DEFAULT_RELEASE, Entry, Unwritable, entry_for, parse
from hermetic_hunt.report.history import history
from hermetic_hunt.store.history import RunPoint, Tally

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The pages whose commands must parse.
PAGES = ("fixes.md", "quarantine.md", "ci.md", "options.md", "cli.md", "quickstart.md")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
#: GitHub Actions expressions and shell variables in the recipes, and what stands in for them.
EXPRESSIONS = {"github.base_ref": "main", "github.run_id": "4242"}
VARIABLES = {"SEED": "4242", "K": "1", "M": "4", "TARGET_BRANCH": "main"}


def text(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


def blocks(page: str, lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(text(page)) if kind == lang]


def _yaml_runs(body: str) -> list[str]:
    """The shell commands of a workflow's ``run:`` steps (folded ``>`` ones joined)."""
    out: list[str] = []
    lines = body.splitlines()
    for i, line in enumerate(lines):
        found = re.match(r"^(\s*)(?:- )?run: (.*)$", line)
        if not found:
            continue
        indent, value = len(found.group(1)), found.group(2).strip()
        if value not in (">", "|"):
            out.append(value)
            continue
        folded = []
        for nxt in lines[i + 1 :]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            folded.append(nxt.strip())
        out.append(" ".join(p for p in folded if p))
    return out


def commands(page: str) -> list[list[str]]:
    """Every ``hermetic-hunt`` / ``pytest`` command of a page's bash and yaml blocks."""
    lines: list[str] = []
    for body in blocks(page, "bash"):
        lines += body.replace("\\\n", " ").splitlines()
    for body in blocks(page, "yaml"):
        lines += _yaml_runs(body)
    out = []
    for line in lines:
        line = re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: EXPRESSIONS.get(m[1], "x"), line)
        line = re.sub(r"\$(\w+)", lambda m: VARIABLES.get(m[1], "x"), line)
        words: list[str] = []
        for word in [*shlex.split(line, comments=True), "|"]:
            if word in ("|", "||", "&&", ";", ">>", ">"):
                if words and words[0] in ("hermetic-hunt", "pytest"):
                    out.append(words)
                words = [] if word in ("|", "||", "&&", ";") else ["(redirect)"]
            else:
                words.append(word)
    return out


def all_commands(program: str) -> list[tuple[str, list[str]]]:
    return [(page, c) for page in PAGES for c in commands(page) if c[0] == program]


def _id(value: object) -> str:
    return shlex.join(value[1]) if isinstance(value, tuple) else str(value)


def test_the_pages_show_the_new_commands():
    shown = {shlex.join(c) for _, c in all_commands("hermetic-hunt")}
    assert {"hermetic-hunt fix F10", "hermetic-hunt fix F10 --apply", "hermetic-hunt report --since HEAD",
            "hermetic-hunt quarantine -o quarantine.txt"} <= shown  # fmt: skip
    pytest_shown = {shlex.join(c) for _, c in all_commands("pytest")}
    assert "pytest --hermetic-quarantine=quarantine.txt" in pytest_shown
    assert any("--hermetic-hunt-changed=origin/main" in c for c in pytest_shown)


@pytest.mark.parametrize("page_command", all_commands("hermetic-hunt"), ids=_id)
def test_every_hermetic_hunt_command_shown_parses(page_command):
    page, words = page_command
    name, *args = words[1:]
    assert name in main.commands, f"{page}: hermetic-hunt {name} is not a command"
    command = main.commands[name]
    with command.make_context(name, list(args)) as ctx:  # raises on an unknown option or value
        assert ctx.command is command


@pytest.mark.parametrize("page_command", all_commands("pytest"), ids=_id)
def test_every_pytest_command_shown_parses(page_command, pytester: pytest.Pytester):
    _page, words = page_command
    config = pytester.parseconfig(*words[1:])  # UsageError on an unknown option
    hunt = config.getoption("hermetic_hunt")
    if hunt is not None:
        options.parse_hunt(hunt)  # BadOption on a value a hunt refuses


def test_the_run_counts_and_verdicts_shown_are_what_the_code_computes():
    page = " ".join(text("fixes.md").split())
    counts = (runs_needed(12 / 30), runs_needed(0.10), runs_needed(0.001), MIN_RUNS)
    assert (
        f"N is the number of clean runs that make 95% sure a flake failing at its hunted "
        f"rate is gone: {counts[0]} for F10's 40%, {counts[1]} for a 10% flake, {counts[2]} "
        f"for 1% or less, never fewer than {counts[3]}."
    ) in page
    assert Verification("verified", 6, 6).describe() in page
    cli_page = " ".join(text("cli.md").split())
    assert (
        f"({counts[0]} at 40%, {counts[1]} at 10%, {counts[2]} at 1% or less, at least {counts[3]})"
    ) in cli_page


def test_the_history_lines_shown_are_what_the_history_says():
    a, b = "a9630ff079" + "0" * 30, "f5f0d77f68" + "0" * 30
    runs = [
        RunPoint(1, "2026-12-03T17:40:56+00:00", a, "main"),
        RunPoint(2, "2026-12-03T17:53:02+00:00", b, "main"),
    ]
    shown = text("fixes.md")
    for nodeid, first, second in (
        ("tests/test_catalog.py::test_catalog_lists_core_products", (30, 5), (10, 0)),
        ("tests/test_checkout.py::test_checkout_reports_metrics", (30, 3), (10, 0)),
        ("tests/test_labels.py::test_label_defaults_to_dollars", (30, 11), (10, 0)),
        ("tests/test_billing.py::test_next_billing_date", (30, 10), (10, 3)),
    ):
        tallies = [Tally(nodeid, 1, *first), Tally(nodeid, 2, *second)]
        for line in history(nodeid, runs, tallies).lines():
            assert f"      {line}\n" in shown, line


def test_the_quarantine_lines_shown_read_and_write_back_the_same():
    (listing,) = [b for b in blocks("quarantine.md", "text") if b.startswith("# hermetic-hunt")]
    lines = [line for line in listing.splitlines() if line and not line.startswith(("#", "..."))]
    entries = parse("\n".join(lines))
    assert [e.format() for e in entries] == lines
    assert all(e.flake_id and e.kinds for e in entries)
    releases = [Entry("t.py::t", rate=r).release_after for r in (0.68, 0.10, 0.005)]
    assert (
        f"{releases[0]} at 68%, {releases[1]} at 10%, {releases[2]} at 1% or less, "
        f"{DEFAULT_RELEASE} without a rate"
    ) in " ".join(text("quarantine.md").split())


def test_both_pages_say_what_a_line_holding_a_file_path_quarantines():
    # quarantine.md and limitations.md once disagreed; both now say what the code does.
    entries = parse("tests/test_x.py\n./tests/test_y.py\n")
    assert entry_for(entries, "tests/test_x.py::TestX::test_a[1]") is entries[0]
    assert entry_for(entries, "tests/test_y.py::test_b") is None
    with pytest.raises(BadOption, match="line 1"):
        parse("tests/\n")
    with pytest.raises(Unwritable, match="not a test id"):
        Entry("tests/test_x.py").format()  # hermetic-hunt quarantine never writes one
    for page in ("quarantine.md", "limitations.md"):
        words = " ".join(text(page).split())
        assert "(`tests/test_x.py`" in words and "quarantines every test of that file" in words
        assert "`./tests/test_x.py`" in words and "matches no test" in words, page
        assert "`hermetic-hunt quarantine`" in words and "never" in words, page


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


LINK = re.compile(r"\]\(([^)\s#]*)#([^)\s]+)\)")


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_links_to_a_heading_find_it(page):
    for target, anchor in LINK.findall(text(page)):
        if "://" in target:
            continue
        path = (DOCS / page).parent / target if target else DOCS / page
        headings = re.findall(r"^#+ (.*)$", path.read_text(encoding="utf-8"), re.M)
        assert anchor in {slug(h) for h in headings}, f"{page}: {target}#{anchor}"


# -- the walkthrough itself ---------------------------------------------------------------


def _run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from hermetic_hunt.cli import main; sys.exit(main())"
    return _run(cwd, sys.executable, "-c", code, *args)


def _shown_output(first_line: str) -> list[str]:
    """The text block of fixes.md that starts with ``first_line``, uncut."""
    for body in blocks("fixes.md", "text"):
        if body.startswith(first_line) and "\n...\n" not in body:
            return [line.rstrip() for line in body.rstrip("\n").splitlines()]
    raise AssertionError(f"no text block starts with {first_line!r}")


@pytest.mark.slow
def test_the_walkthrough_hunt_and_fix_print_what_the_page_shows(demo_hunt, tmp_path):
    # The page's hunt is the demo's (30 rounds, -n 2, seed 7): the session's shared
    # demo hunt, on a private copy in a git checkout as on the page.
    (hunt,) = [c for c in commands("fixes.md") if c[:2] == ["pytest", "--hermetic-hunt=30"]]
    demo_args = hunt_argv(DEFAULT_ROUNDS, DEFAULT_SEED, "2")[3:]
    assert set(hunt[1:]) <= set(demo_args), (hunt, demo_args)
    assert "hermetic-hunt isolation:" in demo_hunt.stdout, demo_hunt.stdout[-3000:]
    root = demo_hunt.copy(tmp_path)
    git = ("git", "-c", "user.name=docs", "-c", "user.email=docs@example.invalid")
    (root / ".gitignore").write_text("flakes.db*\n__pycache__/\n.pytest_cache/\nreports/\n")
    for step in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "example")):
        assert _run(root, *git, *step).returncode == 0
    fixed = _cli(root, "fix", "F10")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    shown = _shown_output("F10 tests/test_labels.py::test_label_defaults_to_dollars: victim")
    assert [line.rstrip() for line in fixed.stdout.rstrip("\n").splitlines()] == shown
    report = _cli(root, "report")
    assert "      verified: the reproducer passes 6/6 with the patch\n" in report.stdout
