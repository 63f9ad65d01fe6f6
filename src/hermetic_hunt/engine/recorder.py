"""Phase reports in, attempts out (in the process that ran the test).

pytest reports each test per phase (setup, call, teardown), and
pytest-rerunfailures adds executions in between. The executor folds each
execution's phase reports into a :class:`Fold` as pytest makes them and,
after teardown, adds its own facts (seed, clock, journal...); the runner
builds the :class:`~hermetic_hunt.models.Attempt` from the fold once the
step is over, with what the step left behind (:meth:`Fold.attempt`): a rerun
is its own attempt, and an execution that failed stays failed whatever its
rerun did. Nothing of hermetic-hunt's rides on pytest's report objects:
they are pytest's, and other processes (xdist, a journal-keeping failure)
serialise them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermetic_hunt import failures
from hermetic_hunt.models import FAILING, Attempt, Failure


@dataclass
class Fold:
    """One execution of a test as its phase reports arrive."""

    nodeid: str
    round_no: int
    position: int
    repeat: int
    execution: int
    outcome: str = "passed"
    phase: str | None = None
    failure: Failure | None = None
    #: The executor's facts, as :class:`~hermetic_hunt.models.Attempt` fields.
    facts: dict[str, Any] = field(default_factory=dict)

    def phase_report(
        self,
        report: Any,
        rootdir: str,
        exc_type: str | None = None,
        location: str | None = None,
    ) -> None:
        """Fold one phase report (``exc_type``/``location``: named from the exception)."""
        failed = report.failed or report.outcome == "rerun"
        xfail = getattr(report, "wasxfail", None) is not None
        if failed and self.outcome not in FAILING:
            self.outcome = "failed"
            self.phase = report.when
            self.failure = failures.from_report(
                report, rootdir, exc_type=exc_type, location=location
            )
        elif report.when == "call" and self.outcome == "passed":
            if xfail:
                self.outcome = "xfailed" if report.skipped else "xpassed"
                if self.outcome == "xpassed":
                    self.failure = failures.from_report(report, rootdir)
                    self.phase = "call"
            elif report.skipped:
                self.outcome = "skipped"
        elif report.when == "setup" and report.skipped and self.outcome == "passed":
            self.outcome = "skipped"

    def attempt(self, **more: Any) -> Attempt:
        """The attempt: this fold's outcome with the executor's facts and ``more``.

        A journal is kept for a failing attempt only.
        """
        facts = {**self.facts, **more}
        if self.outcome not in FAILING:
            facts.pop("journal", None)
        return Attempt(
            nodeid=self.nodeid,
            outcome=self.outcome,
            round_no=self.round_no,
            position=self.position,
            execution=self.execution,
            phase=self.phase,
            failure=self.failure,
            repeat=self.repeat,
            **facts,
        )
