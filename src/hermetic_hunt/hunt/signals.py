"""SIGTERM and SIGHUP end a hunt the way Ctrl-C does.

What ``timeout``, ``docker stop``, a closed terminal and a cancelled CI job
send: by default they kill the process on the spot, the run stays
``running`` and the batch in hand is lost. During a hunt the controller and
its xdist workers turn them into ``KeyboardInterrupt``, so they take the
Ctrl-C path (every finished attempt stored, the run ``interrupted``, exit
status 2). The first signal interrupts; any later one -- SIGINT too, on the
controller -- is noted and ignored until the controller has stored what
finished (:meth:`Interrupts.stored`), so pressing Ctrl-C again or a second
``docker stop`` never cuts the final write short. A round's child keeps the
default (it dies; its parent hands on what it had finished).

Only the main thread may set handlers, and a handler someone else installed
(a test framework, the user's conftest) is left alone.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

#: The signals that take the Ctrl-C path during a hunt.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """The hunt's handlers for :data:`TERMINATING` (and, on the controller, SIGINT)."""

    def __init__(self, *, controller: bool) -> None:
        self.controller = controller
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}
        self._stored = False

    def install(self) -> Interrupts:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in TERMINATING:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                self._previous[signum] = signal.signal(signum, self._handle)
        if self.controller and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if len(self.received) == 1 or self._stored:
            raise KeyboardInterrupt(signal.Signals(signum).name)
        # A second signal while the first is being handled: what finished
        # is being stored; the hunt ends as soon as it is.

    def stored(self) -> None:
        """What finished is stored: a signal from now on interrupts again."""
        self._stored = True

    def uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    @property
    def name(self) -> str:
        """The first signal received, e.g. ``SIGTERM`` ("" when none)."""
        return signal.Signals(self.received[0]).name if self.received else ""
