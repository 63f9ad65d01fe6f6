"""What ``report``, ``list`` and ``show`` do: open the database, query, render.

Each public function here is what one CLI command calls. They read through
:mod:`hermetic_hunt.store.queries` (the SQL) and render through the pure
report modules; errors are :class:`~hermetic_hunt.errors.HuntError` with a
one-line message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from hermetic_hunt import journal, pasteable
from hermetic_hunt.errors import BadDatabase, BadJournal, BadOption, UnknownId
from hermetic_hunt.models import parse_ref
from hermetic_hunt.replay.plan import location_arg
from hermetic_hunt.report import format_name, render
from hermetic_hunt.report.fixes import fix_views
from hermetic_hunt.report.history import history, runs_since
from hermetic_hunt.report.model import Replay, Report, assemble, flake_run
from hermetic_hunt.report.show import Comparison, render_attempt, render_flake
from hermetic_hunt.report.text import list_lines
from hermetic_hunt.report.words import (
    summary_line,
)
from hermetic_hunt.store import Store, flakes, queries
from hermetic_hunt.store import fixes as fix_db
from hermetic_hunt.store import history as history_db
from hermetic_hunt.store import runs as run_db
from hermetic_hunt.store.rows import AttemptDetail


def open_database(path: str | os.PathLike[str]) -> Store:
    """An existing hermetic-hunt database, read-only (never creates or migrates one)."""
    return Store.open(path, create=False, write=False)


def load_report(
    store: Store, run: int | None = None, cwd: str | None = None, since: str | None = None
) -> Report:
    """The report of run ``run`` (every run when None) of ``store``; ``since`` a date or
    a git revision: only the runs since then."""
    where = os.fspath(cwd or os.getcwd())
    name = pasteable.display_path(store.path, where)
    runs = run_db.run_rows(store, run)
    if not runs:
        raise BadDatabase(
            f"{name} holds no runs yet: run a hunt first (pytest --hermetic-hunt=30 -n auto)"
        )
    selection = None if run is None else [run]
    if since is not None:
        places = [where, *dict.fromkeys(r for r, _ in run_db.locations(store).values())]
        points = [p for p in history_db.runs(store) if run is None or p.run_id == run]
        selection = runs_since(since, points, places)
        runs = [r for r in runs if r.id in selection]
    counts = queries.test_counts(store, selection)
    failing = [c.nodeid for c in counts if c.failed or c.second_run_failures]
    report = assemble(
        database=name,
        runs=runs,
        selected_run=run,
        counts=counts,
        flakes=flakes.read(store, database=name),
        checks=queries.check_rows(store, selection),
        violations=queries.violation_rows(store, selection),
        rounds=tuple(queries.round_cells(store, selection, failing)),
        replay=replayer(store, where),
        leaks=queries.leak_rows(store, selection),
        conditions=queries.condition_rows(store, selection, failing),
    )
    return with_history_and_fixes(store, report, since, name)


def with_history_and_fixes(store: Store, report: Report, since: str | None, name: str) -> Report:
    """``report`` with each flake's suggested fix and each flaky test's history.

    History spans every run of the database, whatever the selection: it is
    what tells a flake that stopped failing from one that never failed (a
    database of one run has none).
    """
    nodeids = [f.nodeid for f in report.flakes]
    nodeids += [t.nodeid for t in report.with_status("flaky") if t.nodeid not in nodeids]
    points = history_db.runs(store)
    histories = {}
    if len(points) > 1:  # one run has no history to tell
        tallies = history_db.tallies(store, nodeids)
        replays = history_db.replays(store)
        flake_of = {f.nodeid: f.flake_id for f in report.flakes}
        histories = {
            n: history(n, points, tallies, [r for r in replays if r.flake_id == flake_of.get(n)])
            for n in nodeids
        }
    facts = [fix_db.facts_of(store, f) for f in sorted(report.flakes, key=lambda f: f.row_id)]
    fixes = fix_views(facts, fix_db.stored_fixes(store), name)
    return replace(report, since=since, fixes=fixes, histories=histories)


def replayer(store: Store, cwd: str) -> Replay:
    """``replay(ref, run_id)`` for ``store``: the one replay command form.

    Like ``hermetic-hunt replay``, the command names the hunt's rootdir when
    it is a directory below ``cwd`` (nodeids are relative to it).
    """
    locations = run_db.locations(store)
    arguments: dict[int | None, str | None] = {None: None}
    for run_id, (rootdir, invocation_dir) in locations.items():
        location = location_arg(rootdir, invocation_dir, cwd)
        arguments[run_id] = str(Path(cwd, location)) if location else None

    def replay(ref: str, run_id: int | None) -> str:
        rootdir = arguments.get(run_id)
        return pasteable.replay_command(store.path, ref, cwd, rootdir=rootdir)

    return replay


@dataclass(frozen=True)
class ReportOutcome:
    """What ``hermetic-hunt report`` prints or wrote, and whether it found anything."""

    text: str | None
    path: Path | None
    findings: bool
    summary: str


def write_report(
    db: str | os.PathLike[str],
    *,
    run: int | None,
    fmt: str,
    output: str | os.PathLike[str] | None,
    cwd: str | None = None,
    since: str | None = None,
) -> ReportOutcome:
    """Render the report; write it to ``output`` (html: a default path) or return it."""
    from hermetic_hunt.report.html import DEFAULT_PATH

    fmt = format_name(fmt)
    where = os.fspath(cwd or os.getcwd())
    with open_database(db) as store:
        report = load_report(store, run, where, since)
    text = render(report, fmt)
    summary = summary_line(report)
    if output is None and fmt == "html":
        output = DEFAULT_PATH
    if output is None:
        return ReportOutcome(text, None, report.findings, summary)
    target = Path(where, output)
    if target.is_dir():
        raise BadOption(f"-o {output}: is a directory; pass a file path such as {DEFAULT_PATH}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BadOption(
            f"-o {output}: cannot write the report ({exc.strerror or exc}); pass a writable path"
        ) from None
    return ReportOutcome(None, target, report.findings, summary)


def list_flakes(
    db: str | os.PathLike[str], *, run: int | None = None, cwd: str | None = None
) -> tuple[list[str], bool]:
    """``hermetic-hunt list``: one line per flake; whether there were any."""
    with open_database(db) as store:
        report = load_report(store, run, cwd)
    lines = list_lines(report)
    return lines or [f"no flakes in {report.database} ({len(report.tests)} tests)"], bool(lines)


def show(db: str | os.PathLike[str], ref: str, cwd: str | None = None) -> str:
    """``hermetic-hunt show F3`` / ``show A1207``: everything stored, as text."""
    parsed = parse_ref(ref.strip())
    if parsed is None:
        raise BadOption(
            f"expected a flake id like F3 or an attempt id like A1207, got {ref!r} "
            "(hermetic-hunt list shows the flake ids)"
        )
    where = os.fspath(cwd or os.getcwd())
    with open_database(db) as store:
        if parsed.kind == "attempt":
            return _show_attempt(store, parsed.number, where)
        return _show_flake(store, str(parsed), where)


def _detail(store: Store, attempt_id: int | None) -> AttemptDetail | None:
    return queries.attempt_detail(store, attempt_id) if attempt_id is not None else None


def _show_attempt(store: Store, attempt_id: int, cwd: str) -> str:
    detail = queries.attempt_detail(store, attempt_id)
    if detail is None:
        first, last = queries.attempt_range(store)
        held = f"A{first}-A{last}" if last else "no attempts"
        raise UnknownId(
            f"attempt A{attempt_id} is not in {store.path.name} (it holds {held}): "
            "the report and the hunt's summary name attempts"
        )
    try:
        summary, problem = _decoded(store, detail), None
    except BadJournal as exc:
        summary, problem = None, f"unreadable: {exc}"
    failing: AttemptDetail | None = detail
    if not detail.failing:
        failing = _detail(store, queries.counterpart(store, detail.nodeid, detail.id, failing=True))
    return render_attempt(
        detail,
        journal=summary,
        journal_problem=problem,
        comparison=_compare(store, failing) if failing is not None else None,
        replay=replayer(store, cwd)(f"A{attempt_id}", detail.run_id),
        leaks=queries.attempt_leaks(store, attempt_id),
    )


def _show_flake(store: Store, flake_id: str, cwd: str) -> str:
    flake = flakes.get(store, flake_id, pasteable.display_path(store.path, cwd))
    report = load_report(store, None, cwd)
    test = next((t for t in report.tests if t.nodeid == flake.nodeid), None)
    repro = flake.reproducer
    failing = _detail(store, repro.steps[-1].attempt_id if repro is not None else None)
    if failing is None or not failing.failing or failing.nodeid != flake.nodeid:
        failing = _detail(store, queries.first_failing_attempt(store, flake.nodeid))
    group = next((g for g in report.groups if any(t.nodeid == flake.nodeid for t in g.tests)), None)
    related = [flake.nodeid, *(n for s in (*flake.polluters, *flake.state_setters) for n in s)]
    found = queries.test_leaks(store, related)
    return render_flake(
        flake,
        test=test,
        steps=queries.isolation_steps(store, flake_id),
        comparison=_compare(store, failing) if failing is not None else None,
        replay=replayer(store, cwd)(flake_id, flake_run(flake)),
        group=group,
        leaks={n: found[n] for n in dict.fromkeys(related) if n in found},
    )


def _decoded(store: Store, detail: AttemptDetail) -> journal.Journal | None:
    """The attempt's journal (None: none stored; BadJournal: unreadable)."""
    data = queries.journal_data(store, detail.id)
    if data is None:
        return None
    return journal.decode(data, where=f"A{detail.id}", expect_test=detail.nodeid)


def _compare(store: Store, failing: AttemptDetail) -> Comparison:
    """Compare ``failing`` with the nearest passing attempt of the same test."""
    passing = _detail(store, queries.counterpart(store, failing.nodeid, failing.id, failing=False))
    if passing is None:
        return Comparison(failing.id, None, "", ())
    try:  # each side's journal, else its read counts
        left, right = (_decoded(store, d) or d.parsed_counts() for d in (failing, passing))
    except BadJournal as exc:
        return Comparison(failing.id, passing.id, "journals", (), problem=f"unreadable: {exc}")
    both = isinstance(left, journal.Journal) and isinstance(right, journal.Journal)
    return Comparison(
        failing.id,
        passing.id,
        "journals" if both else "read counts",
        tuple(journal.compare(left, right)),
    )
