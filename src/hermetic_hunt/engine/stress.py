"""CPU stress: busy processes that compete with the tests for the CPU.

A ``stress`` round of a record-mode (or sandbox-off) hunt runs while the
hunt itself keeps ``n`` extra processes spinning on the same cores -- never
more than the hunt's own worker count -- so a test that only passes on an
idle machine (a sleep racing a TTL, a thread racing a timeout) shows it, as
on a loaded CI runner. Isolation probes that check such a failure run under
the same stress, one at a time.

Each busy process is a plain ``python -c 'while 1: pass'`` in isolated
mode (no site, no environment options), in its own session, killed when
the stress ends (and, should the hunt die first, it ends itself when its
parent is gone: it checks once a second).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

#: The busy loop: spins, and leaves once its parent process is gone.
BUSY_LOOP = (
    "import os, time\n"
    "parent = os.getppid()\n"
    "while os.getppid() == parent:\n"
    "    end = time.monotonic() + 1.0\n"
    "    while time.monotonic() < end:\n"
    "        pass\n"
)


class CpuStress:
    """``n`` busy processes from :meth:`start` to :meth:`stop` (a context manager too)."""

    def __init__(self, processes: int) -> None:
        self.processes = max(0, processes)
        self._running: list[subprocess.Popen[bytes]] = []

    @property
    def running(self) -> int:
        return len(self._running)

    def start(self) -> int:
        """Start the busy processes; how many run (0 when none could start)."""
        while len(self._running) < self.processes:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", BUSY_LOOP],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError:
                break
            self._running.append(proc)
        return len(self._running)

    def stop(self) -> None:
        """Kill the busy processes and reap them."""
        running, self._running = self._running, []
        for proc in running:
            with contextlib.suppress(OSError):
                proc.kill()
        for proc in running:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.wait(timeout=10)

    def __enter__(self) -> CpuStress:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
