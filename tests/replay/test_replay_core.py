"""The replay core: targets, plans, verdicts and warnings, driven by a fake database."""

from __future__ import annotations

import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from hermetic_hunt import journal as journal_format
from hermetic_hunt.errors import BadJournal, BadOption, UnknownId
from hermetic_hunt.findings import Flake
from hermetic_hunt.journal import Journal
from hermetic_hunt.models import Attempt, Failure, Reproducer, Step
from hermetic_hunt.replay.plan import (
    Expected,
    Plan,
    Target,
    location_arg,
    needs_reexec,
    parse_target,
    resolve,
)
from hermetic_hunt.replay.verdict import Observed, describe, faithfulness_warnings, judge

VICTIM = "tests/test_shop.py::test_victim"
POLLUTER = "tests/test_shop.py::test_polluter"


def journal(test: str, *, mode: str = "record", threads: int = 1, network: str = "block") -> bytes:
    return journal_format.encode(
        Journal(
            test=test,
            mode=mode,
            seed=5,
            now=1.0e9,
            random_seed="ab",
            config={"clock": "virtual", "network": network},
            events={"time": [1.0e9]},
            counts={"time": 1},
            threads=threads,
        )
    )


def attempt(attempt_id: int = 7, **changes: Any) -> Attempt:
    failure = Failure(
        changes.pop("exc_type", "KeyError"),
        changes.pop("message", "'sku'"),
        changes.pop("location", "shop/cart.py:42"),
    )
    values: dict[str, Any] = dict(
        attempt_id=attempt_id, run_id=1, nodeid=VICTIM, outcome="failed", phase="call",
        seed=11, now=1.5e9, mode="seeded", hash_seed=42,
    )  # fmt: skip
    values.update(changes)
    if values["outcome"] in ("failed", "crashed", "xpassed"):
        values["failure"] = failure
    return Attempt(**values)


class FakeSource:
    """A database in memory: attempts, flakes and journals by id."""

    def __init__(self) -> None:
        self.attempts: dict[int, Attempt] = {}
        self.flakes: dict[str, Flake] = {}
        self.journals: dict[int, bytes] = {}

    def attempt(self, attempt_id: int) -> Attempt | None:
        return self.attempts.get(attempt_id)

    def newest_failing_attempt(self, nodeid: str) -> Attempt | None:
        found = [a for a in self.attempts.values() if a.nodeid == nodeid and a.outcome == "failed"]
        return max(found, key=lambda a: a.attempt_id) if found else None

    def test_known(self, nodeid: str) -> bool:
        return any(a.nodeid == nodeid for a in self.attempts.values())

    def flake(self, flake_id: str) -> Flake | None:
        return self.flakes.get(flake_id)

    def flake_of(self, nodeid: str) -> Flake | None:
        return next((f for f in self.flakes.values() if f.nodeid == nodeid), None)

    def journal(self, attempt_id: int) -> bytes | None:
        return self.journals.get(attempt_id)


def flake(reproducer: Any, *, kinds: tuple[str, ...] = ("victim",)) -> Flake:
    """F3 of VICTIM, its reproducer (JSON) read as the store reads it."""
    return Flake(
        flake_id="F3", nodeid=VICTIM, kinds=kinds, status="isolated", confirmed=True,
        polluters=(), cleaners=(), state_setters=(),
        reproducer=None if reproducer is None else Reproducer.from_json(reproducer), evidence={},
        probes=0, probe_seconds=0.0, note="", first_run_id=2, last_run_id=2, row_id=1,
    )  # fmt: skip


def victim_reproducer(**changes: Any) -> dict[str, Any]:
    repro = Reproducer(
        steps=(Step(POLLUTER, 1, 1.0e9), Step(VICTIM, 2, 1.1e9, attempt_id=7)),
        hash_seed=99, exc_type="KeyError", location="shop/cart.py:42", message="'sku'", run_id=1,
    )  # fmt: skip
    data = repro.to_json()
    data.update(changes)
    return data


# -- parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("flakes.db::F3", Target("flakes.db", "F3", "flake", 3)),
        ("flakes.db::f3", Target("flakes.db", "F3", "flake", 3)),
        ("ci/flakes.db::A1207", Target("ci/flakes.db", "A1207", "attempt", 1207)),
        (
            "my dir/x.db::tests/t.py::test_a[b::c d]",
            Target("my dir/x.db", "tests/t.py::test_a[b::c d]", "nodeid"),
        ),
        ("flakes.db::Frobnicate", Target("flakes.db", "Frobnicate", "nodeid")),
    ],
)
def test_a_target_is_a_path_and_a_flake_attempt_or_nodeid(value, expected):
    assert parse_target(value) == expected


