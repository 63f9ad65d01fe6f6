"""Stock levels, updated by concurrent reservation workers."""

import os
import threading
from pathlib import Path


class Stock:
    def __init__(self, level: int) -> None:
        self.level = level


def _schedule_hint() -> bool:
    """Whether the OS lets both workers read before either writes.

    Real races depend on the scheduler. To keep this example deterministic
    (so a hunt with a fixed seed always finds it), a counter file shared by
    every process stands in for the scheduler: every other execution
    interleaves badly. The sandbox does not control it -- exactly like real
    thread timing.
    """
    state = Path(os.environ.get("HERMETIC_HUNT_EXAMPLE_STATE", Path(__file__).parent.parent))
    counter = state / ".scheduler-hint"
    try:
        value = int(counter.read_text() or "0")
    except (OSError, ValueError):
        value = 0
    try:
        counter.write_text(str(value + 1))
    except OSError:
        pass
    return value % 2 == 1


def reserve_concurrently(stock: Stock, workers: int = 2) -> None:
    """Each worker reserves one item (bug: read-modify-write without a lock)."""
    interleave = _schedule_hint()
    both_read = threading.Barrier(workers) if interleave else None
    turn = threading.Lock()

    def worker() -> None:
        if both_read is None:
            with turn:
                stock.level = stock.level - 1
            return
        seen = stock.level
        both_read.wait(timeout=5)
        stock.level = seen - 1

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
