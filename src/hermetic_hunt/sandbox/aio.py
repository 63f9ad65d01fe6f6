"""Virtual asyncio time: a seeded attempt's event loops run on its virtual clock.

What a test sees is in docs/sandbox.md, 'Virtual asyncio time'. The loop's
clock is ``time.monotonic()`` (virtual already); under a frozen clock its
wait for the next timer in ``selector.select(timeout)`` would never end. So,
in a seeded attempt, the ``select`` of the running loop's selector:

1. polls without waiting; anything ready is returned at once;
2. when nothing outside the loop can wake it -- no file descriptor
   registered but the loop's own wake-up pipe, and no thread alive that
   this process started after its first attempt began (a plugin's own
   threads, such as pytest-rerunfailures' server, do not count) -- moves
   the virtual clock to the next timer (``advance(timeout)``) and returns;
3. otherwise waits in real time as a plain loop would, and moves the
   virtual clock by the timeout if nothing came.

Step 2 is what Go's ``synctest`` calls "durably blocked": only the loop's
own timers can happen next. ``select`` of any other selector
(``subprocess``'s own, a loop in another thread) is left alone. Under a
noisy profile the loop's ``call_later`` for a sleep's timer is stretched;
timeouts are not. The CPython details this relies on are in
:mod:`hermetic_hunt._compat`.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from typing import Any

from hermetic_hunt import _compat
from hermetic_hunt.sandbox.clock import SeededClock, note_baseline, threads_alive
from hermetic_hunt.sandbox.patches import Patches

_clock: SeededClock | None = None

#: The selector classes an event loop may use (whichever this platform has).
_NAMES = ("SelectSelector", "PollSelector", "EpollSelector", "DevpollSelector", "KqueueSelector")
_SELECTORS: tuple[type[Any], ...] = tuple(
    cls for name in _NAMES if isinstance(cls := getattr(selectors, name, None), type)
)


def _virtual(original: Callable[..., Any]) -> Callable[..., Any]:
    def select(self: Any, timeout: float | None = None) -> Any:
        clock = _clock
        if clock is None or timeout is None or timeout <= 0:
            return original(self, timeout)
        if _compat.running_loop_selector() is not self:
            return original(self, timeout)
        ready = original(self, 0)
        if ready:
            return ready
        if len(self.get_map()) > 1 or threads_alive():
            # Something outside the loop may still answer: wait as a plain loop would.
            ready = original(self, timeout)
            if ready:
                return ready
        clock.advance(timeout)
        return ready

    select.__wrapped__ = original  # type: ignore[attr-defined]
    return select


_SELECTS = {cls: _virtual(cls.select) for cls in _SELECTORS}


def _stretched(original: Callable[..., Any], sleep_done: Any) -> Callable[..., Any]:
    def call_later(self: Any, delay: float, callback: Any, *args: Any, context: Any = None) -> Any:
        clock = _clock
        if clock is not None and callback is sleep_done and delay > 0:
            delay = delay * clock.stretch()
        return original(self, delay, callback, *args, context=context)

    call_later.__wrapped__ = original  # type: ignore[attr-defined]
    return call_later


def install(patches: Patches, clock: SeededClock, noisy: bool) -> None:
    """Put the attempt's event loops on ``clock`` until ``patches`` is undone.

    ``noisy``: the clock profile stretches sleeps, so ``asyncio.sleep`` must
    stretch too (asyncio is imported with this module, so a test importing it
    later in the attempt sees stretched sleeps all the same).
    """
    global _clock
    _clock = clock
    note_baseline()
    for cls, select in _SELECTS.items():
        patches.setattr(cls, "select", select)
    if not noisy:
        return
    loop_class, sleep_done = _compat.asyncio_sleep_timer(asyncio)
    if loop_class is not None:
        patches.setattr(loop_class, "call_later", _stretched(loop_class.call_later, sleep_done))


def deactivate() -> None:
    """Event loops are back on real time (the attempt is over)."""
    global _clock
    _clock = None
