"""What a replay says: its header line, its faithfulness warnings and its verdict.

Plain functions over a :class:`~hermetic_hunt.replay.plan.Plan` (no pytest, SQL
or hermetic): the plugin hands them what it observed and prints the
sentences they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hermetic_hunt import stats
from hermetic_hunt.environment import differences
from hermetic_hunt.models import FAILING
from hermetic_hunt.replay.plan import Plan
from hermetic_hunt.seeds import iso
from hermetic_hunt.untrusted import whole_or


def describe(plan: Plan, db_display: str) -> str:
    """The header line: what is replayed, from where, with what."""
    step = plan.steps[-1]
    before = len(plan.steps) - 1
    runs = f"{before + 1} tests in order ({before} before {plan.test})" if before else plan.test
    if plan.together:
        runs += f", and {plan.together[-1].nodeid} at the same time in a second process"
    parts = [f"hermetic-hunt replay: {plan.label} from {db_display}: {runs}", f"mode {step.mode}"]
    if step.mode != "off" and step.seed is not None:
        parts.append(f"seed {step.seed}")
    if step.mode == "record" and plan.journal_of(step) is not None:
        parts.append(f"journal of A{step.attempt_id}")
    elif step.mode != "off" and step.now is not None:
        parts.append(f"now {iso(step.now)}")
    if plan.hash_seed is not None:
        parts.append(f"PYTHONHASHSEED={plan.hash_seed}")
    return " · ".join(parts)


def faithfulness_warnings(
    plan: Plan, recorded_env: dict[str, Any] | None, current_env: dict[str, Any]
) -> list[str]:
    """Everything that makes this replay less than faithful, as sentences."""
    out: list[str] = []
    if recorded_env is None:
        out.append("the hunt's environment is not in the database: cannot compare machines")
    else:
        out.extend(differences(recorded_env, current_env))
    if plan.hash_seed is None:
        out.append(
            "the recording's PYTHONHASHSEED is unknown (it was random): set and dict order "
            "may differ from the recording"
        )
    counted = whole_or(plan.counts.get("threads"), 0) or 0
    threads = max([counted, *(journal.threads for journal in plan.journals.values())])
    if "concurrency" in plan.kinds:
        out.append(
            f"{plan.label} is a concurrency flake: thread timing is not replayed, so a replay "
            "may pass; run it a few times"
        )
    elif threads > 1:
        out.append(
            f"the recording was multi-threaded ({threads} threads read the clock or entropy): "
            "thread interleaving is not replayed, so a race may or may not come back"
        )
    for step in plan.steps:
        journal = plan.journal_of(step)
        if step.mode == "off":
            out.append(
                f"{step.nodeid} was recorded without a sandbox (mode off): its time and "
                "randomness are real, not replayed"
            )
        if journal is None and step.mode == "record":
            out.append(
                f"{step.nodeid} ran in record mode without a stored journal: it runs with "
                "real time and entropy"
            )
        if journal is not None and journal.config.get("network") == "off":
            out.append(
                f"{step.nodeid} was recorded with the network allowed (integration marker "
                "or network='off'): the replay reaches the real network too"
            )
        if journal is not None and journal.overflow:
            out.append(
                f"the journal of A{step.attempt_id} kept only the first readings of "
                f"{', '.join(journal.overflow)}: later ones come from the seed"
            )
    return list(dict.fromkeys(out))


# -- what happened -----------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """The replayed run of the reproducer's last step (its first execution)."""

    outcome: str
    exc_type: str = ""
    location: str = ""
    message: str = ""
    violations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplayVerdict:
    outcome: str  # reproduced | not-reproduced | failed-differently
    line: str


def _got(observed: Observed) -> str:
    text = observed.exc_type or "a failure"
    if observed.message:
        text += f" {observed.message}"
    return f"{text} at {observed.location}" if observed.location else text


def _collided(
    plan: Plan, observed: Observed | None, partner: Observed | None, partner_test: str = ""
) -> str:
    """A collision's pair failed (either side, any signature: who came first decides
    which): the verdict's line; "" when neither failed. ``partner_test``: the test
    ``partner`` is of (a side of several tests: the one that failed)."""
    over = f" over {plan.resource}" if plan.resource else ""
    other = partner_test or plan.together[-1].nodeid
    if observed is not None and observed.outcome in FAILING:
        return (
            f"reproduced {plan.label}: {plan.test} got {_got(observed)} while {other} ran at "
            f"the same time: the collision{over}"
        )
    if partner is not None and partner.outcome in FAILING:
        return (
            f"reproduced {plan.label}: {plan.test} collided with {other}, which got "
            f"{_got(partner)}: the collision{over}"
        )
    return ""


