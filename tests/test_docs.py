"""The docs are kept honest: every option, ini key, command and JSON key is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import sample

from hermetic_hunt.cli import main
from hermetic_hunt.plugin import HUNT_OPTIONS
from hermetic_hunt.report import render
from hermetic_hunt.report.load import load_report
from hermetic_hunt.store import Store

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def all_docs() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))


PYTEST_OPTIONS = [
    "--hermetic-hunt",
    "--hermetic-replay-db",
    "--hermetic-hunt-changed",
    "--hermetic-quarantine",
    *(o.flag for o in HUNT_OPTIONS),
]


@pytest.mark.parametrize("option", PYTEST_OPTIONS)
def test_every_pytest_option_is_documented(option):
    assert re.search(rf"`{re.escape(option)}(?![\w-])", all_docs()), f"{option} is not in docs/"


@pytest.mark.parametrize("ini", [o.ini_key for o in HUNT_OPTIONS if o.ini_key is not None])
def test_every_ini_key_is_documented(ini):
    assert f"`{ini}`" in all_docs(), f"ini key {ini} is not in docs/"


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_cli_command_is_documented_with_its_options(command):
    text = all_docs()
    assert re.search(rf"`hermetic-hunt {command}\b", text), f"hermetic-hunt {command}"
    for param in main.commands[command].params:
        for opt in param.opts + param.secondary_opts:
            if opt.startswith("--") and opt != "--help":
                assert re.search(rf"`[^`\n]*{re.escape(opt)}(?![\w-])[^`\n]*`", text), (
                    f"hermetic-hunt {command} {opt} is not in docs/"
                )


def test_the_cli_reference_documents_every_exit_status():
    text = (DOCS / "cli.md").read_text()
    for status in ("0", "1", "2", "3"):
        assert re.search(rf"^\| {status} \| ", text, re.M)


def keys(value: object) -> set[str]:
    if isinstance(value, list):
        return set().union(*(keys(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set(value) | set().union(*(keys(v) for k, v in value.items() if k != "evidence"))
    return set()


def test_every_key_of_the_json_report_is_documented(tmp_path):
    sample(tmp_path / "flakes.db").close()
    with Store.open(tmp_path / "flakes.db", create=False) as store:
        data = json.loads(render(load_report(store, None, str(tmp_path)), "json"))
    text = (DOCS / "json-format.md").read_text()
    missing = sorted(k for k in keys(data) if f"`{k}`" not in text and f'"{k}"' not in text)
    assert missing == []


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_relative_links_in_the_docs_resolve(page):
    for target in LINK.findall((DOCS / page).read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (DOCS / target).exists(), f"{page} links to {target}, which does not exist"


def _named_tests() -> list[str]:
    text = (DOCS / "guarantees.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"`(tests/[\w/]+\.py(?:::\w+)?)`", text)))


def test_the_guarantees_name_tests():
    named = _named_tests()
    assert len([n for n in named if "::" in n]) >= 10, named


@pytest.mark.parametrize("named", _named_tests())
def test_every_test_the_guarantees_name_exists(named):
    path, _, name = named.partition("::")
    assert (ROOT / path).is_file(), f"docs/guarantees.md names {path}, which does not exist"
    if name:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^(async )?def {name}\(", source, re.M), (
            f"docs/guarantees.md names {named}, which does not exist"
        )
