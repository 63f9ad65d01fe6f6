from datetime import date

from shop import billing


def test_next_billing_date():
    today = date.today()
    assert billing.next_billing_date() > today


def test_weekend_detection():
    assert billing.is_weekend(date(2024, 6, 1))
    assert not billing.is_weekend(date(2024, 6, 3))
