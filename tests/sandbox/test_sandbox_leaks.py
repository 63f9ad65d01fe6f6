"""A sandbox undoes exactly its own changes, in every mode; the test's own stay.

As in a plain pytest run, what a test changes in the process -- the
environment, the working directory, the timezone -- stays changed for the
tests after it (the engine's leak checks name it). What the sandbox itself
patched or set (time, entropy, sockets, ``hermetic.current()``, the marker's
``env``, ``fs="isolate"``) is put back exactly.
"""

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
from helpers import unset

from hermetic_hunt.sandbox import Sandbox, SandboxSpec, clock, entropy, netguard

NOW = 1_700_000_000.0
ZONES = ("JST-9", "EST5EDT", "NZST-12NZDT", "UTC0")  # POSIX rules: no tzdata needed
needs_tzset = pytest.mark.skipif(not hasattr(time, "tzset"), reason="no time.tzset here")


def snapshot() -> dict[str, Any]:
    """Everything a sandbox patches, which it must leave exactly as it found it."""
    return {
        "random": random.getstate(),
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
def test_a_thousand_attempts_in_every_mode_undo_exactly_the_sandboxs_own_patches(
    engine: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HH_CHANGED", "original")
    monkeypatch.setenv("HH_REMOVED", "original")
    monkeypatch.setenv("TZ", "CET-1CEST")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)
    work = tmp_path / "elsewhere"
    work.mkdir()
    try:
        before = snapshot()
        modes = specs(engine, tmp_path)
        assert snapshot() == before
        for index in range(1_000):
            spec = modes[index % len(modes)]
            engine.enter(spec)
            try:
                misbehave(index, work)
            finally:
                engine.exit(keep_journal=index % 10 == 0)
            if index % 97 == 0:
                assert snapshot() == before, spec
        assert snapshot() == before
        # ...and what the test itself changed stays changed, as in a plain run
        assert os.environ["HH_LEAKED"] == "999"
        assert os.environ["HH_CHANGED"] == "changed" and "HH_REMOVED" not in os.environ
        assert os.environ["TZ"] == ZONES[999 % len(ZONES)]
        assert os.getcwd() == str(work) and tempfile.tempdir == str(work)
    finally:
        monkeypatch.undo()
        time.tzset()


@needs_tzset
def test_the_tests_own_changes_stay_for_the_tests_after_it(
    engine: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "UTC0")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    unset(monkeypatch, "HH_SET")
    target = tmp_path / "inner"
    target.mkdir()
    try:
        engine.enter(SandboxSpec(seed=1, now=NOW, test_id="t.py::t"))
        try:
            os.environ["HH_SET"] = "1"
            os.environ["TZ"] = "JST-9"
            time.tzset()
            os.chdir(target)
        finally:
            engine.exit()
        assert os.environ["HH_SET"] == "1"
        assert time.localtime(NOW).tm_hour == time.gmtime(NOW + 9 * 3600).tm_hour
        assert os.getcwd() == str(target)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_markers_env_and_isolated_fs_are_undone_the_tests_own_variables_are_not(
    engine: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HH_MARKER", "before")
    monkeypatch.setenv("HOME", "/home/before")
    unset(monkeypatch, "HH_OWN")
    spec = SandboxSpec(
        seed=1, now=NOW, test_id="t.py::t", env=(("HH_MARKER", "during"),), fs="isolate"
    )
    engine.enter(spec)
    try:
        assert os.environ["HH_MARKER"] == "during" and os.getcwd() != str(tmp_path)
        os.environ["HH_OWN"] = "kept"
    finally:
        engine.exit()
    assert os.environ["HH_MARKER"] == "before" and os.environ["HOME"] == "/home/before"
    assert os.getcwd() == str(tmp_path)
    assert os.environ["HH_OWN"] == "kept"


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
