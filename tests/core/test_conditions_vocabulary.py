"""Timing conditions in the shared vocabulary: steps, reproducers, the wire."""

from __future__ import annotations

import json

import pytest

from hermetic_hunt.engine.runner import Job
from hermetic_hunt.isolate import wire as probe_wire
from hermetic_hunt.models import Attempt, Reproducer, Step

OLD = {"nodeid": "t.py::test_x", "seed": 3, "now": 1.5e9, "mode": "seeded", "attempt_id": 7}


def reproducer(*steps: dict) -> Reproducer:
    return Reproducer.from_json({"steps": list(steps), "hash_seed": 1})


def test_a_reproducer_from_before_timing_conditions_runs_without_them() -> None:
    (step,) = reproducer(OLD).steps
    assert (step.profile, step.switch_interval, step.stress) == (None, None, 0)
    assert "profile" not in reproducer(OLD).to_json()["steps"][0]


def test_a_reproducer_keeps_its_steps_conditions() -> None:
    raw = {**OLD, "profile": "jitter", "switch_interval": 2e-06, "stress": 2}
    repro = reproducer(raw)
    assert repro.steps[0] == Step("t.py::test_x", 3, 1.5e9, "seeded", 7, "jitter", 2e-06, 2)
    assert reproducer(*repro.to_json()["steps"]) == repro


@pytest.mark.parametrize(
    "change, message",
    [
        ({"profile": "turbo"}, "unknown clock profile 'turbo'"),
        ({"profile": 3}, "unknown clock profile 3"),
        ({"switch_interval": 0}, "switch_interval must be a number of seconds in (0, 1]"),
        ({"switch_interval": "fast"}, "switch_interval must be"),
        ({"switch_interval": float("nan")}, "switch_interval must be"),
        ({"switch_interval": 5.0}, "switch_interval must be"),
        ({"stress": -1}, "stress must be a number of busy processes"),
        ({"stress": True}, "stress must be a number of busy processes"),
        ({"stress": 10**6}, "stress must be a number of busy processes"),
    ],
)
def test_a_malformed_condition_is_refused(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reproducer({**OLD, **change})


def test_a_step_of_an_attempt_takes_its_conditions() -> None:
    attempt = Attempt("t.py::test_x", "failed", seed=1, now=2.0, profile="slow",
                      switch_interval=1e-5, stress=1, attempt_id=4)  # fmt: skip
    assert Step.of(attempt) == Step("t.py::test_x", 1, 2.0, "seeded", 4, "slow", 1e-5, 1)
    assert Step.of(Attempt("t", "passed", profile="nonsense")).profile is None


def test_conditions_travel_in_attempt_lines_and_probe_requests() -> None:
    attempt = Attempt("t.py::test_x", "passed", profile="jitter", switch_interval=3e-6, stress=2)
    back = Attempt.from_json(attempt.to_json())
    assert back is not None
    assert (back.profile, back.switch_interval, back.stress) == ("jitter", 3e-6, 2)
    step = Step("t.py::test_x", 1, 2.0, profile="slow", switch_interval=1e-4, stress=1)
    job = Job((step, Step("t.py::test_y")))
    request = json.loads(json.dumps(probe_wire.probe_request(1, job, 10.0)))
    assert Job.from_json(request["job"]) == job
