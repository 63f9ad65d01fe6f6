"""One suggested fix per flake, for its kind (pure: reports call it).

:func:`suggest` turns a flake's :class:`~hermetic_hunt.findings.FixFacts`
and the project's source into a :class:`Suggestion`: the concrete changes,
each with file and line, advice for what cannot be patched, and a
:class:`~hermetic_hunt.fix.patch.Patch` where one can be written. What each
kind gets is in docs/fixes.md, 'What `fix` suggests, kind by kind' (one
function per kind here, registered by :func:`suggests`); a network patch is
never verified, since the verification would reach the network.

Nothing here runs a test: :mod:`hermetic_hunt.fix.verify` does, on a copy.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from hermetic_hunt.findings import FixFacts
from hermetic_hunt.fix.analyze import (
    Analyzer,
    Effect,
    Holder,
    TestEffects,
    mutated_arguments,
    one_shot_values,
)
from hermetic_hunt.fix.patch import Draft, Patch, build, indent_of, is_docstring
from hermetic_hunt.fix.source import FunctionNode, Module, NodeName, Project
from hermetic_hunt.kinds import Kind, primary_kind
from hermetic_hunt.kinds import info as kind_info
from hermetic_hunt.models import Leak
from hermetic_hunt.untrusted import clean

_SUFFIX = "(suggested by hermetic-hunt)"


@dataclass(frozen=True)
class Change:
    """One place to change: ``where`` (``path:line``), what happens there, the fix."""

    where: str
    what: str
    fix: str


@dataclass(frozen=True)
class Suggestion:
    """A flake's suggested fix: the changes, advice, and a patch where one exists.

    ``verifiable``: the patch may be checked by running the reproducer on a
    patched copy (not a network fix). ``reason`` says why there is no
    patch, or why it is not verified by running it.
    """

    flake_id: str
    nodeid: str
    kind: str
    summary: str
    changes: tuple[Change, ...] = ()
    advice: tuple[str, ...] = ()
    patch: Patch | None = None
    verifiable: bool = False
    reason: str = ""

    @property
    def diff(self) -> str:
        return self.patch.diff() if self.patch is not None else ""


@dataclass
class _Plan:
    """A suggestion under construction."""

    facts: FixFacts
    project: Project | None
    analyzer: Analyzer | None
    kind: str
    summary: str = ""
    changes: list[Change] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    drafts: dict[str, Draft] = field(default_factory=dict)
    reason: str = ""

    def test(self, nodeid: str) -> TestEffects | None:
        """Test ``nodeid`` read from the source (None: it cannot be read)."""
        return self.analyzer.test(nodeid) if self.analyzer else None

    def effects(self, kind: str) -> list[Effect]:
        """The flake's own test's effects of ``kind`` (none when it cannot be read)."""
        me = self.test(self.facts.nodeid)
        return me.of(kind) if me else []

    def at_test(self, me: TestEffects, what: str, fix: str) -> None:
        """A change at the flake's own test function (``what``: what it does)."""
        where = f"{me.module.rel}:{me.function.lineno}"
        self.change(where, f"{_short(self.facts.nodeid)} {what}", fix)

    def change(self, where: str, what: str, fix: str) -> None:
        self.changes.append(Change(where, what, fix))

    def draft(self, module: Module) -> Draft:
        return self.drafts.setdefault(module.rel, Draft(module))

    def finish(self) -> Suggestion:
        patch = build(list(self.drafts.values())) if self.drafts else None
        row = kind_info(self.kind)
        unverified = row.unverified if row is not None else ""
        if patch is None:
            reason = self.reason or "no patch: the change is described above"
        else:  # a patch that is run to verify it needs no reason
            reason = (self.reason or f"not run to verify it: {unverified}") if unverified else ""
        return Suggestion(
            flake_id=self.facts.flake_id,
            nodeid=self.facts.nodeid,
            kind=self.kind,
            summary=self.summary or "no fix suggested",
            changes=tuple(self.changes),
            advice=tuple(dict.fromkeys(self.advice)),
            patch=patch,
            verifiable=patch is not None and not unverified,
            reason=reason,
        )


#: The suggestion of each kind, filled by ``@suggests`` (tests/core/test_kinds.py
#: checks that every kind of :mod:`hermetic_hunt.kinds` has one).
SUGGESTERS: dict[str, Callable[[_Plan], None]] = {}


def suggests(kind: Kind) -> Callable[[Callable[[_Plan], None]], Callable[[_Plan], None]]:
    """Register the decorated function as the suggestion of ``kind``."""

    def register(function: Callable[[_Plan], None]) -> Callable[[_Plan], None]:
        assert kind not in SUGGESTERS, f"two suggestions for {kind}"
        SUGGESTERS[kind] = function
        return function

    return register


