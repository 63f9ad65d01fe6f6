"""The SQL of fixes: what a suggestion is made from, and verifications (``fixes``).

Values read here may come from a database handed over by CI: flakes'
JSON columns are checked for shape before they leave this module (a
damaged one is a :class:`~hermetic_hunt.errors.BadDatabase` naming it),
and lists are bounded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermetic_hunt.errors import UnknownId
from hermetic_hunt.findings import FixFacts, StoredFix
from hermetic_hunt.models import (
    FAILING,
    PASSING,
    PLAIN_SQL,
    REPEATED_RUN,
    Leak,
    Settings,
    Violation,
    sql_set,
)
from hermetic_hunt.store import cells
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.untrusted import is_number, is_whole

_FAIL = sql_set(FAILING)
_PASS = sql_set(PASSING)
#: Most leaks and blocked calls read per test.
LIMIT = 20

_FLAKE = (
    "SELECT fl.flake_id, t.nodeid, fl.kinds, fl.polluters, fl.cleaners, fl.state_setters, "
    "fl.reproducer, fl.confirmed, fl.first_run_id, fl.last_run_id, fl.evidence "
    "FROM flakes fl JOIN tests t ON t.id = fl.test_id"
)


def fix_facts(store: Store, flake_id: str) -> FixFacts:
    """What the suggestion for ``flake_id`` is made from (UnknownId if there is none)."""
    row = store.conn.execute(_FLAKE + " WHERE fl.flake_id = ?", (flake_id,)).fetchone()
    if row is None:
        known = [r[0] for r in store.conn.execute("SELECT flake_id FROM flakes ORDER BY id")]
        held = (
            "no flakes yet"
            if not known
            else (f"only {known[0]}" if len(known) == 1 else f"{known[0]}-{known[-1]}")
        )
        raise UnknownId(
            f"flake {flake_id} is not in {store.path.name} (it holds {held}): "
            "hermetic-hunt list shows the flake ids"
        )
    return _facts(store, row)


def all_fix_facts(store: Store) -> list[FixFacts]:
    """The facts of every flake, in id order."""
    return [_facts(store, row) for row in store.conn.execute(_FLAKE + " ORDER BY fl.id").fetchall()]


def _facts(store: Store, row: Sequence[Any]) -> FixFacts:
    flake_id, nodeid = str(row[0]), str(row[1])
    where = f"{store.path.name}: flake {flake_id}"
    kinds = cells.kinds(row[2], where)
    polluters = cells.sets(row[3], "polluters", where)
    cleaners = cells.nodeids(row[4], "cleaners", where)
    setters = cells.sets(row[5], "state_setters", where)
    reproducer = cells.reproducer(row[6], where)
    run_id = next(
        (r for r in (reproducer.run_id if reproducer else None, row[9], row[8]) if is_whole(r)),
        None,
    )
    rootdir, marker = _run_context(store, run_id)
    involved = [nodeid, *(n for group in (*polluters, *setters) for n in group)]
    failed, attempts = fail_counts(store, nodeid)
    return FixFacts(
        flake_id=flake_id,
        nodeid=nodeid,
        kinds=kinds,
        polluters=polluters,
        cleaners=cleaners,
        state_setters=setters,
        reproducer=reproducer,
        confirmed=None if row[7] is None else bool(row[7]),
        failed=failed,
        attempts=attempts,
        leaks=leaks_of(store, involved),
        blocked=blocked_calls(store, nodeid),
        rootdir=rootdir,
        integration_marker=marker,
        stretch=_stretch(cells.cell(row[10], "evidence", where)),
    )


def _stretch(evidence: Any) -> float | None:
    """The ``stretch`` fact of a flake's evidence (untrusted: a number > 1, else None)."""
    value = evidence.get("stretch") if isinstance(evidence, dict) else None
    if is_number(value) and 1 < value < 1e6:
        return float(value)
    return None


def _run_context(store: Store, run_id: int | None) -> tuple[str, str]:
    """(rootdir, integration marker) of run ``run_id`` (the newest run when None)."""
    sql = "SELECT rootdir, settings, base_seed FROM runs "
    row = (
        store.conn.execute(sql + "WHERE id = ?", (run_id,)).fetchone()
        if run_id is not None
        else store.conn.execute(sql + "ORDER BY id DESC LIMIT 1").fetchone()
    )
    if row is None:
        return "", Settings.from_json(None).integration_marker
    try:
        stored = json.loads(row[1]) if isinstance(row[1], str) else None
    except (ValueError, RecursionError):
        stored = None
    settings = Settings.from_json(stored)
    return (row[0] if isinstance(row[0], str) else ""), settings.integration_marker


