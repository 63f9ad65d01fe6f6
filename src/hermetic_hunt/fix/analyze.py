"""What a test changes that outlives it, read from the source (pure, ``ast``).

:class:`Analyzer` reads a test function and the project functions it calls
(up to :data:`MAX_DEPTH` calls deep, files under the rootdir only) and
lists its :class:`Effect` objects:

* ``env`` -- ``os.environ`` set or deleted (``os.environ[K] = V``,
  ``.update``, ``.pop``, ``os.putenv``...);
* ``cwd`` -- ``os.chdir``;
* ``sys.path`` -- ``sys.path`` changed;
* ``rebind`` -- a module global or class attribute assigned
  (``settings.CURRENCY = ...``, ``global CURRENCY; CURRENCY = code``);
* ``mutate`` -- a module-level container (a registry, a cache, a list of
  plugins) or class attribute changed in place (``_REGISTRY[sku] = ...``,
  ``ACTIVE.extend(...)``, ``self.graph["hub"].append(...)``);

and, for advice only, where it draws randomness (``random``), reads the
clock (``clock``), starts threads (``thread``) and builds sets (``set``).

Static reading is a best effort: what it cannot resolve (a method of an
object, a dynamic attribute) is left out, and the suggestions fall back on
the leaks the hunt recorded. A fix is only claimed once the reproducer
passes with it (:mod:`hermetic_hunt.fix.verify`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from hermetic_hunt.fix.source import FunctionNode, Module, NodeName, Project, shape_of

#: Calls followed from the test into the project's functions.
MAX_DEPTH = 3

EffectKind = Literal[
    "env", "cwd", "sys.path", "rebind", "mutate", "random", "clock", "thread", "set"
]
#: Kinds of effect that outlive the test (the others are facts for advice).
LASTING = frozenset({"env", "cwd", "sys.path", "rebind", "mutate"})

#: Methods that change their container in place, by container (and a registry's verbs).
_MUTATORS = frozenset(
    {
        *("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"),  # list
        *("popitem", "update", "setdefault", "__setitem__", "__delitem__"),  # dict
        *("add", "discard", "difference_update"),  # set
        *("intersection_update", "symmetric_difference_update"),  # set
        *("appendleft", "extendleft"),  # deque
        *("register", "subscribe", "connect"),  # registries
    }
)
_ENVIRON = "os.environ"
#: Methods of ``os.environ`` that delete variables (``update``, ``setdefault`` and
#: ``__setitem__`` set them).
_ENVIRON_DELETING = ("pop", "popitem", "clear", "__delitem__")
_RANDOM = ("random.", "secrets.", "uuid.uuid1", "uuid.uuid4", "os.urandom", "numpy.random.")
_CLOCK = frozenset(
    {
        "time.sleep",  # not a reading: what a deadline races (fix advice names it)
        "asyncio.sleep",
        *("time.time", "time.time_ns", "time.monotonic", "time.perf_counter"),
        *("time.localtime", "time.gmtime", "time.strftime"),
        *("datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today"),
        "datetime.date.today",
    }
)
_THREADS = frozenset(
    {
        "threading.Thread",
        "threading.Timer",
        "concurrent.futures.ThreadPoolExecutor",
        "multiprocessing.Process",
    }
)


@dataclass(frozen=True)
class Holder:
    """Module-level state: ``name`` of the module at ``path`` (of class ``owner``)."""

    path: str
    owner: str | None
    name: str
    shape: str

    @property
    def label(self) -> str:
        return f"{self.owner}.{self.name}" if self.owner else self.name


@dataclass(frozen=True)
class Rewrite:
    """A statement of the test (its exact span) and what replaces it."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Effect:
    """One thing a test does, where, and how it got there.

    ``site`` is the line of the test function where it starts (the call
    that leads there, or the statement itself); ``origin`` is
    ``path:line`` of the statement that does it; ``via`` names the call
    in the test (empty when the test does it itself).
    """

    kind: EffectKind
    site: int
    origin: str
    origin_text: str
    via: str = ""
    holder: Holder | None = None
    key: str | None = None
    deep: bool = False
    rewrite: Rewrite | None = None
    detail: str = ""