@pytest.mark.parametrize(
    "value",
    ["flakes.db", "flakes.db::", "::F3", "flakes.db:F3", "flakes.db::F0", "flakes.db::A", "x::F3 "],
)
def test_a_malformed_target_is_refused_with_the_expected_form(value):
    with pytest.raises(BadOption) as info:
        parse_target(value)
    assert "expected PATH::ID, e.g. flakes.db::F3" in str(info.value)
    assert repr(value) in str(info.value)
    assert "\n" not in str(info.value)


# -- plans -----------------------------------------------------------------------


def test_an_attempt_plan_runs_that_test_with_its_seed_now_and_hash_seed():
    source = FakeSource()
    source.attempts[7] = attempt(counts={"time": 2})
    plan = resolve(Target("x.db", "A7", "attempt", 7), source)
    assert plan.label == "A7" and plan.attempt_id == 7 and plan.run_id == 1
    assert plan.steps == (Step(VICTIM, 11, 1.5e9, "seeded", 7),)
    assert plan.hash_seed == 42
    assert plan.expected == Expected("failed", "KeyError", "shop/cart.py:42", "'sku'")


def test_a_record_mode_attempt_replays_its_validated_journal():
    source = FakeSource()
    source.attempts[7] = attempt(mode="record", has_journal=True)
    source.journals[7] = journal(VICTIM)
    plan = resolve(Target("x.db", "A7", "attempt", 7), source)
    replayed = plan.journal_of(plan.steps[0])
    assert replayed is not None and replayed.events["time"] == [1.0e9]


def test_a_record_mode_step_without_a_stored_journal_runs_live_with_a_warning():
    source = FakeSource()
    source.flakes["F3"] = flake(
        victim_reproducer(
            steps=[
                {"nodeid": POLLUTER, "seed": 1, "now": 1.0e9, "mode": "record", "attempt_id": 6},
                {"nodeid": VICTIM, "seed": 2, "now": 1.0e9, "mode": "record", "attempt_id": 7},
            ]
        )
    )
    source.attempts[7] = attempt(mode="record", has_journal=True)
    source.journals[7] = journal(VICTIM)
    plan = resolve(Target("x.db", "F3", "flake", 3), source)
    assert [plan.journal_of(s) is not None for s in plan.steps] == [False, True]
    warnings = faithfulness_warnings(plan, {}, {})
    assert (
        f"{POLLUTER} ran in record mode without a stored journal: it runs with real time and entropy"
        in warnings
    )


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x1f\x8b\x08\x00garbage", "the journal of A7: journal is *"),
        (b"[1, 2]", "the journal of A7: journal is not a JSON object"),
        (journal("tests/test_shop.py::test_other"), "the journal of A7: journal was recorded for*"),
    ],
)
def test_a_corrupt_journal_is_a_one_line_error(data, message):
    source = FakeSource()
    source.attempts[7] = attempt(mode="record", has_journal=True)
    source.journals[7] = data
    with pytest.raises(BadJournal) as info:
        resolve(Target("x.db", "A7", "attempt", 7), source)
    assert fnmatch(str(info.value), message), str(info.value)


def test_a_flake_plan_runs_the_reproducer_steps_in_order():
    source = FakeSource()
    source.flakes["F3"] = flake(victim_reproducer())
    source.attempts[7] = attempt(counts={"threads": 3})
    plan = resolve(Target("x.db", "F3", "flake", 3), source)
    assert [s.nodeid for s in plan.steps] == [POLLUTER, VICTIM]
    assert [(s.seed, s.now) for s in plan.steps] == [(1, 1.0e9), (2, 1.1e9)]
    assert plan.hash_seed == 99 and plan.flake_row == 1 and plan.attempt_id == 7
    assert plan.expected == Expected("failed", "KeyError", "shop/cart.py:42", "'sku'")
    assert plan.counts == {"threads": 3}
    assert plan.kinds == ("victim",)
    concurrent = resolve(Target("x.db", "F3", "flake", 3), source)
    concurrent.kinds = ("concurrency",)
    assert (
        "F3 is a concurrency flake: thread timing is not replayed, so a replay may pass; run it "
        "a few times" in faithfulness_warnings(concurrent, {}, {})
    )


def test_a_nodeid_means_its_newest_flake_or_else_its_newest_failing_attempt():
    source = FakeSource()
    source.attempts[7] = attempt()
    source.attempts[9] = attempt(9)
    plan = resolve(Target("x.db", VICTIM, "nodeid"), source)
    assert plan.label == "A9"
    assert plan.notes == [
        f"{VICTIM} has no flake in the database yet: replaying its newest failing attempt, A9"
    ]
    source.flakes["F3"] = flake(victim_reproducer())
    assert resolve(Target("x.db", VICTIM, "nodeid"), source).label == "F3"


