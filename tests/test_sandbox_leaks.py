"""No leaks between attempts: what a test changes is put back exactly, in every mode."""

from __future__ import annotations

import _socket
import datetime
import os
import random
import socket
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import hermetic
import pytest

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, clock, entropy, netguard

NOW = 1_700_000_000.0
ZONES = ("JST-9", "EST5EDT", "NZST-12NZDT", "UTC0")  # POSIX rules: no tzdata needed
needs_tzset = pytest.mark.skipif(not hasattr(time, "tzset"), reason="no time.tzset here")


def snapshot() -> dict[str, Any]:
    """Everything an attempt must leave exactly as it found it."""
    return {
        "tz": (time.tzname, time.timezone, time.altzone, time.daylight),
        "localtime": time.localtime(NOW),
        "random": random.getstate(),
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "tempdir": tempfile.tempdir,
        "datetime": {k: vars(datetime.datetime)[k] for k in ("now", "utcnow")},
        "date": vars(datetime.date)["today"],
        "datetime classes": (datetime.datetime, datetime.date),
        "time": {name: getattr(time, name) for name in clock.TIME_PATCH},
        "tzset": getattr(time, "tzset", None),
        "urandom": (os.urandom, random._urandom),  # type: ignore[attr-defined]
        "socket methods": {k: v for k, v in vars(socket.socket).items() if not k.startswith("__")},
        "socket module": {k: getattr(socket, k) for k in netguard.SOCKET_MODULE_PATCH},
        "_socket module": {k: getattr(_socket, k) for k in netguard.RAW_MODULE_PATCH},
        "handle": hermetic.current(),
        "meta_path": list(sys.meta_path),
    }


def record_journal(engine: Sandbox) -> Any:
    engine.enter(SandboxSpec(seed=1, now=NOW, mode="record", test_id="t.py::t"))
    try:
        time.time()
        os.urandom(4)
    finally:
        facts = engine.exit(keep_journal=True)
    return facts.journal


def specs(engine: Sandbox, tmp: Path) -> list[SandboxSpec]:
    base = SandboxSpec(seed=5, now=NOW, test_id="t.py::t")
    return [
        base,
        replace(base, mode="record"),
        replace(base, mode="replay", replay=record_journal(engine)),
        replace(base, clock="off"),
        replace(base, rng="off", network="off"),
        replace(base, rng="seed", env=(("HH_MARKER", "1"),)),
        replace(base, fs="isolate", scrub_env=True),
    ]


def misbehave(index: int, tmp: Path) -> None:
    """A test that changes everything and puts nothing back."""
    time.time()
    os.urandom(4)
    os.environ["HH_LEAKED"] = str(index)
    os.environ["HH_CHANGED"] = "changed"
    os.environ.pop("HH_REMOVED", None)
    if hasattr(time, "tzset"):
        os.environ["TZ"] = ZONES[index % len(ZONES)]
        time.tzset()
    random.seed(index)
    random.random()
    os.chdir(tmp)
    tempfile.tempdir = str(tmp)


@needs_tzset
def test_a_thousand_attempts_in_every_mode_leave_the_process_exactly_as_it_was(
    engine: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HH_CHANGED", "original")
    monkeypatch.setenv("HH_REMOVED", "original")
    monkeypatch.setenv("TZ", "CET-1CEST")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    try:
        before = snapshot()
        modes = specs(engine, tmp_path)
        assert snapshot() == before
        seen_leaks = set()
        for index in range(1_000):
            spec = modes[index % len(modes)]
            engine.enter(spec)
            try:
                misbehave(index, work)
            finally:
                facts = engine.exit(keep_journal=index % 10 == 0)
            seen_leaks.update(facts.leaks)
            if index % 97 == 0:
                assert snapshot() == before, spec
        assert snapshot() == before
        assert {"tz", "cwd", "env:HH_LEAKED", "env:HH_CHANGED", "env:HH_REMOVED"} <= seen_leaks
    finally:
        monkeypatch.undo()
        time.tzset()


@needs_tzset
def test_tz_is_resynced_when_the_test_restores_the_variable_but_not_tzset(
    engine: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "UTC0")
    time.tzset()
    try:
        before = time.localtime(NOW)
        engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
        try:
            os.environ["TZ"] = "JST-9"
            time.tzset()
            os.environ["TZ"] = "UTC0"  # e.g. monkeypatch's undo: no tzset()
        finally:
            facts = engine.exit()
        assert time.localtime(NOW) == before
        assert facts.leaks == ["tz"]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_reference_kept_past_an_attempt_behaves_like_the_real_function(
    engine: Sandbox,
) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    try:
        kept_time, kept_sleep, kept_urandom = time.time, time.sleep, os.urandom
        kept_now = datetime.datetime.now
        assert kept_time() == NOW
    finally:
        engine.exit()
    assert abs(kept_time() - clock.REAL_TIME()) < 60
    assert abs(kept_now().timestamp() - clock.REAL_TIME()) < 60
    kept_sleep(0)
    assert len(kept_urandom(8)) == 8
    assert entropy._source is None


def test_a_sandbox_that_fails_to_open_leaves_nothing_behind(engine: Sandbox) -> None:
    before = snapshot()
    bad = SandboxSpec(seed=1, now=NOW, test_id="t.py::t", network=("host:notaport",))
    with pytest.raises(ValueError):
        engine.enter(bad)
    assert not engine.active
    assert snapshot() == before


def test_sandboxes_do_not_nest(engine: Sandbox) -> None:
    engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
    try:
        with pytest.raises(hermetic.SandboxActiveError):
            engine.enter(SandboxSpec(seed=2, now=NOW, test_id="t.py::t"))
    finally:
        engine.exit()
    assert engine.exit().counts == {}  # exit without an open sandbox is a no-op