def suggest(facts: FixFacts) -> Suggestion:
    """The suggested fix of one flake (advice only when its rootdir is not here)."""
    here = facts.rootdir and Path(facts.rootdir).is_dir()
    project = Project(facts.rootdir) if here else None
    plan = _Plan(facts, project, Analyzer(project) if project else None, primary_kind(facts.kinds))
    if project is None:
        plan.reason = f"no patch: the hunt's rootdir {facts.rootdir or '(unknown)'} is not here"
    else:
        plan.reason = _outside_link(project, facts)
    SUGGESTERS.get(plan.kind, SUGGESTERS["unexplained"])(plan)
    for other in facts.kinds:
        row = kind_info(other)
        if other != plan.kind and row is not None and row.advice:
            plan.advice.append(row.advice)
    return plan.finish()


def _outside_link(project: Project, facts: FixFacts) -> str:
    """Why there is no patch when a test file of the flake is a link out of the
    checkout ("" : none is); said only when no patch is made after all."""
    tests = [facts.nodeid, *facts.cleaners]
    tests += [n for group in (*facts.polluters, *facts.state_setters) for n in group]
    for rel in dict.fromkeys(n.partition("::")[0] for n in tests):
        target = project.leaves(rel)
        if target is not None:
            return (
                f"no patch: {clean(rel)} is a link to {clean(str(target))}, outside the checkout "
                f"({clean(str(project.rootdir))}); fix reads and patches only files inside it"
            )
    return ""


# -- the state a test leaves behind ----------------------------------------------------


def _short(nodeid: str) -> str:
    name = NodeName.parse(nodeid)
    return name.function if name else nodeid.rsplit("::", 1)[-1]


def _where(test: TestEffects, line: int) -> str:
    return f"{test.module.rel}:{line}"


def _state_text(effect: Effect) -> str:
    """``os.environ['X']``, ``shop.catalog._REGISTRY``, ``the working directory``."""
    if effect.kind == "env":
        return f"os.environ[{effect.key!r}]" if effect.key else "os.environ"
    if effect.kind in ("cwd", "sys.path"):
        return "the working directory" if effect.kind == "cwd" else "sys.path"
    holder = effect.holder
    assert holder is not None
    module = holder.path.removesuffix(".py").replace("/", ".")
    return f"{module}.{holder.label}" if not holder.owner else f"{holder.label}"


def _doing(effect: Effect) -> str:
    verb = {
        "env": "deletes" if effect.detail == "deleted" else "sets",
        "cwd": "changes",
        "sys.path": "changes",
        "rebind": "rebinds",
        "mutate": "changes",
    }[effect.kind]
    there = f" ({effect.origin}: {effect.origin_text})" if effect.via else ""
    via = f"{effect.via}() " if effect.via else ""
    return f"{via}{verb} {_state_text(effect)}{there} and nothing puts it back"


def restore_state(plan: _Plan, test: TestEffects, leaks: tuple[Leak, ...], who: str) -> int:
    """Make ``test`` put back what it changes; the number of changes made."""
    made = 0
    draft = plan.draft(test.module)
    covered: set[tuple[str, str | None]] = set()
    for effect in test.lasting():
        fix = _restore(plan, draft, test, effect)
        if fix is not None:
            covered.add((effect.kind, effect.key))
            made += 1
        fix = fix or "put it back after the test (no patch: see the advice)"
        plan.change(_where(test, effect.site), f"{who} {_doing(effect)}", fix)
    for leak in leaks:
        made += _leak_fix(plan, draft, test, leak, who, covered)
    return made


def _restore(plan: _Plan, draft: Draft, test: TestEffects, effect: Effect) -> str | None:
    """Patch ``test`` so ``effect`` is undone; how (None: it cannot be patched)."""
    func = test.function
    rewrite = effect.rewrite
    if rewrite is not None and draft.add_param(func, "monkeypatch"):
        draft.rewrite(rewrite.line, rewrite.col, rewrite.end_line, rewrite.end_col, rewrite.text)
        if "os.environ.get(" in rewrite.text:
            draft.ensure_import("import os", "os")
        method = rewrite.text.split("(", 1)[0]
        return f"use {method}(): monkeypatch puts it back after the test"
    if effect.kind in _BUILTIN_FIXTURES:
        name, block = _BUILTIN_FIXTURES[effect.kind]
        if not _use_fixture(draft, func, name, block):
            return None
        return f"a fixture, {name}, that snapshots {_state_text(effect)} and restores it"
    holder = effect.holder
    if holder is None:
        return None
    owner = _owner_expression(plan, draft, holder)
    if owner is None:
        return None
    # The test module's own global is named as it is; another module's through it.
    target = f"{owner}.{holder.name}" if owner else holder.name
    if effect.kind == "rebind" or holder.shape == "other":
        if not owner:
            draft.ensure_import("import sys", "sys")
            owner = "sys.modules[__name__]"  # the test module, as it was imported
        value = target if effect.kind == "rebind" else f"copy.deepcopy({target})"
        if effect.kind != "rebind":
            draft.ensure_import("import copy", "copy")
        if not draft.add_param(func, "monkeypatch"):
            return None
        statement = f'monkeypatch.setattr({owner}, "{holder.name}", {value})'
        if (func.lineno, statement) not in draft.prepended:
            if not draft.prepend(func, [statement]):
                return None
            draft.prepended.add((func.lineno, statement))
        return f"{statement} first: monkeypatch puts it back after the test"
    name = _fixture_name(draft, f"restore_{holder.name}")
    block = _snapshot(name, target, holder.shape, deep=effect.deep)
    if effect.deep:
        draft.ensure_import("import copy", "copy")
    if not _use_fixture(draft, func, name, block):
        return None
    return f"a fixture, {name}, that snapshots {target} and restores it after the test"