def judge(
    plan: Plan,
    observed: Observed | None,
    stopped: str = "",
    partner: Observed | None = None,
    partner_test: str = "",
) -> ReplayVerdict:
    """Whether the replay showed the recorded behaviour again, as one sentence.

    ``partner``: a collision's partner, run at the same time in another process;
    the collision is back when either of the two failed (whichever came second).
    With sides of several tests (tests that collide over one path) ``partner`` is
    the first test that failed on either side but the plan's last (``partner_test``).
    """
    label, test, expected = plan.label, plan.test, plan.expected
    if plan.together:
        collided = _collided(plan, observed, partner, partner_test)
        if collided:
            return ReplayVerdict("reproduced", collided)
    if observed is None:
        why = stopped or "the session stopped before it"
        return ReplayVerdict(
            "not-reproduced", f"did not reproduce {label} ({test} did not run: {why})"
        )
    failed = observed.outcome in FAILING
    if expected.outcome == "passed" and failed:
        return ReplayVerdict(
            "failed-differently",
            f"failed differently: {label} recorded a pass of {test}, the replay got "
            f"{_got(observed)}",
        )
    if not failed and (expected.outcome != "passed" or observed.outcome != "passed"):
        return ReplayVerdict("not-reproduced", f"did not reproduce {label} ({observed.outcome})")
    if expected.outcome == "passed":
        if expected.violations and not observed.violations:
            return ReplayVerdict(
                "not-reproduced",
                f"did not reproduce {label} (passed without the recorded blocked network call)",
            )
        if expected.violations:
            return ReplayVerdict(
                "reproduced",
                f"reproduced {label}: {test} made the recorded blocked network call "
                f"({observed.violations[0]})",
            )
        return ReplayVerdict("reproduced", f"reproduced {label}: {test} passed as recorded")
    same = not expected.exc_type or (
        observed.exc_type == expected.exc_type and observed.location == expected.location
    )
    if same:
        return ReplayVerdict(
            "reproduced",
            f"reproduced {label}: {test} failed with the recorded signature "
            f"({expected.describe() if expected.exc_type else _got(observed)})",
        )
    return ReplayVerdict(
        "failed-differently",
        f"failed differently: {label} recorded {expected.describe()}, the replay of {test} got "
        f"{_got(observed)}",
    )


#: A replay runs its reproducer at most this many times (a 1% flake would want 299).
MAX_RUNS = 100


@dataclass(frozen=True)
class Runs:
    """How many times a replay runs its reproducer, and why.

    ``planned``: runs at most (the replay stops at the first that reproduces);
    ``needed``: the runs in which a failure at ``rate`` shows with 95%
    confidence (:func:`hermetic_hunt.stats.runs_for_rate`, the fix verifier's
    sizing); ``override``: ``--hermetic-replay-runs`` set it.
    """

    planned: int
    needed: int
    rate: float | None = None
    override: bool = False


def plan_runs(rate: float | None, override: int | None = None) -> Runs:
    """The runs of a replay whose test failed at ``rate`` in the hunt (None: unknown)."""
    needed = stats.runs_for_rate(rate) if rate else 1
    if override is not None:
        return Runs(override, needed, rate, override=True)
    return Runs(min(MAX_RUNS, needed), needed, rate)


def over_runs(plan: Plan, verdicts: Sequence[ReplayVerdict], runs: Runs) -> ReplayVerdict:
    """The verdict of a replay that ran its reproducer ``len(verdicts)`` times.

    The first run that reproduces decides (``reproduced F11 in run 4 of 23``;
    the first run reproducing is said as one run says it);
    else the first that failed differently; else ``did not reproduce F11 in
    23 runs``, with whether that many runs made a reproduction 95% expected.
    One run says what :func:`judge` says.
    """
    assert verdicts
    if (runs.planned <= 1 and len(verdicts) == 1) or verdicts[0].outcome == "reproduced":
        return verdicts[0]  # one run, or the first run did: as one run says it
    number = deciding(verdicts) + 1
    verdict = verdicts[number - 1]
    if verdict.outcome == "reproduced":
        head = f"reproduced {plan.label}"
        rest = verdict.line.removeprefix(head)
        return ReplayVerdict("reproduced", f"{head} in run {number} of {runs.planned}{rest}")
    if verdict.outcome == "failed-differently":
        return ReplayVerdict(verdict.outcome, f"{verdict.line} (in run {number} of {runs.planned})")
    done = len(verdicts)
    last = verdicts[-1].line
    why = last[last.index("(") :] if last.endswith(")") and "(" in last else ""
    rate = f"a {stats.percent(runs.rate)} flake" if runs.rate else "a flake"
    if done >= runs.needed:
        expected = "95% expected"
    else:
        expected = f"not 95% expected: {rate} needs {runs.needed} runs for that"
    return ReplayVerdict(
        "not-reproduced",
        f"did not reproduce {plan.label} in {done} run{'s' * (done != 1)} ({expected})"
        + (f"; the last run: {why[1:-1]}" if why else ""),
    )


def deciding(verdicts: Sequence[ReplayVerdict]) -> int:
    """The index of the run that decides a replay of several: the first that reproduced,
    else the first that failed differently, else the last."""
    first = {verdict.outcome: index for index, verdict in reversed(list(enumerate(verdicts)))}
    return first.get("reproduced", first.get("failed-differently", len(verdicts) - 1))


def blocked_calls(records: Sequence[tuple[str, Sequence[Any]]]) -> str:
    """The line saying which replayed tests made a blocked network call ("" if none).

    ``records`` are ``(nodeid, violations)`` of every replayed execution. The
    replay then fails, as the hunt does: an unmarked test that opens a socket
    fails as a hermetic violation.
    """
    tests = list(dict.fromkeys(nodeid for nodeid, violations in records if violations))
    if not tests:
        return ""
    first = next(v for _, violations in records for v in violations)
    more = f" and {len(tests) - 1} more test(s)" if len(tests) > 1 else ""
    return (
        f"network violation: {tests[0]}{more} made a blocked network call "
        f"({first.describe()}); it fails the replay as it fails the hunt (mark the test "
        "with the integration marker if it needs the network)"
    )
