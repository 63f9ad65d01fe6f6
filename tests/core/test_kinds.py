"""Tests for hermetic_hunt.kinds: one row per flake kind, and every stage reads it."""

from __future__ import annotations

import string

import pytest

from hermetic_hunt import kinds
from hermetic_hunt.fix.suggest import SUGGESTERS
from hermetic_hunt.kinds import KINDS, NO_REASON, PRIORITY, REASON_FACTS, TABLE, primary_kind
from hermetic_hunt.models import exposure
from hermetic_hunt.quarantine.build import reason, reason_facts
from hermetic_hunt.report.model import Flake


def test_every_kind_has_exactly_one_row_in_report_order():
    assert [row.kind for row in kinds.ROWS] == list(KINDS)
    assert list(TABLE) == list(KINDS)


def test_every_kind_has_exactly_one_suggestion():
    # @suggests refuses a second one; a missing one shows here.
    assert sorted(SUGGESTERS) == sorted(KINDS)


def test_priorities_order_every_kind_once():
    assert sorted(row.priority for row in kinds.ROWS) == list(range(len(KINDS)))
    assert sorted(PRIORITY) == sorted(KINDS)
    assert primary_kind(["random", "network"]) == "network"
    assert primary_kind(["random", "victim"]) == "victim"
    assert primary_kind([]) == "unexplained"


def test_reasons_name_only_facts_the_quarantine_list_supplies():
    flake = _flake(kinds=("victim",))
    assert sorted(reason_facts(flake)) == sorted(REASON_FACTS)
    for row in kinds.ROWS:
        named = {name for _, name, _, _ in string.Formatter().parse(row.reason) if name}
        assert named <= set(REASON_FACTS), row.kind


@pytest.mark.parametrize(
    ("flake_kinds", "polluters", "expected"),
    [
        (("victim",), (("a.py::t", "b.py::u"),), "fails after a.py::t + b.py::u"),
        (("victim",), (), NO_REASON),  # a row whose facts are missing says nothing
        (("victim", "random"), (), "depends on random draws"),
        (("random", "network"), (), "depends on random draws"),  # report order
        (("unexplained",), (), NO_REASON),
    ],
)
def test_the_quarantine_reason_is_the_first_kind_with_one(flake_kinds, polluters, expected):
    assert reason(_flake(kinds=flake_kinds, polluters=polluters)) == expected


def test_each_exposure_rule_decides_as_its_rows_say():
    by_rule = {rule: [row.kind for row in kinds.ROWS if row.exposure == rule]
               for rule in kinds.EXPOSURE_RULES}  # fmt: skip
    assert all(exposure([kind]) == "normal" for kind in by_rule["any-run"])
    assert all(
        exposure([kind], default_order=True) == "normal" for kind in by_rule["default-order"]
    )
    assert all(
        exposure([kind], default_order=False) == "order" for kind in by_rule["default-order"]
    )
    assert all(exposure([kind], fails_now=False) == "dates" for kind in by_rule["calendar"])
    assert all(exposure([kind], status="not-idempotent") == "repeat" for kind in by_rule["repeat"])
    assert all(exposure([kind]) == "order" for kind in by_rule["repeat"])  # flaky: shuffled too
    assert all(exposure([kind]) == "order" for kind in by_rule["order"])
    assert exposure(["not-a-kind"]) == "order"  # an old database's kind ranks last


def test_a_kind_whose_patch_cannot_be_verified_says_why():
    assert all(row.unverified == "" or row.unverified.strip() for row in kinds.ROWS)
    assert TABLE["network"].unverified


def _flake(kinds: tuple[str, ...], polluters: tuple[tuple[str, ...], ...] = ()) -> Flake:
    base = Flake(
        flake_id="F1", nodeid="t.py::t", kinds=kinds, status="isolated", confirmed=True,
        polluters=polluters, cleaners=(), state_setters=(), reproducer=None, evidence={},
        probes=0, probe_seconds=0.0, note="", first_run_id=1, last_run_id=1,
    )  # fmt: skip
    return base
