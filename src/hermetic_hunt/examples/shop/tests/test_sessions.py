from datetime import datetime, timedelta, timezone

import pytest


@pytest.fixture(scope="class")
def opened_at():
    # Read once per class: the tests below must see the same clock run on.
    return datetime.now(timezone.utc)


class TestSessionClock:
    def test_session_is_fresh(self, opened_at):
        assert datetime.now(timezone.utc) - opened_at < timedelta(minutes=5)

    def test_session_is_not_from_the_future(self, opened_at):
        assert opened_at <= datetime.now(timezone.utc)
