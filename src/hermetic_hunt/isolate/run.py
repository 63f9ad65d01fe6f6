"""An isolation run: a hunt's flaky tests -> classifiers and probes -> ``flakes`` rows.

Called after the rounds of ``pytest --hermetic-hunt`` (:func:`isolate_after_hunt`)
and by ``hermetic-hunt isolate`` (:func:`isolate_database`). Both read the
run back from the database, start probe servers that collect what the hunt
collected (:mod:`hermetic_hunt.isolate.probes`), classify every flaky test
(:mod:`hermetic_hunt.isolate.classifier`) and store each result as soon as it is known,
so an interrupted isolation keeps what it finished.

Tests that failed in every attempt are not flakes: each is run once with
the sandbox off (``test_checks``, ``sandbox-off``): passing means
*sandbox-incompatible*, failing means *broken*.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path

from hermetic_hunt import commands
from hermetic_hunt.findings import Finding, Probe
from hermetic_hunt.isolate import wire
from hermetic_hunt.isolate.case import ClassifySettings
from hermetic_hunt.isolate.classifier import Classifier
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget
from hermetic_hunt.models import (
    DEFAULT_INTEGRATION_MARKER,
    DEFAULT_ISOLATE_BUDGET,
    DEFAULT_PROBE_TIMEOUT,
    Attempt,
    Settings,
    Step,
    format_seconds,
)
from hermetic_hunt.seeds import probe_hash_seed
from hermetic_hunt.store import Store
from hermetic_hunt.store import isolation as db

_PERF = time.perf_counter
SANDBOX_OFF = "sandbox-off"


@dataclass(frozen=True)
class IsolationOptions:
    budget: int = DEFAULT_ISOLATE_BUDGET
    timeout: float = DEFAULT_PROBE_TIMEOUT
    parallel: int = 1
    integration_marker: str = DEFAULT_INTEGRATION_MARKER
    fork: bool | None = None

    @classmethod
    def of(cls, settings: Settings, workers: int) -> IsolationOptions:
        return cls(
            budget=settings.isolate_budget,
            timeout=settings.probe_timeout,
            parallel=max(1, workers),
            integration_marker=settings.integration_marker,
        )


@dataclass
class IsolationReport:
    """What one isolation run did (the terminal and CLI print :meth:`lines`)."""

    run_id: int
    rootdir: str
    flakes: list[tuple[str, Finding]] = field(default_factory=list)
    checks: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    fork: bool = True
    parallel: int = 1
    interrupted: bool = False
    pending: int = 0

    def lines(self, db_path: str | os.PathLike[str], cwd: str) -> list[str]:
        if not self.flakes and not self.checks and not self.interrupted:
            return []
        probes = sum(len(v.probes) for _, v in self.flakes)
        how = "forked from a collected session" if self.fork else "one process each"
        plural = "s" if len(self.flakes) != 1 else ""
        out = [
            "",
            f"hermetic-hunt isolation: {len(self.flakes)} flaky test{plural} · {probes} probes "
            f"({how}, {self.parallel} at a time) in {format_seconds(round(self.seconds, 1))}",
        ]
        for flake_id, verdict in self.flakes:
            out.extend(_flake_lines(flake_id, verdict, db_path, cwd, self.rootdir))
        if self.checks:
            out.append("always failing (run once with the sandbox off):")
            out.extend(f"  {nodeid}  {verdict}" for nodeid, verdict in self.checks)
        if self.interrupted:
            out.append(
                f"isolation interrupted: {self.pending} flaky test(s) not isolated; "
                "finish with: hermetic-hunt isolate"
            )
        return out


def _flake_lines(
    flake_id: str, v: Finding, db_path: str | os.PathLike[str], cwd: str, rootdir: str
) -> list[str]:
    kinds = ", ".join(v.kinds) or "not classified"
    status = "" if v.status == "isolated" else f" [{v.status}]"
    cost = f"{len(v.probes)} probes, {format_seconds(round(v.probe_seconds, 1))}"
    out = [f"  {flake_id} {v.nodeid}  {kinds}{status} ({cost})"]
    unfinished = " (search unfinished, not minimal)" if v.status == "partial" else ""
    for label, sets in (("polluters", v.polluters), ("state-setters", v.state_setters)):
        for members in sets:
            out.append(f"      {label}{unfinished}: {' + '.join(members)}")
    if v.cleaners:
        out.append(f"      cleaners: {', '.join(v.cleaners)}")
    if v.reproducer is not None and v.confirmed is False and v.status == "isolated":
        out.append("      reproducer not confirmed: it did not fail again when re-run")
    rate = [n for n in v.notes if n.startswith("the reproducer fails in about")]
    if "concurrency" in v.kinds and rate:
        out.append(f"      {rate[0]}: replay it a few times")
    elif v.status != "isolated" and v.notes:
        out.append(f"      note: {v.notes[-1]}")
    elif "unexplained" in v.kinds:
        why = v.notes[0] if v.notes else _why(v, "unexplained")
        out.append(f"      note: {why}")
    if v.reproducer is not None:
        command = commands.replay_command(db_path, flake_id, cwd, rootdir=rootdir)
        out.append(f"      replay: {command}")
    return out


def _why(v: Finding, kind: str) -> str:
    claims = [c for c in v.evidence.get("verdicts", []) if c.get("kind") == kind]
    return str(claims[0]["why"]) if claims else ""


def isolate(
    store: Store,
    run_id: int | None,
    opts: IsolationOptions,
    only: Sequence[str] | None = None,
    say: Callable[[str], None] | None = None,
) -> IsolationReport:
    """Isolate the flaky tests of ``run_id`` (all of them, or ``only`` these nodeids)."""
    started = _PERF()
    facts = db.run_facts(store, run_id)
    found = db.candidates(store, facts.run_id, only)
    report = IsolationReport(facts.run_id, facts.rootdir, parallel=opts.parallel)
    if not found.flaky and not found.always_failing and not found.not_idempotent:
        return report
    target = ProbeTarget(
        invocation_dir=facts.invocation_dir,
        args=tuple(wire.probe_args(facts.argv)),
        settings=replace(facts.settings, integration_marker=opts.integration_marker),
    )
    history = db.RunHistory(store, facts.run_id)
    flaky = {**found.flaky, **found.not_idempotent}
    rows = db.ensure_flakes(store, list(flaky), facts.run_id)
    settings = ClassifySettings(budget=opts.budget, base_seed=facts.base_seed)
    runner = ProbeRunner(
        target, parallel=opts.parallel, timeout=opts.timeout, fork=opts.fork,
        journals=history.journal,
    )  # fmt: skip
    report.fork = runner.fork
    if say is not None and flaky:
        say(f"hermetic-hunt: isolating {len(flaky)} flaky test(s)...")
    try:
        _classify_all(store, flaky, history, runner, settings, rows, report)
        _sandbox_off(store, found.always_failing, runner, facts, report)
    except KeyboardInterrupt:
        runner.abort()
        report.interrupted = True
        report.pending = len(flaky) - len(report.flakes)
    finally:
        runner.close()
        history.close()
        report.seconds = _PERF() - started
    report.flakes.sort(key=lambda item: rows[item[1].nodeid][0])  # F1, F2, ...
    return report


def _classify_all(
    store: Store,
    flaky: dict[str, list[Attempt]],
    history: db.RunHistory,
    runner: ProbeRunner,
    settings: ClassifySettings,
    rows: dict[str, tuple[int, str]],
    report: IsolationReport,
) -> None:
    classifiers = [Classifier(n, a, history, runner, settings) for n, a in flaky.items()]
    if not classifiers:
        return
    threads = min(len(classifiers), max(2, 2 * runner.parallel))
    pool = ThreadPoolExecutor(max_workers=threads)
    try:
        # Phase 1 for every flake before any phase 2: alone runs never
        # overlap with sequences that contain the same test.
        for _ in _completed({pool.submit(c.environment): c for c in classifiers}):
            pass
        for c in _completed({pool.submit(c.order): c for c in classifiers}):
            verdict = c.result()
            row, flake_id = rows[c.nodeid]
            db.save_finding(store, row, report.run_id, verdict)
            report.flakes.append((flake_id, verdict))
    except KeyboardInterrupt:
        # Stop the probes first, or the pool would wait for them.
        runner.abort()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _completed(futures: dict[Future[None], Classifier]) -> Iterator[Classifier]:
    """Classifiers as their work completes (a failure is noted on the classifier)."""
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
    facts: db.RunFacts,
    report: IsolationReport,
) -> None:
    """Run each always-failing test once without the sandbox."""
    names = sorted(broken)
    probes = []
    for nodeid in names:
        first = broken[nodeid][0]
        hash_seed = first.hash_seed
        if hash_seed is None:
            hash_seed = probe_hash_seed(facts.base_seed, 0)
        probes.append(Probe(SANDBOX_OFF, (Step(nodeid, None, None, "off"),), hash_seed))
    for nodeid, result in zip(names, runner.run_many(probes), strict=True):
        outcome = result.outcome
        if outcome == "passed":
            text = "sandbox-incompatible: passes with the sandbox off"
        elif outcome == "failed":
            text = "broken: fails with the sandbox off too"
        else:
            text = f"not checked ({outcome}: {result.detail})"
        db.add_check(store, facts.run_id, nodeid, SANDBOX_OFF, outcome, text)
        report.checks.append((nodeid, text))


# -- the two doors -------------------------------------------------------------


def isolate_after_hunt(
    store: Store,
    run_id: int,
    settings: Settings,
    workers: int,
    cwd: str,
    say: Callable[[str], None] | None = None,
) -> list[str]:
    """Isolation at the end of ``pytest --hermetic-hunt``; the summary's lines."""
    report = isolate(store, run_id, IsolationOptions.of(settings, workers), say=say)
    return report.lines(store.path, cwd)


def isolate_database(
    db_path: str,
    run_id: int | None,
    refs: Sequence[str],
    *,
    budget: int | None = None,
    timeout: float | None = None,
    workers: int | None = None,
    cwd: str | None = None,
) -> list[str]:
    """``hermetic-hunt isolate``: isolate (again) the flakes of a stored run.

    The hunt's stored settings decide, unless an argument overrides them.
    """
    where = cwd or os.getcwd()
    path = Path(where, os.path.expanduser(db_path)).resolve()
    with Store.open(path, create=False) as store:
        facts = db.run_facts(store, run_id)
        only = db.resolve_refs(store, refs) if refs else None
        stored = IsolationOptions.of(facts.settings, workers or facts.workers)
        opts = replace(
            stored,
            budget=budget if budget is not None else stored.budget,
            timeout=timeout if timeout is not None else stored.timeout,
        )
        report = isolate(store, facts.run_id, opts, only)
        lines = report.lines(store.path, where)
    return lines or [f"run {facts.run_id}: nothing to isolate (no flaky or always-failing test)"]