def _snapshot(name: str, target: str, shape: str, *, deep: bool = False) -> list[str]:
    """Fixture ``name``: a copy of the container ``target``, put back after the test."""
    copy = f"copy.deepcopy({target})" if deep else f"{shape}({target})"
    if shape == "list":
        restore = [f"    {target}[:] = saved"]
    else:
        restore = [f"    {target}.clear()", f"    {target}.update(saved)"]
    return [
        "@pytest.fixture",
        f"def {name}():",
        f'    """Puts {target} back as it was before the test {_SUFFIX}."""',
        f"    saved = {copy}",
        "    yield",
        *restore,
    ]


#: The fixtures that put back the process-wide state a test changes, by effect kind.
_BUILTIN_FIXTURES = {
    "env": ("restore_environ", _snapshot("restore_environ", "os.environ", "dict")),
    "cwd": (
        "restore_cwd",
        [
            "@pytest.fixture",
            "def restore_cwd():",
            f'    """Goes back to the working directory of before the test {_SUFFIX}."""',
            "    saved = os.getcwd()",
            "    yield",
            "    os.chdir(saved)",
        ],
    ),
    "sys.path": ("restore_sys_path", _snapshot("restore_sys_path", "sys.path", "list")),
}


def _use_fixture(draft: Draft, func: FunctionNode, name: str, block: list[str]) -> bool:
    """Define fixture ``name`` above the test (once per module) and request it."""
    if not draft.add_param(func, name):
        return False
    defined = draft.fixtures
    if name not in defined and name not in draft.module.globals:
        draft.ensure_import("import pytest", "pytest")
        for module in ("os", "sys"):
            if any(f"{module}." in line for line in block):
                draft.ensure_import(f"import {module}", module)
        top = draft.module.top_level(func)
        if top is None:
            return False
        draft.insert_above(top, block)
        defined.add(name)
    return True


def _fixture_name(draft: Draft, wanted: str) -> str:
    base = re.sub(r"\W+", "_", wanted.lower()).replace("restore__", "restore_").rstrip("_")
    taken = set(draft.module.globals) | set(draft.module.imports)
    mine = draft.names
    if wanted in mine:
        return mine[wanted]
    name, number = base, 2
    while name in taken or name in mine.values():
        name, number = f"{base}_{number}", number + 1
    mine[wanted] = name
    return name


def _owner_expression(plan: _Plan, draft: Draft, holder: Holder) -> str | None:
    """How the test module names the module (or class) that owns ``holder``."""
    module = draft.module
    project = plan.project
    assert project is not None
    if holder.path == module.rel:  # a global (or a class) of the test module itself
        if holder.owner is None:
            return ""
        return holder.owner if holder.owner in module.globals else None
    path = project.rootdir / holder.path
    imported = (
        n for n, ref in module.imports.items() if (ref.path, ref.attr) == (path, holder.owner)
    )
    name = next(imported, None)
    if name is not None or holder.owner is not None:
        return name  # a class is named only through an import of it
    dotted = project.dotted_name(path, module.path)
    if dotted is None:
        return None
    head, _, last = dotted.rpartition(".")
    if last in module.globals or last in module.imports:
        return None
    return draft.ensure_import(f"from {head} import {last}" if head else f"import {last}", last)


#: Leaked resources a built-in fixture puts back: resource -> what its fixture does.
_RESTORERS = {
    "env": "that snapshots os.environ and restores it",
    "cwd": "that goes back to the working directory after the test",
}
#: What a leak no fixture puts back asks for, by resource (a thread's is said apart).
_LEAK_ADVICE = dict.fromkeys(("file", "tempfile"), "write it under tmp_path instead")


