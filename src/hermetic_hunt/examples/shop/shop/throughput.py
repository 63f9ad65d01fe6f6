"""How fast orders are packed, and a background packer that reports when it is done."""

import threading
import time


def pack(orders: list[str]) -> list[str]:
    return [order.upper() for order in orders]


def packing_rate(orders: list[str]) -> float:
    """Orders packed per second."""
    start = time.time()
    pack(orders)
    return len(orders) / (time.time() - start)


def pack_in_background(orders: list[str], done: list[int], delay: float) -> threading.Timer:
    """Pack ``orders`` after ``delay`` seconds on a timer thread; ``done[0]`` turns 1."""

    def work() -> None:
        pack(orders)
        done[0] = 1

    timer = threading.Timer(delay, work)
    timer.start()
    return timer