@dataclass
class TestEffects:
    """A test function found in the source, and what it does."""

    name: NodeName
    module: Module
    function: FunctionNode
    effects: list[Effect] = field(default_factory=list)

    def lasting(self) -> list[Effect]:
        return [e for e in self.effects if e.kind in LASTING]

    def of(self, *kinds: str) -> list[Effect]:
        return [e for e in self.effects if e.kind in kinds]


def mutated_arguments(test: TestEffects) -> list[tuple[str, int, str]]:
    """``(argument, line, how)`` for each parametrize argument ``test`` changes in
    place (``test_args.insert(0, "x")``, ``args["k"] = v``, ``del args[0]``): the
    value is one object shared by every run of the parametrization, so its next
    run in the process gets it changed. Pure reading of the function's own body.
    """
    names = _parametrize_names(test.function)
    found: dict[str, tuple[str, int, str]] = {}
    for node in ast.walk(test.function):
        target: ast.expr | None = None
        how = ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _MUTATORS:
                target, how = node.func.value, f".{node.func.attr}()"
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            subscripts = [t for t in targets if isinstance(t, ast.Subscript)]
            if subscripts:
                target = subscripts[0].value
                how = "del [...]" if isinstance(node, ast.Delete) else "[...] ="
        if isinstance(target, ast.Name) and target.id in names and target.id not in found:
            found[target.id] = (target.id, getattr(node, "lineno", test.function.lineno), how)
    return list(found.values())


#: Calls whose value is an iterator: a parametrize value made by one is used up by
#: the first run that iterates it.
_ONE_SHOT_CALLS = frozenset({"iter", "map", "filter", "zip", "reversed", "enumerate"})


def one_shot_values(test: TestEffects) -> list[tuple[int, str]]:
    """``(line, source)`` of each iterator among ``test``'s parametrize values (a
    generator expression, ``iter(...)``, ``map(...)``...): one object for every run
    of the parametrization, empty after the first run iterated it."""
    found: list[tuple[int, str]] = []
    for deco in _parametrizes(test.function):
        values = [*deco.args[1:2], *(k.value for k in deco.keywords if k.arg == "argvalues")]
        for node in (n for value in values for n in ast.walk(value)):
            one_shot = isinstance(node, ast.GeneratorExp) or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in _ONE_SHOT_CALLS
            )
            if one_shot:
                found.append((getattr(node, "lineno", test.function.lineno), ast.unparse(node)))
    return found


def _parametrizes(function: FunctionNode) -> list[ast.Call]:
    """``function``'s ``@pytest.mark.parametrize(...)`` decorators."""
    return [d for d in function.decorator_list
            if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("parametrize")]  # fmt: skip


def _parametrize_names(function: FunctionNode) -> set[str]:
    """The argument names of ``function``'s ``@pytest.mark.parametrize`` decorators."""
    out: set[str] = set()
    for deco in _parametrizes(function):
        first = deco.args[0] if deco.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.update(n.strip() for n in first.value.split(",") if n.strip())
        elif isinstance(first, (ast.List, ast.Tuple)):
            out.update(e.value for e in first.elts if isinstance(e, ast.Constant)
                       and isinstance(e.value, str))  # fmt: skip
    params = {a.arg for a in (*function.args.posonlyargs, *function.args.args,
                              *function.args.kwonlyargs)}  # fmt: skip
    return out & params


# -- what an expression names --------------------------------------------------------


@dataclass(frozen=True)
class _Mod:
    module: Module


@dataclass(frozen=True)
class _Ext:
    name: str


@dataclass(frozen=True)
class _Func:
    module: Module
    node: FunctionNode
    cls: ast.ClassDef | None


@dataclass(frozen=True)
class _Class:
    """A class, or (``instance``) ``self`` in one of its methods."""

    module: Module
    node: ast.ClassDef
    instance: bool = False


@dataclass(frozen=True)
class _Root:
    holder: Holder
    depth: int


_Ref = _Mod | _Ext | _Func | _Class | _Root | None


@dataclass
class _Frame:
    """A function being read: its module, class, local names and where the test is."""

    module: Module
    cls: ast.ClassDef | None
    local: frozenset[str]
    declared: frozenset[str]
    depth: int
    site: int | None
    via: str