def _leak_fix(
    plan: _Plan,
    draft: Draft,
    test: TestEffects,
    leak: Leak,
    who: str,
    covered: set[tuple[str, str | None]],
) -> int:
    """What a recorded leak that the source reading did not explain asks for."""
    func = test.function
    where = _where(test, func.lineno)
    what = _RESTORERS.get(leak.resource)
    if what is not None:
        name, block = _BUILTIN_FIXTURES[leak.resource]
        done = covered & {(leak.resource, leak.name), (leak.resource, None)}
        if done or not _use_fixture(draft, func, name, block):
            return 0
        covered.add((leak.resource, None))
        plan.change(where, f"{who} {leak.describe()}", f"a fixture, {name}, {what}")
        return 1
    started = test.of("thread") if leak.resource == "thread" else []
    if started:
        e = started[0]
        advice = (
            f" (started at {e.origin}: {e.origin_text}): stop and join it at teardown (a "
            "fixture that yields, then stops it)"
        )
    else:
        advice = ": " + _LEAK_ADVICE.get(leak.resource, "undo it at teardown")
    plan.advice.append(f"{who} {leak.describe()}{advice}")
    return 0


# -- set-up as a fixture (a cleaner's reset, a state-setter's set-up) -----------------------


def setup_fixture(plan: _Plan, source: str, target: TestEffects) -> str | None:
    """Turn test ``source``'s statements (asserts left out) into a fixture in
    ``target``'s module that ``target`` requests; its name (None: not possible)."""
    found = plan.test(source)
    if found is None:
        return None
    func, module = found.function, found.module
    body = [s for s in func.body if not isinstance(s, ast.Assert) and not is_docstring(s)]
    if not body:
        return None
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)]
    used = _free_names(body)
    if "self" in used or "cls" in used:
        return None
    draft = plan.draft(target.module)
    imports: list[tuple[str, str]] = []
    for name in sorted(used - set(params)):
        if hasattr(builtins, name):
            continue
        if target.module is module or module.rel == target.module.rel:
            if name in module.globals or name in module.imports:
                continue
            return None
        ref = module.imports.get(name)
        if ref is None or not ref.text or ref.text.startswith("from ."):
            return None
        mine = target.module.imports.get(name, ref)  # the target's own import of it
        clash = (mine.path, mine.attr, mine.external) != (ref.path, ref.attr, ref.external)
        if clash or name in target.module.globals:
            return None
        imports.append((ref.text, name))
    fixture = _fixture_name(draft, _short(source).removeprefix("test_") or "setup")
    needs = [p for p in params if p in used]
    indent = indent_of(module.lines[func.body[0].lineno - 1])
    lines: list[str] = []
    for stmt in body:
        chunk = "".join(module.lines[stmt.lineno - 1 : stmt.end_lineno or stmt.lineno])
        text = textwrap.dedent(chunk) if not indent else _dedent(chunk, indent)
        lines.extend(
            "    " + line if line.strip() else "" for line in text.rstrip("\n").split("\n")
        )
    block = [
        "@pytest.fixture",
        f"def {fixture}({', '.join(needs)}):",
        f'    """{_short(source)}\'s set-up, before the test {_SUFFIX}."""',
        *lines,
    ]
    for statement, name in imports:
        draft.ensure_import(statement, name)
    if not _use_fixture(draft, target.function, fixture, block):
        return None
    return fixture


def _free_names(body: list[ast.stmt]) -> set[str]:
    names = [node for stmt in body for node in ast.walk(stmt) if isinstance(node, ast.Name)]
    loaded = {n.id for n in names if isinstance(n.ctx, ast.Load)}
    return loaded - {n.id for n in names if not isinstance(n.ctx, ast.Load)}


def _dedent(text: str, indent: str) -> str:
    return "".join(
        line[len(indent) :] if line.startswith(indent) else line.lstrip()
        for line in text.splitlines(keepends=True)
    )


# -- per kind ---------------------------------------------------------------------------


def _list(plan: _Plan, effects: Sequence[Effect], what: str, fix: str) -> None:
    """A change at each of ``effects``: ``what`` names ``{via}`` (the call of the test
    that leads there), the effect's ``{detail}`` and its line's ``{text}``."""
    for e in effects:
        via = f"{e.via}() " if e.via else ""
        what_here = what.format(via=via, detail=e.detail, text=e.origin_text)
        plan.change(e.origin, what_here, fix)


def _shared_stream(plan: _Plan, others: Sequence[str]) -> bool:
    """The tests share the global ``random`` stream the suite seeds at import
    (their ``random`` leaks say where): seed per test, or a local generator."""
    seeded = next(
        (
            leak.detail.rpartition("seeded at import at ")[2]
            for nodeid in others
            for leak in plan.facts.leaks.get(nodeid, ())
            if leak.resource == "random" and "seeded at import at " in leak.detail
        ),
        None,
    )
    if seeded is None:
        return False
    names = " + ".join(_short(n) for n in others)
    plan.summary = (
        f"shares the global random stream seeded once at import ({seeded}) with {names}: "
        "what it draws depends on how much the tests before it drew"
    )
    plan.change(
        seeded,
        "seeds the global random stream once, at import",
        "seed per test (an autouse fixture calling random.seed(N)), or draw from a local "
        "random.Random(seed) the test creates or injects",
    )
    plan.reason = "no patch: which seed (or generator) the code should use is its decision"
    return True


