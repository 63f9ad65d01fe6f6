"""Every private name of pytest, pytest-xdist, hermetic-sandbox and CPython we touch.

One module, so that a version bump of any of them is checked in one place.
Each function says what it relies on, since which version it was verified,
and what happens when the private is gone (a degraded feature, never a
crash). ``tests/core/test_compat.py`` checks the CPython and asyncio ones against the
installed versions (the pytest and xdist ones are exercised by every hunt test).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

# -- CPython -----------------------------------------------------------------------


def environ_data() -> dict[Any, Any]:
    """A copy of the environment as the OS has it.

    ``os.environ._data`` (CPython 3.x): the encoded mapping, copied without
    decoding every value -- a third of the cost of ``dict(os.environ)``.
    Falls back to ``dict(os.environ)``.
    """
    data = getattr(os.environ, "_data", None)
    return dict(data) if data is not None else dict(os.environ)


def raw_signal() -> tuple[Callable[[int], Any], Callable[[int, Any], Any]]:
    """``getsignal`` and ``signal`` without the ``signal`` module's enum conversions.

    ``_signal.getsignal`` and ``_signal.signal`` (CPython 3.5+, checked on
    3.10-3.14): the C functions the ``signal`` module wraps. The wrappers turn
    every handler into an enum member -- a Python handler by trying and failing
    -- most of what a handler swap costs (one per batch of attempts handed on).
    The public functions when the private module is gone (slower, the same).
    """
    try:
        raw = importlib.import_module("_signal")
    except ImportError:
        return signal.getsignal, signal.signal
    return raw.getsignal, raw.signal


def asyncio_policy() -> Any:
    """The asyncio event loop policy if one was set, without creating one.

    ``asyncio.events._event_loop_policy`` (3.10-3.14); ``get_event_loop_policy()``
    would create the default policy as a side effect. None when asyncio was
    never imported or the private is gone.
    """
    return getattr(sys.modules.get("asyncio.events"), "_event_loop_policy", None)


def running_loop_selector() -> Any:
    """The selector of the asyncio loop running in this thread (None: none, or not one).

    ``asyncio.events._get_running_loop()`` (3.7+, what ``get_running_loop``
    reads, without raising) and the selector loops' ``_selector`` (3.4+).
    Without them the virtual loop clock is off: event loops wait in real
    time, as without hermetic-hunt (:mod:`hermetic_hunt.sandbox.aio`).
    """
    getter = getattr(sys.modules.get("asyncio.events"), "_get_running_loop", None)
    if getter is None:
        return None
    return getattr(getter(), "_selector", None)


def asyncio_sleep_timer(asyncio: Any) -> tuple[type[Any] | None, Any]:
    """``(BaseEventLoop, the callback of asyncio.sleep's timer)``.

    ``asyncio.sleep(d)`` schedules ``loop.call_later(d,
    futures._set_result_unless_cancelled, ...)`` (3.7-3.14): a call_later
    with that callback is a sleep, whoever imported ``sleep`` how (anyio's
    backend binds it at import). ``(None, None)`` when either is gone: then
    asyncio sleeps are not stretched by noisy clock profiles.
    """
    loop_class = getattr(getattr(asyncio, "base_events", None), "BaseEventLoop", None)
    callback = getattr(getattr(asyncio, "futures", None), "_set_result_unless_cancelled", None)
    if not isinstance(loop_class, type) or callback is None:
        return None, None
    return loop_class, callback


def type_dict(cls: type) -> dict[str, Any] | None:
    """The writable dict behind a type's read-only ``__dict__`` (CPython).

    ``gc.get_referents(cls.__dict__)`` hands over the one dict a mappingproxy
    wraps. None where the layout differs: the datetime freeze then falls back
    to real time for ``now()`` (see :mod:`hermetic_hunt.sandbox.datetimes`).
    """
    referents = gc.get_referents(cls.__dict__)
    if len(referents) == 1 and isinstance(referents[0], dict):
        return referents[0]
    return None


def type_modified() -> Callable[[type], None] | None:
    """``PyType_Modified`` from the C API: drops a type's attribute caches after a write."""
    function = getattr(getattr(ctypes, "pythonapi", None), "PyType_Modified", None)
    if function is None:
        return None
    function.argtypes = [ctypes.py_object]
    function.restype = None
    return function  # type: ignore[no-any-return]


def die_with_parent() -> None:
    """Linux: this (forked) process gets SIGKILL when its parent dies.

    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through libc; a no-op elsewhere. A
    round's child whose hunt was killed must not run on as an orphan.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9


# -- hermetic-sandbox (0.1.x) --------------------------------------------------------


def set_hermetic_handle(handle: Any) -> None:
    """Make ``hermetic.current()`` return ``handle`` (``hermetic._sandbox._active_handle``)."""
    import hermetic._sandbox as internal

    internal._active_handle = handle


# -- pytest (8.x, 9.x) ------------------------------------------------------------------


def plain_imports(package: str) -> None:
    """The modules of ``package`` imported from now on skip pytest's assertion rewriting.

    pytest rewrites every module of a distribution with a ``pytest11`` entry point:
    its ``AssertionRewritingHook`` (in ``sys.meta_path``) keeps the names in
    ``_must_rewrite`` (pytest 7-9). Our asserts are invariants, not a test's, so a
    rewrite buys nothing and costs a parse and a compile of each module in every
    process (each xdist worker's too) where pytest cannot keep its own cache
    (``PYTHONDONTWRITEBYTECODE``, a read-only site-packages), where the interpreter
    would read a ``.pyc``. Without the private: rewritten, as before.
    """
    for finder in sys.meta_path:
        names = getattr(finder, "_must_rewrite", None)
        if type(finder).__name__ == "AssertionRewritingHook" and isinstance(names, set):
            names.discard(package)


def quiet_progress(terminal: Any) -> None:
    """Turn off the per-file percentage (``TerminalReporter._show_progress_info``).

    A hunt's progress is per round; without the private the percentage stays.
    """
    if hasattr(terminal, "_show_progress_info"):
        terminal._show_progress_info = False


def add_stats(terminal: Any, category: str, items: list[Any]) -> None:
    """Add to ``terminalreporter.stats`` keeping its colour cache right (``_add_stats``)."""
    adder = getattr(terminal, "_add_stats", None)
    if adder is not None:
        adder(category, items)
    else:
        terminal.stats.setdefault(category, []).extend(items)


def silence_terminal(config: Any) -> None:
    """Point the terminal reporter's writer at /dev/null (``TerminalReporter._tw``).

    In a forked child that runs tests for the hunt: its parent prints. The
    child's file descriptors 1 and 2 are redirected too, so this only stops
    the reporter's own writes early.
    """
    terminal = config.pluginmanager.getplugin("terminalreporter")
    if terminal is None:
        return
    from _pytest._io import TerminalWriter

    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives with the child
    with contextlib.suppress(AttributeError, TypeError):
        terminal._tw = TerminalWriter(devnull)


# -- pytest-xdist (3.5-3.8) ----------------------------------------------------------------


def worker_interactor(config: Any) -> Any:
    """xdist's ``WorkerInteractor`` on a worker (registered without a name).

    Found by class name (``xdist.remote.WorkerInteractor``); None when xdist
    changed it -- then the worker runs its tests through xdist's own loop
    and the hunt degrades to one process per worker (a clear error says so).
    """
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "channel"):
            return plugin
    return None


def gateway_fds(interactor: Any) -> list[int]:
    """File descriptors of the execnet connection to the controller.

    ``channel.gateway._io`` (execnet 2.x: ``Popen2IO`` with ``outfile`` and
    ``infile``). A forked child closes them so that nothing it runs can write
    into the controller's channel. Empty when the layout differs.
    """
    fds: list[int] = []
    io = getattr(getattr(getattr(interactor, "channel", None), "gateway", None), "_io", None)
    for name in ("outfile", "infile"):
        handle: Any = getattr(io, name, None)
        with contextlib.suppress(AttributeError, ValueError, OSError):
            fds.append(int(handle.fileno()))
    return fds


def parse_tx_specs(config: Any) -> list[str]:
    """The gateway specs of ``-n``/``--tx``.

    ``xdist.workermanage.parse_tx_spec_config`` (3.7+), which 3.5 and 3.6
    call ``parse_spec_config`` (same signature, same result).
    """
    from xdist import workermanage

    parse = getattr(workermanage, "parse_tx_spec_config", None) or workermanage.parse_spec_config
    return [str(spec) for spec in parse(config)]


_MONOTONIC = time.monotonic  # the real clock, whatever a sandbox does later


def late_batches(config: Any, quiet: float, most: float) -> Iterator[tuple[Any, Any]]:
    """``(node, item_index)`` of the ``runtest_protocol_complete`` events xdist's
    controller had not handled when its loop stopped (``DSession.queue``, a
    ``queue.Queue`` of ``(name, kwargs)``; verified with xdist 3.5-3.8).

    Ctrl-C stops the controller's loop while the workers, interrupted too,
    still send what they had finished: waits until the queue has been quiet
    for ``quiet`` seconds, at most ``most`` seconds in all. Nothing when xdist
    changed the layout.
    """
    dsession = config.pluginmanager.getplugin("dsession")
    events = getattr(dsession, "queue", None)
    if events is None or not hasattr(events, "get"):
        return
    deadline = _MONOTONIC() + most
    while (left := deadline - _MONOTONIC()) > 0:
        try:
            name, kwargs = events.get(timeout=min(quiet, left))
        except (queue.Empty, TypeError, ValueError):
            return
        if name == "runtest_protocol_complete" and isinstance(kwargs, dict):
            yield kwargs.get("node"), kwargs.get("item_index")
