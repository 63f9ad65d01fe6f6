"""Tests for hermetic_hunt._compat: every private we rely on is there in the installed versions.

Each function of ``_compat`` degrades when its private is gone; these tests fail
instead, so that a version bump that removes one is seen here first, not as a
quietly degraded feature.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from hermetic_hunt import _compat


def test_the_environment_copy_is_the_encoded_mapping_of_os_environ() -> None:
    data = _compat.environ_data()
    assert data == dict(os.environ._data)  # type: ignore[attr-defined]
    assert data is not os.environ._data  # type: ignore[attr-defined]  # a copy


def test_the_asyncio_privates_are_present() -> None:
    assert _compat.asyncio_sleep_timer(asyncio) != (None, None)

    async def selector() -> object:
        return _compat.running_loop_selector()

    assert asyncio.run(selector()) is not None
    assert _compat.running_loop_selector() is None  # no loop runs here


def test_the_writable_type_dict_and_type_modified_are_reachable() -> None:
    class Holder:
        value = 1

    namespace = _compat.type_dict(Holder)
    modified = _compat.type_modified()
    assert namespace is not None and modified is not None
    namespace["value"] = 2
    modified(Holder)
    assert Holder.value == 2


def test_the_raw_signal_functions_are_the_ones_behind_the_signal_module() -> None:
    getsignal, setsignal = _compat.raw_signal()
    assert getsignal is not signal.getsignal and setsignal is not signal.signal
    # (== : SIG_DFL and SIG_IGN come back as ints, where the module makes enums;
    # a process started in the background of a shell ignores SIGINT)
    assert getsignal(signal.SIGINT) == signal.getsignal(signal.SIGINT)
    previous = setsignal(signal.SIGUSR1, mine := lambda signum, frame: None)
    try:
        assert signal.getsignal(signal.SIGUSR1) is mine and getsignal(signal.SIGUSR1) is mine
    finally:
        setsignal(signal.SIGUSR1, previous)


def test_hermetic_hunts_modules_after_the_plugin_are_not_rewritten_by_pytest() -> None:
    import hermetic_hunt.hunt.controller  # (imported after the plugin, in any session)

    hooks = [f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook"]
    assert hooks and all("hermetic_hunt" not in f._must_rewrite for f in hooks)  # type: ignore[attr-defined]
    loader = hermetic_hunt.hunt.controller.__loader__
    assert type(loader).__name__ != "AssertionRewritingHook"
