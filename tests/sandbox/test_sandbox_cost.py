"""An attempt's cost does not depend on how many modules are loaded.

Timing lives in ``benchmarks/bench_sandbox.py``; here we prove the shape:
entering a sandbox makes the same patches whatever was imported, and those
patches still freeze ``from datetime import datetime`` in every module.
"""

from __future__ import annotations

import datetime
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec
from hermetic_hunt.sandbox.patches import Patches

NOW = 1_600_000_000.0
MODULES = 300


def patched_names(engine: Sandbox, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What one enter patches: (namespace size, names) per update, class attributes."""
    made: list[Any] = []
    update, setattr_ = Patches.update, Patches.setattr

    def counting_update(self: Patches, namespace: Any, values: Any, after: Any = None) -> None:
        made.append(sorted(map(str, values)))
        update(self, namespace, values, after)

    def counting_setattr(self: Patches, obj: Any, name: str, value: Any) -> None:
        made.append((obj.__name__, name))
        setattr_(self, obj, name, value)

    with monkeypatch.context() as patch:
        patch.setattr(Patches, "update", counting_update)
        patch.setattr(Patches, "setattr", counting_setattr)
        engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
        engine.exit()
    return made


@pytest.fixture
def importer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[Any]]]:
    """Imports MODULES synthetic modules when called (half with datetime references)."""
    package = tmp_path / "hh_cost_synth"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for index in range(MODULES):
        source = f"VALUE = {index}\n"
        if index % 2 == 0:
            source = "from datetime import date, datetime\n" + source
            source += "def stamp():\n    return datetime.now(), date.today()\n"
        (package / f"m{index}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = [f"hh_cost_synth.m{index}" for index in range(MODULES)]
    yield lambda: [importlib.import_module(name) for name in names]
    for name in [*names, "hh_cost_synth"]:
        sys.modules.pop(name, None)


def test_entering_patches_the_same_names_whatever_is_imported(
    engine: Sandbox, monkeypatch: pytest.MonkeyPatch, importer: Callable[[], list[Any]]
) -> None:
    few = patched_names(engine, monkeypatch)
    loaded = len(sys.modules)
    importer()
    assert len(sys.modules) == loaded + MODULES + 1
    assert patched_names(engine, monkeypatch) == few
    assert sum(len(entry) for entry in few if isinstance(entry, list)) < 40


def test_every_imported_modules_datetime_references_are_frozen(
    engine: Sandbox, importer: Callable[[], list[Any]]
) -> None:
    many_modules = importer()
    frozen = (datetime.datetime.fromtimestamp(NOW), datetime.date.fromtimestamp(NOW))
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    try:
        stamps = [module.stamp() for module in many_modules if hasattr(module, "stamp")]
    finally:
        engine.exit()
    # Each reading moves the clock a microsecond: the dates are the attempt's.
    assert len(stamps) == MODULES // 2
    start = datetime.datetime.fromtimestamp(NOW)
    assert all(
        start <= at < start + datetime.timedelta(milliseconds=1) and day == frozen[1]
        for at, day in stamps
    )
    assert many_modules[0].stamp()[1] != frozen[1]
