"""Price labels: the currency comes from the environment (SHOP_CURRENCY)."""

import os


def currency() -> str:
    return os.environ.get("SHOP_CURRENCY", "USD")


def label(cents: int) -> str:
    return f"{cents / 100:.2f} {currency()}"
