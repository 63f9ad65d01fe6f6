"""Process-wide settings (module globals: the classic order-dependence trap)."""

CURRENCY = "USD"
REGION = "US"


def switch_currency(code: str) -> None:
    global CURRENCY
    CURRENCY = code


def set_region(code: str) -> None:
    global REGION
    REGION = code
