"""When will a ``time`` flake fail for real? Its reproducer at the coming dates.

The exposures this decides (*fails on DATE*, *past dates only*) and the
candidate instants are in docs/isolation.md, "What CI will see: exposure".
What the page leaves out: a flake that fails at its time of day on any day
*fails in normal runs* (a race with a second's boundary fails at the same
millisecond tomorrow and the days after); "today" is the run's
(:attr:`~hermetic_hunt.models.Settings.today`, stored), so the next failing
date is never before it.

A coming date's failure counts only if it is confirmed alone in a process
that runs on that date from its first import on
(:mod:`hermetic_hunt.sandbox.shift`): the hunt's own processes import the
modules once, today, so a value computed at import fails there on every
coming date and on none in CI -- such a flake is *past dates only* (its
``imported_apart`` fact names the date it failed at in the hunt's process).
The candidates run in batches, the test alone at each instant, one after
another in one fresh process per batch; the first failure found is
confirmed alone in a fresh process of its own.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from hermetic_hunt.isolate.case import Case
from hermetic_hunt.models import Step
from hermetic_hunt.seeds import DEFAULT_HORIZON_DAYS, iso

#: Days checked instant by instant; then only the edges of months and years.
DAYS = 366
#: Instants replayed in one probe.
BATCH = 150
_DAY = 86400.0


def candidate_instants(
    now: float,
    failing_now: float,
    horizon_days: int = DEFAULT_HORIZON_DAYS,
    seen: Iterable[float] = (),
) -> list[float]:
    """Instants to try, in time order from ``now`` (whole milliseconds), none
    before it: ``seen`` (where the hunt's failures ran) and the calendar's
    edges up to ``horizon_days`` ahead."""
    start = datetime.fromtimestamp(now, timezone.utc).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    time_of_day = failing_now % _DAY
    offsets = (time_of_day, 0.25, _DAY - 0.75)
    out = {round(now, 3), *(round(t, 3) for t in seen)}
    for day in range(min(DAYS, horizon_days) + 1):
        base = (start + timedelta(days=day)).timestamp()
        out.update(round(base + offset, 3) for offset in offsets)
    limit = now + horizon_days * _DAY
    last_year = datetime.fromtimestamp(limit, timezone.utc).year
    for year in range(start.year, last_year + 1):
        for month in range(1, 13):
            last = calendar.monthrange(year, month)[1]
            days = [last] if month != 2 else sorted({28, last})
            for day in days:
                base = datetime(year, month, day, tzinfo=timezone.utc).timestamp()
                out.update(round(base + offset, 3) for offset in offsets)
    return sorted(t for t in out if now <= t <= limit)


def every_day(hits: Sequence[float], now: float, failing_now: float) -> bool:
    """The first failure from ``now`` on is less than a day ahead, and the failing
    attempt's time of day (to the millisecond) failed on the two days that follow
    it too: the time of day decides, not the date (a race with a second's or a
    minute's boundary)."""

    def at(t: float) -> float:
        return round(t % _DAY, 3)

    if not hits or not now <= hits[0] < now + _DAY or at(hits[0]) != at(failing_now):
        return False
    days = {int(t // _DAY) for t in hits if at(t) == at(failing_now)}
    first = int(hits[0] // _DAY)
    return {first + 1, first + 2} <= days


def check(case: Case) -> None:
    """Replay a ``time`` flake at the coming dates; the finding's ``dates`` fact."""
    target = case.target
    if target is None or target.now is None or target.mode == "off":
        return
    step = replace(Step.of(target), mode="seeded", attempt_id=None)
    hash_seed = case.hash_seed_of(target)
    window = case.settings.today_window
    now = round(window.start, 3)
    failed_at = sorted({a.now for a in case.failing if a.now is not None})
    instants = candidate_instants(now, target.now, window.days, failed_at)
    found: float | None = None
    daily = False
    imported_apart: float | None = None
    tried = 0
    for start in range(0, len(instants), BATCH):
        batch = instants[start : start + BATCH]
        result = case.probe("at the coming dates", [replace(step, now=t) for t in batch], hash_seed)
        tried += len(result.steps)
        hits = [t for t, a in zip(batch, result.steps, strict=False) if case.same_attempt(a)]
        if hits:
            # Confirmed whole on that date (the module docstring says why).
            alone = [replace(step, now=hits[0])]
            whole = case.probe("at the coming dates (alone)", alone, hash_seed, hits[0])
            if case.same(whole):
                found = hits[0]
                daily = every_day(hits, now, target.now)
                break
            if whole.status == "completed" and imported_apart is None:
                imported_apart = hits[0]
        if result.status != "completed":
            break
    checked_until = instants[min(tried, len(instants)) - 1] if tried else now
    case.facts["dates"] = {
        "checked_from": iso(now),
        "checked_until": iso(checked_until),
        "instants": tried,
        # At its time of day on every day: a run at that time on any day sees it.
        "fails_now": found == now or daily,
        "daily": daily,
        "next_failure": iso(found) if found is not None else None,
        # A coming date failed it only in a process that imported its modules
        # today (the hunt's, forked from one collection): run whole on that
        # date it passed.
        "imported_apart": iso(imported_apart) if imported_apart is not None else None,
        "past_only": found is None
        and tried == len(instants)
        and bool(failed_at)
        and (failed_at[-1] < now or imported_apart is not None),
    }
