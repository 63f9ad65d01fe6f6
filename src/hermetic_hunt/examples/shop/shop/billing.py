"""Subscriptions and billing dates."""

from datetime import date


def next_billing_date(today: date | None = None) -> date:
    """The day after ``today``... naively (bug: the last day of a month)."""
    today = today or date.today()
    return today.replace(day=today.day + 1)


def is_weekend(day: date) -> bool:
    return day.weekday() >= 5