@suggests("victim")
def _victim(plan: _Plan) -> None:
    facts = plan.facts
    polluters = facts.polluters[0] if facts.polluters else ()
    if _shared_stream(plan, polluters):
        return
    me = plan.test(facts.nodeid)
    names = " + ".join(_short(p) for p in polluters) or "another test"
    if facts.cleaners and me is not None:
        cleaner = facts.cleaners[0]
        fixture = setup_fixture(plan, cleaner, me)
        if fixture is not None:
            plan.summary = (
                f"fails after {names}; {_short(cleaner)} resets what it leaves: run that reset "
                f"before the test, as a fixture ({fixture})"
            )
            plan.at_test(
                me,
                f"runs on the state {names} leaves",
                f"request the fixture {fixture}: {_short(cleaner)}'s reset without its asserts",
            )
            read = [(p, t) for p in polluters if (t := plan.test(p)) is not None]
            plan.advice.extend(
                f"the polluter's line: {_where(t, e.site)} {_short(p)} {_doing(e)}"
                for p, t in read
                for e in t.lasting()
            )
            return
    for polluter in polluters:
        test = plan.test(polluter)
        if test is None:
            _unread_leaks(plan, polluter)
        else:
            restore_state(plan, test, facts.leaks.get(polluter, ()), _short(polluter))
    if plan.changes:
        plan.summary = f"fails after {names}: make " + (
            "them put back what they change"
            if len(polluters) > 1
            else "it put back what it changes"
        )
        return
    shared = _shared_fixtures(plan, polluters, facts.nodeid)
    if shared:
        plan.summary = f"fails after {names}: they share state through a fixture"
        plan.advice.extend(shared)
        plan.reason = "no patch: the state is shared through a fixture (see the advice)"
        return
    plan.summary = f"fails after {names}: find what {names} leaves behind"
    plan.advice.append(
        f"the source does not show what {names} changes: look for module globals, class "
        "attributes, caches or files it changes, and restore them at teardown"
    )


def _unread_leaks(plan: _Plan, nodeid: str) -> None:
    """What test ``nodeid`` left behind, without a place: its source cannot be read."""
    for leak in plan.facts.leaks.get(nodeid, ()):
        plan.change("", f"{_short(nodeid)} {leak.describe()}", "put it back after the test")


def _shared_fixtures(plan: _Plan, polluters: tuple[str, ...], victim: str) -> list[str]:
    """Fixtures of a wider scope that the polluters and the victim both request."""
    mine, project = plan.test(victim), plan.project
    if mine is None or project is None:
        return []
    wanted = _params(mine.function)
    out = []
    for polluter in polluters:
        theirs = plan.test(polluter)
        if theirs is None:
            continue
        for name in sorted(wanted & _params(theirs.function)):
            where, scope = _fixture_def(project, mine.module, name) or ("", "function")
            if scope == "function":
                continue
            out.append(
                f"{_short(polluter)} and {_short(victim)} share the {scope}-scoped fixture "
                f"{name} ({where}): what one changes there, the other sees; give each test its "
                f"own (a function-scoped fixture) or restore it after {_short(polluter)}"
            )
    return out


def _params(func: FunctionNode) -> set[str]:
    return {a.arg for a in (*func.args.args, *func.args.kwonlyargs)} - {"self", "cls"}


def _fixture_def(project: Project, near: Module, name: str) -> tuple[str, str] | None:
    """Where fixture ``name`` is defined (the test module, then conftest.py files up to
    the rootdir) and its scope."""
    conftests = (project.module(folder / "conftest.py") for folder in project.folders(near.path))
    for module in (near, *(m for m in conftests if m is not None)):
        stmt = module.globals.get(name)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.decorator_list:
            keywords = getattr(stmt.decorator_list[0], "keywords", [])  # the first decorator's
            scopes = [k.value.value for k in keywords
                      if k.arg == "scope" and isinstance(k.value, ast.Constant)]  # fmt: skip
            return f"{module.rel}:{stmt.lineno}", str(scopes[0]) if scopes else "function"
    return None


@suggests("brittle")
def _brittle(plan: _Plan) -> None:
    facts = plan.facts
    setters = facts.state_setters[0] if facts.state_setters else ()
    if _shared_stream(plan, setters):
        return
    names = " + ".join(_short(s) for s in setters) or "another test"
    plan.summary = f"fails alone: it needs what {names} does first; set that up in the test"
    me = plan.test(facts.nodeid)
    if me is None or not setters:
        plan.advice.append(
            f"give {_short(facts.nodeid)} its own set-up (it passes only after {names})"
        )
        return
    made = []
    for setter in setters:
        fixture = setup_fixture(plan, setter, me)
        if fixture is None:
            plan.drafts.clear()
            plan.advice.append(
                f"{_short(setter)}'s set-up cannot be lifted into a fixture as it is (it uses "
                f"self, or names its module does not import): give {_short(facts.nodeid)} its own"
            )
            return
        made.append(fixture)
    plan.at_test(
        me,
        f"relies on {names} having run",
        f"request {', '.join(made)}: the set-up of {names} without its asserts",
    )


