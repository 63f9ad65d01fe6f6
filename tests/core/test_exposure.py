"""What CI will see of a finding, budgets, groups and dates: the pure parts."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermetic_hunt.errors import BadOption
from hermetic_hunt.isolate.dates import candidate_instants, every_day
from hermetic_hunt.isolate.groups import group, sample, substitute
from hermetic_hunt.models import (
    CI_EXPOSURES,
    EXPOSURES,
    Attempt,
    Failure,
    Step,
    exposure,
    exposure_words,
    function_of,
)
from hermetic_hunt.options import parse_isolate_budget
from hermetic_hunt.report.words import dates_text


@pytest.mark.parametrize(
    ("kinds", "status", "facts", "expected"),
    [
        (["random"], "flaky", {}, "normal"),
        (["hash-order"], "flaky", {}, "normal"),
        (["concurrency"], "not-idempotent", {}, "normal"),
        (["victim"], "flaky", {"default_order": True}, "normal"),
        (["victim"], "flaky", {"default_order": False}, "order"),
        (["brittle"], "flaky", {}, "order"),
        (["self-polluting"], "not-idempotent", {}, "repeat"),
        ([], "not-idempotent", {}, "repeat"),
        (["time"], "flaky", {"fails_now": True}, "normal"),
        (["time"], "flaky", {"fails_now": False}, "dates"),
        (["time"], "flaky", {"fails_now": False, "past_only": True}, "past"),
        (["victim", "time"], "flaky", {"past_only": True}, "order"),
        (["time"], "flaky", {}, "normal"),  # a clock profile: any day
        (["unexplained"], "flaky", {}, "order"),
        ([], "flaky", {}, "order"),
        ([], "broken", {}, "normal"),
        ([], "sandbox-incompatible", {}, "sandbox"),
    ],
)
def test_each_finding_gets_the_exposure_its_evidence_shows(
    kinds: list[str], status: str, facts: dict[str, bool], expected: str
) -> None:
    assert exposure(kinds, status=status, **facts) == expected


def test_exposures_are_ranked_from_what_breaks_ci_first() -> None:
    assert EXPOSURES == ("normal", "order", "repeat", "dates", "sandbox", "past")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("300", (300, None, False)),
        ("15m", (None, 900.0, False)),
        ("300,15m", (300, 900.0, False)),
        ("15m 300", (300, 900.0, False)),
        ("auto", (None, None, True)),
        ("200,auto", (200, None, True)),
    ],
)
def test_the_isolation_budget_is_probes_time_or_both(
    text: str, expected: tuple[int | None, float | None, bool]
) -> None:
    assert parse_isolate_budget(text) == expected


@pytest.mark.parametrize("text", ["lots", "0", "", "10m,20m", "300,400", "10m,auto"])
def test_a_bad_isolation_budget_is_a_one_line_error(text: str) -> None:
    with pytest.raises(BadOption) as info:
        parse_isolate_budget(text, "--budget")
    assert str(info.value).startswith("--budget: ")
    assert "\n" not in str(info.value)


def test_a_parametrization_belongs_to_its_test_function() -> None:
    assert function_of("t.py::test_x[1-a]") == "t.py::test_x"
    assert function_of("t.py::TestC::test_x[a[b]]") == "t.py::TestC::test_x"
    assert function_of("t.py::test_x") == "t.py::test_x"


def _attempts(nodeid: str, outcomes: str, location: str = "t.py:3") -> list[Attempt]:
    return [
        Attempt(nodeid, "failed", failure=Failure("AssertionError", "", location))
        if o == "F"
        else Attempt(nodeid, "passed")
        for o in outcomes
    ]


def test_parametrizations_failing_alike_are_one_group_led_by_the_most_failing() -> None:
    tests = {
        "t.py::test_x[0]": _attempts("t.py::test_x[0]", "PF"),
        "t.py::test_x[1]": _attempts("t.py::test_x[1]", "FFP"),
        "t.py::test_x[2]": _attempts("t.py::test_x[2]", "PF"),
        "t.py::test_x[3]": _attempts("t.py::test_x[3]", "PF", location="t.py:9"),
        "t.py::test_y": _attempts("t.py::test_y", "PF"),
    }
    groups = group(tests)
    assert [g.members for g in groups] == [
        ("t.py::test_x[1]", "t.py::test_x[0]", "t.py::test_x[2]"),
        ("t.py::test_x[3]",),
        ("t.py::test_y",),
    ]


def test_a_sample_spreads_over_the_group() -> None:
    members = [f"m{i}" for i in range(75)]
    assert sample(members) == ["m0", "m37", "m74"]
    assert sample(members[:2]) == ["m0", "m1"]


def test_a_member_takes_the_representatives_place_in_its_reproducer() -> None:
    steps = [Step("t.py::p", 1, 1.0, attempt_id=4), Step("t.py::x[0]", 2, 2.0, attempt_id=5)]
    assert substitute(steps, "t.py::x[0]", "t.py::x[7]") == [
        Step("t.py::p", 1, 1.0, attempt_id=4),
        Step("t.py::x[7]", 2, 2.0, attempt_id=None),
    ]


def test_the_coming_dates_start_now_and_cover_every_day_of_a_year_then_the_month_ends() -> None:
    now = datetime(2026, 12, 3, 10, 0, tzinfo=timezone.utc).timestamp()
    failing = datetime(2011, 4, 30, 23, 59, 59, 500000, tzinfo=timezone.utc).timestamp()
    instants = candidate_instants(now, failing)
    assert instants[0] == now and instants == sorted(set(instants))
    days = {datetime.fromtimestamp(t, timezone.utc).date() for t in instants}
    assert datetime(2026, 12, 31).date() in days
    assert datetime(2027, 6, 17).date() in days  # every day of the first year
    assert datetime(2028, 2, 29).date() in days  # the next leap day
    assert datetime(2029, 6, 17).date() not in days  # later: only edges
    assert datetime(2029, 6, 30).date() in days
    moments = {datetime.fromtimestamp(t, timezone.utc).time().isoformat() for t in instants}
    assert "23:59:59.500000" in moments  # the failing attempt's time of day


@given(
    now=st.floats(0, 2**33, allow_nan=False),
    seen=st.lists(st.floats(0, 2**33, allow_nan=False), max_size=5),
    horizon=st.integers(1, 3 * 366),
)
@settings(max_examples=40, deadline=None)
def test_the_next_date_it_can_fail_is_never_before_today(
    now: float, seen: list[float], horizon: int
) -> None:
    now, seen = round(now, 3), [round(t, 3) for t in seen]  # as isolation passes them
    instants = candidate_instants(now, seen[0] if seen else now, horizon, seen)
    assert instants and instants[0] >= now and instants[-1] <= now + horizon * 86400
    ahead = [t for t in seen if now <= t <= now + horizon * 86400]
    assert all(t in instants for t in ahead)  # where the hunt failed, if ahead


def test_the_horizon_bounds_the_coming_dates() -> None:
    now = datetime(2026, 12, 3, tzinfo=timezone.utc).timestamp()
    instants = candidate_instants(now, now, 90)
    last = datetime.fromtimestamp(instants[-1], timezone.utc).date()
    assert last <= datetime(2027, 3, 3).date()


@pytest.mark.parametrize(
    ("level", "dates", "words"),
    [
        ("dates", {"next_failure": "2026-12-31T23:59:59.500+00:00",
                   "checked_from": "2026-12-03T14:00:00.000+00:00"},
         "fails on 2026-12-31 (in 28 days)"),
        ("dates", {"next_failure": "2026-12-04T00:00:00.250+00:00",
                   "checked_from": "2026-12-03T14:00:00.000+00:00"}, "fails on 2026-12-04 (in 1 day)"),
        ("dates", {"next_failure": None}, "fails on a coming date"),
        ("dates", {"next_failure": "garbage", "checked_from": "x"}, "fails on a coming date"),
        ("past", {"past_only": True}, "past dates only"),
        ("repeat", None,
         "fails only when rerun in one process (pytest-rerunfailures, --count)"),
        ("normal", None, "fails in normal runs"),
    ],
)  # fmt: skip
def test_each_exposure_says_when_ci_sees_it(level: str, dates: object, words: str) -> None:
    assert exposure_words(level, dates) == words


def test_past_dates_only_is_never_what_ci_will_see() -> None:
    assert "past" not in CI_EXPOSURES
    assert set(EXPOSURES) - CI_EXPOSURES == {"past"}


def test_a_failure_at_the_same_time_of_day_on_the_next_days_fails_every_day() -> None:
    def at(day: int, hour: int, minute: int, second: int, ms: int = 250) -> float:
        return datetime(2026, 12, day, hour, minute, second, ms * 1000,
                        tzinfo=timezone.utc).timestamp()  # fmt: skip

    now = at(4, 16, 0, 0, 0)
    failing = datetime(2027, 3, 26, 16, 59, 27, 250000, tzinfo=timezone.utc).timestamp()
    race = [at(4, 16, 59, 27), at(5, 16, 59, 27), at(6, 16, 59, 27), at(7, 16, 59, 27)]
    assert every_day(race, now, failing)
    assert not every_day(race[:2], now, failing)  # one more day: not yet every day
    assert not every_day(race[1:], now, failing)  # its first failure is over a day ahead
    # a month-end flake whose own failing instant is tomorrow: that date decides
    month_end = at(31, 0, 0, 0)
    assert not every_day([month_end], at(30, 17, 0, 0), month_end)
    # another time of day than the failing attempt's: a calendar edge
    assert not every_day([at(5, 0, 0, 0), at(6, 0, 0, 0), at(7, 0, 0, 0)], now, failing)


def test_a_daily_failure_reads_as_its_time_of_day() -> None:
    dates = {"next_failure": "2026-12-05T16:59:27.250+00:00", "daily": True, "fails_now": True}
    assert dates_text(dates) == "fails every day at 16:59:27.250 UTC (replayed at the coming dates)"