def _scope(function: FunctionNode) -> tuple[frozenset[str], frozenset[str]]:
    """(local names, names declared ``global``/``nonlocal``) of ``function`` and its
    nested functions."""
    declared: set[str] = set()
    local: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not function:
            local.add(node.name)
        elif isinstance(node, ast.alias) and node is not None:
            local.add((node.asname or node.name).split(".")[0])
    return frozenset(local - declared), frozenset(declared)


def _class_names(cls: ast.ClassDef) -> dict[str, ast.stmt]:
    out: dict[str, ast.stmt] = {}
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = stmt
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = stmt
    return out


def _const_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class Analyzer:
    """Reads tests and the project code they call (see the module docstring)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._cache: dict[str, TestEffects | None] = {}

    def test(self, nodeid: str) -> TestEffects | None:
        """The test ``nodeid`` and its effects (None: its source cannot be read)."""
        if nodeid not in self._cache:
            self._cache[nodeid] = self._test(nodeid)
        return self._cache[nodeid]

    def _test(self, nodeid: str) -> TestEffects | None:
        name = NodeName.parse(nodeid)
        module = self.project.module(name.path) if name is not None else None
        function = module.function(name.classes, name.function) if module and name else None
        if name is None or module is None or function is None:
            return None
        walked = self._walk(module, function, module.nested(name.classes), 0, None, "", set())
        return TestEffects(name, module, function, _dedupe(sorted(walked, key=lambda e: e.site)))

    # -- reading a function ----------------------------------------------------------

    def _walk(
        self,
        module: Module,
        function: FunctionNode,
        cls: ast.ClassDef | None,
        depth: int,
        site: int | None,
        via: str,
        seen: set[tuple[str, int]],
    ) -> Iterator[Effect]:
        key = (module.rel, function.lineno)
        if key in seen:
            return
        seen.add(key)
        local, declared = _scope(function)
        frame = _Frame(module, cls, local, declared, depth, site, via)
        for node in ast.walk(function):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                yield from self._assignment(frame, node)
            elif isinstance(node, ast.Call):
                yield from self._call(frame, node, seen)
            elif isinstance(node, (ast.Set, ast.SetComp)):
                yield self._effect(frame, node, "set", detail="a set")

    def _effect(self, frame: _Frame, node: ast.AST, kind: EffectKind, **extra: object) -> Effect:
        line = getattr(node, "lineno", 0)
        return Effect(
            kind=kind,
            site=frame.site if frame.site is not None else line,
            origin=f"{frame.module.rel}:{line}",
            origin_text=frame.module.line(line),
            via=frame.via,
            **extra,  # type: ignore[arg-type]
        )

    def _assignment(self, frame: _Frame, node: ast.stmt) -> Iterator[Effect]:
        targets: list[ast.expr] = (
            node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]  # type: ignore[attr-defined]
        )
        for target in targets:
            if isinstance(target, ast.Name) and target.id in frame.declared:
                stmt = frame.module.globals.get(target.id)
                holder = Holder(frame.module.rel, None, target.id, shape_of(stmt))
                yield self._effect(frame, node, "rebind", holder=holder)
            elif isinstance(target, ast.Attribute):
                ref = self.resolve(frame, target.value)
                owned = self._attribute_holder(ref, target.attr)
                if owned is not None:
                    rewrite = None
                    if frame.depth == 0 and isinstance(node, ast.Assign) and len(node.targets) == 1:
                        owner = frame.module.segment(target.value)
                        value = frame.module.segment(node.value)
                        rewrite = _rewrite(
                            node, f'monkeypatch.setattr({owner}, "{target.attr}", {value})'
                        )
                    yield self._effect(frame, node, "rebind", holder=owned, rewrite=rewrite)
                elif isinstance(ref, _Root):
                    yield self._effect(frame, node, "mutate", holder=ref.holder, deep=True)
            elif isinstance(target, ast.Subscript):
                ref = self.resolve(frame, target.value)
                if isinstance(ref, _Ext) and ref.name == _ENVIRON:
                    yield self._environ_item(frame, node, target)
                elif isinstance(ref, _Root):
                    yield self._effect(frame, node, "mutate", holder=ref.holder, deep=ref.depth > 0)

    def _environ_item(self, frame: _Frame, node: ast.stmt, target: ast.Subscript) -> Effect:
        deleting, rewrite = isinstance(node, ast.Delete), None
        if frame.depth == 0:
            key = frame.module.segment(target.slice)
            if isinstance(node, ast.Delete) and len(node.targets) == 1:
                rewrite = _rewrite(node, f"monkeypatch.delenv({key})")
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                value = frame.module.segment(node.value)
                rewrite = _rewrite(node, f"monkeypatch.setenv({key}, {value})")
        return self._env(frame, node, _const_str(target.slice), deleting, rewrite)

    def _env(
        self, frame: _Frame, node: ast.AST, key: str | None, deleting: bool, rewrite: Rewrite | None
    ) -> Effect:
        detail = "deleted" if deleting else "set"
        return self._effect(frame, node, "env", key=key, rewrite=rewrite, detail=detail)

    def _whole(self, frame: _Frame, node: ast.Call, text: str) -> Rewrite | None:
        """``text`` in place of the test's own statement that is just the call ``node``
        (None: the call is made deeper than the test, or is part of a statement)."""
        stmt = _statement_of(frame.module, node) if frame.depth == 0 else None
        return _rewrite(stmt, text) if stmt is not None else None

    def _attribute_holder(self, ref: _Ref, attr: str) -> Holder | None:
        """The module global or class attribute ``ref.attr`` names, when assigned."""
        if isinstance(ref, _Mod):
            stmt = ref.module.globals.get(attr)
            return Holder(ref.module.rel, None, attr, shape_of(stmt))
        if isinstance(ref, _Class) and not ref.instance:
            stmt = _class_names(ref.node).get(attr)
            return Holder(ref.module.rel, ref.node.name, attr, shape_of(stmt))
        return None  # self.x = ...: an instance attribute, gone with the instance

    def _call(self, frame: _Frame, node: ast.Call, seen: set[tuple[str, int]]) -> Iterator[Effect]:
        func = node.func
        target = self.resolve(frame, func)
        if isinstance(func, ast.Attribute):
            owner = self.resolve(frame, func.value)
            if isinstance(owner, _Ext) and owner.name == _ENVIRON:
                if func.attr in (*_ENVIRON_DELETING, "update", "setdefault", "__setitem__"):
                    yield self._environ_call(frame, node, func.attr)
                return
            if isinstance(owner, _Ext) and owner.name == "sys.path" and func.attr in _MUTATORS:
                rewrite = None
                if func.attr == "insert" and len(node.args) == 2 and _is_zero(node.args[0]):
                    path = frame.module.segment(node.args[1])
                    rewrite = self._whole(frame, node, f"monkeypatch.syspath_prepend({path})")
                yield self._effect(frame, node, "sys.path", rewrite=rewrite)
                return
            if isinstance(owner, _Root) and func.attr in _MUTATORS:
                yield self._effect(frame, node, "mutate", holder=owner.holder, deep=owner.depth > 0)
                return
        if isinstance(target, _Ext):
            yield from self._external_call(frame, node, target.name)
        elif isinstance(target, _Func) and frame.depth < MAX_DEPTH:
            site = frame.site if frame.site is not None else node.lineno
            via = frame.via or frame.module.segment(func)
            yield from self._walk(
                target.module, target.node, target.cls, frame.depth + 1, site, via, seen
            )

    def _environ_call(self, frame: _Frame, node: ast.Call, method: str) -> Effect:
        key = frame.module.segment(node.args[0]) if node.args else ""
        value = frame.module.segment(node.args[1]) if len(node.args) == 2 else ""
        rewrite = None
        if method == "pop" and node.args:
            rewrite = self._whole(frame, node, f"monkeypatch.delenv({key}, raising=False)")
        elif method == "setdefault" and value:
            text = f"monkeypatch.setenv({key}, os.environ.get({key}, {value}))"
            rewrite = self._whole(frame, node, text)
        name = _const_str(node.args[0]) if node.args else None
        return self._env(frame, node, name, method in _ENVIRON_DELETING, rewrite)

    def _external_call(self, frame: _Frame, node: ast.Call, name: str) -> Iterator[Effect]:
        if name in ("os.chdir", "os.fchdir"):
            rewrite = None
            if name == "os.chdir" and len(node.args) == 1:
                path = frame.module.segment(node.args[0])
                rewrite = self._whole(frame, node, f"monkeypatch.chdir({path})")
            yield self._effect(frame, node, "cwd", rewrite=rewrite)
        elif name in ("os.putenv", "os.unsetenv"):
            key = _const_str(node.args[0]) if node.args else None
            yield self._env(frame, node, key, name == "os.unsetenv", None)
        elif name.startswith(_RANDOM):
            yield self._effect(frame, node, "random", detail=name)
        elif name in _CLOCK:
            yield self._effect(frame, node, "clock", detail=name)
        elif name in _THREADS:
            yield self._effect(frame, node, "thread", detail=name)
        elif name in ("set", "frozenset"):
            yield self._effect(frame, node, "set", detail="a set")

    # -- resolving names -------------------------------------------------------------

    def resolve(self, frame: _Frame, node: ast.expr) -> _Ref:
        if isinstance(node, ast.Name):
            return self._name(frame, node.id)
        if isinstance(node, ast.Attribute):
            return self._member(self.resolve(frame, node.value), node.attr)
        if isinstance(node, ast.Subscript):
            inner = self.resolve(frame, node.value)
            return _Root(inner.holder, inner.depth + 1) if isinstance(inner, _Root) else None
        return None

    def _name(self, frame: _Frame, name: str) -> _Ref:
        if name == "self" and frame.cls is not None:
            return _Class(frame.module, frame.cls, instance=True)
        if name in frame.local:
            return None
        if name in ("set", "frozenset"):
            return _Ext(name)
        return self._global(frame.module, name, 0)

    def _global(self, module: Module, name: str, hops: int) -> _Ref:
        stmt = module.globals.get(name)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return _Func(module, stmt, None)
        if isinstance(stmt, ast.ClassDef):
            return _Class(module, stmt)
        if stmt is not None:
            return _Root(Holder(module.rel, None, name, shape_of(stmt)), 0)
        ref = module.imports.get(name)
        if ref is None:
            return None
        if ref.path is None:
            return _Ext(ref.external)
        target = self.project.module(ref.path)
        if target is None:
            return None
        if ref.attr is None:
            return _Mod(target)
        if hops > 3:
            return None
        return self._global(target, ref.attr, hops + 1)

    def _member(self, ref: _Ref, attr: str) -> _Ref:
        if isinstance(ref, _Mod):
            if attr in ref.module.globals or attr in ref.module.imports:
                return self._global(ref.module, attr, 0)
            sub = self.project.find(attr, ref.module.path.parent / "__init__.py")
            if ref.module.path.name == "__init__.py" and sub is not None:
                module = self.project.module(sub)
                return _Mod(module) if module is not None else None
            return _Root(Holder(ref.module.rel, None, attr, "other"), 0)
        if isinstance(ref, _Ext):
            return _Ext(f"{ref.name}.{attr}")
        if isinstance(ref, _Class):
            return self._class_member(ref, attr)
        if isinstance(ref, _Root):
            return _Root(ref.holder, ref.depth + 1)
        return None

    def _class_member(self, ref: _Class, attr: str) -> _Ref:
        stmt = _class_names(ref.node).get(attr)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return _Func(ref.module, stmt, ref.node)
        if stmt is None and ref.instance:
            return None
        return _Root(Holder(ref.module.rel, ref.node.name, attr, shape_of(stmt)), 0)


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def _statement_of(module: Module, node: ast.expr) -> ast.stmt | None:
    """The statement whose whole value is ``node`` (``os.chdir(p)`` on its own)."""
    found = (s for s in ast.walk(module.tree) if isinstance(s, ast.Expr) and s.value is node)
    return next(found, None)


def _rewrite(stmt: ast.stmt, text: str) -> Rewrite | None:
    if stmt.end_lineno is None or stmt.end_col_offset is None:
        return None
    return Rewrite(stmt.lineno, stmt.col_offset, stmt.end_lineno, stmt.end_col_offset, text)


def _dedupe(effects: list[Effect]) -> list[Effect]:
    first: dict[tuple[object, ...], Effect] = {}
    for e in effects:
        first.setdefault((e.kind, e.origin, e.holder, e.key, e.site), e)
    return list(first.values())
