import threading

from shop import rates


def test_quote_in_euros():
    # Fails after test_start_rate_refresher: its thread keeps changing RATES.
    assert rates.rate("EUR") == 0.92


def test_start_rate_refresher():
    thread = rates.start_refresher()  # never stopped: it outlives the test
    assert thread.is_alive()


def test_pound_is_listed():
    assert "GBP" in rates.RATES


def test_no_worker_threads_at_import():
    assert all(t.name != "rate-worker" for t in threading.enumerate())
