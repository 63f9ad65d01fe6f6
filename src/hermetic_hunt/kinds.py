"""The flake kinds: one row per kind (pure).

A kind says why a test flakes; isolation claims it only after a probe showed
it. Everything the stages treat differently per kind is a column of
:data:`TABLE`, in the style of CPython regrtest's ``save_env`` resources:

* ``priority`` -- which kind a fix suggestion addresses first when a flake
  has several (lowest first; :func:`primary_kind`);
* ``exposure`` -- how a plain CI run sees it (:data:`ExposureRule`, read by
  :func:`hermetic_hunt.models.exposure`);
* ``reason`` -- the quarantine list's few words, a template over the facts
  of :data:`REASON_FACTS` (a row whose facts are missing says nothing);
* ``advice`` -- the line a suggestion adds when the flake has this kind
  besides the one it addresses;
* ``unverified`` -- why a suggested patch is never verified by running the
  reproducer on a patched copy (``""``: it is).

Adding a kind: its name in :data:`Kind`, its row here, the isolation phase
that claims it (``isolate/``), its suggestion (a function decorated
``@suggests("name")`` in :mod:`hermetic_hunt.fix.suggest`) and its docs rows.
``tests/core/test_kinds.py`` fails until every kind has exactly one row and
one suggestion.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal[
    "victim",
    "brittle",
    "self-polluting",
    "collision",
    "random",
    "time",
    "hash-order",
    "network",
    "concurrency",
    "unexplained",
]
#: Flake kinds, exactly as stored and reported, in report order.
KINDS: tuple[Kind, ...] = get_args(Kind)

ExposureRule = Literal["any-run", "default-order", "calendar", "repeat", "order"]
"""How a CI run sees a kind, strongest first:

``any-run``: any plain run shows it, in any order, on any day; ``default-order``:
a plain run shows it when pytest's default order puts its reproducer's tests in
that order, else shuffling or xdist does; ``calendar``: the start time decides
it, so it may wait for its date; ``repeat``: it fails when run again in one
process (alone: only a repeated run shows it); ``order``: shuffling or xdist shows it.
"""
EXPOSURE_RULES: tuple[ExposureRule, ...] = get_args(ExposureRule)

#: The facts a quarantine reason may name (``{polluters}`` in a template).
REASON_FACTS = ("polluters", "state_setters", "partner", "resource")
#: The quarantine reason of a flake none of whose kinds has one.
NO_REASON = "flaky, cause not found"


@dataclass(frozen=True)
class KindInfo:
    """One flake kind's row (see the module docstring for the columns)."""

    kind: Kind
    priority: int
    exposure: ExposureRule
    reason: str
    advice: str = ""
    unverified: str = ""

    def quarantine_reason(self, facts: Mapping[str, str]) -> str:
        """The reason with ``facts`` filled in; ``""`` when one it names is missing."""
        names = [name for _, name, _, _ in string.Formatter().parse(self.reason) if name]
        if not self.reason or not all(facts.get(name) for name in names):
            return ""
        return self.reason.format_map({name: facts[name] for name in names})


ROWS = (
    KindInfo(
        "victim",
        priority=0,
        exposure="default-order",
        reason="fails after {polluters}",
    ),
    KindInfo(
        "brittle",
        priority=1,
        exposure="default-order",
        reason="fails unless {state_setters} ran first",
    ),
    KindInfo(
        "self-polluting",
        priority=2,
        exposure="repeat",
        reason="fails when it runs twice in one process",
    ),
    KindInfo(
        "collision",
        priority=3,
        exposure="order",
        reason="collides with {partner} over {resource} under xdist",
        advice="it also collides with a test another worker runs at the same time: give each "
        "its own path (tmp_path, or a name with worker_id)",
    ),
    KindInfo(
        "random",
        priority=5,
        exposure="any-run",
        reason="depends on random draws",
        advice="it also depends on random draws: seed or inject the generator it uses",
    ),
    KindInfo(
        "time",
        priority=6,
        exposure="calendar",
        reason="depends on the clock",
        advice="it also depends on the clock: freeze it or pass the time in",
    ),
    KindInfo(
        "hash-order",
        priority=7,
        exposure="any-run",
        reason="depends on PYTHONHASHSEED",
        advice="it also depends on PYTHONHASHSEED: sort what it iterates",
    ),
    KindInfo(
        "network",
        priority=4,
        exposure="any-run",
        reason="makes network calls",
        advice="it also makes network calls the hunt blocked: mock them, or mark the test "
        "integration",
        unverified="it would reach the network",
    ),
    KindInfo(
        "concurrency",
        priority=8,
        exposure="any-run",
        reason="races between threads",
        advice="it also races between threads: guard the shared state with a lock",
    ),
    KindInfo("unexplained", priority=9, exposure="order", reason=""),
)
#: Every kind's row, in report order.
TABLE: dict[str, KindInfo] = {row.kind: row for row in ROWS}
#: Kinds in the order a suggestion addresses them.
PRIORITY: tuple[Kind, ...] = tuple(row.kind for row in sorted(ROWS, key=lambda row: row.priority))


def info(kind: str) -> KindInfo | None:
    """The row of ``kind`` (None: not a kind, e.g. read from an old database)."""
    return TABLE.get(kind)


def primary_kind(kinds: Sequence[str]) -> str:
    """The kind a suggestion addresses first (``unexplained`` when there is none)."""
    return next((k for k in PRIORITY if k in kinds), kinds[0] if kinds else "unexplained")


def quarantine_reason(kinds: Sequence[str], facts: Mapping[str, str]) -> str:
    """Why a flake flakes in a few words: the first of its kinds (report order) with a reason."""
    rows = (info(kind) for kind in kinds)
    reasons = (row.quarantine_reason(facts) for row in rows if row is not None)
    return next((text for text in reasons if text), NO_REASON)
