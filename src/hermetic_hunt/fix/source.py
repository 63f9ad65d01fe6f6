"""The project's source, read and parsed: test files, the modules they import.

Pure (``ast`` only; files are read through :class:`Project`). Only files
inside the rootdir are read -- site-packages and the standard library are
"external" -- and a file that cannot be read or parsed is simply unknown:
suggestions fall back to advice without line numbers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from hermetic_hunt.project import inside

#: Larger files are not parsed (a generated module is no place for a fix).
MAX_SOURCE = 1_000_000
_PARAMS = re.compile(r"\[.*\]$", re.S)

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class NodeName:
    """A nodeid taken apart: ``tests/t.py::TestX::test_y[1]``."""

    path: str
    classes: tuple[str, ...]
    function: str

    @classmethod
    def parse(cls, nodeid: str) -> NodeName | None:
        parts = nodeid.split("::")
        if len(parts) < 2 or not parts[0].endswith(".py"):
            return None
        function = _PARAMS.sub("", parts[-1])
        if not function.isidentifier() or not all(p.isidentifier() for p in parts[1:-1]):
            return None
        return cls(parts[0], tuple(parts[1:-1]), function)


@dataclass(frozen=True)
class ImportRef:
    """What an import binds: a module of ours (``path``) or an external one.

    ``from shop import catalog`` binds ``catalog`` to ``shop/catalog.py``;
    ``from shop.catalog import register`` to the name ``register`` of it
    (``attr``); ``import os`` to the external ``os``.
    """

    path: Path | None
    attr: str | None
    external: str
    line: int
    text: str = ""


@dataclass
class Module:
    """One parsed source file of the project."""

    path: Path
    rel: str
    text: str
    tree: ast.Module
    #: What each imported name binds (resolved by :meth:`Project.module`).
    imports: dict[str, ImportRef] = field(default_factory=dict)

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def line(self, number: int) -> str:
        """Line ``number`` (1-based), stripped; '' outside the file."""
        return self.lines[number - 1].strip() if 0 < number <= len(self.lines) else ""

    # -- definitions ------------------------------------------------------------

    def nested(self, classes: tuple[str, ...]) -> ast.ClassDef | None:
        """The class ``classes`` name, each inside the one before (None: not found, or none)."""
        found = None
        for name in classes:
            body = found.body if found else self.tree.body
            found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == name), None)
            if found is None:
                return None
        return found

    def function(self, classes: tuple[str, ...], name: str) -> FunctionNode | None:
        """The function ``name`` (in the nested classes ``classes``)."""
        owner = self.nested(classes)
        if classes and owner is None:
            return None
        body = owner.body if owner else self.tree.body
        functions = (n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        return next((n for n in functions if n.name == name), None)

    def top_level(self, node: ast.AST) -> ast.stmt | None:
        """The module-level statement that contains ``node``."""
        line = getattr(node, "lineno", 0)
        found = (s for s in self.tree.body if s.lineno <= line <= (s.end_lineno or s.lineno))
        return next(found, None)

    @cached_property
    def globals(self) -> dict[str, ast.stmt]:
        """Names bound at module level -> the statement that (last) binds them."""
        return {name: stmt for stmt in self.tree.body for name in bound_names(stmt)}


def bound_names(stmt: ast.stmt) -> Iterator[str]:
    """Names a module-level statement binds (assignments, defs, classes; not imports)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield stmt.name
    elif isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            yield from _target_names(target)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        yield from _target_names(stmt.target)


def _target_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


#: The container a value builds, by its literal's node type or the name it calls.
_SHAPES: dict[object, str] = {
    **dict.fromkeys((ast.Dict, ast.DictComp, "dict", "defaultdict", "OrderedDict"), "dict"),
    **dict.fromkeys((ast.List, ast.ListComp, "list"), "list"),
    **dict.fromkeys((ast.Set, ast.SetComp, "set"), "set"),
}


