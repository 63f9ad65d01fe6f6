"""``--hermetic-hunt-changed[=BASE]``: hunt only the tests a change touches.

Which tests are selected and which ``BASE`` is the default are in
docs/ci.md, "Pull requests: hunt what changed". The import graph is cheap
to know here: collection imported every test module already, so each
import statement is resolved through ``sys.modules`` and only files under
the rootdir are followed.

The base is resolved once on the controller and handed to xdist workers
(``workerinput``), so every process selects the same tests. A hunt that
selects nothing exits 0 and says so: a pull request that changes no test
has nothing to hunt.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermetic_hunt import vcs
from hermetic_hunt.errors import HuntError

#: How many imports deep a test's dependencies are followed.
MAX_DEPTH = 8
WORKERINPUT_KEY = "hermetic_hunt_changed"


@dataclass
class DependencyGraph:
    """Project files each module imports (resolved through ``sys.modules``)."""

    rootdir: Path
    modules: dict[str, ModuleType]
    _edges: dict[Path, set[Path]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_file: dict[Path, ModuleType] = {}
        for module in list(self.modules.values()):
            path = self._file(module)
            if path is not None:
                self._by_file.setdefault(path, module)

    def _file(self, module: ModuleType | None) -> Path | None:
        """``module``'s file when it is the project's (under the rootdir, not installed)."""
        name = getattr(module, "__file__", None)
        if not isinstance(name, str) or not name.endswith(".py"):
            return None
        try:
            path = Path(name).resolve()
        except OSError:
            return None
        ours = path.is_relative_to(self.rootdir) and "site-packages" not in path.parts
        return path if ours else None

    def imports(self, path: Path) -> set[Path]:
        if path not in self._edges:
            self._edges[path] = self._scan(path)
        return self._edges[path]

    def _scan(self, path: Path) -> set[Path]:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            return set()
        module = self._by_file.get(path)
        package = getattr(module, "__package__", None) or ""
        found: set[Path] = set()
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    keep = len(parts) - (node.level - 1)
                    if keep < 0:
                        continue
                    base = ".".join([*parts[:keep], *([base] if base else [])])
                names = [base] + [f"{base}.{a.name}" if base else a.name for a in node.names]
            targets = {self._file(self.modules.get(name)) for name in names}
            found.update(target for target in targets if target not in (None, path))
        return found

    def closure(self, path: Path) -> set[Path]:
        """Every project file ``path`` depends on, itself included."""
        seen = frontier = {path}
        for _ in range(MAX_DEPTH):
            frontier = {target for item in frontier for target in self.imports(item)} - seen
            seen = seen | frontier
        return seen


def why_selected(test_file: Path, changed: set[Path], graph: DependencyGraph) -> str | None:
    """Why the tests of ``test_file`` are hunted (None: the change does not touch them)."""
    if test_file in changed:
        return "changed"
    for folder in test_file.parents:
        if folder / "conftest.py" in changed:
            return f"{(folder / 'conftest.py').relative_to(graph.rootdir).as_posix()} changed"
        if folder == graph.rootdir:
            break
    touched = min(graph.closure(test_file) & changed, default=None)  # (the first by path)
    return None if touched is None else f"imports {touched.relative_to(graph.rootdir).as_posix()}"


def select(paths: Iterable[Path], changed: set[Path], rootdir: Path) -> dict[Path, str]:
    """``{test file: why}`` for the files the change touches."""
    graph = DependencyGraph(rootdir, dict(sys.modules))
    whys = {path: why_selected(path, changed, graph) for path in dict.fromkeys(paths)}
    return {path: why for path, why in whys.items() if why is not None}


class ChangedFilter:
    """pytest plugin: deselect the tests the change does not touch."""

    def __init__(self, config: pytest.Config, sha: str, described: str) -> None:
        self.config = config
        self.sha = sha
        self.described = described
        self.nothing = False

    @classmethod
    def install(cls, config: pytest.Config) -> None:
        """Resolve the base (once: workers get the sha) and register the filter."""
        value = config.getoption("hermetic_hunt_changed")
        workerinput = getattr(config, "workerinput", None)
        handed = workerinput.get(WORKERINPUT_KEY) if isinstance(workerinput, dict) else None
        if isinstance(handed, list) and len(handed) == 2:
            sha, described = str(handed[0]), str(handed[1])
        else:
            try:
                sha, described = vcs.resolve_base(value or None, str(config.rootpath))
            except HuntError as exc:
                raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(cls(config, sha, described), "hermetic-hunt-changed")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: every worker compares with the same commit."""
        node.workerinput[WORKERINPUT_KEY] = [self.sha, self.described]

    def pytest_report_header(self) -> list[str]:
        return [
            f"hermetic-hunt: hunting the tests changed since {self.described} ({self.sha[:12]})"
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        changed = vcs.changed_files(self.sha, str(config.rootpath))
        paths = [Path(str(item.path)).resolve() for item in items]
        chosen = select(paths, changed, Path(str(config.rootpath)).resolve())
        kept = [item for item, path in zip(items, paths, strict=True) if path in chosen]
        dropped = [item for item, path in zip(items, paths, strict=True) if path not in chosen]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: Any) -> None:
        self.nothing = not session.testscollected and not session.testsfailed
        if self.nothing and int(exitstatus) == int(pytest.ExitCode.NO_TESTS_COLLECTED):
            # Nothing changed that a test covers: nothing to hunt, and no failure.
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.nothing and getattr(self.config, "workerinput", None) is None:
            terminalreporter.write_line(
                f"hermetic-hunt: no test changed since {self.described} ({self.sha[:12]}): "
                "nothing to hunt"
            )
