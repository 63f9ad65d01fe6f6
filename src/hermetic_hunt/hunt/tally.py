"""Running per-test tallies of a hunt (the progress line and the end summary).

Only plain attempts count towards a test's outcome: a ``twice`` round's
second run (:data:`~hermetic_hunt.models.REPEATED_RUN`) only nominates
tests whose second run in one process failed after a first that passed --
candidates for *self-polluting*, checked by isolation in a fresh process
(docs/how-it-works.md, "A twice round").

Kept as attempts come in, never recounted, and most of them a batch at a
time (:meth:`Tallies.add_columns`: counters updated in C): :attr:`Tallies.flaky`
is the number of tests that both passed and failed so far, updated when a
test becomes flaky.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from hermetic_hunt.models import FAILING, PASSING, REPEATED_RUN, Attempt, Columns


class Tallies:
    """Per-test tallies, fed as attempts arrive.

    ``passed``/``failed``: plain attempts of each test that passed (or
    xfailed) and failed (or crashed, or xpassed); ``second_run_failures``:
    twice rounds in which a test's second run failed after a first that passed.
    """

    def __init__(self) -> None:
        self.passed: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.second_run_failures: Counter[str] = Counter()
        self.attempts = 0
        #: Attempts that are no plain run (counted apart: ``models.attempts_text``).
        self.repeated = 0
        self.failed_attempts = 0
        self.violation_attempts = 0
        #: Repeated runs (a twice round's second) that passed: pytest's last line counts them.
        self.repeated_passes = 0
        #: Tests that both passed and failed in plain attempts.
        self.flaky = 0
        # (worker, round, nodeid) -> outcome of a twice round's first run
        self._first_runs: dict[tuple[str, int, str], str] = {}

    def add_columns(self, *found: Columns) -> None:
        """Attempts decoded a batch at a time; the plain runs of all of ``found`` counted
        at once (their counts do not depend on order), a twice round's one row at a time,
        in order (each row aside as its whole attempt: it may carry what its run's columns
        do not, such as its repeat)."""
        plain: list[Columns] = []
        for columns in found:
            aside = dict(columns.aside)
            repeats = columns.column("repeat")
            if not any(repeats or ()) and not any(a.repeat for a in aside.values()):
                self.violation_attempts += sum(bool(a.violations) for a in aside.values())
                plain.append(columns)
                continue
            rows = zip(columns.nodeids, columns.outcomes, repeats or itertools.repeat(0),
                       columns.column("round_no") or itertools.repeat(0),
                       columns.column("execution") or itertools.repeat(1),
                       strict=False)  # fmt: skip
            for index, row in enumerate(rows):
                if index in aside:
                    self.add(aside[index])
                else:
                    self._one(*row, columns.worker)
        if len(plain) == 1:
            self._count(plain[0].nodeids, plain[0].outcomes)
        elif plain:
            nodeids = list(itertools.chain.from_iterable(c.nodeids for c in plain))
            self._count(nodeids, list(itertools.chain.from_iterable(c.outcomes for c in plain)))

    def add(self, attempt: Attempt) -> None:
        """One attempt, whatever it carries (violations, a failure...)."""
        self.violation_attempts += bool(attempt.violations)
        a = attempt
        self._one(a.nodeid, a.outcome, a.repeat, a.round_no, a.execution, a.worker)

    def _one(
        self, nodeid: str, outcome: str, repeat: int, round_no: int, execution: int, worker: str
    ) -> None:
        if execution == 1 and repeat:
            key = (worker, round_no, nodeid)
            if repeat != REPEATED_RUN:  # a twice round's first run: a plain one
                self._first_runs[key] = outcome
            elif self._first_runs.pop(key, None) in PASSING and outcome in FAILING:
                self.second_run_failures[nodeid] += 1
        if repeat != REPEATED_RUN:
            self._count((nodeid,), (outcome,))
            return
        self.attempts += 1
        self.repeated += 1
        if outcome in FAILING:
            self.failed_attempts += 1
        elif outcome in PASSING:
            self.repeated_passes += 1

    def _count(self, nodeids: Sequence[str], outcomes: Sequence[str]) -> None:
        """Plain attempts: ``nodeids[i]`` ended with ``outcomes[i]``."""
        self.attempts += len(nodeids)
        kinds = set(outcomes)
        passed = nodeids if kinds == {"passed"} else self._of(nodeids, outcomes, PASSING)
        failed = () if kinds.isdisjoint(FAILING) else self._of(nodeids, outcomes, FAILING)
        # A test becomes flaky with its first pass after a failure, or the reverse.
        newly = {n for n in self.failed.keys() & passed if not self.passed[n]}
        self.passed.update(passed)
        if failed:
            newly.update(n for n in set(failed) if self.passed[n] and not self.failed[n])
            self.failed.update(failed)
            self.failed_attempts += len(failed)
        self.flaky += len(newly)

    @staticmethod
    def _of(nodeids: Sequence[str], outcomes: Sequence[str], kinds: frozenset[str]) -> list[str]:
        return list(itertools.compress(nodeids, map(kinds.__contains__, outcomes)))

    def is_flaky(self, nodeid: str) -> bool:
        return bool(self.passed[nodeid] and self.failed[nodeid])

    def not_idempotent(self) -> list[str]:
        """Tests whose second run in one process failed, and that are not flaky otherwise."""
        return sorted(n for n in self.second_run_failures if not self.is_flaky(n))
