"""Reports in, attempts out (the controller's bookkeeping).

Reports arrive per phase (setup, call, teardown), possibly interleaved
across xdist workers, with pytest-rerunfailures executions and crashed
workers in between. :class:`Recorder` folds them into one
:class:`~hermetic_hunt.models.AttemptRecord` per execution: a rerun is its
own attempt, and an execution that failed stays failed whatever its rerun
did.

It also keeps the running per-test tallies the progress line and the end
summary use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hermetic_hunt import failures
from hermetic_hunt.models import AttemptRecord, Failure, Violation
from hermetic_hunt.seeds import attempt_now, attempt_seed

FAILING = ("failed", "crashed", "xpassed")


@dataclass
class _Partial:
    round_no: int
    position: int
    nodeid: str
    execution: int
    outcome: str = "passed"
    phase: str | None = None
    failure: Failure | None = None


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    other: int = 0
    violations: int = 0
    first_failure: AttemptRecord | None = None
    signatures: Counter[str] = field(default_factory=Counter)

    @property
    def flaky(self) -> bool:
        return self.passed > 0 and self.failed > 0


class Recorder:
    """Folds reports into attempt records for one run."""

    def __init__(self, run_id: int, base_seed: int, mode: str, rootdir: str) -> None:
        self.run_id = run_id
        self.base_seed = base_seed
        self.mode = mode
        self.rootdir = rootdir
        self._open: dict[tuple[str, int, int], _Partial] = {}
        self._positions: dict[str, dict[int, int]] = {}
        self.tallies: dict[str, Tally] = {}
        self.attempts = 0
        self.failed_attempts = 0
        self.violation_attempts = 0

    def _position(self, worker: str, key: int) -> int:
        seen = self._positions.setdefault(worker, {})
        if key not in seen:
            seen[key] = len(seen)
        return seen[key]

    def report(self, report: Any, worker: str) -> AttemptRecord | None:
        """Take one phase report; return the attempt it completes, if any."""
        data = getattr(report, "hermetic_hunt", None)
        if not isinstance(data, dict):
            return None
        key, execution = int(data["key"]), int(data["execution"])
        ident = (worker, key, execution)
        partial = self._open.get(ident)
        if partial is None:
            partial = _Partial(
                round_no=int(data["round"]),
                position=self._position(worker, key),
                nodeid=report.nodeid,
                execution=execution,
            )
            self._open[ident] = partial
        self._fold(partial, report)
        if report.when != "teardown":
            return None
        del self._open[ident]
        return self._finish(partial, worker, data)

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

    def _finish(self, partial: _Partial, worker: str, data: dict[str, Any]) -> AttemptRecord:
        violations = [
            Violation(
                op=str(v[0]),
                host=str(v[1]),
                port=v[2] if isinstance(v[2], int) else None,
                detail=str(v[3]),
            )
            for v in data.get("violations") or []
        ]
        record = AttemptRecord(
            run_id=self.run_id,
            round_no=partial.round_no,
            worker=worker,
            position=partial.position,
            nodeid=partial.nodeid,
            execution=partial.execution,
            outcome=partial.outcome,
            phase=partial.phase,
            duration=float(data.get("duration") or 0.0),
            seed=data.get("seed"),
            now=data.get("now"),
            mode=str(data.get("mode") or self.mode),
            hash_seed=data.get("hash_seed"),
            counts=data.get("counts") or None,
            violations=violations,
            failure=partial.failure,
            journal=data.get("journal") if partial.outcome in FAILING else None,
            journal_format=data.get("journal_format"),
        )
        self._count(record)
        return record

    def crashed(self, worker: str, key: int, round_no: int, nodeid: str) -> AttemptRecord:
        """The attempt a dead worker was running (xdist reported the crash)."""
        execution = max([ident[2] for ident in self._open if ident[:2] == (worker, key)], default=1)
        partial = self._open.pop((worker, key, execution), None)
        position = partial.position if partial else self._position(worker, key)
        seed = attempt_seed(self.base_seed, nodeid, round_no, execution)
        record = AttemptRecord(
            run_id=self.run_id,
            round_no=round_no,
            worker=worker,
            position=position,
            nodeid=nodeid,
            execution=execution,
            outcome="crashed",
            phase=partial.phase if partial and partial.phase else "call",
            duration=0.0,
            seed=seed if self.mode != "off" else None,
            now=attempt_now(seed) if self.mode != "off" else None,
            mode=self.mode,
            hash_seed=None,
            failure=Failure(
                exc_type="WorkerCrashed",
                message=f"worker {worker} died while running this test",
                location="",
                excerpt=f"worker {worker} crashed while running {nodeid}",
            ),
        )
        self._count(record)
        return record

    def _count(self, record: AttemptRecord) -> None:
        tally = self.tallies.setdefault(record.nodeid, Tally())
        self.attempts += 1
        if record.outcome in FAILING:
            tally.failed += 1
            self.failed_attempts += 1
            if tally.first_failure is None:
                tally.first_failure = record
            if record.failure is not None:
                tally.signatures[record.failure.signature] += 1
        elif record.outcome in ("passed", "xfailed"):
            tally.passed += 1
        else:
            tally.other += 1
        if record.violations:
            tally.violations += 1
            self.violation_attempts += 1

    def flaky(self) -> list[str]:
        return sorted(n for n, t in self.tallies.items() if t.flaky)