def fail_counts(store: Store, nodeid: str) -> tuple[int, int]:
    """(failed, counted) plain attempts; for a test that only failed as a twice
    round's second run, its second runs (the rate its reproducer shows). The
    rate the fix verifier and the replay size their runs from."""
    found = []
    for which in (PLAIN_SQL, f"a.repeat = {REPEATED_RUN}"):
        row = store.conn.execute(
            f"SELECT sum(a.outcome IN {_FAIL}), sum(a.outcome IN {_FAIL} OR a.outcome IN "  # noqa: S608
            f"{_PASS}) FROM attempts a JOIN tests t ON t.id = a.test_id "
            f"WHERE t.nodeid = ? AND {which}",
            (nodeid,),
        ).fetchone()
        found.append((int(row[0] or 0), int(row[1] or 0)))
    plain, second = found
    return second if not plain[0] and second[0] else plain


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def leaks_of(store: Store, nodeids: Sequence[str]) -> dict[str, tuple[Leak, ...]]:
    """Distinct leaks of each test in any run (what a round kept first)."""
    out: dict[str, list[Leak]] = {}
    wanted = list(dict.fromkeys(nodeids))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = store.conn.execute(
            "SELECT t.nodeid, l.resource, l.name, l.change, l.detail FROM leaks l "  # noqa: S608
            "JOIN attempts a ON a.id = l.attempt_id JOIN tests t ON t.id = a.test_id "
            f"WHERE t.nodeid IN ({','.join('?' * len(chunk))}) ORDER BY l.persisted DESC, l.id",
            chunk,
        )
        for nodeid, resource, name, change, detail in rows:
            found = out.setdefault(_text(nodeid), [])
            leak = Leak(_text(resource), _text(name), _text(change), _text(detail)[:200])
            if len(found) < LIMIT and all(
                (x.resource, x.name) != (leak.resource, leak.name) for x in found
            ):
                found.append(leak)
    return {k: tuple(v) for k, v in out.items()}


def blocked_calls(store: Store, nodeid: str) -> tuple[Violation, ...]:
    rows = store.conn.execute(
        "SELECT DISTINCT v.op, v.host, v.port, v.detail FROM violations v "
        "JOIN attempts a ON a.id = v.attempt_id JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ? ORDER BY v.id LIMIT ?",
        (nodeid, LIMIT),
    ).fetchall()
    return tuple(
        Violation(_text(op), _text(host), port if isinstance(port, int) else None, _text(detail))
        for op, host, port, detail in rows
    )


# -- verifications ----------------------------------------------------------------


def save_fix(store: Store, fix: StoredFix, diff: str) -> None:
    """Store one verification of ``flake_id``'s patch."""
    with store.transaction() as conn:
        row = conn.execute("SELECT id FROM flakes WHERE flake_id = ?", (fix.flake_id,)).fetchone()
        if row is None:
            raise UnknownId(f"flake {fix.flake_id} is not in {store.path.name}")
        conn.execute(
            "INSERT INTO fixes (flake_id, created_at, kind, patch_sha, diff, outcome, runs, "
            "passed, control, detail, git_sha, applied) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                row[0],
                fix.created_at or real_now_iso(),
                fix.kind,
                fix.patch_sha,
                diff,
                fix.outcome,
                fix.runs,
                fix.passed,
                fix.control[:2000],
                fix.detail[:2000],
                fix.git_sha,
                int(fix.applied),
            ),
        )


def stored_fixes(store: Store) -> dict[str, list[StoredFix]]:
    """Every verification, by flake id, newest first."""
    out: dict[str, list[StoredFix]] = {}
    rows = store.conn.execute(
        "SELECT fl.flake_id, x.created_at, x.kind, x.patch_sha, x.outcome, x.runs, x.passed, "
        "x.control, x.detail, x.git_sha, x.applied FROM fixes x "
        "JOIN flakes fl ON fl.id = x.flake_id ORDER BY x.id DESC"
    ).fetchall()
    for r in rows:
        runs, passed = r[5], r[6]
        if not (is_whole(runs) and is_whole(passed)):
            continue
        out.setdefault(_text(r[0]), []).append(
            StoredFix(
                flake_id=_text(r[0]),
                created_at=_text(r[1]),
                kind=_text(r[2]),
                patch_sha=_text(r[3]),
                outcome=_text(r[4]),
                runs=runs,
                passed=passed,
                control=_text(r[7]),
                detail=_text(r[8]),
                git_sha=r[9] if isinstance(r[9], str) else None,
                applied=bool(r[10]),
            )
        )
    return out


def matching(fixes: Sequence[StoredFix], patch_sha: str) -> StoredFix | None:
    """The newest verification of exactly this patch."""
    return next((f for f in fixes if f.patch_sha == patch_sha), None)
