"""SIGTERM and SIGHUP end a hunt the way Ctrl-C does; on one xdist worker, only that worker.

What each signal does to a hunt, at ``-n 0`` and under xdist, and the run's
status and exit status, is in docs/guarantees.md, "What survives which
fault". By default they kill the process on the spot (the run stays
``running``, the batch in hand is lost), so during a hunt the controller
turns them into ``KeyboardInterrupt``; the first signal interrupts, any
later one -- SIGINT too -- is noted and ignored until the controller has
stored what finished (:meth:`Interrupts.stored`). An xdist worker that a signal ending a process
by default (:data:`WORKER_ENDING`) reaches, while it runs a job, hands on
the lines of the steps that finished (:class:`Terminated`), then dies of the
signal as if it had no handler. A round's child keeps the default (it dies;
its parent hands on what it had finished).

Only the main thread may set handlers, and a handler someone else installed
(a test framework, the user's conftest) is left alone.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any, NoReturn

#: The signals that take the Ctrl-C path during a hunt.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
#: The signals an xdist worker hands on its finished steps for before it dies of
#: them: every one whose default is to end the process and that a handler can catch
#: (SIGKILL cannot be: what the worker had not yet sent is lost with it).
WORKER_ENDING = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM")
    if hasattr(signal, name)
)


class Terminated(BaseException):
    """A signal of :data:`WORKER_ENDING` reached an xdist worker while it ran a job.

    Raised by the worker's handler so that the job's finished steps are handed
    on (the code between here and the worker's loop only cleans up); the loop
    then calls :meth:`die`. A ``BaseException``: no ``except Exception`` of a
    plugin keeps the worker alive.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    def die(self) -> NoReturn:
        """End this process by the signal, as if no handler had caught it."""
        signal.signal(self.signum, signal.SIG_DFL)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {self.signum})
        os.kill(os.getpid(), self.signum)
        os._exit(128 + self.signum)  # only if the signal could not end it


class Interrupts:
    """The hunt's handlers for :data:`TERMINATING` (and, on the controller, SIGINT).

    On the controller (``controller=True``) they raise ``KeyboardInterrupt``;
    on an xdist worker, installed for as long as its job loop runs, they
    raise :class:`Terminated`.
    """

    def __init__(self, *, controller: bool) -> None:
        self.controller = controller
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}
        self._stored = False

    def install(self) -> Interrupts:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in TERMINATING if self.controller else WORKER_ENDING:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                self._previous[signum] = signal.signal(signum, self._handle)
        if self.controller and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if not self.controller:
            if len(self.received) == 1:
                raise Terminated(signum)
            return  # the worker is handing on what finished, then dies of the first
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
