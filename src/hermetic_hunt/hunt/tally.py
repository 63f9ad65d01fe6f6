"""Running per-test tallies of a hunt (the progress line and the end summary).

Only plain attempts count towards a test's outcome. A ``twice`` round's
first run of a test (``repeat`` 1) is one: the test's first run in a fresh
process, like any other. Its second run (:data:`~hermetic_hunt.models.REPEATED_RUN`)
is not; it only nominates tests whose second run in one process failed after
a first that passed -- candidates for *self-polluting*, checked by isolation
in a fresh process.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hermetic_hunt.models import FAILING, PASSING, REPEATED_RUN, Attempt


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    other: int = 0
    violations: int = 0
    first_failure: Attempt | None = None
    signatures: Counter[str] = field(default_factory=Counter)
    #: Twice rounds in which the second run failed after a first that passed.
    second_run_failures: int = 0

    @property
    def flaky(self) -> bool:
        return self.passed > 0 and self.failed > 0

    @property
    def broken(self) -> bool:
        return self.failed > 0 and not self.passed and not self.other


class Tallies:
    """Per-test tallies, fed attempt by attempt."""

    def __init__(self) -> None:
        self.tests: dict[str, Tally] = {}
        self.attempts = 0
        #: Attempts that are no plain run (counted apart: ``models.attempts_text``).
        self.repeated = 0
        self.failed_attempts = 0
        self.violation_attempts = 0
        # (worker, round, nodeid) -> outcome of a twice round's first run
        self._first_runs: dict[tuple[str, int, str], str] = {}

    def add(self, attempt: Attempt) -> None:
        tally = self.tests.get(attempt.nodeid)
        if tally is None:
            tally = self.tests[attempt.nodeid] = Tally()
        self.attempts += 1
        if attempt.violations:
            tally.violations += 1
            self.violation_attempts += 1
        if attempt.execution == 1 and attempt.repeat:
            key = (attempt.worker, attempt.round_no, attempt.nodeid)
            if attempt.repeat != REPEATED_RUN:  # a twice round's first run: a plain one
                self._first_runs[key] = attempt.outcome
            else:
                self.repeated += 1
                if self._first_runs.pop(key, None) in PASSING and attempt.outcome in FAILING:
                    tally.second_run_failures += 1
        if attempt.repeat == REPEATED_RUN:
            if attempt.outcome in FAILING:
                self.failed_attempts += 1
            return
        if attempt.outcome in FAILING:
            tally.failed += 1
            self.failed_attempts += 1
            if tally.first_failure is None:
                tally.first_failure = attempt
            if attempt.failure is not None:
                tally.signatures[attempt.failure.signature] += 1
        elif attempt.outcome in PASSING:
            tally.passed += 1
        else:
            tally.other += 1

    def flaky(self) -> list[str]:
        return sorted(n for n, t in self.tests.items() if t.flaky)

    def broken(self) -> list[str]:
        return sorted(n for n, t in self.tests.items() if t.broken)

    def not_idempotent(self) -> list[str]:
        """Tests whose second run in one process failed, and that are not flaky otherwise."""
        return sorted(n for n, t in self.tests.items() if t.second_run_failures and not t.flaky)

    def violators(self) -> list[str]:
        return sorted(n for n, t in self.tests.items() if t.violations)
