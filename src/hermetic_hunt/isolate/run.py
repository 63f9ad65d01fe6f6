"""An isolation run: a hunt's flaky tests -> classifiers and probes -> ``flakes`` rows.

Called after the rounds of ``pytest --hermetic-hunt`` (:func:`isolate`, with the
hunt's own :class:`Invocation`) and by ``hermetic-hunt isolate``
(:func:`isolate_database`). Both read the run back from the database, start
probe servers that collect what the hunt collected
(:mod:`hermetic_hunt.isolate.probes`), classify every flaky test
(:mod:`hermetic_hunt.isolate.classifier`) and store each result as soon as it
is known, so an interrupted isolation keeps what it finished. Parametrizations that
fail alike are isolated once (:mod:`.groups`); the most exposed flakes go
first, within the probe and time budgets; :mod:`.summary` words the result.

Tests that failed in every attempt are not flakes: each is run once with
the sandbox off, *sandbox-incompatible* or *broken* (docs/isolation.md,
"What is stored", ``test_checks``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hermetic_hunt.engine.files import FileWatch
from hermetic_hunt.findings import Finding, IsolationReport, Probe, ProbeResult
from hermetic_hunt.isolate import shared, wire
from hermetic_hunt.isolate.blast import Polluters, victims_of
from hermetic_hunt.isolate.case import ClassifySettings, Deadline, hash_seed_or_default
from hermetic_hunt.isolate.classifier import Classifier
from hermetic_hunt.isolate.collision import relative
from hermetic_hunt.isolate.groups import Group, adopt, sample
from hermetic_hunt.isolate.groups import group as groups_of
from hermetic_hunt.isolate.order import recorded_step
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget
from hermetic_hunt.isolate.search import BudgetExceeded
from hermetic_hunt.models import (
    DEFAULT_INTEGRATION_MARKER,
    DEFAULT_ISOLATE_BUDGET,
    DEFAULT_PROBE_TIMEOUT,
    MIN_ISOLATE_SECONDS,
    Attempt,
    Settings,
    Step,
    format_seconds,
    is_plain,
)
from hermetic_hunt.project import project_root
from hermetic_hunt.store import Store, flakes, runs
from hermetic_hunt.store import isolation as db

_PERF = time.perf_counter
SANDBOX_OFF = "sandbox-off"
#: What the sandbox-off check of an always-failing test shows, by outcome.
_SANDBOX_OFF_TEXT = {
    "passed": "sandbox-incompatible: passes with the sandbox off",
    "failed": "broken: fails with the sandbox off too",
}
#: The least time an ``auto`` budget leaves for cleaner searches (seconds).
EXTRAS_MIN_SECONDS = 10.0


@dataclass(frozen=True)
class IsolationOptions:
    """``budget``: probes per flaky test; ``seconds``: the overall time (None:
    ``auto``, as long as the rounds took -- ``rounds_seconds`` -- and at
    least :data:`~hermetic_hunt.models.MIN_ISOLATE_SECONDS`)."""

    budget: int = DEFAULT_ISOLATE_BUDGET
    timeout: float = DEFAULT_PROBE_TIMEOUT
    parallel: int = 1
    integration_marker: str = DEFAULT_INTEGRATION_MARKER
    fork: bool | None = None
    seconds: float | None = None
    rounds_seconds: float | None = None

    @classmethod
    def of(
        cls, settings: Settings, workers: int, rounds_seconds: float | None = None
    ) -> IsolationOptions:
        return cls(
            budget=settings.isolate_budget,
            timeout=settings.probe_timeout,
            parallel=max(1, workers),
            integration_marker=settings.integration_marker,
            seconds=settings.isolate_seconds,
            rounds_seconds=rounds_seconds,
        )

    @property
    def time_budget(self) -> float:
        if self.seconds is not None:
            return self.seconds
        return max(MIN_ISOLATE_SECONDS, self.rounds_seconds or 0.0)

    @property
    def extras_budget(self) -> float:
        """Time for evidence beyond the verdicts (cleaners): with ``auto``, what
        the rounds took (at least :data:`EXTRAS_MIN_SECONDS`), so that a large
        suite's cleaner search does not cost more than its rounds."""
        if self.seconds is not None:
            return self.seconds
        return min(self.time_budget, max(EXTRAS_MIN_SECONDS, self.rounds_seconds or 0.0))