@suggests("self-polluting")
def _self_polluting(plan: _Plan) -> None:
    facts = plan.facts
    me = plan.test(facts.nodeid)
    plan.summary = "fails on its second run in one process: it leaves state for itself"
    if me is None:
        _unread_leaks(plan, facts.nodeid)
        return
    if _copy_arguments(plan, me, _short(facts.nodeid)):
        plan.summary += ": work on a copy of its parametrize value"
        return
    if _one_shot_values(plan, me):
        plan.summary += ": give it a parametrize value that lasts"
        return
    if not restore_state(plan, me, facts.leaks.get(facts.nodeid, ()), _short(facts.nodeid)):
        plan.advice.append(
            "the source does not show what it leaves behind: look for module globals, caches "
            "or registries it fills, and make that idempotent or restore it"
        )
    else:
        plan.summary += ": put back what it changes"


def _copy_arguments(plan: _Plan, test: TestEffects, who: str) -> bool:
    """The smallest patch for a test that changes its own parametrize value in
    place: a copy first thing in the test (``copy.deepcopy(arg)``)."""
    mutated = mutated_arguments(test)
    if not mutated:
        return False
    draft = plan.draft(test.module)
    copies = [f"{name} = copy.deepcopy({name})  # its parametrize value is shared by every run"
              for name, _, _ in mutated]  # fmt: skip
    if not draft.prepend(test.function, copies):
        return False
    draft.ensure_import("import copy", "copy")
    for name, line, how in mutated:
        plan.change(
            _where(test, line),
            f"{who} changes its parametrize argument {name} in place ({name}{how}): the "
            "value is one object, so its next run in the process gets it changed",
            f"copy it first: {name} = copy.deepcopy({name})",
        )
    return True


def _one_shot_values(plan: _Plan, test: TestEffects) -> bool:
    """A parametrize value that is an iterator, used up by the first run: advice (a
    list instead changes what the test passes, so it is not patched)."""
    found = one_shot_values(test)
    for line, source in found:
        shown = source if len(source) <= 60 else source[:57] + "..."
        plan.change(
            _where(test, line),
            f"its parametrize value {shown} is an iterator: one object for every run, "
            "empty once the first run has iterated it",
            "pass a list or a tuple, or build the iterator inside the test from one",
        )
    return bool(found)


@suggests("network")
def _network(plan: _Plan) -> None:
    facts = plan.facts
    marker = facts.integration_marker
    root = plan.project.rootdir if plan.project else None
    calls = {
        (f"{v.op} {v.host}" + (f":{v.port}" if v.port else ""), _relative(v.detail, root))
        for v in facts.blocked
    }
    plan.summary = f"makes network calls: mock them, or mark it @pytest.mark.{marker}"
    for call, where in sorted(calls)[:5]:
        fix = "mock it (monkeypatch.setattr on the function that makes the call)"
        plan.change(where, f"calls {call}", fix)
    me = plan.test(facts.nodeid)
    if me is None:
        return
    names = [
        ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in me.function.decorator_list
    ]
    if f"pytest.mark.{marker}" in names:
        plan.reason = f"no patch: it is marked {marker} already"
        return
    draft = plan.draft(me.module)
    draft.ensure_import("import pytest", "pytest")
    indent = indent_of(me.module.lines[me.function.lineno - 1])
    first = min([me.function.lineno, *(d.lineno for d in me.function.decorator_list)])
    draft.insert_lines(first, [f"{indent}@pytest.mark.{marker}"])
    plan.at_test(
        me,
        "needs the network",
        f"or mark it @pytest.mark.{marker}: it keeps real network in a hunt (and CI can "
        "deselect it)",
    )


def _relative(location: str, root: Path | None) -> str:
    """``/abs/root/shop/x.py:10`` -> ``shop/x.py:10`` (inside the rootdir)."""
    if root is None or not location.startswith(str(root)):
        return location
    return location[len(str(root)) :].lstrip("/\\") or location


