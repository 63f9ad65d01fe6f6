"""Frozen ``datetime.datetime.now()`` / ``date.today()`` that libraries accept.

``datetime.datetime`` is a C type whose classmethods cannot be patched, so
while an attempt runs the ``datetime`` module (and every module that did
``from datetime import datetime``) sees :class:`FrozenDatetime`, a subclass
whose ``now``/``utcnow``/``today`` read the attempt's clock.

Three choices keep it invisible to the code under test:

* Every *instance* is a real ``datetime``/``date``: the constructor and the
  C classmethods (``fromtimestamp``, ``fromisoformat``, ...) build real
  objects. So ``sqlite3`` binds them with its default adapters, ``pickle``
  round-trips them, and ``type(x) is real_datetime`` holds.
* ``isinstance(x, datetime.datetime)`` stays true for real instances while
  the frozen class is in place (metaclass ``__instancecheck__``).
* With no attempt active the classes behave exactly like the real ones, so
  a reference that outlives an attempt is harmless.

Finding ``from datetime import datetime`` references must not cost a scan
of every loaded module per attempt: :class:`ReferenceIndex` scans a module
once, when it first appears in ``sys.modules``, and keeps the places to
patch; entering an attempt patches just those places.
"""

from __future__ import annotations

import datetime as _dt
import sys
from types import ModuleType
from typing import Any

from hermetic_hunt._sandbox.clock import ClockSource
from hermetic_hunt._sandbox.patches import Patches

real_datetime = _dt.datetime
real_date = _dt.date

_active: ClockSource | None = None


def set_clock(source: ClockSource | None) -> None:
    global _active
    _active = source


class _FrozenDateMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        if cls is FrozenDate:
            return isinstance(obj, real_date)
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub: type) -> bool:
        if cls is FrozenDate:
            return issubclass(sub, real_date)
        return type.__subclasscheck__(cls, sub)


class _FrozenDatetimeMeta(_FrozenDateMeta):
    def __instancecheck__(cls, obj: object) -> bool:
        if cls is FrozenDatetime:
            return isinstance(obj, real_datetime)
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub: type) -> bool:
        if cls is FrozenDatetime:
            return issubclass(sub, real_datetime)
        return type.__subclasscheck__(cls, sub)


class FrozenDate(real_date, metaclass=_FrozenDateMeta):
    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is FrozenDate:
            return real_date(*args, **kwargs)
        return real_date.__new__(cls, *args, **kwargs)

    @classmethod
    def today(cls) -> Any:
        source = _active
        if source is None:
            return real_date.today()
        return real_date.fromtimestamp(source.wall())


class FrozenDatetime(real_datetime, metaclass=_FrozenDatetimeMeta):
    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is FrozenDatetime:
            return real_datetime(*args, **kwargs)
        return real_datetime.__new__(cls, *args, **kwargs)

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        source = _active
        if source is None:
            return real_datetime.now(tz)
        return real_datetime.fromtimestamp(source.wall(), tz)

    @classmethod
    def utcnow(cls) -> Any:
        source = _active
        if source is None:
            return real_datetime.now(_dt.timezone.utc).replace(tzinfo=None)
        return real_datetime.fromtimestamp(source.wall(), _dt.timezone.utc).replace(tzinfo=None)

    @classmethod
    def today(cls) -> Any:
        return cls.now()


# Pickling the *class* (pickle.dumps(datetime.datetime)) looks it up by name:
# keep the real names so it resolves to whatever datetime.datetime is.
for _cls, _name in ((FrozenDatetime, "datetime"), (FrozenDate, "date")):
    _cls.__module__ = "datetime"
    _cls.__qualname__ = _name
    _cls.__name__ = _name

#: Top-level packages whose references are never rewritten: the datetime
#: machinery itself and the test runner's own timing (durations stay real).
SKIP_PACKAGES = frozenset(
    {
        "datetime",
        "_datetime",
        "_strptime",
        "hermetic",
        "hermetic_hunt",
        "_pytest",
        "pytest",
        "pluggy",
        "xdist",
        "execnet",
    }
)


class ReferenceIndex:
    """Where loaded modules hold ``datetime``/``date`` class references.

    :meth:`refresh` is O(1) while no module was imported since the last call;
    otherwise it scans only modules it has not seen.
    """

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._refs: list[tuple[ModuleType, str, bool]] = []
        self._modules_seen = -1

    def refresh(self) -> None:
        modules = sys.modules
        if len(modules) == self._modules_seen:
            return
        for name, module in list(modules.items()):
            if module is None or self._seen.get(name) == id(module):
                continue
            self._seen[name] = id(module)
            if name.partition(".")[0] in SKIP_PACKAGES:
                continue
            try:
                namespace = vars(module)
            except TypeError:
                continue
            for attr, value in list(namespace.items()):
                if value is real_datetime:
                    self._refs.append((module, attr, True))
                elif value is real_date:
                    self._refs.append((module, attr, False))
        self._modules_seen = len(modules)

    @property
    def size(self) -> int:
        return len(self._refs)

    def install(self, patches: Patches, deep: bool) -> None:
        patches.set(_dt, "datetime", FrozenDatetime)
        patches.set(_dt, "date", FrozenDate)
        if not deep:
            return
        self.refresh()
        for module, attr, is_datetime in self._refs:
            current = module.__dict__.get(attr)
            if is_datetime and current is real_datetime:
                patches.set(module, attr, FrozenDatetime)
            elif not is_datetime and current is real_date:
                patches.set(module, attr, FrozenDate)
