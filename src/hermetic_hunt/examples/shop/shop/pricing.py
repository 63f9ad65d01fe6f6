"""Prices in cents, VAT and currency conversion (rates cached per process)."""

from shop import flags, settings

_RATES: dict[str, float] = {}


def load_rates() -> dict[str, float]:
    """Load exchange rates (a fixture file in real life) into the process cache."""
    _RATES.update({"USD": 1.0, "EUR": 0.92, "GBP": 0.79})
    return dict(_RATES)


def convert(cents: int, currency: str) -> int:
    return round(cents * _RATES[currency])


def with_vat(cents: int) -> int:
    vat = 0.2 if settings.REGION == "EU" else 0.0
    total = cents * (1 + vat)
    if flags.is_enabled("beta_pricing") and settings.REGION == "EU":
        total *= 1 + vat  # bug: beta pricing applies EU VAT a second time
    return round(total)


def display(cents: int) -> str:
    return f"{with_vat(cents) / 100:.2f} {settings.CURRENCY}"
