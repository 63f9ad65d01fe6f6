"""Findings as reports show them: groups of tests, and what CI will see of them.

A :class:`Group` is one finding: a test, or the parametrizations of one test
function that fail the same way (same status, kinds and failure signature).
Each has an *exposure* (:func:`hermetic_hunt.models.exposure`);
:func:`rank_groups` lists them what CI sees first, then most surely failing.
Pure, like :mod:`hermetic_hunt.report.model`, whose rows it groups.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermetic_hunt import stats
from hermetic_hunt.models import EXPOSURE_TEXT, EXPOSURES, exposure, function_of

if TYPE_CHECKING:
    from hermetic_hunt.report.model import Flake, TestResult

#: Statuses that are findings (the rest never failed).
FINDINGS = ("flaky", "broken", "sandbox-incompatible", "not-idempotent")


@dataclass(frozen=True)
class Group:
    """One finding as reports show it: a test, or the parametrizations of one
    test function that fail the same way (same status, kinds and failure
    signature). ``tests[0]`` leads (the one isolation explained)."""

    tests: tuple[TestResult, ...]
    exposure: str

    @property
    def lead(self) -> TestResult:
        return self.tests[0]

    @property
    def others(self) -> tuple[TestResult, ...]:
        return self.tests[1:]

    @property
    def nodeid(self) -> str:
        return function_of(self.lead.nodeid) if self.others else self.lead.nodeid

    @property
    def attempts(self) -> int:
        return sum(t.attempts for t in self.tests)

    @property
    def failures(self) -> int:
        return sum(t.failures for t in self.tests)

    @property
    def rate(self) -> float | None:
        return self.failures / self.attempts if self.attempts else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return stats.wilson(self.failures, self.attempts) if self.attempts else None

    @property
    def exposure_text(self) -> str:
        return EXPOSURE_TEXT.get(self.exposure, self.exposure)


def group_rank(group: Group) -> tuple[int, float, float, str]:
    low = group.interval[0] if group.interval else 0.0
    level = EXPOSURES.index(group.exposure) if group.exposure in EXPOSURES else len(EXPOSURES)
    return (level, -low, -(group.rate or 0.0), group.nodeid)


def _signature(test: TestResult) -> tuple[str, str]:
    failure = test.failure
    return (failure.exc_type, failure.location) if failure is not None else ("", "")


def _is_lead(test: TestResult) -> tuple[int, int, str]:
    """The test isolation explained leads its group (then the lowest flake id)."""
    flake = test.flake
    evidence = flake.evidence if flake is not None else None
    grouped = isinstance(evidence, dict) and isinstance(evidence.get("group"), dict)
    digits = flake.flake_id[1:] if flake is not None else ""
    number = int(digits) if digits.isdigit() else 1 << 62
    return (int(grouped), number, test.nodeid)


def rank_groups(tests: Iterable[TestResult]) -> tuple[Group, ...]:
    """Findings as groups (see :class:`Group`), what CI sees first."""
    by_key: dict[tuple[Any, ...], list[TestResult]] = {}
    for t in tests:
        if t.status not in FINDINGS:
            continue
        kinds = t.flake.kinds if t.flake is not None else ()
        key = (function_of(t.nodeid), t.status, kinds, _signature(t), t.exposure)
        by_key.setdefault(key, []).append(t)
    groups = [
        Group(tuple(sorted(members, key=_is_lead)), members[0].exposure or "order")
        for members in by_key.values()
    ]
    return tuple(sorted(groups, key=group_rank))


def test_exposure(status: str, flake: Flake | None) -> str | None:
    """:func:`hermetic_hunt.models.exposure` of a test, from its status and flake."""
    if status not in FINDINGS:
        return None
    evidence = flake.evidence if flake is not None and isinstance(flake.evidence, dict) else {}
    dates = evidence.get("dates")
    return exposure(
        flake.kinds if flake is not None else (),
        status=status,
        default_order=evidence.get("default_order") is True,
        fails_now=isinstance(dates, dict) and dates.get("fails_now") is True,
    )
