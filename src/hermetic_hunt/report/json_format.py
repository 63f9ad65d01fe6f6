"""``hermetic-hunt report --format json``: a versioned structure for other tools.

The structure is documented in ``docs/json-format.md``; its key names are a
contract. Adding keys is not a breaking change; renaming, removing or
changing the meaning of one is, and bumps :data:`VERSION`.
"""

from __future__ import annotations

import json
from typing import Any

from hermetic_hunt import stats
from hermetic_hunt.report.fixes import fix_json, history_json
from hermetic_hunt.report.model import Flake, Group, Report, TestResult
from hermetic_hunt.store.rows import LeakRow, RunRow, ViolationRow

FORMAT = "hermetic-hunt-report"
VERSION = 1


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def run_json(run: RunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "uuid": run.uuid,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "status": run.status,
        "argv": list(run.argv),
        "base_seed": run.base_seed,
        "rounds_planned": run.rounds_planned,
        "budget_seconds": run.budget_seconds,
        "rounds_done": run.rounds_done,
        "attempts": run.attempts,
        "plain_attempts": run.attempts - run.repeated,
        "repeated": run.repeated,
        "tests": run.tests,
        "workers": run.workers,
        "mode": run.mode,
        "order": run.order,
        "shard": run.shard,
        "exit_status": run.exit_status,
        "git_sha": run.git_sha,
        "git_branch": run.git_branch,
    }


def test_json(test: TestResult) -> dict[str, Any]:
    failure = test.failure
    return {
        "nodeid": test.nodeid,
        "status": test.status,
        "attempts": test.attempts,
        "failures": test.failures,
        "rate": _round(test.rate),
        "interval": None if test.interval is None else [_round(v) for v in test.interval],
        "bound": _round(test.bound),
        "more_attempts_for_1pct": test.more_for_1pct,
        "skipped": test.skipped,
        "crashed": test.crashed,
        "attempts_with_violations": test.with_violations,
        "flake": test.flake.flake_id if test.flake else None,
        "first_failure": None
        if failure is None
        else {
            "attempt": f"A{failure.attempt_id}",
            "exc_type": failure.exc_type,
            "message": failure.message,
            "location": failure.location,
        },
        "sandbox_off_check": None if test.check is None else test.check.outcome,
        "replay": test.replay,
        "exposure": test.exposure,
        "second_run_failures": test.second_run_failures,
    }


def _collides_with(flake: Flake) -> dict[str, str] | None:
    pair = flake.reproducer
    if pair is None or not pair.together:
        return None
    return {"partner": pair.together[-1].nodeid, "resource": pair.resource}


def flake_json(flake: Flake, replay: str | None, exposure: str | None = None) -> dict[str, Any]:
    return {
        "exposure": exposure,
        "id": flake.flake_id,
        "nodeid": flake.nodeid,
        "kinds": list(flake.kinds),
        "polluters": [list(group) for group in flake.polluters],
        "state_setters": [list(group) for group in flake.state_setters],
        "cleaners": list(flake.cleaners),
        "collides_with": _collides_with(flake),
        "reproducer": None if flake.reproducer is None else flake.reproducer.to_json(),
        "confirmed": flake.confirmed,
        "replay": replay,
        "status": flake.status,
        "probes": flake.probes,
        "probe_seconds": _round(flake.probe_seconds),
        "note": flake.note,
        "evidence": flake.evidence,
        "first_run": flake.first_run_id,
        "last_run": flake.last_run_id,
    }


def group_json(group: Group) -> dict[str, Any]:
    """One finding: a test, parametrizations of one test function failing alike, or
    tests that collide over one path (``shared``: where and how many)."""
    return {
        "exposure": group.exposure,
        "exposure_text": group.exposure_text,
        "nodeid": group.nodeid,
        "lead": group.lead.nodeid,
        "tests": [t.nodeid for t in group.tests],
        "flakes": [t.flake.flake_id for t in group.tests if t.flake is not None],
        "status": group.lead.status,
        "kinds": list(group.lead.flake.kinds) if group.lead.flake is not None else [],
        "attempts": group.attempts,
        "failures": group.failures,
        "rate": _round(group.rate),
        "shared": group.shared,
    }


def leak_json(leak: LeakRow) -> dict[str, Any]:
    return {
        "nodeid": leak.nodeid,
        "resource": leak.resource,
        "name": leak.name,
        "change": leak.change,
        "detail": leak.detail,
        "description": leak.describe(),
        "attempts": leak.attempts,
        "first_attempt": f"A{leak.first_attempt_id}" if leak.first_attempt_id else None,
    }


def violation_json(violation: ViolationRow) -> dict[str, Any]:
    return {
        "nodeid": violation.nodeid,
        "op": violation.op,
        "host": violation.host,
        "port": violation.port,
        "attempts": violation.attempts,
        "first_attempt": f"A{violation.first_attempt_id}",
    }


def as_dict(report: Report) -> dict[str, Any]:
    tests = {t.nodeid: t for t in report.tests}  # each flake's test: its replay and exposure
    return {
        "format": FORMAT,
        "version": VERSION,
        "database": report.database,
        "selected_run": report.selected_run,
        "confidence": stats.CONFIDENCE,
        "runs": [run_json(run) for run in report.runs],
        "tests": [test_json(test) for test in report.tests],
        "since": report.since,
        "flakes": [
            {
                **flake_json(f, tests[f.nodeid].replay, tests[f.nodeid].exposure),
                "fix": fix_json(report.fixes[f.flake_id]) if f.flake_id in report.fixes else None,
                "history": history_json(report.histories[f.nodeid])
                if f.nodeid in report.histories
                else None,
            }
            for f in report.flakes
        ],
        "violations": [violation_json(v) for v in report.violations],
        "findings": [group_json(g) for g in report.groups],
        "leaks": [leak_json(leak) for leak in report.leaks],
    }


def render_json(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2, ensure_ascii=False) + "\n"
