import time

from shop.sessions import SessionCache


def test_session_survives_until_its_ttl():
    # Flaky: 45 ms of "work" against a 50 ms TTL. On a loaded machine the
    # sleep overshoots by more than 11% now and then, and the session is gone.
    cache = SessionCache(ttl=0.05)
    cache.put("t0k3n", "ada")
    time.sleep(0.045)
    assert cache.get("t0k3n") == "ada"


def test_session_is_there_right_away():
    cache = SessionCache(ttl=1.0)
    cache.put("t0k3n", "ada")
    assert cache.get("t0k3n") == "ada"


def test_session_expires_after_its_ttl():
    cache = SessionCache(ttl=0.005)
    cache.put("t0k3n", "ada")
    time.sleep(0.01)  # twice the TTL: however long the sleep lasts, it is gone
    assert cache.get("t0k3n") is None
