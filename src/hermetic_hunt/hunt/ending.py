"""The end of a hunt (:func:`finish`, at pytest's session finish): what is pending
stored, the attempts' indexes built when the hunt deferred them
(:meth:`~hermetic_hunt.store.core.Store.defer_indexes`), the run's status
(``complete``, ``incomplete``, ``interrupted``) and pytest's exit status, the
terminal condensed (:class:`~.terminal.Terminal`), isolation when something
failed; a run whose failures all fall on dates before today exits 0.
"""

from __future__ import annotations

import pytest

from hermetic_hunt import pasteable
from hermetic_hunt.hunt.rounds import Rounds
from hermetic_hunt.hunt.signals import Interrupts
from hermetic_hunt.hunt.state import HuntState
from hermetic_hunt.models import attempts_text, format_seconds
from hermetic_hunt.store import runs


def finish(hunt: HuntState, rounds: Rounds, interrupts: Interrupts, session: pytest.Session,
           exitstatus: int, *, interrupted: bool) -> None:  # fmt: skip
    """The end of the rounds: store, set the run's and pytest's status, isolate."""
    with hunt.writing():
        hunt.intake.flush()
        hunt.intake.store_leaks(hunt.run_id)
    with hunt.writing():  # (before isolation and the report read them)
        hunt.store.build_indexes()
    tallies = hunt.intake.tallies
    interrupted = (
        interrupted
        or exitstatus == pytest.ExitCode.INTERRUPTED
        or bool(session.shouldfail or session.shouldstop)
        or hunt.error is not None
    )
    found = tallies.failed_attempts or tallies.violation_attempts
    if found and not interrupted and session.exitstatus == pytest.ExitCode.OK:
        # Reruns that passed and swallowed network calls leave pytest at 0.
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if hunt.error is not None and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    terminal = hunt.terminal
    terminal.count({"passed": sum(tallies.passed.values()) + tallies.repeated_passes})
    terminal.hide_tracebacks()
    terminal.condense()
    if hunt.intake.rejected:
        with hunt.writing():
            runs.set_run(hunt.store, hunt.run_id, incomplete=rounds.notes())
    incomplete = "incomplete" if rounds.incomplete else "complete"
    _finish_run(hunt, rounds, "interrupted" if interrupted else incomplete, int(session.exitstatus))
    interrupts.stored()
    if (found or tallies.not_idempotent()) and hunt.settings.isolate and not interrupted:
        with hunt.writing():  # a full disk during isolation: said in the summary
            _isolate(hunt, rounds)
        _past_dates_only(hunt, rounds, session)


def _finish_run(hunt: HuntState, rounds: Rounds, status: str, exit_status: int) -> None:
    with hunt.writing():
        runs.finish_run(hunt.store, hunt.run_id, status=status,
                        rounds_done=rounds.completed, exit_status=exit_status)  # fmt: skip


def _isolate(hunt: HuntState, rounds: Rounds) -> None:
    """Why each flake flakes, in fresh processes (see isolate.run)."""
    from hermetic_hunt.isolate.run import Invocation, IsolationOptions, isolate
    from hermetic_hunt.isolate.wire import probe_args

    config = hunt.config
    quiet = hunt.terminal.reporter is None or config.get_verbosity() < -1
    params = config.invocation_params
    invocation = Invocation(str(params.dir), tuple(probe_args([str(a) for a in params.args])))
    opts = IsolationOptions.of(hunt.settings, hunt.workers, rounds.seconds)
    hunt.isolation = isolate(hunt.store, hunt.run_id, opts, invocation,
                             say=None if quiet else hunt.terminal.line)  # fmt: skip


def _past_dates_only(hunt: HuntState, rounds: Rounds, session: pytest.Session) -> None:
    """Every failing test failed only at dates before today (and no network call was
    blocked): CI will never see it, so the hunt exits 0."""
    isolation = hunt.isolation
    if (
        isolation is None
        or hunt.error is not None
        or hunt.intake.tallies.violation_attempts
        or session.exitstatus != pytest.ExitCode.TESTS_FAILED
    ):
        return
    past = {v.nodeid for _, v in isolation.flakes if v.evidence.get("exposure") == "past"}
    failed = set(hunt.intake.tallies.failed)
    if not failed or not failed <= past:
        return
    session.exitstatus = pytest.ExitCode.OK
    _finish_run(hunt, rounds, "complete", int(session.exitstatus))


def summary_header(hunt: HuntState, rounds: Rounds, seconds: float) -> str:
    """The first line of the end summary: what the rounds did (the rest -- counts,
    findings, leaks -- is :func:`hermetic_hunt.report.summary.end_of_hunt`)."""
    t = hunt.intake.tallies
    db = pasteable.display_path(hunt.store.path, str(hunt.config.invocation_params.dir))
    return (
        f"hermetic-hunt: run {hunt.run_id} · {rounds.completed} round(s) · "
        f"{attempts_text(t.attempts, t.repeated)} in {format_seconds(round(seconds, 1))} · "
        f"{t.failed_attempts:,} failed · {db}"
    )
