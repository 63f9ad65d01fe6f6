import os

from shop import labels


def test_label_defaults_to_dollars():
    # Fails after test_checkout_in_euros: it sets os.environ directly.
    assert labels.label(1250) == "12.50 USD"


def test_checkout_in_euros():
    os.environ["SHOP_CURRENCY"] = "EUR"  # no monkeypatch: never put back
    assert labels.label(1250) == "12.50 EUR"


def test_label_rounds_to_cents():
    assert labels.label(5).startswith("0.05 ")