def test_a_flake_without_a_reproducer_replays_its_newest_failing_attempt():
    source = FakeSource()
    source.flakes["F3"] = flake(None)
    source.attempts[7] = attempt()
    plan = resolve(Target("x.db", "F3", "flake", 3), source)
    assert plan.label == "F3" and plan.flake_row == 1 and plan.attempt_id == 7
    assert "F3 has no minimal reproducer (isolation isolated)" in plan.notes[0]


@pytest.mark.parametrize(
    "target, message",
    [
        (Target("x.db", "A8", "attempt", 8), "x.db has no attempt A8: see 'hermetic-hunt list'*"),
        (Target("x.db", "F4", "flake", 4), "x.db has no flake F4: see 'hermetic-hunt list'*"),
        (Target("x.db", "t.py::nope", "nodeid"), "x.db knows no test 't.py::nope'*"),
        (Target("x.db", POLLUTER, "nodeid"), f"'{POLLUTER}' never failed in x.db*"),
    ],
)
def test_an_unknown_id_names_what_is_missing(target, message):
    source = FakeSource()
    source.attempts[7] = attempt()
    source.attempts[6] = attempt(6, nodeid=POLLUTER, outcome="passed")
    with pytest.raises(UnknownId) as info:
        resolve(target, source)
    assert fnmatch(str(info.value), message), str(info.value)


def test_a_seeded_steps_journal_explains_the_recording_and_a_corrupt_one_is_ignored():
    source = FakeSource()
    source.flakes["F3"] = flake(victim_reproducer())
    source.attempts[7] = attempt(has_journal=True)
    source.journals[7] = journal(VICTIM, mode="seeded", threads=2, network="off")
    plan = resolve(Target("x.db", "F3", "flake", 3), source)
    assert plan.journal_of(plan.steps[-1]) is not None
    warnings = "\n".join(faithfulness_warnings(plan, {}, {}))
    assert "multi-threaded (2 threads" in warnings and "network allowed" in warnings
    source.journals[7] = b"garbage"
    again = resolve(Target("x.db", "F3", "flake", 3), source)
    assert again.journal_of(again.steps[-1]) is None


def test_a_network_flake_without_a_failure_expects_the_blocked_call():
    source = FakeSource()
    source.flakes["F3"] = flake(victim_reproducer(signature={}), kinds=("network",))
    plan = resolve(Target("x.db", "F3", "flake", 3), source)
    assert plan.expected == Expected("passed", violations=True)


# -- verdicts ----------------------------------------------------------------------


def plan_for(expected: Expected, label: str = "F3") -> Plan:
    return Plan(label, Target("x.db", label, "flake", 3), (Step(VICTIM, 1, 1.0, "seeded"),),
                None, expected)  # fmt: skip


RECORDED = Expected("failed", "KeyError", "shop/cart.py:42", "'sku'")


@pytest.mark.parametrize(
    "observed, outcome, line",
    [
        (Observed("failed", "KeyError", "shop/cart.py:42", "'other'"), "reproduced",
         f"reproduced F3: {VICTIM} failed with the recorded signature "
         "(KeyError 'sku' at shop/cart.py:42)"),
        (Observed("passed"), "not-reproduced", "did not reproduce F3 (passed)"),
        (Observed("skipped"), "not-reproduced", "did not reproduce F3 (skipped)"),
        (Observed("failed", "ValueError", "shop/cart.py:50", "bad"), "failed-differently",
         "failed differently: F3 recorded KeyError 'sku' at shop/cart.py:42, "
         f"the replay of {VICTIM} "
         "got ValueError bad at shop/cart.py:50"),
        (Observed("failed", "KeyError", "shop/cart.py:43"), "failed-differently",
         "failed differently: *"),
        (None, "not-reproduced", f"did not reproduce F3 ({VICTIM} did not run: stopped early: x)"),
    ],
)  # fmt: skip
def test_the_verdict_is_one_plain_sentence(observed, outcome, line):
    verdict = judge(plan_for(RECORDED), observed, "stopped early: x" if observed is None else "")
    assert verdict.outcome == outcome
    assert fnmatch(verdict.line, line), verdict.line


def test_a_passing_recording_is_reproduced_by_a_pass_and_a_network_one_by_the_call():
    assert judge(plan_for(Expected("passed"), "A5"), Observed("passed")).line == (
        f"reproduced A5: {VICTIM} passed as recorded"
    )
    network = plan_for(Expected("passed", violations=True))
    assert judge(network, Observed("passed", violations=("connect x.invalid:80",))).line == (
        f"reproduced F3: {VICTIM} made the recorded blocked network call (connect x.invalid:80)"
    )
    assert judge(network, Observed("passed")).outcome == "not-reproduced"
    assert judge(network, Observed("failed", "OSError")).outcome == "failed-differently"


