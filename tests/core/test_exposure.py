"""What CI will see of a finding, budgets, groups and dates: the pure parts."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from hermetic_hunt.errors import BadOption
from hermetic_hunt.isolate.dates import candidate_instants
from hermetic_hunt.isolate.groups import group, sample, substitute
from hermetic_hunt.models import EXPOSURES, Attempt, Failure, Step, exposure, function_of
from hermetic_hunt.options import parse_isolate_budget


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
    assert EXPOSURES == ("normal", "order", "repeat", "dates", "sandbox")


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
