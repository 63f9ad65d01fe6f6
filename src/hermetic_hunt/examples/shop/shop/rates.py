"""Exchange rates, refreshed by a background thread once one is started."""

import threading

RATES: dict[str, float] = {"EUR": 0.92, "GBP": 0.79}
_refreshers: list[tuple[threading.Event, threading.Event]] = []


def start_refresher() -> threading.Thread:
    """Start the refresher (bug: nothing ever stops it; every later read refreshes)."""
    wake, done = threading.Event(), threading.Event()

    def run() -> None:
        while True:
            wake.wait()
            wake.clear()
            RATES["EUR"] = round(RATES["EUR"] + 0.01, 2)
            done.set()

    thread = threading.Thread(target=run, name="rate-refresher", daemon=True)
    thread.start()
    _refreshers.append((wake, done))
    return thread


def rate(code: str) -> float:
    # A running refresher updates the rates before they are read. (Deterministic
    # here: the example suite must find the same flakes every time.)
    for wake, done in _refreshers:
        wake.set()
        done.wait(timeout=5)
        done.clear()
    return RATES[code]
