"""``hermetic-hunt fix ID``: suggest a fix, verify it on a copy, store, apply if asked.

:func:`fix` is what the CLI command calls: it returns the lines to print
and the exit status. The verification is stored in ``fixes`` (the reports
show it next to the suggestion for as long as the patch stays the same);
``--apply`` writes the patch to the checkout only when it was verified (or
verification was switched off with ``--no-verify``) and the files still
hold the text it was made from.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from hermetic_hunt import environment, pasteable
from hermetic_hunt.errors import BadOption, HuntError
from hermetic_hunt.findings import FixFacts, StoredFix
from hermetic_hunt.fix.patch import Patch, PatchConflict
from hermetic_hunt.fix.suggest import Suggestion, describe, suggest
from hermetic_hunt.fix.verify import RunPlace, Verification, runs_needed, verify
from hermetic_hunt.models import database_path, parse_ref
from hermetic_hunt.project import project_root
from hermetic_hunt.stats import percent
from hermetic_hunt.store import Store, flakes
from hermetic_hunt.store import fixes as db
from hermetic_hunt.store.core import real_now_iso
from hermetic_hunt.store.isolation import RunHistory
from hermetic_hunt.store.runs import run_facts
from hermetic_hunt.untrusted import clean

EXIT_OK = 0
#: The patch did not pass its verification (or --apply was refused because of it).
EXIT_NOT_VERIFIED = 1


@dataclass
class FixOutcome:
    lines: list[str] = field(default_factory=list)
    exit_status: int = EXIT_OK


def fix(
    db_path: str,
    ref: str,
    *,
    check: bool = True,
    runs: int | None = None,
    apply: bool = False,
    diff_only: bool = False,
    cwd: str | None = None,
    say: Callable[[str], None] | None = None,
) -> FixOutcome:
    """Suggest (and verify, store, apply) the fix of flake ``ref``, in five steps."""
    parsed = parse_ref(ref.strip())
    if parsed is None or parsed.kind != "flake":
        raise BadOption(f"expected a flake id like F3, got {ref!r} (hermetic-hunt list shows them)")
    out = FixOutcome()
    with Store.open(database_path(db_path, cwd), create=False) as store:
        # 1. the flake's facts, in the project the user stands in, and its suggestion
        facts = _facts_in_project(store, str(parsed), cwd)
        suggestion = suggest(facts)
        if diff_only:
            out.lines = [suggestion.diff.rstrip("\n")] if suggestion.patch else []
            return out
        # 2. what it says, and its diff
        out.lines = describe(suggestion)
        patch = suggestion.patch
        if patch is None:
            out.lines.append(f"  {clean(suggestion.reason)}")
            if apply:
                out.lines.append("nothing to apply")
                out.exit_status = EXIT_NOT_VERIFIED
            return out
        out.lines += ["", suggestion.diff.rstrip("\n"), ""]
        # 3. the verification on a copy (or why there is none)
        verification = _verify(store, facts, suggestion, check, runs, say, out)
        if verification is not None and verification.outcome in ("not-verified", "error"):
            out.exit_status = EXIT_NOT_VERIFIED  # it failed, or the check itself did not run
        # 4. the patch written to the checkout, when asked and verified
        applied = apply and _apply(facts, patch, verification, check, cwd, out)
        # 5. what was verified or applied, stored for the reports
        if verification is not None or applied:
            _store(store, facts, suggestion, verification, applied, out)
    return out


def _facts_in_project(store: Store, flake_id: str, cwd: str | None) -> FixFacts:
    """The flake's facts, its rootdir the project the user stands in: a stored rootdir
    is only taken when it is the current directory or below it (:mod:`hermetic_hunt.project`)."""
    facts = db.facts_of(store, flakes.get(store, flake_id))
    root = project_root(facts.rootdir, cwd or os.getcwd())
    return replace(facts, rootdir=str(root))


def _verify(
    store: Store,
    facts: FixFacts,
    suggestion: Suggestion,
    check: bool,
    runs: int | None,
    say: Callable[[str], None] | None,
    out: FixOutcome,
) -> Verification | None:
    """Run the reproducer on a patched copy (None: not run, ``out`` says why)."""
    assert suggestion.patch is not None
    if not suggestion.verifiable:
        out.lines.append(f"not verified: {suggestion.reason}")
        return None
    if not check:
        out.lines.append("not verified (--no-verify)")
        return None
    if facts.reproducer is None:
        out.lines.append("not verified: the flake has no reproducer to run")
        return None
    needed = runs or runs_needed(facts.rate)
    facts_run = run_facts(store, facts.reproducer.run_id)
    place = RunPlace(facts.rootdir, facts_run.settings, facts_run.base_seed)
    with contextlib.closing(RunHistory(store, facts_run.run_id)) as history:
        verification = verify(
            suggestion.patch,
            facts.reproducer,
            place,
            needed,
            journals=history.journal,
            parallel=min(4, os.cpu_count() or 1),
            say=say,
            exclude=tuple(Path(p) for p in store.own_files()),
        )
    why = f" (enough to be 95% sure a {percent(facts.rate)} flake is gone)" if not runs else ""
    out.lines.append(verification.describe() + (why if verification.runs else ""))
    if verification.control:
        out.lines.append(f"  control: the reproducer {verification.control}")
    if verification.detail and verification.outcome in ("verified", "not-verified"):
        out.lines.append(f"  {verification.detail}")
    return verification


def _apply(
    facts: FixFacts,
    patch: Patch,
    verification: Verification | None,
    check: bool,
    cwd: str | None,
    out: FixOutcome,
) -> bool:
    """Write the patch into the project if it was verified (or ``--no-verify``)."""
    unverified = verification.outcome != "verified" if verification is not None else check
    if unverified:
        out.lines.append(
            "not applied: the patch is not verified (--no-verify --apply applies it anyway)"
        )
        out.exit_status = EXIT_NOT_VERIFIED
        return False
    try:
        written = patch.apply_to(facts.rootdir)
    except PatchConflict as exc:
        raise BadOption(str(exc)) from None
    shown = ", ".join(clean(pasteable.display_path(p, cwd)) for p in written)
    out.lines.append(f"applied to {shown}")
    return True


def _store(
    store: Store,
    facts: FixFacts,
    suggestion: Suggestion,
    verification: Verification | None,
    applied: bool,
    out: FixOutcome,
) -> None:
    """Keep the verdict in ``fixes`` (a failure to store it is said, not raised)."""
    assert suggestion.patch is not None
    verdict = verification or Verification("not-verified", detail="applied without verification")
    record = StoredFix(
        flake_id=facts.flake_id,
        created_at=real_now_iso(),
        kind=suggestion.kind,
        patch_sha=suggestion.patch.sha,
        git_sha=environment.git_sha(facts.rootdir) if facts.rootdir else None,
        applied=applied,
        **asdict(verdict),  # its outcome, runs, passed, control and detail
    )
    try:
        db.save_fix(store, record, suggestion.patch.diff())
    except HuntError as exc:
        out.lines.append(f"(the verification was not stored: {exc})")
