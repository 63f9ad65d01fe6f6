from datetime import date, datetime, timezone

from shop import billing


def test_next_billing_date():
    today = date.today()
    assert billing.next_billing_date() > today


def test_weekend_detection():
    assert billing.is_weekend(date(2024, 6, 1))
    assert not billing.is_weekend(date(2024, 6, 3))


def test_billing_started_in_the_past():
    # Stable: time only moves forward. A hunt's dates start today, so this
    # hard-coded instant is always behind them, as on every CI machine.
    assert datetime(2019, 6, 1, tzinfo=timezone.utc) < datetime.now(timezone.utc)