# -- warnings, hash seeds, locations -----------------------------------------------


def test_warnings_name_every_difference_that_makes_a_replay_less_faithful():
    steps = (Step(POLLUTER, None, None, "off"), Step(VICTIM, 1, 1.0, "record", 7))
    recording = journal_format.decode(journal(VICTIM, threads=3, network="off"), where="j")
    plan = Plan(
        "F3", Target("x.db", "F3", "flake", 3), steps, None, RECORDED, journals={7: recording}
    )
    recorded = {"python": "3.10.1", "platform": "Linux-A", "tz": "Europe/Paris",
                "git_sha": "a" * 40,
                "locale": "C", "versions": {"hermetic-sandbox": "0.1.0"}}  # fmt: skip
    current = {"python": "3.11.7", "platform": "Linux-A", "tz": None, "git_sha": "b" * 40,
               "locale": "C", "versions": {"hermetic-sandbox": "0.1.1"}}  # fmt: skip
    text = "\n".join(faithfulness_warnings(plan, recorded, current))
    for expected in (
        "Python differs: recorded '3.10.1', here '3.11.7'",
        "TZ differs: recorded 'Europe/Paris', here None",
        "git commit differs",
        "hermetic-sandbox differs: recorded '0.1.0', here '0.1.1'",
        "PYTHONHASHSEED is unknown",
        "multi-threaded (3 threads",
        f"{VICTIM} was recorded with the network allowed",
        f"{POLLUTER} was recorded without a sandbox",
    ):
        assert expected in text
    assert "platform" not in text
    plan.hash_seed = 5
    same = faithfulness_warnings(
        Plan("A1", plan.target, (Step(VICTIM, 1, 1.0, "seeded"),), 5, RECORDED),
        current,
        current,
    )
    assert same == []


@pytest.mark.parametrize(
    "needed, environ, expected",
    [(None, {}, False), (5, {"PYTHONHASHSEED": "5"}, False), (5, {}, True),
     (5, {"PYTHONHASHSEED": "random"}, True), (0, {"PYTHONHASHSEED": "0"}, False),
     (5, {"PYTHONHASHSEED": "6"}, True)],
)  # fmt: skip
def test_a_restart_is_needed_only_when_the_hash_seed_differs(needed, environ, expected):
    assert needs_reexec(needed, environ) is expected


def test_the_command_points_at_the_hunts_rootdir_only_inside_the_current_directory(tmp_path):
    (tmp_path / "ci" / "shop").mkdir(parents=True)
    here = str(tmp_path / "ci")
    assert location_arg(str(tmp_path / "ci" / "shop"), here, here) == "shop"
    assert location_arg(here, here, here) is None
    # the recording's machine had other paths: the same layout below cwd counts
    assert location_arg("/home/runner/work/app/shop", "/home/runner/work/app", here) == "shop"
    assert location_arg("/home/runner/work/app/gone", "/home/runner/work/app", here) is None
    # never outside the current directory, whatever the database says
    assert location_arg(str(tmp_path), here, here) is None
    assert location_arg("/etc", "/", here) is None
    assert location_arg("/x/../../etc", "/x", here) is None


def test_the_header_says_what_runs_with_what():
    steps = (Step(POLLUTER, 1, 0.0, "seeded"), Step(VICTIM, 2, 951782400.0, "seeded"))
    plan = Plan("F3", Target("x.db", "F3", "flake", 3), steps, 77, RECORDED)
    assert describe(plan, "ci/x.db") == (
        f"hermetic-hunt replay: F3 from ci/x.db: 2 tests in order (1 before {VICTIM}) "
        "· mode seeded "
        "· seed 2 · now 2000-02-29T00:00:00.000+00:00 · PYTHONHASHSEED=77"
    )


@pytest.mark.process
def test_the_core_imports_neither_pytest_nor_sqlite_nor_hermetic():
    code = (
        "import sys, hermetic_hunt.replay.plan, hermetic_hunt.replay.verdict\n"
        "names = ('pytest', '_pytest', 'sqlite3', 'hermetic', 'click')\n"
        "print(sorted(m for m in names if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_nothing_in_the_replay_path_unpickles_evaluates_or_uses_a_shell():
    root = Path(__file__).resolve().parents[2] / "src" / "hermetic_hunt"
    for name in ("replay/plan.py", "replay/verdict.py", "replay/session.py", "store/replay.py"):
        text = (root / name).read_text()
        for forbidden in (r"\bpickle\b", r"\beval\(", r"\bexec\(", r"shell=True", r"os\.system",
                          r"\bmarshal\b"):  # fmt: skip
            assert not re.search(forbidden, text), (name, forbidden)