def shape_of(stmt: ast.stmt | None) -> str:
    """``dict``, ``list``, ``set`` or ``other``: the kind of container a module-level
    assignment builds (a literal, a comprehension, ``dict(...)``, an annotation)."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    func = value.func if isinstance(value, ast.Call) else None
    shape = _SHAPES.get(type(value)) or _SHAPES.get(func.id if isinstance(func, ast.Name) else "")
    if shape is not None:
        return shape
    annotation = stmt.annotation if isinstance(stmt, ast.AnnAssign) else None
    head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    if isinstance(head, ast.Name) and head.id.lower() in ("dict", "list", "set"):
        return head.id.lower()
    return "other"


class Project:
    """The source files under ``rootdir``, parsed on demand (and cached).

    Dotted module names are looked up under the rootdir, its ``src/``, and
    the directories between the importing file and the rootdir -- where
    pytest's rootdir-relative imports and ``pythonpath = .`` find them.
    """

    def __init__(self, rootdir: str | Path):
        self.rootdir = Path(rootdir)
        try:
            self._real_root: Path | None = self.rootdir.resolve()
        except (OSError, RuntimeError, ValueError):
            self._real_root = None
        self._modules: dict[Path, Module | None] = {}

    def inside(self, path: Path) -> bool:
        """``path`` is below the rootdir, as written and once resolved (``..`` and
        symbolic links followed): a nodeid from a database cannot lead outside."""
        if not path.is_relative_to(self.rootdir) or ".." in path.parts:
            return False
        return self._real_root is not None and (not path.exists() or inside(self._real_root, path))

    def leaves(self, rel: str) -> Path | None:
        """Where the file ``rel`` names under the rootdir really is, when a symbolic
        link takes it outside the rootdir (None: it stays inside, or is not there).
        A link to another file of the project is read, patched and verified as that
        file; one that leaves is not (fix writes only inside the checkout)."""
        path = self.rootdir / rel
        if ".." in path.parts or self._real_root is None:
            return None
        try:
            return path.resolve() if path.exists() and not inside(self._real_root, path) else None
        except (OSError, RuntimeError, ValueError):
            return None

    def module(self, rel_or_path: str | Path) -> Module | None:
        path = Path(rel_or_path)
        if not path.is_absolute():
            path = self.rootdir / path
        if path in self._modules:
            return self._modules[path]
        self._modules[path] = None  # a module importing itself stops here
        if not self.inside(path):
            return None
        text = _read_text(path)
        if text is None or len(text) > MAX_SOURCE:
            return None
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        module = Module(path, path.relative_to(self.rootdir).as_posix(), text, tree)
        self._modules[path] = module
        module.imports = self._resolve_imports(module)
        return module

    # -- imports ---------------------------------------------------------------------

    def folders(self, near: Path) -> Iterator[Path]:
        """The folders from ``near``'s up to the rootdir (those inside it)."""
        folder = near.parent
        while self.inside(folder):
            yield folder
            if folder == self.rootdir:
                break
            folder = folder.parent

    def _roots(self, near: Path) -> list[Path]:
        return list(dict.fromkeys([self.rootdir, self.rootdir / "src", *self.folders(near)]))

    def find(self, dotted: str, near: Path) -> Path | None:
        """The file of module ``dotted``, if it is ours."""
        parts = dotted.split(".")
        if not all(p.isidentifier() for p in parts):
            return None
        found = (p for root in self._roots(near) for p in self._files(root.joinpath(*parts)))
        return next(found, None)

    def _files(self, base: Path, package: bool = False) -> Iterator[Path]:
        """``base``.py then ``base``/__init__.py (a ``package``: only the latter), those
        that are files (one already read: that parsed)."""
        for path in (base.with_suffix(".py"), base / "__init__.py")[package:]:
            if (self._modules[path] is not None) if path in self._modules else path.is_file():
                yield path

    def _relative(self, module: Module, level: int, name: str | None) -> Path | None:
        parents = module.path.parents
        if level >= len(parents):  # the filesystem's root or past it: not the project's
            return None
        folder = parents[level - 1]
        base = folder.joinpath(*name.split(".")) if name else folder
        return next((p for p in self._files(base, not name) if self.inside(p)), None)

    def _resolve_imports(self, module: Module) -> dict[str, ImportRef]:
        found: dict[str, ImportRef] = {}
        for node in module.tree.body:
            for stmt in _import_statements(node):
                if isinstance(stmt, ast.Import):
                    for alias in stmt.names:
                        text = ast.unparse(ast.Import(names=[alias]))
                        # import a.b binds a (module a); import a.b as c binds c (module a.b)
                        name = alias.name if alias.asname else alias.name.split(".")[0]
                        hit = self.find(name, module.path)
                        found[alias.asname or name] = ImportRef(hit, None, name, stmt.lineno, text)
                elif isinstance(stmt, ast.ImportFrom):
                    self._from_import(module, stmt, found)
        return found

    def _from_import(
        self, module: Module, stmt: ast.ImportFrom, found: dict[str, ImportRef]
    ) -> None:
        def locate(dotted: str | None) -> Path | None:
            if stmt.level:
                return self._relative(module, stmt.level, dotted)
            return self.find(dotted, module.path) if dotted else None

        owner = locate(stmt.module)
        for alias in stmt.names:
            if alias.name == "*":
                continue
            external = f"{stmt.module}.{alias.name}" if stmt.module else alias.name
            text = ast.unparse(ast.ImportFrom(stmt.module, [alias], stmt.level))
            # a submodule of ours, else a name of a module of ours, else an external name
            sub = locate(external)
            ref = ImportRef(sub or owner, None if sub else alias.name, external, stmt.lineno, text)
            found[alias.asname or alias.name] = ref

    def dotted_name(self, path: Path, near: Path) -> str | None:
        """How ``near`` would import the module at ``path`` (``shop.catalog``)."""
        for root in self._roots(near):
            if not path.is_relative_to(root):
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if parts and all(p.isidentifier() for p in parts):
                return ".".join(parts)
        return None


def _import_statements(node: ast.stmt) -> Iterator[ast.stmt]:
    """Imports at module level, also inside ``if``/``try`` blocks (``TYPE_CHECKING``...)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    elif isinstance(node, (ast.If, ast.Try)):
        for child in (*node.body, *node.orelse, *getattr(node, "finalbody", ())):
            yield from _import_statements(child)


def _read_text(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_SOURCE:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None
