"""Frozen datetimes that libraries accept: sqlite3, isinstance, pickle, subclasses, arithmetic."""

from __future__ import annotations

import copy
import datetime
import importlib
import pickle
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from datetime import date, timedelta, timezone
from pathlib import Path

import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, datetimes

NOW = 1_709_251_199.0  # 2024-02-29 23:59:59 UTC
FROZEN_UTC = datetime.datetime(2024, 2, 29, 23, 59, 59, tzinfo=timezone.utc)
#: Every clock reading moves the virtual clock by a tick (1 us): a few readings
#: into an attempt, its datetimes are a few microseconds past its start.
CLOSE = timedelta(milliseconds=1)


def near(value: datetime.datetime, expected: datetime.datetime) -> bool:
    """``value`` is the attempt's time ``expected``, give or take the readings' ticks."""
    return expected <= value < expected + CLOSE


class EarlyStamp(datetime.datetime):
    """A subclass defined before any attempt (at import)."""


class EarlyDay(datetime.date):
    pass


@pytest.fixture
def frozen(engine: Sandbox) -> Iterator[Sandbox]:
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    yield engine
    if engine.active:
        engine.exit()


def test_now_today_and_utcnow_read_the_attempts_clock(frozen: Sandbox) -> None:
    first = datetime.datetime.now(timezone.utc)
    assert near(first, FROZEN_UTC)
    assert near(datetime.datetime.now(), datetime.datetime.fromtimestamp(NOW))
    assert near(datetime.datetime.today(), datetime.datetime.fromtimestamp(NOW))
    assert datetime.date.today() == date.fromtimestamp(NOW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # utcnow() is deprecated on 3.12+
        assert near(datetime.datetime.utcnow(), FROZEN_UTC.replace(tzinfo=None))
    assert datetime.datetime.now(timezone.utc) > first  # as on a real machine


def test_the_classes_and_their_instances_stay_the_real_ones(frozen: Sandbox) -> None:
    value = datetime.datetime.now()
    assert type(value) is datetime.datetime
    assert isinstance(value, datetime.datetime) and isinstance(value, date)
    assert isinstance(datetime.date.today(), datetime.date)
    assert not isinstance(datetime.date.today(), datetime.datetime)
    assert datetime.datetime is datetimes.real_datetime


def test_arithmetic_and_comparisons_work_on_frozen_values(frozen: Sandbox) -> None:
    start = datetime.datetime.now(timezone.utc)
    time.sleep(90)  # virtual: moves the clock
    later = datetime.datetime.now(timezone.utc)
    assert timedelta(seconds=90) < later - start < timedelta(seconds=90) + CLOSE
    assert near(start + timedelta(days=1), datetime.datetime(
        2024, 3, 1, 23, 59, 59, tzinfo=timezone.utc
    ))  # fmt: skip
    assert start < later and max(start, later) is later
    assert (datetime.date.today() - date(2024, 1, 1)).days >= 59
    assert NOW + 90 < datetime.datetime.now(timezone.utc).timestamp() < NOW + 90.001


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_frozen_values_and_the_classes_pickle_and_copy(frozen: Sandbox, protocol: int) -> None:
    values = [
        datetime.datetime.now(),
        datetime.datetime.now(timezone(timedelta(hours=5))),
        datetime.date.today(),
        EarlyStamp.now(),
        datetime.datetime,
        datetime.date,
        type(datetime.datetime.now()),
    ]
    for value in values:
        again = pickle.loads(pickle.dumps(value, protocol))
        assert again == value and type(again) is type(value)
        assert copy.deepcopy(value) == value
    blob = pickle.dumps(datetime.datetime.now(timezone.utc), protocol)
    frozen.exit()
    assert near(pickle.loads(blob), FROZEN_UTC)  # and they load outside the attempt


def test_subclasses_get_frozen_instances_of_themselves(frozen: Sandbox) -> None:
    class LateStamp(datetime.datetime):  # defined during the attempt
        pass

    for cls in (EarlyStamp, LateStamp):
        stamp = cls.now(timezone.utc)
        assert type(stamp) is cls and near(stamp, FROZEN_UTC)
        assert type(cls.today()) is cls
    assert type(EarlyDay.today()) is EarlyDay and EarlyDay.today() == date.fromtimestamp(NOW)


def test_sqlite3_binds_and_converts_frozen_datetimes(frozen: Sandbox) -> None:
    # Python 3.12 deprecates sqlite3's default datetime adapters; what users
    # rely on is that binding works under the sandbox as it does outside.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        conn = sqlite3.connect(":memory:", detect_types=sqlite3.PARSE_DECLTYPES)
        try:
            conn.execute("CREATE TABLE t (at TIMESTAMP, day DATE)")
            now, today = datetime.datetime.now(), datetime.date.today()
            conn.execute("INSERT INTO t VALUES (?, ?)", (now, today))
            assert conn.execute("SELECT at, day FROM t").fetchone() == (now, today)
        finally:
            conn.close()


SQLITE_IMPORTED_DURING_AN_ATTEMPT = textwrap.dedent(
    """
    import datetime, sys, warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    assert "sqlite3" not in sys.modules
    from hermetic_hunt.sandbox import Sandbox, SandboxSpec
    engine = Sandbox()
    assert "sqlite3" not in sys.modules, "the engine must not need sqlite3 pre-imported"
    engine.enter(SandboxSpec(seed=1, now=1709251199.0, test_id="t"))
    try:
        import sqlite3
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE t (at, day)")
        conn.execute("INSERT INTO t VALUES (?, ?)", (datetime.datetime.now(), datetime.date.today()))
    finally:
        engine.exit()
    conn.execute("INSERT INTO t VALUES (?, ?)", (datetime.datetime.now(), datetime.date.today()))
    print([row for row in conn.execute("SELECT count(*) FROM t")][0][0])
    conn.close()
    """
)


@pytest.mark.process
def test_sqlite3_imported_during_an_attempt_binds_datetimes_during_and_after_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SQLITE_IMPORTED_DURING_AN_ATTEMPT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


REGISTRY_MODULE = """
from datetime import date, datetime

RENDERERS = {datetime: "datetime", date: "date"}


def render(value):
    return RENDERERS[type(value)]


def stamp():
    return datetime.now()
"""


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    (tmp_path / f"{name}.py").write_text(REGISTRY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_imported_during_an_attempt_keys_its_registry_by_the_real_classes(
    engine: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(tmp_path, monkeypatch, "hh_registry_during")
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    try:
        module = importlib.import_module("hh_registry_during")
        assert module.render(datetime.datetime.now()) == "datetime"
        assert near(module.stamp(), datetime.datetime.fromtimestamp(NOW))
    finally:
        engine.exit()
    assert module.render(datetime.datetime.now()) == "datetime"
    assert module.render(date.today()) == "date"
    assert module.datetime is datetimes.real_datetime
    sys.modules.pop("hh_registry_during")


def test_from_datetime_import_datetime_references_are_frozen(
    engine: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(tmp_path, monkeypatch, "hh_registry_before")
    module = importlib.import_module("hh_registry_before")
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    try:
        assert near(module.stamp(), datetime.datetime.fromtimestamp(NOW))
    finally:
        engine.exit()
    assert not near(module.stamp(), datetime.datetime.fromtimestamp(NOW))
    sys.modules.pop("hh_registry_before")


def test_with_the_clock_off_datetimes_are_real(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t", clock="off"))
    try:
        assert datetime.datetime.now(timezone.utc) != FROZEN_UTC
        assert vars(datetime.datetime)["now"] is not datetimes.DATETIME_PATCH["now"]
    finally:
        engine.exit()


def test_the_patch_is_in_place_on_this_interpreter() -> None:
    assert datetimes.AVAILABLE
