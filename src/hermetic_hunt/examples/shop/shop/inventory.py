"""Stock levels, updated by concurrent reservation workers."""

import threading


class Stock:
    def __init__(self, level: int) -> None:
        self.level = level
        self.lock = threading.Lock()


def reserve_concurrently(stock: Stock, workers: int = 2) -> None:
    """Each worker reserves one item (read-modify-write under the stock's lock)."""

    def worker() -> None:
        with stock.lock:
            stock.level = stock.level - 1

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