@suggests("random")
def _random(plan: _Plan) -> None:
    project, me = plan.project, plan.test(plan.facts.nodeid)
    plan.summary = "depends on random draws: draw from an injected, seeded generator"
    draws = plan.effects("random")
    _list(
        plan,
        draws[:5],
        "{via}draws from {detail} ({text})",
        "take a random.Random (or a seed) as a parameter; seed it in the test",
    )
    if not draws:
        plan.advice.append("seed or inject the generator the code under test draws from")
        return
    assert me is not None and project is not None
    inject = [e for e in draws if e.via and e.detail.startswith("random.")]
    if not inject:
        return
    path = inject[0].origin.rsplit(":", 1)[0]
    owner = project.module(path)
    ref = owner.imports.get("random") if owner else None
    if owner is None or ref is None or ref.external != "random" or ref.path is not None:
        return
    draft = plan.draft(me.module)
    holder = Holder(path, None, "random", "other")
    expr = _owner_expression(plan, draft, holder)
    if expr is None or not draft.add_param(me.function, "monkeypatch"):
        plan.drafts.clear()
        return
    draft.ensure_import("import random", "random")
    draft.prepend(me.function, [f'monkeypatch.setattr({expr}, "random", random.Random(0))'])
    plan.at_test(
        me,
        f"gets whatever {path} draws",
        f"inject a seeded generator: {expr}.random = random.Random(0) for the test (monkeypatch)",
    )
    plan.advice.append(
        "a seeded generator makes the test repeatable; if the values can collide in real use, "
        "that is a bug in the code, not only in the test"
    )


@suggests("time")
def _time(plan: _Plan) -> None:
    """By mechanism: a sleep racing a deadline (the clock profile showed it), or
    a date (the start time showed it): the value that breaks at that date."""
    facts, me = plan.facts, plan.test(plan.facts.nodeid)
    location = facts.reproducer.location if facts.reproducer is not None else ""
    if facts.stretch is not None:
        _sleep_margin(plan, me, facts.stretch, location)
        return
    when = ""
    if facts.reproducer is not None and facts.reproducer.steps[-1].now is not None:
        instant = datetime.fromtimestamp(facts.reproducer.steps[-1].now, timezone.utc)
        when = f" (it failed at {instant:%Y-%m-%d %H:%M:%S} UTC)"
    plan.summary = f"depends on the clock{when}: inject the clock or freeze it in the test"
    value = _breaking_value(me, location) if me is not None else None
    if me is not None and value is not None:
        plan.change(
            _where(me, value),
            f"the value that breaks at that date ({me.module.line(value).strip()})",
            "derive it from the time the test sets, or test the edge (a month's last "
            "day, Feb 29, New Year's Eve) with an explicit date",
        )
    reads = [e for e in plan.effects("clock") if not e.detail.endswith("sleep")]
    _list(
        plan,
        reads[:5],
        "{via}reads {detail}() ({text})",
        "take the time as a parameter, or freeze it in the test (time-machine, freezegun)",
    )
    plan.advice.append(
        f"replay the failure at its instant: hermetic-hunt replay {facts.flake_id} --run; "
        "test that date explicitly once the code takes the time as a parameter"
    )
    plan.reason = "no patch: freezing needs a library or a parameter the code does not have"


#: Calls that read the clock (their value is "now", not the value that breaks).
_CLOCK_CALLS = frozenset({"now", "today", "utcnow", "time", "monotonic", "perf_counter"})


def _reads_clock(node: ast.AST) -> bool:
    calls = (call.func for call in ast.walk(node) if isinstance(call, ast.Call))
    names = (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "") for f in calls)
    return any(name in _CLOCK_CALLS for name in names)


def _breaking_value(me: TestEffects, location: str) -> int | None:
    """The line of the value the failing assertion (at ``location``) compares that
    does not read the clock: a hard-coded date, or a computation from the date;
    the assertion's own line when the value is written in it. None: not found."""
    path, _, number = location.rpartition(":")
    if path != me.module.rel or not number.isdigit():
        return None
    line = int(number)
    check = next(
        (n for n in ast.walk(me.function) if isinstance(n, ast.Assert) and n.lineno == line),
        None,
    )
    if check is None:
        return None
    names = {n.id for n in ast.walk(check.test) if isinstance(n, ast.Name)}
    before = (n for n in ast.walk(me.function) if isinstance(n, ast.Assign) and n.lineno < line)
    # each name's latest assignment (of two on one line, the one walked last)
    latest = {t.id: n for n in sorted(before, key=lambda n: n.lineno) for t in n.targets
              if isinstance(t, ast.Name) and t.id in names}  # fmt: skip
    value = min((n.lineno for n in latest.values() if not _reads_clock(n.value)), default=None)
    if value is not None:
        return value
    inline = [n for n in ast.walk(check.test) if isinstance(n, (ast.Call, ast.BinOp, ast.Constant))]
    return line if inline else None