@dataclass(frozen=True)
class Invocation:
    """Where probe servers start, with which pytest arguments.

    After a hunt: the running hunt's own directory and arguments (what the
    user typed, :func:`~hermetic_hunt.isolate.wire.probe_args`). For a stored
    run (``args`` None): the project's rootdir and
    :func:`~hermetic_hunt.isolate.wire.stored_run_args` -- never the stored
    ``argv`` or directories.
    """

    directory: str
    args: tuple[str, ...] | None = None


def isolate(
    store: Store,
    run_id: int | None,
    opts: IsolationOptions,
    invocation: Invocation,
    only: Sequence[str] | None = None,
    say: Callable[[str], None] | None = None,
) -> IsolationReport:
    """Isolate the flaky tests of ``run_id`` (all of them, or ``only`` these nodeids).

    Always-failing tests are checked first (one probe each); then every
    group of flaky tests, most exposed first, within the budgets.
    """
    started = _PERF()
    facts = runs.run_facts(store, run_id)
    found = db.candidates(store, facts.run_id, only)
    report = IsolationReport(facts.run_id, facts.rootdir, str(store.path),
                             parallel=opts.parallel, time_budget=opts.time_budget)  # fmt: skip
    if not found.flaky and not found.always_failing and not found.not_idempotent:
        return report
    history = db.RunHistory(store, facts.run_id, default_round=facts.settings.default_round)
    try:
        args = invocation.args
        if args is None:
            args = tuple(wire.stored_run_args(Path(invocation.directory), history.tests()))
    except BaseException:
        history.close()
        raise
    target = ProbeTarget(
        invocation_dir=invocation.directory,
        args=args,
        settings=replace(facts.settings, integration_marker=opts.integration_marker),
    )
    flaky = {**found.flaky, **found.not_idempotent}
    rows = flakes.ensure_flakes(store, list(flaky), facts.run_id)
    crossing = facts.workers > 1
    deadline = Deadline(started + opts.time_budget, opts.time_budget)
    settings = ClassifySettings(
        budget=opts.budget, base_seed=facts.base_seed, deadline=deadline, rootdir=facts.rootdir,
        dates=facts.settings.dates, today_window=facts.settings.today_window,
    )  # fmt: skip
    runner = ProbeRunner(
        target, parallel=opts.parallel, timeout=opts.timeout, fork=opts.fork,
        journals=history.journal, writes=history.writes(),
        checkout=FileWatch(facts.rootdir, own=store.own_files()) if facts.rootdir else None,
    )  # fmt: skip
    report.fork = runner.fork
    work = _Work(store, flaky, history, runner, settings, rows, report,
                 say or (lambda line: None), opts.extras_budget)  # fmt: skip
    try:
        _sandbox_off(store, found.always_failing, runner, facts, report)
        if flaky:
            if crossing:
                work.shared_resources()
            work.run(flakes.known_verdicts(store, list(flaky)))
    except KeyboardInterrupt:
        runner.abort()
        report.interrupted = True
        report.pending = len(flaky) - len(report.flakes)
    finally:
        runner.close()
        history.close()
        report.seconds = _PERF() - started
    return report


def _rate(attempts: Sequence[Attempt]) -> float:
    plain = [a for a in attempts if is_plain(a.repeat) and (a.failed or a.passed)]
    return sum(a.failed for a in plain) / len(plain) if plain else 0.0


