"""Clock references bound before the attempt: found once, made to follow the attempt's clock.

An attempt patches the ``time`` module's functions (:data:`clock.TIME_PATCH`).
Code that took a reference to the real function before that (the forms
listed below) would read the real clock while the test's sleeps are
virtual: a TTL cache test that sleeps 90% of its TTL then sees no time pass
and is never caught.

:func:`follow` finds those references in the project's own modules (files
under the rootdir, not in a ``site-packages`` folder, not pytest's, xdist's,
hermetic's or ours) and replaces each with the patched function. The patched
functions read the real clock whenever no attempt is active, so the
replacement is permanent and costs nothing to undo; it is what a virtual
attempt would have handed out had the module been imported inside it.

Looked at, per module (each module once per process):

* module globals (``from time import monotonic``, ``now = time.time``);
* classes defined in the module (nested ones too): their attributes --
  put back as ``staticmethod`` so ``self.clock()`` still takes no argument --
  and their methods' defaults;
* functions defined in the module: ``__defaults__`` and ``__kwdefaults__``;
* objects of the module's own classes held in a module global: their
  instance attributes (one level).

What is not found (closures, containers, deeper object graphs, installed
libraries, C code) is in ``docs/limitations.md``, "Names bound before the attempt".

:func:`follow` is called before every attempt with a virtual clock; it
rescans only when ``sys.modules`` grew, and then only the modules it has not
seen: a per-process cost, not a per-attempt one (``benchmarks/bench_sandbox.py``).
"""

from __future__ import annotations

import functools
import os
import sys
from types import FunctionType, ModuleType
from typing import Any

from hermetic_hunt.sandbox.clock import REAL_FUNCTIONS, TIME_PATCH

#: ``id(real time function) -> patched function``; the real ones live as long
#: as the ``time`` module, so an id seen here is always one of them.
_SWAP: dict[int, Any] = {id(REAL_FUNCTIONS[name]): TIME_PATCH[name] for name in TIME_PATCH}
#: Top-level packages never touched: the test machinery keeps its real clock.
_SKIP = frozenset({"hermetic_hunt", "hermetic", "_pytest", "pytest", "pluggy", "xdist",
                   "execnet", "_hypothesis_pytestplugin"})  # fmt: skip
#: Modules looked at: name -> the module object (a module imported again under
#: the same name, as pytester's in-process runs do, is looked at again). The
#: object is kept, not its id: a dropped module's id can be reused by the next.
_seen: dict[str, object] = {}
#: ``sys.modules`` when :func:`follow` last looked: its size and newest entry
#: (name and object: a module dropped and imported again leaves both the size
#: and the newest name as they were).
_mark: tuple[int, str | None, object] = (0, None, None)
#: References replaced so far in this process (for tests and the benchmark).
replaced = 0


@functools.cache
def _roots_of(rootdir: str) -> tuple[str, ...]:
    plain = os.path.join(os.path.abspath(rootdir), "")
    real = os.path.join(os.path.realpath(rootdir), "")
    return (plain,) if plain == real else (plain, real)


def follow(rootdir: str) -> int:
    """Swap bound references in modules not seen yet; how many were swapped."""
    global _mark, replaced
    modules = sys.modules
    newest = next(reversed(modules), None)
    mark = (len(modules), newest, modules.get(newest) if newest is not None else None)
    if mark[0] == _mark[0] and mark[1] == _mark[1] and mark[2] is _mark[2]:
        return 0
    _mark = mark
    roots = _roots_of(rootdir)
    swapped = 0
    for name, module in list(modules.items()):
        if _seen.get(name) is module:
            continue
        _seen[name] = module
        if name.partition(".")[0] in _SKIP or not isinstance(module, ModuleType):
            continue
        path = getattr(module, "__file__", None)
        if (
            not isinstance(path, str)
            or not path.startswith(roots)
            or f"{os.sep}site-packages{os.sep}" in path
            or f"{os.sep}dist-packages{os.sep}" in path
        ):
            continue
        swapped += _module(module)
    replaced += swapped
    return swapped


def _module(module: ModuleType) -> int:
    try:
        namespace = vars(module)
    except TypeError:
        return 0
    name = module.__name__
    swapped = _swap_values(namespace)  # what is left are the module's own things
    for value in list(namespace.values()):
        if isinstance(value, type):
            if getattr(value, "__module__", None) == name:
                swapped += _class(value, set())
        elif isinstance(value, FunctionType):
            if value.__module__ == name:
                swapped += _function(value)
        elif getattr(type(value), "__module__", None) == name:
            swapped += _instance(value)
    return swapped


def _class(cls: type, done: set[int]) -> int:
    if id(cls) in done:
        return 0
    done.add(id(cls))
    swapped = 0
    for key, value in list(vars(cls).items()):
        new = _SWAP.get(id(value))
        if new is not None:
            try:
                setattr(cls, key, staticmethod(new))
            except (AttributeError, TypeError):  # a C type, a frozen class
                continue
            swapped += 1
        elif isinstance(value, FunctionType):
            swapped += _function(value)
        elif isinstance(value, (staticmethod, classmethod)):
            inner = value.__func__
            if isinstance(inner, FunctionType):
                swapped += _function(inner)
        elif isinstance(value, type) and value.__module__ == cls.__module__:
            swapped += _class(value, done)
    return swapped


def _function(function: FunctionType) -> int:
    defaults = function.__defaults__ or ()
    swapped = sum(1 for value in defaults if id(value) in _SWAP)
    if swapped:
        function.__defaults__ = tuple(_SWAP.get(id(value), value) for value in defaults)
    if function.__kwdefaults__:
        swapped += _swap_values(function.__kwdefaults__)
    return swapped


def _instance(obj: Any) -> int:
    attributes = getattr(obj, "__dict__", None)
    return _swap_values(attributes) if isinstance(attributes, dict) else 0


def _swap_values(mapping: dict[str, Any]) -> int:
    """Replace the real time functions among ``mapping``'s values; how many there were."""
    swapped = 0
    for key, value in list(mapping.items()):
        new = _SWAP.get(id(value))
        if new is not None:
            mapping[key] = new
            swapped += 1
    return swapped
