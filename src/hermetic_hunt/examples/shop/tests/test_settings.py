from shop import pricing, settings


def test_switch_currency_to_gbp():
    settings.switch_currency("GBP")  # never switched back: pollutes later tests
    assert settings.CURRENCY == "GBP"


def test_default_currency_is_usd():
    assert pricing.display(1000).endswith("USD")