@dataclass(eq=False)
class _Work:
    """One isolation's flakes: grouped, ranked, classified phase by phase, stored."""

    store: Store
    flaky: dict[str, list[Attempt]]
    history: db.RunHistory
    runner: ProbeRunner
    settings: ClassifySettings
    rows: dict[str, tuple[int, str]]
    report: IsolationReport
    say: Callable[[str], None]
    extras_seconds: float
    saved: dict[str, int] = field(default_factory=dict)  # nodeid -> probes already stored
    done: int = 0
    total: int = 0
    #: Failures explained by a path another worker used at the same time
    #: (:mod:`.shared`), by nodeid: each classifier of the test starts with them.
    crossed: dict[str, list[shared.Crossed]] = field(default_factory=dict)

    def classifier(self, nodeid: str) -> Classifier:
        case = Classifier(nodeid, self.flaky[nodeid], self.history, self.runner, self.settings)
        for crossed in self.crossed.get(nodeid, ()):
            crossed.apply(case)
        return case

    # -- causes that cross workers (before the tests are isolated one by one) -----

    def shared_resources(self) -> None:
        """Paths that tests on several workers used at once: each probed once
        (:func:`.shared.confirm`, through its lead test's case), the failures it
        explains set aside for every test (:func:`.shared.explained`)."""
        found = shared.resources(self.flaky, self.history.round_attempts)
        if not found:
            return
        self.say(
            f"hermetic-hunt: {len(found)} path(s) that tests on several workers used at "
            "once: probing each with two processes"
        )
        taken: dict[str, set[int]] = {}
        for resource in found:
            try:
                self._probe_resource(resource, taken)
            except BudgetExceeded:
                return  # the time is up: what is left is isolated as usual (or pending)
            except Exception as exc:  # a bug must not cost the isolation of every test
                self.say(f"hermetic-hunt: the probe of {resource.path} failed: {exc!r}")

    def _probe_resource(self, resource: shared.Resource, taken: dict[str, set[int]]) -> None:
        tests = resource.tests()
        lead = next((n for n in tests if n in self.flaky), None)
        if lead is None:
            return
        order = {nodeid: i for i, nodeid in enumerate(self.history.tests())}

        def duration(nodeid: str) -> float:
            attempt = self.history.representative(nodeid)
            return attempt.duration if attempt is not None else 0.0

        chosen = sorted(shared.sample(resource, duration), key=lambda n: order.get(n, 1 << 30))
        probe_case = Classifier(lead, self.flaky[lead], self.history, self.runner, self.settings)
        first = next(a for a in resource.failures()[lead])
        rel = relative(resource.path, self.settings.rootdir)
        verdict = shared.confirm(probe_case, resource, chosen, self._step_for,
                                 probe_case.hash_seed_of(first), f"shared {rel}")  # fmt: skip
        probes = list(probe_case.finding.probes)
        if verdict is None:
            self._keep_probes(lead, probes)
            return

        def probe_member(nodeid: str) -> tuple[frozenset[shared.Shown], list[Any]]:
            case = Classifier(nodeid, self.flaky[nodeid], self.history, self.runner, self.settings)
            also = shared.confirm_member(case, verdict, self._step_for, f"shared {rel}")
            return also, list(case.finding.probes)

        deadline = self.settings.deadline
        alone = None if deadline is not None and deadline.passed else probe_member
        found = shared.members(resource, verdict, self.flaky, self.history.round_attempts,
                               alone, taken)  # fmt: skip
        leads = bool(found.explained.get(lead))
        lead_id = self.rows[lead][1]
        group = found.facts(rel, lead, lead_id if leads else None)
        for nodeid, explained in found.explained.items():
            mine = probes if nodeid == lead else found.probes.get(nodeid, [])
            crossed = shared.Crossed(resource, verdict, explained, rel, group, mine,
                                     lead_id if leads and nodeid != lead else "",
                                     found.left[nodeid])  # fmt: skip
            self.crossed.setdefault(nodeid, []).append(crossed)
        if lead not in found.explained:
            self._keep_probes(lead, probes)

    def _keep_probes(self, nodeid: str, probes: list[tuple[Probe, ProbeResult]]) -> None:
        """Probes that showed no shared cause are still the lead's evidence."""
        if probes:
            self.crossed.setdefault(nodeid, []).append(shared.Crossed.probes_only(probes))

    def priority(self, g: Group, known: dict[str, tuple[str, list[str]]]) -> tuple[Any, ...]:
        """Most valuable first: what CI sees, then fail rate, then not yet explained."""
        attempts = self.flaky[g.lead]
        plain_failures = any(a.failed and is_plain(a.repeat) for a in attempts)
        tier = 0 if plain_failures else (1 if any(a.failed for a in attempts) else 2)
        status, kinds = known.get(g.lead, ("pending", []))
        explained = status == "isolated" and bool(kinds) and kinds != ["unexplained"]
        return (tier, int(explained), -_rate(attempts), g.lead)

    def run(self, known: dict[str, tuple[str, list[str]]]) -> None:
        groups = sorted(groups_of(self.flaky), key=lambda g: self.priority(g, known))
        self.total = len(groups)
        self.report.rates.update({self.rows[g.lead][1]: _rate(self.flaky[g.lead]) for g in groups})
        alike = sum(len(g.members) for g in groups if len(g.members) > 1)
        how = f" ({alike} of them parametrizations that fail alike)" if alike else ""
        self.say(
            f"hermetic-hunt: isolating {len(self.flaky)} test(s) in {len(groups)} "
            f"finding(s){how} · budget {self.settings.budget} probes each, "
            f"{format_seconds(round(self.report.time_budget, 1))} in all"
        )
        leads = [self.classifier(g.lead) for g in groups]
        by_lead = dict(zip((g.lead for g in groups), groups, strict=True))
        alone: list[Classifier] = []
        with _Pool(self.runner) as pool:
            for _ in pool.each(leads, Classifier.environment):
                pass
            for case in pool.each(leads, Classifier.order):
                self.finish(case)
                alone.extend(self.adopt(case, by_lead[case.nodeid]))
            # Instances that did not fail like their representative: on their own.
            for _ in pool.each(alone, Classifier.environment):
                pass
            for case in pool.each(alone, Classifier.order):
                self.finish(case)
            wanted = [case for case in leads + alone if case.wants_extras]
            extras = self.extras_deadline()
            for case in wanted:
                case.settings = replace(case.settings, deadline=extras)
            for case in pool.each(wanted, Classifier.extras):
                self.store_result(case)
        self.blast_radius([case.finding for case in leads + alone], extras)
        self.group_collisions()

    def group_collisions(self) -> None:
        """Tests that only collide over one path are one finding (as the reports show
        them): led by the test whose probe showed the path shared."""
        by_path: dict[str, list[tuple[str, Finding]]] = {}
        for flake_id, finding in self.report.flakes:
            facts = finding.evidence.get("shared") if isinstance(finding.evidence, dict) else None
            if finding.kinds == ["collision"] and isinstance(facts, dict):
                by_path.setdefault(str(facts.get("resource")), []).append((flake_id, finding))
        for path, found in by_path.items():
            if len(found) < 2:
                continue
            lead = next(
                (f for f in found if f[1].evidence["shared"].get("lead") == f[1].nodeid), found[0]
            )
            self.report.collide[lead[0]] = (path, [f for f, _ in found if f != lead[0]])

    def blast_radius(self, findings: Sequence[Finding], deadline: Deadline | None) -> None:
        """Every other victim of each polluter set found: one probe per set
        (:mod:`.blast`), within the time left; each is stored as a flake."""
        sets: dict[tuple[str, ...], Polluters] = {}
        for f in findings:
            repro = f.reproducer
            if "victim" not in f.kinds or repro is None or not f.confirmed or len(repro.steps) < 2:
                continue
            steps = tuple(repro.steps[:-1])
            if [s.nodeid for s in steps] not in f.polluters:
                continue  # the reproducer is not exactly a polluter set
            hash_seed = hash_seed_or_default(repro.hash_seed, self.settings.base_seed)
            _, shown_by = self.rows[f.nodeid]
            sets.setdefault(
                tuple(s.nodeid for s in steps), Polluters(steps, hash_seed, shown_by, repro.run_id)
            )
        if not sets:
            return
        known = set(self.flaky) | set(self.rows)
        for polluters in sets.values():
            collected = self.runner.collected(polluters.hash_seed)
            tests = [n for n in self.history.tests() if collected is None or n in collected]
            try:
                found = victims_of(polluters, tests, known, self._step_for, self.runner, deadline)
            except BudgetExceeded:
                return
            for finding in found:
                known.add(finding.nodeid)
                rows = flakes.ensure_flakes(self.store, [finding.nodeid], self.report.run_id)
                self.rows.update(rows)
                row, flake_id = rows[finding.nodeid]
                flakes.save_finding(self.store, row, self.report.run_id, finding)
                self.report.flakes.append((flake_id, finding))
                self.say(
                    f"hermetic-hunt: {flake_id} · victim of {' + '.join(polluters.nodeids)}"
                    f" · found by the polluter probe · {len(finding.probes)} probes · "
                    f"{format_seconds(round(finding.probe_seconds, 1))}"
                )

    def _step_for(self, nodeid: str) -> Step:
        return recorded_step(self.history, self.settings, nodeid)

    def extras_deadline(self) -> Deadline:
        """The cleaner searches' time, counted from now (they start once every
        flake has its verdict), within the isolation's overall budget."""
        at, overall = _PERF() + self.extras_seconds, self.settings.deadline
        return Deadline(min(at, overall.at) if overall else at, self.extras_seconds)

    def store_result(self, case: Classifier) -> Finding:
        verdict = case.result()
        row, flake_id = self.rows[case.nodeid]
        flakes.save_finding(self.store, row, self.report.run_id, verdict,
                        steps_from=self.saved.get(case.nodeid, 0) + 1)  # fmt: skip
        self.saved[case.nodeid] = len(verdict.probes)
        if all(v is not verdict for _, v in self.report.flakes):
            self.report.flakes.append((flake_id, verdict))
        return verdict

    def finish(self, case: Classifier) -> None:
        verdict = self.store_result(case)
        self.done += 1
        _, flake_id = self.rows[case.nodeid]
        kinds = ", ".join(verdict.kinds) or verdict.status
        state = f" [{verdict.status}]" if verdict.status not in ("isolated", "pending") else ""
        self.say(
            f"hermetic-hunt: {flake_id} {self.done}/{max(self.total, self.done)} · {kinds}"
            f"{state} · {len(verdict.probes)} probes · "
            f"{format_seconds(round(verdict.probe_seconds, 1))}"
        )

    def adopt(self, lead: Classifier, g: Group) -> list[Classifier]:
        """The other instances of ``lead``'s group: a sample probed, the rest take
        its verdict; those whose probe disagrees come back, to be isolated alone."""
        if not g.others:
            return []
        verdict = lead.finding
        _, lead_id = self.rows[lead.nodeid]
        if verdict.status != "isolated" or (verdict.reproducer is None and not verdict.kinds):
            # Not finished: each instance waits for its own isolation.
            for nodeid in g.others:
                case = self.classifier(nodeid)
                case.finding.status = "pending"
                case.finding.notes.append(
                    f"not isolated: grouped with {lead_id} (same test function, same failure), "
                    f"whose isolation is not finished ({verdict.status}); finish with: "
                    f"hermetic-hunt isolate"
                )
                self.store_result(case)
            return []
        # No reproducer, yet explained as far as anything could be (unexplained):
        # nothing to replay, every instance takes the verdict unprobed.
        chosen = set(sample(g.others)) if verdict.reproducer is not None else set()
        again: list[Classifier] = []
        adopted: list[str] = []
        sampled: set[str] = set()
        for nodeid in g.others:
            case = self.classifier(nodeid)
            probe = nodeid in chosen
            try:
                ok = adopt(case, verdict, lead_id, probe=probe)
            except BudgetExceeded:
                ok = adopt(case, verdict, lead_id, probe=False)
                probe = False
            if not ok:
                again.append(self.classifier(nodeid))
                continue
            _, flake_id = self.rows[nodeid]
            adopted.append(flake_id)
            if probe:
                sampled.add(flake_id)
            self.store_result(case)
        if again:
            # The group is not one finding after all: every unprobed instance
            # keeps the verdict it was given, the disagreeing ones are isolated.
            lead.finding.notes.append(
                f"{len(again)} of its parametrizations did not fail like it: isolated on their own"
            )
        self.report.members[lead_id] = adopted
        self.report.sampled[lead_id] = sampled
        self.total += len(again)
        return again


