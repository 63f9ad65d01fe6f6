"""The SQL of fixes: what a suggestion is made from, and verifications (``fixes``).

Values read here may come from a database handed over by CI: a flake
is read validated (:mod:`hermetic_hunt.store.flakes`), the rest is
checked for type, and lists are bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermetic_hunt.errors import UnknownId
from hermetic_hunt.findings import FixFacts, Flake, StoredFix
from hermetic_hunt.models import PLAIN_SQL, REPEATED_RUN, Leak, Violation
from hermetic_hunt.store import runs
from hermetic_hunt.store.attempts import violation
from hermetic_hunt.store.core import Store, real_now_iso
from hermetic_hunt.store.rows import FAIL_SQL, PASS_SQL, chunks, insert, named, scalar
from hermetic_hunt.untrusted import is_number, is_whole, text_or

#: Most leaks and blocked calls read per test.
LIMIT = 20
#: The facts of a suggestion that are its flake's, as they are.
_FLAKE_FACTS = ("flake_id", "nodeid", "kinds", "polluters", "cleaners", "state_setters",
                "reproducer", "confirmed")  # fmt: skip


def facts_of(store: Store, flake: Flake) -> FixFacts:
    """What the suggestion for ``flake`` is made from."""
    reproducer = flake.reproducer
    run_id = next(
        (r for r in (reproducer.run_id if reproducer else None, flake.last_run_id,
                     flake.first_run_id) if r is not None),
        None,
    )  # fmt: skip
    rootdir, marker = runs.run_context(store, run_id)
    involved = [
        flake.nodeid,
        *(n for group in (*flake.polluters, *flake.state_setters) for n in group),
    ]
    failed, attempts = fail_counts(store, flake.nodeid)
    return FixFacts(
        **{key: getattr(flake, key) for key in _FLAKE_FACTS},
        failed=failed,
        attempts=attempts,
        leaks=leaks_of(store, involved),
        blocked=blocked_calls(store, flake.nodeid),
        rootdir=rootdir,
        integration_marker=marker,
        stretch=_stretch(flake.evidence),
    )


def _stretch(evidence: Any) -> float | None:
    """The ``stretch`` fact of a flake's evidence (untrusted: a number > 1, else None)."""
    value = evidence.get("stretch") if isinstance(evidence, dict) else None
    if is_number(value) and 1 < value < 1e6:
        return float(value)
    return None


def fail_counts(store: Store, nodeid: str) -> tuple[int, int]:
    """(failed, counted) plain attempts; for a test that only failed as a twice
    round's second run, its second runs (the rate its reproducer shows). The
    rate the fix verifier and the replay size their runs from."""
    found = []
    for which in (PLAIN_SQL, f"a.repeat = {REPEATED_RUN}"):
        failed, counted = store.conn.execute(
            f"SELECT sum(a.outcome IN {FAIL_SQL}), sum(a.outcome IN {FAIL_SQL} OR a.outcome IN "  # noqa: S608
            f"{PASS_SQL}) FROM attempts a JOIN tests t ON t.id = a.test_id "
            f"WHERE t.nodeid = ? AND {which}",
            (nodeid,),
        ).fetchone()
        found.append((int(failed or 0), int(counted or 0)))
    plain, second = found
    return second if not plain[0] and second[0] else plain


def leaks_of(store: Store, nodeids: Sequence[str]) -> dict[str, tuple[Leak, ...]]:
    """Distinct leaks of each test in any run (what a round kept first)."""
    out: dict[str, list[Leak]] = {}
    wanted = list(dict.fromkeys(nodeids))
    for chunk, marks in chunks(wanted):
        rows = store.conn.execute(
            "SELECT t.nodeid, l.resource, l.name, l.change, l.detail FROM leaks l "  # noqa: S608
            "JOIN attempts a ON a.id = l.attempt_id JOIN tests t ON t.id = a.test_id "
            f"WHERE t.nodeid IN ({marks}) ORDER BY l.persisted DESC, l.id",
            chunk,
        )
        for nodeid, resource, name, change, detail in rows:
            found = out.setdefault(text_or(nodeid), [])
            leak = Leak(text_or(resource), text_or(name), text_or(change), text_or(detail)[:200])
            if len(found) < LIMIT and all(
                (x.resource, x.name) != (leak.resource, leak.name) for x in found
            ):
                found.append(leak)
    return {k: tuple(v) for k, v in out.items()}


def blocked_calls(store: Store, nodeid: str) -> tuple[Violation, ...]:
    rows = named(
        store.conn,
        "SELECT DISTINCT v.op, v.host, v.port, v.detail FROM violations v "
        "JOIN attempts a ON a.id = v.attempt_id JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid = ? ORDER BY v.id LIMIT ?",
        (nodeid, LIMIT),
    )
    return tuple(violation(row) for row in rows)


# -- verifications ----------------------------------------------------------------


def save_fix(store: Store, fix: StoredFix, diff: str) -> None:
    """Store one verification of ``flake_id``'s patch."""
    with store.transaction() as conn:
        flake_row = scalar(conn, "SELECT id FROM flakes WHERE flake_id = ?", (fix.flake_id,))
        if flake_row is None:
            raise UnknownId(f"flake {fix.flake_id} is not in {store.path.name}")
        row = {
            "flake_id": flake_row,
            "created_at": fix.created_at or real_now_iso(),
            "kind": fix.kind,
            "patch_sha": fix.patch_sha,
            "diff": diff,
            "outcome": fix.outcome,
            "runs": fix.runs,
            "passed": fix.passed,
            "control": fix.control[:2000],
            "detail": fix.detail[:2000],
            "git_sha": fix.git_sha,
            "applied": int(fix.applied),
        }
        insert(conn, "fixes", row)


def stored_fixes(store: Store) -> dict[str, list[StoredFix]]:
    """Every verification, by flake id, newest first."""
    out: dict[str, list[StoredFix]] = {}
    rows = named(
        store.conn,
        "SELECT fl.flake_id, x.created_at, x.kind, x.patch_sha, x.outcome, x.runs, x.passed, "
        "x.control, x.detail, x.git_sha, x.applied FROM fixes x "
        "JOIN flakes fl ON fl.id = x.flake_id ORDER BY x.id DESC",
    )
    for r in rows:
        if not (is_whole(r["runs"]) and is_whole(r["passed"])):
            continue
        texts = {k: text_or(r[k]) for k in ("flake_id", "created_at", "kind", "patch_sha",
                                             "outcome", "control", "detail")}  # fmt: skip
        sha = r["git_sha"] if isinstance(r["git_sha"], str) else None
        out.setdefault(texts["flake_id"], []).append(
            StoredFix(**texts, runs=r["runs"], passed=r["passed"], git_sha=sha,
                      applied=bool(r["applied"]))
        )  # fmt: skip
    return out
