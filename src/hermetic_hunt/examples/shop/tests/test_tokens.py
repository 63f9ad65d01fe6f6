import time

from shop.tokens import TokenCache


def test_token_survives_most_of_its_ttl():
    # Flaky: 90 ms of "work" against a 100 ms TTL. The cache's clock is bound as
    # a default argument (clock=time.monotonic); on a loaded machine the sleep
    # overshoots by more than 11% now and then, and the token is gone.
    cache = TokenCache(ttl=0.1)
    cache.put("api", "s3cr3t")
    time.sleep(0.09)
    assert cache.get("api") == "s3cr3t"


def test_token_is_there_right_away():
    cache = TokenCache(ttl=1.0)
    cache.put("api", "s3cr3t")
    assert cache.get("api") == "s3cr3t"


def test_token_expires_after_its_ttl():
    cache = TokenCache(ttl=0.01)
    cache.put("api", "s3cr3t")
    time.sleep(0.02)  # twice the TTL: however long the sleep lasts, it is gone
    assert cache.get("api") is None
