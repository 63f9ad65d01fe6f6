"""The report's words: how a finding, a rate, a run or a leak reads, in every format.

The text report (:mod:`.text`), ``show``, the markdown and HTML reports, the
end of a hunt and the isolation summary phrase things the same way by using
these. Everything printed from the database goes through :func:`clean`: a
test id or failure message is untrusted text, and terminal control sequences
in it must not reach the terminal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from hermetic_hunt import stats
from hermetic_hunt.findings import Finding
from hermetic_hunt.models import (
    CI_EXPOSURES,
    EXPOSURE_TEXT,
    Reproducer,
    attempts_text,
    format_seconds,
)
from hermetic_hunt.report.model import (
    Flake,
    Group,
    Report,
    TestResult,
    calendar_dates,
    found_by_probe,
)
from hermetic_hunt.store.rows import LeakRow, RunRow
from hermetic_hunt.untrusted import clean as clean  # re-exported: every format uses it

#: Tests listed by name in a group before the rest are only counted.
LIST_LIMIT = 10


#: Items of a flake's list (polluters, cleaners, members...) shown before the
#: rest are only counted; ``hermetic-hunt show`` and JSON keep them all.
SHOW = 3


#: Members of one set shown (a partial search may leave a long one).
MEMBERS = 6


def listing(
    items: Sequence[object],
    noun: str,
    *,
    ref: str | None = None,
    limit: int | None = SHOW,
    sep: str = ", ",
) -> str:
    """``a, b`` -- or, past ``limit`` (None: none), ``68 cleaners, e.g. a, b, c;
    hermetic-hunt show F1 lists all`` (the names cleaned, joined by ``sep``)."""
    names = [clean(item) for item in items]
    if limit is None or len(names) <= limit:
        return sep.join(names)
    more = f"; hermetic-hunt show {clean(ref)} lists all" if ref else ""
    return f"{len(names)} {noun}, e.g. {sep.join(names[:limit])}{more}"


def set_texts(
    sets: Sequence[Sequence[str]], *, leaks: Any = None, members: int | None = None
) -> list[str]:
    """One text per set: ``a (left os.environ['X'] set) + b``.

    ``leaks`` (``{nodeid: [phrase, ...]}``) puts what a member left behind
    next to it; ``members`` bounds a long set (a partial search's).
    """
    known = leaks if isinstance(leaks, dict) else {}

    def member(nodeid: str) -> str:  # what it left: ``left os.environ['X'] set, and 2 more``
        left = known.get(nodeid)
        if not isinstance(left, list) or not left:
            return clean(nodeid)
        more = f", and {len(left) - 1} more" if len(left) > 1 else ""
        return f"{clean(nodeid)} ({clean(left[0])}{more})"

    def together(group: Sequence[str]) -> str:
        if members is None or len(group) <= members:
            return " + ".join(member(n) for n in group)
        head = " + ".join(member(n) for n in group[: members - 1])
        return f"{head} + ... + {member(group[-1])} ({len(group)} tests)"

    return [together(group) for group in sets if group]


def dates_text(dates: Any) -> str:
    """A time flake's coming dates: ``next real failure: 2026-01-31 23:59:59 UTC``."""
    if not isinstance(dates, dict):
        return ""
    until = _day(dates.get("checked_until"))
    found = dates.get("next_failure")
    if dates.get("daily") is True and isinstance(found, str) and found:
        return f"fails every day at {_moment(found)[11:]} UTC (replayed at the coming dates)"
    if dates.get("fails_now"):
        return "fails at today's date (replayed now)"
    if isinstance(found, str) and found:
        return f"next real failure: {_moment(found)} (replayed at the coming dates)"
    count = dates.get("instants")
    tried = f"{count:,} instants" if isinstance(count, int) else "the coming dates"
    if dates.get("past_only") is True and isinstance(dates.get("imported_apart"), str):
        return (
            f"failed on {_day(dates.get('imported_apart'))} only in a process that imported "
            f"the tests today; run whole on the coming dates through {until} ({tried} "
            "replayed), it passes: not a CI risk"
        )
    if dates.get("past_only") is True:
        since = _day(dates.get("checked_from"))
        return (
            f"failed only at dates before {since}; no failure from {since} through {until} "
            f"({tried} replayed): not a CI risk"
        )
    return f"no real failure through {until} ({tried} replayed)"


def calendar_text(test: TestResult) -> str:
    """What a finding the calendar decides means in real runs, in place of a fail
    rate (its share of the hunt's attempts is how often the hunt's clock hit its
    dates): its dates' words -- ``next real failure: 2026-12-31 00:00:00.250
    (replayed at the coming dates)``. "" for any other test (its rate says it)."""
    return dates_text(calendar_dates(test))


def _day(value: object) -> str:
    return clean(value)[:10] if isinstance(value, str) else "?"


def _moment(value: str) -> str:
    return clean(value).replace("T", " ").replace("+00:00", " UTC")[:23].rstrip()


def kinds_text(flake: Flake | None) -> str:
    if flake is None:
        return "not isolated"
    return ", ".join(flake.kinds) or "not classified yet"


def flake_state(flake: Flake) -> str:
    status = {
        "pending": "isolation pending",
        "isolated": "isolated",
        "partial": "partly isolated (probe budget or timeout reached)",
        "skipped": "isolation skipped",
        "error": "isolation failed (see the note)",
        "not-collected": "not isolated: the test is no longer collected",
    }.get(flake.status, clean(flake.status))
    confirmed = {
        True: "reproducer confirmed",
        False: "reproducer NOT confirmed",
        None: "reproducer not tried" if flake.reproducer is not None else "no reproducer",
    }[flake.confirmed]
    found = (
        " · found by the polluter probe (not observed in rounds)" if found_by_probe(flake) else ""
    )
    return f"{status} · {confirmed}{found}"


def interval_text(item: TestResult | Group) -> str:
    """``95% CI 79%-98%`` of a test or a group ("" without attempts)."""
    if item.interval is None:
        return ""
    low, high = item.interval
    return f"{stats.CONFIDENCE:.0%} CI {stats.percent(low)}–{stats.percent(high)}"


def rate_text(test: TestResult) -> str:
    """``failed 28 of 30 attempts: 93% (95% CI 79%-98%)`` (an en dash, really)."""
    if not test.attempts:
        return f"skipped in all {test.skipped} attempt(s)"
    if test.failures == 0:
        return bound_text(test.attempts)
    extra = f", {test.crashed} crashed" if test.crashed else ""
    if calendar_dates(test) is not None:
        return (
            f"failed {test.failures} of {test.attempts} attempts{extra}, at the dates the hunt's "
            "clock drew: the calendar decides, not a rate (its dates below)"
        )
    rate = stats.percent(test.rate or 0.0)
    return (
        f"failed {test.failures} of {test.attempts} attempts{extra}: {rate} ({interval_text(test)})"
    )


def share_text(test: TestResult) -> str:
    """A test's fail rate in a column: ``37%``, or ``dates`` for a finding the
    calendar decides (:func:`calendar_text`: its share is the hunt clock's)."""
    return "dates" if calendar_dates(test) is not None else stats.percent(test.rate or 0.0)


def bound_text(attempts: int) -> str:
    """``0/50 failures: flake rate < 6% at 95%``."""
    return f"0/{attempts} failures: {stats.bound_text(attempts)}"


def tighten_text(attempts: int) -> str:
    more = stats.more_attempts_for_bound(attempts)
    if not more:
        return "already below 1%"
    return f"{more:,} more clean attempts each would tighten it to < 1%"


def run_line(run: RunRow) -> str:
    if run.rounds_planned is not None:
        rounds = f"{run.rounds_done}/{run.rounds_planned} rounds"
    else:
        budget = format_seconds(run.budget_seconds or 0)
        rounds = f"{run.rounds_done} rounds in a {budget} budget"
    started = clean(run.started_at).replace("T", " ").replace("+00:00", " UTC")
    shard = f" · shard {clean(run.shard)}" if run.shard != "1/1" else ""
    return (
        f"run {run.id} · {started} · {clean(run.status)} · {rounds} · "
        f"{attempts_text(run.attempts, run.repeated)} · {run.tests:,} tests · "
        f"seed {run.base_seed} · {clean(run.mode)} · "
        f"order {clean(run.order)} · {run.workers} worker{'s' if run.workers != 1 else ''}"
        f"{shard}{f' · incomplete: {clean(run.incomplete)}' if run.incomplete else ''}"
    )


def headline(report: Report) -> str:
    runs = len(report.runs)
    which = f"{runs} run{'s' * (runs != 1)}"
    if report.selected_run:
        which = f"run {report.selected_run}"
    if report.since:
        which += f" since {clean(report.since)}"
    return (
        f"hermetic-hunt report · {clean(report.database)} · {which} · "
        f"{report.attempts_text} of {len(report.tests):,} tests"
    )


def summary_line(report: Report) -> str:
    """Tests per status: the one summary ``report`` and the end of a hunt print."""
    count = report.counts()
    return " · ".join(
        f"{count[key]} {words}" for key, words, always in _SUMMARY if always or count[key]
    )


#: The summary's counts in order: (``Report.counts`` key, words, shown when 0).
_SUMMARY = (
    ("flaky", "flaky", True),
    ("broken", "broken", True),
    ("sandbox-incompatible", "sandbox-incompatible", True),
    ("not-idempotent", "not idempotent", False),
    ("stable", "stable", True),
    ("skipped", "skipped", False),
    ("violations", "with network violations", True),
    ("leaking", "leave state behind", False),
)


def exposure_line(report: Report) -> str:
    """``what CI will see: 2 fail in normal runs · 1 fails on 2026-12-31 (in 28 days)``,
    then, apart, the findings CI will never see (``past dates only: 1``)."""
    parts = []
    apart = ""
    for level, groups in report.by_exposure():
        if level not in CI_EXPOSURES:
            apart = f" · apart: {len(groups)} {EXPOSURE_TEXT[level]} (failed only before today)"
            continue
        many = EXPOSURE_TEXT[level].replace("fails ", "fail ", 1)
        parts.append(f"{len(groups)} {groups[0].exposure_text if len(groups) == 1 else many}")
    return "what CI will see: " + (" · ".join(parts) or "nothing failed") + apart


def stable_groups(report: Report) -> list[tuple[int, int]]:
    """``(attempts, how many stable tests had that many)``, fewest attempts first."""
    return sorted(Counter(t.attempts for t in report.tests if t.status == "stable").items())


STATUS_TEXT = {
    "broken": "broken: failed in every attempt, with and without the sandbox",
    "sandbox-incompatible": "sandbox-incompatible: fails under the sandbox, passes without it",
}


def status_text(test: TestResult) -> str:
    """What a finding is: its kinds and isolation state, or its status."""
    flake = test.flake
    if test.status == "broken" and test.check is None:
        return "broken: failed in every attempt"
    if test.status in STATUS_TEXT:
        return STATUS_TEXT[test.status]
    text = kinds_text(flake) + (f" · {flake_state(flake)}" if flake is not None else "")
    if test.status == "not-idempotent":
        return f"{text} · not idempotent: never failed in a plain run"
    return text


def group_rate_text(group: Group) -> str:
    of = f" of {len(group.tests)} tests" if group.others else ""
    if group.lead.status == "not-idempotent":
        seconds = sum(t.second_run_failures for t in group.tests)
        return (
            f"passed all {group.attempts} plain attempts{of}; failed {seconds} time(s) as the "
            "second run in one process"
        )
    if not group.others:
        return rate_text(group.lead)
    if not group.attempts:
        return f"{len(group.tests)} tests"
    rate = stats.percent(group.rate or 0.0)
    return (
        f"failed {group.failures} of {group.attempts} attempts of {len(group.tests)} tests: "
        f"{rate} ({interval_text(group)})"
    )


def members_text(group: Group) -> str:
    """The tests of a group, bounded: ``76 parametrizations, e.g. ...``."""
    names = [
        f"{t.flake.flake_id} {t.nodeid}" if t.flake is not None else t.nodeid for t in group.tests
    ]
    ref = group.lead.flake.flake_id if group.lead.flake is not None else None
    return listing(names, group.members, ref=ref)


def shared_text(group: Group) -> str:
    """Where a collision group's tests fail over their shared path, and the fix:
    ``failing at fs/tests/setup.py:21 (in 31 test files): each test is fine alone;
    ...`` ("" for other groups)."""
    shared = group.shared
    if shared is None:
        return ""
    locations = [clean(x) for x in shared.get("locations") or [] if isinstance(x, str)]
    files = shared.get("files")
    where = f"failing at {', '.join(locations[:3])}" if locations else "every one uses it"
    if isinstance(files, int) and files > 1:
        where += f" (in {files} test files)"
    return (
        f"{where}: each test is fine alone; two workers using {clean(shared['resource'])} at "
        "once break each other -- give each its own (tmp_path, or worker_id in the name)"
    )


def collision_text(reproducer: Reproducer | None) -> str:
    """``tests/b.py::test_b over tests/_out, at the same time on another worker``
    for a collision's reproducer ("" for any other)."""
    if reproducer is None or not reproducer.together:
        return ""
    partner = clean(reproducer.together[-1].nodeid)
    over = f" over {clean(reproducer.resource)}" if reproducer.resource else ""
    return f"{partner}{over}, at the same time on another worker"


def relation_items(flake: Flake | Finding, members: int | None = None) -> dict[str, list[str]]:
    """A flake's (or an isolation finding's) related tests, by label: the test it collides
    with, polluter sets (with what they left), cleaners, state-setter sets, every item
    (``members`` bounds a long set)."""
    evidence = flake.evidence if isinstance(flake.evidence, dict) else {}
    found: dict[str, list[str]] = {}
    if collision_text(flake.reproducer):
        found["collides with"] = [collision_text(flake.reproducer)]
    if flake.polluters:  # each set minimal on its own
        leaks = evidence.get("polluter_leaks")
        found["polluters"] = set_texts(flake.polluters, leaks=leaks, members=members)
    if flake.cleaners:
        found["cleaners"] = list(flake.cleaners)
    if flake.state_setters:
        leaks = evidence.get("state_setter_leaks")
        found["state-setters"] = set_texts(flake.state_setters, leaks=leaks, members=members)
    return found


def relation_texts(flake: Flake | Finding, ref: str, limit: int | None = SHOW) -> dict[str, str]:
    """:func:`relation_items` as one text each, each list bounded by ``limit`` (None:
    all), and ``dates`` (its coming dates' words)."""
    evidence = flake.evidence if isinstance(flake.evidence, dict) else {}
    out = {}
    for label, items in relation_items(flake, None if limit is None else MEMBERS).items():
        # counted as ``68 cleaners`` or ``12 polluter sets``; sets: ``a + b; or c``
        noun, sep = ("cleaners", ", ") if label == "cleaners" else (f"{label[:-1]} sets", "; or ")
        out[label] = listing(items, noun, ref=ref, limit=limit, sep=sep)
    if isinstance(evidence.get("dates"), dict):
        out["dates"] = dates_text(evidence["dates"])
    return out


def relation_lines(
    flake: Flake | Finding,
    ref: str,
    labels: Sequence[str] = ("collides with", "polluters", "cleaners", "state-setters"),
    unfinished: str = "",
) -> list[str]:
    """:func:`relation_texts` as lines, in the order of ``labels``, then the dates;
    ``unfinished`` follows the label of the polluters and state-setters."""
    texts = relation_texts(flake, ref)
    out = []
    for label in (label for label in labels if label in texts):
        more = unfinished if label in ("polluters", "state-setters") else ""
        out.append(f"      {label}{more}: {texts[label]}")
    return out + ([f"      {texts['dates']}"] if "dates" in texts else [])


#: What a report section's heading adds around its exposure's words.
_SECTION_NOTE = {
    "normal": ("Will break CI: ", ""),
    "order": ("", " (order-dependent)"),
    "sandbox": ("", " (sandbox-incompatible)"),
    "past": ("", ": not what CI will see"),
}


def section_title(level: str, groups: Sequence[Group]) -> str:
    """The heading of a section of the markdown and HTML reports:
    ``Fails on 2026-12-31 (in 28 days)``, ``Will break CI: fails in normal runs``."""
    words = groups[0].exposure_text if len(groups) == 1 else EXPOSURE_TEXT.get(level, level)
    before, after = _SECTION_NOTE.get(level, ("", ""))
    title = f"{before}{words}{after}"
    return title[:1].upper() + title[1:]


#: Where leaks no single test can be blamed for are listed.
UNATTRIBUTED = "(not one test's: several ran at once when it was written)"


def leak_count_text(leak: LeakRow) -> str:
    """``left os.environ['X'] set in 3 attempt(s), first A12`` (rounds when not one test's)."""
    if leak.nodeid is None:
        return f"{clean(leak.describe())} in {leak.attempts} round(s)"
    first = f", first A{leak.first_attempt_id}" if leak.first_attempt_id else ""
    return f"{clean(leak.describe())} in {leak.attempts} attempt(s){first}"
