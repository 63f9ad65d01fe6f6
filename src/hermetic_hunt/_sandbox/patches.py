"""A flat, reversible list of attribute patches (the hot path of every attempt)."""

from __future__ import annotations

from typing import Any

_MISSING = object()


class Patches:
    """Set attributes now; put every original back, in reverse, on :meth:`undo`."""

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        self._saved.append((obj, name, getattr(obj, name, _MISSING)))
        setattr(obj, name, value)

    def undo(self) -> None:
        saved = self._saved
        while saved:
            obj, name, original = saved.pop()
            if original is _MISSING:
                try:
                    delattr(obj, name)
                except AttributeError:
                    pass
            else:
                setattr(obj, name, original)
