import asyncio

import pytest

from shop import quotes


def test_quote_arrives_within_the_checkout_timeout():
    # Flaky: a 100 ms timeout for a call that takes 90 ms; a slow answer times out.
    assert asyncio.run(quotes.quote("mug", timeout=0.1)) == 495


def test_quote_with_a_generous_timeout():
    assert asyncio.run(quotes.quote("tea", timeout=1.0)) == 395


def test_quote_times_out_when_the_courier_is_down():
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(quotes.quote("tea", timeout=0.001))
