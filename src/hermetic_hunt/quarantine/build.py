"""``hermetic-hunt quarantine``: the quarantine list of every test a database saw fail.

Every flake goes on the list, and every other test the hunt saw fail
outside a sandbox violation (a broken test, a flaky test isolation did not
reach), unless its history says it is fixed (95% sure,
:mod:`hermetic_hunt.report.history`) or it fails only under the sandbox (a
plain run passes it). Each line names the flake id, its kinds, its fail
rate (which decides how many passes in a row release it), why it flakes
and whether its reproducer was confirmed: a thread race whose reproducer
did not fail again still fails CI now and then. ``confirmed_only`` keeps
only the flakes whose reproducer was confirmed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hermetic_hunt import pasteable
from hermetic_hunt.kinds import quarantine_reason
from hermetic_hunt.models import CI_EXPOSURES, EXPOSURE_TEXT
from hermetic_hunt.quarantine.listfile import Entry, Unwritable, render
from hermetic_hunt.report.history import History, history
from hermetic_hunt.report.load import load_report, open_database
from hermetic_hunt.report.model import Flake, calendar_dates
from hermetic_hunt.store import history as db
from hermetic_hunt.store.core import real_now_iso
from hermetic_hunt.untrusted import clean


def reason(flake: Flake) -> str:
    """Why it flakes, in a few words (the line's comment): its kinds' rows say it."""
    return quarantine_reason(flake.kinds, reason_facts(flake))


def reason_facts(flake: Flake) -> dict[str, str]:
    """What a kind's reason may name (:data:`hermetic_hunt.kinds.REASON_FACTS`), as text."""
    pair = flake.reproducer if flake.reproducer is not None and flake.reproducer.together else None
    return {
        "polluters": " + ".join(flake.polluters[0]) if flake.polluters else "",
        "state_setters": " + ".join(flake.state_setters[0]) if flake.state_setters else "",
        "partner": pair.together[-1].nodeid if pair else "",
        "resource": pair.resource if pair else "",
    }


def confirmation(flake: Flake) -> str:
    """Whether isolation saw the flake's reproducer fail again (the line says it)."""
    if flake.reproducer is None:
        return "no reproducer" if flake.status == "isolated" else f"isolation {flake.status}"
    return "reproducer confirmed" if flake.confirmed else "reproducer not confirmed"


def _add(entries: list[Entry], left_out: list[str], entry: Entry, label: str) -> None:
    """``entry`` on the list, or under "Left out" when it cannot be written as a line."""
    try:
        entry.format()
    except Unwritable as exc:
        left_out.append(f"{label}: refused: {exc}")
        return
    entries.append(entry)


@dataclass
class QuarantineList:
    text: str
    entries: list[Entry] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def quarantine_list(
    db_path: str, *, output: str | None = None, cwd: str | None = None, confirmed_only: bool = False
) -> QuarantineList:
    """The list for ``db_path`` (``output``: the file it will be written to)."""
    where = cwd or os.getcwd()
    with open_database(db_path) as store:
        report = load_report(store, None, where)
        flakes = list(report.flakes)
        runs = db.runs(store)
        tallies = db.tallies(store, [f.nodeid for f in flakes])
        replays = db.replays(store)
    tests = {t.nodeid: t for t in report.tests}
    entries: list[Entry] = []
    left_out: list[str] = []
    for flake in flakes:
        past: History = history(
            flake.nodeid, runs, tallies, [r for r in replays if r.flake_id == flake.flake_id]
        )
        label = f"{flake.flake_id} {clean(flake.nodeid)}"
        if past.status == "fixed":
            left_out.append(f"{label}: {past.status_text()}")
            continue
        state = confirmation(flake)
        if flake.confirmed is not True and confirmed_only:
            left_out.append(f"{label}: {state} (--confirmed-only)")
            continue
        test = tests.get(flake.nodeid)
        if test is not None and test.exposure is not None and test.exposure not in CI_EXPOSURES:
            left_out.append(f"{label}: {EXPOSURE_TEXT[test.exposure]}")
            continue
        # (no rate for a finding the calendar decides: its share is the hunt clock's)
        dated = test is not None and calendar_dates(test) is not None
        rate = test.rate if test is not None and test.rate and not dated else None
        why = f"{reason(flake)} ({state})"
        entry = Entry(flake.nodeid, flake.flake_id, tuple(flake.kinds), rate, why)
        _add(entries, left_out, entry, flake.flake_id)
    listed = {f.nodeid for f in flakes}
    for test in report.tests:
        if test.nodeid in listed or test.failures <= test.with_violations:
            continue  # a flake (above), or it only failed by a sandbox violation
        label = clean(test.nodeid)
        if test.status == "sandbox-incompatible":
            left_out.append(f"{label}: fails only under the sandbox (plain runs pass it)")
            continue
        if confirmed_only:
            left_out.append(f"{label}: {test.status}, not isolated (--confirmed-only)")
            continue
        why = "fails every time" if test.status == "broken" else "failed in the hunt"
        entry = Entry(test.nodeid, None, (test.status,), test.rate or None, f"{why} (not isolated)")
        _add(entries, left_out, entry, label)
    newest = runs[-1] if runs else None
    commit = f" on {newest.git_sha[:10]}" if newest and newest.git_sha else ""
    name = output or "FILE"
    header = [
        f"hermetic-hunt quarantine list: pytest --hermetic-quarantine={name}",
        f"From {pasteable.display_path(report.database, where)} ({len(runs)} run(s), newest "
        f"run {newest.run_id if newest else '-'}{commit}), written {real_now_iso()}.",
        "A quarantined test runs as usual; its failure does not fail the session.",
        "Remove a line to release a test; the session's summary says when one passed often",
        "enough in a row to be 95% sure it no longer flakes (at the rate on its line).",
        "Each line: a test id, then after two spaces and #: flake id, kinds, fail rate, why.",
    ]
    if left_out:
        header += ["", "Left out:"] + [f"  {line}" for line in left_out]
    return QuarantineList(render(entries, header), entries, left_out)
