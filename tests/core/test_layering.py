"""The package layering, read from the code's own imports (every import, lazy ones too).

The tree reads as the pipeline -- hunt -> isolate -> replay -> report -- over
the engine, the sandbox and the store, with the shared vocabulary (the core)
at the bottom: an import may only point down or along the pipeline, never
back up, and no modules import each other in a circle. The core and the store
import no stage and no test framework; only the sandbox (and ``_compat``)
imports hermetic-sandbox. docs/architecture.md draws the same map.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "hermetic_hunt"
CORE = {"models", "kinds", "findings", "errors", "seeds", "journal", "stats", "failures", "options",
        "pasteable", "environment", "timing", "untrusted", "vcs", "project", "__init__"}  # fmt: skip
#: layer -> the layers it may import (besides itself).
ALLOWED = {
    "core": {"core"},
    "compat": set(),
    "store": {"core"},
    "sandbox": {"core", "compat"},
    "engine": {"core", "compat", "sandbox"},
    "isolate": {"core", "compat", "engine", "store"},
    "hunt": {"core", "compat", "engine", "store", "isolate"},
    "replay": {"core", "compat", "engine", "store"},
    # fix: after replay, before the reports (which show each flake's suggestion); it
    # verifies a patch with the isolation's probe servers.
    "fix": {"core", "store", "isolate"},
    "report": {"core", "store", "replay", "fix"},
    # quarantine: the end of the pipeline, in CI: its list is written from a report,
    # read by a plain pytest session.
    "quarantine": {"core", "store", "report"},
    "edge": {"core", "compat", "sandbox", "engine", "store", "hunt", "isolate", "replay",
             "fix", "report", "quarantine"},
}  # fmt: skip
#: layer -> third-party (and stdlib) modules it must never import.
FORBIDDEN = {
    "core": {"pytest", "_pytest", "xdist", "execnet", "click", "sqlite3", "sqlite_utils",
             "hermetic", "jinja2"},
    "store": {"pytest", "_pytest", "xdist", "execnet", "click", "hermetic", "jinja2"},
    "engine": {"click", "sqlite3", "sqlite_utils", "hermetic", "jinja2"},
    "isolate": {"click", "sqlite3", "sqlite_utils", "hermetic", "jinja2"},
    "replay": {"sqlite3", "sqlite_utils", "hermetic", "jinja2"},
    "report": {"pytest", "_pytest", "xdist", "hermetic", "sqlite3"},
    "hunt": {"click", "sqlite3", "sqlite_utils", "hermetic", "jinja2"},
    "fix": {"pytest", "_pytest", "xdist", "click", "sqlite3", "sqlite_utils", "hermetic",
            "jinja2"},
    "quarantine": {"xdist", "click", "sqlite3", "sqlite_utils", "hermetic", "jinja2"},
}  # fmt: skip


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "examples":
            continue
        out[".".join(parts)] = path
    return out


def layer(module: str) -> str:
    head = module.split(".")[0]
    if head in CORE:
        return "core"
    if head == "_compat":
        return "compat"
    if head in ("plugin", "cli", "demo"):
        return "edge"
    return head


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def own(name: str, known: dict[str, Path]) -> str | None:
    """``hermetic_hunt.x.y`` -> the module of ours it names (None: not ours)."""
    if not name.startswith("hermetic_hunt."):
        return None
    inner = name.removeprefix("hermetic_hunt.")
    while inner and inner not in known and f"{inner}.__init__" not in known:
        inner = inner.rpartition(".")[0]
    if not inner:
        return None
    return inner if inner in known else f"{inner}.__init__"


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = {own(name, known) for name in imports(path)}
        edges[module] = {t for t in targets if t is not None and t != module}
    return edges


def test_every_import_points_down_or_along_the_pipeline() -> None:
    wrong = []
    for module, targets in graph().items():
        mine = layer(module)
        for target in targets:
            theirs = layer(target)
            if theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{module} ({mine}) -> {target} ({theirs})")
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    edges = graph()
    # a package's __init__ re-exporting its own modules is not a circle
    for module in edges:
        package = module.rpartition(".")[0]
        edges[module] = {t for t in edges[module] if t != f"{package}.__init__"}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_layers_import_none_of_the_frameworks_they_must_not_touch() -> None:
    wrong = []
    for module, path in modules().items():
        banned = FORBIDDEN.get(layer(module), set())
        for name in imports(path):
            if name.split(".")[0] in banned:
                wrong.append(f"{module} imports {name}")
    assert wrong == []


def test_only_the_sandbox_and_compat_import_hermetic_sandbox() -> None:
    users = {
        module
        for module, path in modules().items()
        if any(name.split(".")[0] == "hermetic" for name in imports(path))
    }
    assert users <= {"_compat"} | {m for m in modules() if m.startswith("sandbox.")}


@pytest.mark.process
def test_importing_the_whole_core_loads_no_framework() -> None:
    core = sorted(m for m in modules() if layer(m) == "core" and m != "__init__")
    code = (
        "import sys\n"
        + "".join(f"import hermetic_hunt.{m}\n" for m in core)
        + "banned = ('pytest', '_pytest', 'xdist', 'click', 'sqlite3', 'sqlite_utils', "
        "'hermetic', 'jinja2')\n"
        "print(sorted(m for m in banned if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
