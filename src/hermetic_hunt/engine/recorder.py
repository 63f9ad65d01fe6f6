"""Phase reports in, attempts out (in the process that ran the test).

pytest reports each test per phase (setup, call, teardown), and
pytest-rerunfailures adds executions in between. :class:`Recorder` folds
them into one :class:`~hermetic_hunt.models.Attempt` per execution: a rerun
is its own attempt, and an execution that failed stays failed whatever its
rerun did. It keeps pytest's own serialised reports of the failing phases,
so the process that prints can show the failure as pytest would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermetic_hunt import failures
from hermetic_hunt.engine.executor import REPORT_ATTR
from hermetic_hunt.models import FAILING, Attempt, Failure, Violation


@dataclass
class _Partial:
    nodeid: str
    round_no: int
    position: int
    repeat: int
    execution: int
    outcome: str = "passed"
    phase: str | None = None
    failure: Failure | None = None


class Recorder:
    """Folds reports into attempts; :meth:`take` hands over the finished ones."""

    def __init__(self, rootdir: str, serialize: Any = None) -> None:
        self.rootdir = rootdir
        #: ``report -> dict`` (pytest's ``pytest_report_to_serializable``), or None.
        self.serialize = serialize
        self._open: dict[int, _Partial] = {}
        self.finished: list[Attempt] = []
        self.reports: list[dict[str, Any]] = []

    def report(self, report: Any) -> Attempt | None:
        """Take one phase report; return the attempt it completes, if any."""
        data = getattr(report, REPORT_ATTR, None)
        if not isinstance(data, dict):
            return None
        execution = int(data["execution"])
        partial = self._open.get(execution)
        if partial is None:
            partial = _Partial(
                nodeid=report.nodeid,
                round_no=int(data["round"]),
                position=int(data["position"]),
                repeat=int(data.get("repeat") or 0),
                execution=execution,
            )
            self._open[execution] = partial
        self._fold(partial, report)
        if report.failed and self.serialize is not None:
            self.reports.append(self.serialize(report))
        if report.when != "teardown":
            return None
        del self._open[execution]
        attempt = self._finish(partial, data)
        self.finished.append(attempt)
        return attempt

    def take(self) -> tuple[list[Attempt], list[dict[str, Any]]]:
        """The attempts and failing reports recorded since the last call."""
        attempts, reports = self.finished, self.reports
        self.finished, self.reports = [], []
        self._open.clear()
        return attempts, reports

    def _fold(self, partial: _Partial, report: Any) -> None:
        outcome = report.outcome
        failed = report.failed or outcome == "rerun"
        if failed and partial.outcome not in FAILING:
            partial.outcome = "failed"
            partial.phase = report.when
            if getattr(report, "wasxfail", None) is not None and report.passed:
                partial.outcome = "xpassed"
            partial.failure = failures.from_report(report, self.rootdir)
        elif report.when == "call" and partial.outcome == "passed":
            if getattr(report, "wasxfail", None) is not None:
                partial.outcome = "xfailed" if report.skipped else "xpassed"
                if partial.outcome == "xpassed":
                    partial.failure = failures.from_report(report, self.rootdir)
                    partial.phase = "call"
            elif report.skipped:
                partial.outcome = "skipped"
        elif report.when == "setup" and report.skipped and partial.outcome == "passed":
            partial.outcome = "skipped"

    def _finish(self, partial: _Partial, data: dict[str, Any]) -> Attempt:
        violations = [
            Violation(
                op=str(v[0]),
                host=str(v[1]),
                port=v[2] if isinstance(v[2], int) else None,
                detail=str(v[3]),
            )
            for v in data.get("violations") or []
        ]
        return Attempt(
            nodeid=partial.nodeid,
            outcome=partial.outcome,
            round_no=partial.round_no,
            position=partial.position,
            execution=partial.execution,
            phase=partial.phase,
            duration=float(data.get("duration") or 0.0),
            seed=data.get("seed"),
            now=data.get("now"),
            mode=str(data.get("mode") or "off"),
            hash_seed=data.get("hash_seed"),
            counts=data.get("counts") or None,
            violations=violations,
            failure=partial.failure,
            repeat=partial.repeat,
            profile=data.get("profile"),
            switch_interval=data.get("switch_interval"),
            stress=int(data.get("stress") or 0),
            started=data.get("started"),
            journal=data.get("journal") if partial.outcome in FAILING else None,
            journal_format=data.get("journal_format"),
        )