class _Pool:
    """Runs one phase of many classifiers in threads; yields each as it finishes."""

    def __init__(self, runner: ProbeRunner) -> None:
        self.runner = runner
        # Each classifier waits on one probe at a time: several per probe slot
        # keep the slots busy while others read the database or decide.
        self.pool = ThreadPoolExecutor(max_workers=max(4, 4 * runner.parallel))

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is KeyboardInterrupt:
            self.runner.abort()  # stop the probes first, or the pool would wait for them
        self.pool.shutdown(wait=True, cancel_futures=True)

    def each(
        self, classifiers: Sequence[Classifier], phase: Callable[[Classifier], None]
    ) -> Iterator[Classifier]:
        """Submitted in order (most valuable first); yielded as they complete (a
        failure is noted on the classifier)."""
        futures = {self.pool.submit(phase, case): case for case in classifiers}
        try:
            for future in as_completed(futures):
                classifier = futures[future]
                error = future.exception()
                if error is not None:
                    classifier.fail(error)
                yield classifier
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            raise


def _sandbox_off(
    store: Store,
    broken: dict[str, list[Attempt]],
    runner: ProbeRunner,
    facts: runs.RunFacts,
    report: IsolationReport,
) -> None:
    """Run each always-failing test once without the sandbox."""
    names = sorted(broken)
    # In the process that collected it, as a plain run: not in a fork of it
    # (a pid taken at collection must be the running process's).
    probes = [
        Probe(SANDBOX_OFF, (Step(nodeid, None, None, "off"),),
              hash_seed_or_default(broken[nodeid][0].hash_seed, facts.base_seed), unforked=True)
        for nodeid in names
    ]  # fmt: skip
    for nodeid, result in zip(names, runner.run_many(probes), strict=True):
        outcome = result.outcome
        text = _SANDBOX_OFF_TEXT.get(outcome, f"not checked ({outcome}: {result.detail})")
        db.add_check(store, facts.run_id, nodeid, SANDBOX_OFF, outcome, text)
        report.checks.append((nodeid, text))