def _sleep_margin(plan: _Plan, me: TestEffects | None, stretch: float, location: str) -> None:
    """A sleep and a deadline too close: CI's slower sleeps cross it."""
    facts = plan.facts
    plan.summary = (
        f"the margin between the sleep and the deadline is too small (fails at >= "
        f"{stretch:.2f}x): on a busy CI machine sleeps last longer than asked"
    )
    clock = plan.effects("clock")
    _list(
        plan,
        [e for e in clock if e.detail.endswith("sleep")][:2],
        "{via}sleeps ({text})",
        "sleep well inside the deadline, or wait for the condition itself (an event, "
        "a poll with a generous timeout)",
    )
    deadline = location if me is not None and location.startswith(f"{me.module.rel}:") else ""
    if not deadline:
        deadline = next((e.origin for e in clock if not e.detail.endswith("sleep")), "")
    if deadline and me is not None:
        number = deadline.rpartition(":")[2]
        text = me.module.line(int(number)).strip() if number.isdigit() else ""
        plan.change(
            deadline,
            f"the deadline the sleep races ({text})",
            f"give it a margin a slow machine keeps: it fails once sleeps last "
            f"{stretch:.2f}x their duration",
        )
    plan.advice.append(
        f"replay it: hermetic-hunt replay {facts.flake_id} --run (the clock profile stretches "
        "the sleeps as the hunt did)"
    )
    plan.reason = "no patch: how much margin the code needs is its decision"


@suggests("hash-order")
def _hash_order(plan: _Plan) -> None:
    facts = plan.facts
    plan.summary = "depends on set or dict order (PYTHONHASHSEED): sort what it iterates"
    _list(
        plan,
        [e for e in plan.effects("set") if not e.origin_text.startswith("assert")][:5],
        "builds a set ({text}); its order follows PYTHONHASHSEED",
        "sort it (sorted(...)) before rendering or comparing",
    )
    if facts.reproducer is not None and facts.reproducer.hash_seed is not None:
        plan.advice.append(f"it fails with PYTHONHASHSEED={facts.reproducer.hash_seed}")
    plan.reason = "no patch: which order is right is the code's decision"


@suggests("concurrency")
def _concurrency(plan: _Plan) -> None:
    plan.summary = "races between threads: guard the shared state with a lock"
    _list(
        plan,
        plan.effects("thread")[:5],
        "{via}starts threads ({text})",
        "protect the state they share (threading.Lock around each read-modify-write)",
    )
    plan.reason = "no patch: where the lock goes is the code's decision"


@suggests("collision")
def _collision(plan: _Plan) -> None:
    facts = plan.facts
    pair = facts.reproducer if facts.reproducer is not None and facts.reproducer.together else None
    partner = pair.together[-1].nodeid if pair else "another worker's test"
    resource = pair.resource if pair and pair.resource else "a fixed path"
    plan.summary = (
        f"collides with {partner} over {resource} when two workers run them at the same time: "
        "give each test its own"
    )
    name = os.path.basename(resource.rstrip(os.sep))
    what = f"names the fixed path {resource!r}, which every worker shares"
    fix = (
        "make it per test with tmp_path (tmp_path_factory.mktemp for a module or session), or "
        "put worker_id in its name"
    )
    for nodeid in dict.fromkeys((facts.nodeid, partner)):
        plan.changes.extend(Change(where, what, fix) for where in _mentions(plan, nodeid, name))
    plan.advice.append(
        f"{resource}: under tmp_path each test (and each xdist worker) gets a folder of its own; "
        "a path that must stay fixed needs the worker_id fixture in its name "
        f'(f"{name}-{{worker_id}}")'
    )
    plan.reason = "no patch: which fixture owns the path is the code's decision"


def _mentions(plan: _Plan, nodeid: str, name: str) -> list[str]:
    """``path:line`` of the string literals naming ``name`` in ``nodeid``'s module."""
    parsed = NodeName.parse(nodeid)
    module = plan.project.module(parsed.path) if plan.project and parsed and name else None
    if module is None:
        return []
    lines = sorted(
        {
            node.lineno
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and name in node.value.split("/")
        }
    )  # fmt: skip
    return [f"{module.rel}:{line}" for line in lines[:5]]


@suggests("unexplained")
def _unexplained(plan: _Plan) -> None:
    plan.summary = "no cause found: no fix to suggest"
    plan.advice.append(
        f"see the evidence: hermetic-hunt show {plan.facts.flake_id}; hunt longer or in record "
        "mode (--hermetic-hunt-mode=record) to catch it again"
    )
    plan.reason = "no patch: isolation found no cause"


def describe(suggestion: Suggestion, *, indent: str = "  ") -> list[str]:
    """The suggestion as text lines (without the diff): summary, changes, advice."""
    s = suggestion  # every word may come from a database: control characters shown escaped
    out = [f"{clean(s.flake_id)} {clean(s.nodeid)}: {clean(s.kind)}: {clean(s.summary)}"]
    for change in s.changes:
        where = f"{clean(change.where)}: " if change.where else ""
        out.append(f"{indent}{where}{clean(change.what)}")
        out.append(f"{indent}  fix: {clean(change.fix)}")
    out.extend(f"{indent}- {clean(line)}" for line in s.advice)
    return out
