"""Reversible patches: the hot path of every attempt.

Module namespaces (and plain dicts such as ``copyreg.dispatch_table``) are
patched through their ``__dict__``, several names in one C-level
``dict.update``; class attributes one at a time (a class's ``__dict__`` is
read-only). :meth:`Patches.undo` puts every original back, newest first, and
is exact: a name that was absent -- or, on a class, only inherited -- is
deleted again rather than left behind as a copy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

_MISSING: Any = object()
_DictPatch = tuple[dict[Any, Any], dict[Any, Any], tuple[Any, ...], "Callable[[], None] | None"]


class Patches:
    """The patches of one attempt, undone together."""

    __slots__ = ("_attrs", "_dicts")

    def __init__(self) -> None:
        self._dicts: list[_DictPatch] = []
        self._attrs: list[tuple[Any, str, Any]] = []

    def update(
        self,
        namespace: dict[Any, Any],
        values: Mapping[Any, Any],
        after: Callable[[], None] | None = None,
    ) -> None:
        """Set ``values`` in ``namespace`` (a module's ``__dict__`` or any dict).

        ``after`` runs once the originals are back (e.g. to flush a type cache).
        """
        try:
            saved = {name: namespace[name] for name in values}
            missing: tuple[str, ...] = ()
        except KeyError:
            saved = {name: namespace[name] for name in values if name in namespace}
            missing = tuple(name for name in values if name not in namespace)
        namespace.update(values)
        self._dicts.append((namespace, saved, missing, after))

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        """Set a class (or instance) attribute; undo deletes it if it was not its own."""
        own = getattr(obj, "__dict__", None)
        original = own.get(name, _MISSING) if own is not None else getattr(obj, name, _MISSING)
        setattr(obj, name, value)
        self._attrs.append((obj, name, original))

    def undo(self) -> None:
        attrs = self._attrs
        while attrs:
            obj, name, original = attrs.pop()
            if original is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(obj, name)
            else:
                setattr(obj, name, original)
        dicts = self._dicts
        while dicts:
            namespace, saved, missing, after = dicts.pop()
            namespace.update(saved)
            for name in missing:
                namespace.pop(name, None)
            if after is not None:
                after()