# -- the command's door ---------------------------------------------------------


def isolate_database(
    db_path: str,
    run_id: int | None,
    refs: Sequence[str],
    *,
    budget: int | None = None,
    seconds: float | None = None,
    timeout: float | None = None,
    workers: int | None = None,
    cwd: str | None = None,
    say: Callable[[str], None] | None = None,
) -> IsolationReport:
    """``hermetic-hunt isolate``: isolate (again) the flakes of a stored run.

    The hunt's stored settings decide, unless an argument overrides them
    (``budget``: probes per flaky test; ``seconds``: the overall time).
    Probes run in the project's rootdir (:func:`hermetic_hunt.project.project_root`)
    with :func:`~hermetic_hunt.isolate.wire.stored_run_args`: the stored
    ``argv`` is never executed.
    """
    with Store.open(db_path, create=False, base=cwd) as store:
        facts = runs.run_facts(store, run_id)
        only = db.resolve_refs(store, refs) if refs else None
        stored = IsolationOptions.of(
            facts.settings, workers or facts.workers, runs.rounds_seconds(store, facts.run_id)
        )
        given: dict[str, Any] = {"budget": budget, "seconds": seconds, "timeout": timeout}
        opts = replace(stored, **{name: v for name, v in given.items() if v is not None})
        root = project_root(facts.rootdir, cwd or os.getcwd())
        return isolate(store, facts.run_id, opts, Invocation(str(root)), only, say=say)
