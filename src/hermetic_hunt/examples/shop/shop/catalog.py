"""The product catalog: a registry that tests can extend (and must reset),
and a price feed that answers from a thread of its own."""

import queue
import threading

CORE = {"tea": 450, "mug": 1200, "honey": 899}
_REGISTRY: dict[str, int] = dict(CORE)


def register(sku: str, cents: int) -> None:
    _REGISTRY[sku] = cents


def reset() -> None:
    _REGISTRY.clear()
    _REGISTRY.update(CORE)


def products() -> list[str]:
    return sorted(_REGISTRY)


def price(sku: str) -> int:
    return _REGISTRY[sku]


class PriceFeed:
    """Prices served by a background thread, as a feed server would be."""

    def __init__(self) -> None:
        self._requests: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="price-feed", daemon=True)

    def start(self) -> "PriceFeed":
        self._thread.start()
        return self

    def _serve(self) -> None:
        while (request := self._requests.get()) is not None:
            sku, answer = request
            answer.put(price(sku))

    def quote(self, sku: str) -> int:
        answer: queue.Queue = queue.Queue()
        self._requests.put((sku, answer))
        return answer.get()

    def stop(self) -> None:
        self._requests.put(None)
        self._thread.join()
