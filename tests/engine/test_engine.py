"""The engine's one door per concern, in process: the conflict table, the loop
preamble, the hand-over of seeding, and the import-time ``random`` seeds
(engine/engine.py, engine/rng.py). No pytest session and no process is started."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hermetic_hunt.engine import rng
from hermetic_hunt.engine.engine import (
    hand_seeding_to_the_hunt,
    refuse_conflicts,
    stop_on_collection_errors,
)

CONFLICTS = (
    ("count", "--count (pytest-repeat): a hunt already repeats every test"),
    ("looponfail", "--looponfail: a hunt is a single session"),
)


def config(**options: Any) -> Any:
    return SimpleNamespace(option=SimpleNamespace(**options))


@pytest.mark.parametrize(
    "options",
    [{}, {"count": None}, {"count": 1}, {"looponfail": False}, {"count": 0, "looponfail": 0}],
    ids=["absent", "none", "count-1-is-the-default", "false", "zero"],
)
def test_options_left_at_their_defaults_are_no_conflict(options: dict[str, Any]) -> None:
    refuse_conflicts(config(**options), "--hermetic-hunt", CONFLICTS)


def test_the_first_conflicting_option_set_is_named_with_its_reason() -> None:
    with pytest.raises(pytest.UsageError) as raised:
        refuse_conflicts(config(count=3, looponfail=True), "--hermetic-hunt", CONFLICTS)
    assert str(raised.value) == (
        "--hermetic-hunt cannot be combined with --count (pytest-repeat): a hunt already "
        "repeats every test"
    )
    with pytest.raises(pytest.UsageError) as raised:
        refuse_conflicts(config(looponfail=True), "--hermetic-replay-db", CONFLICTS)
    assert str(raised.value) == (
        "--hermetic-replay-db cannot be combined with --looponfail: a hunt is a single session"
    )


class Interrupted(Exception):
    pass


def session(failed: int = 0, *, keep_going: bool = False, collect_only: bool = False) -> Any:
    option = SimpleNamespace(continue_on_collection_errors=keep_going, collectonly=collect_only)
    return SimpleNamespace(
        testsfailed=failed, config=SimpleNamespace(option=option), Interrupted=Interrupted
    )


def test_the_loop_preamble_runs_a_collected_session_and_skips_collect_only() -> None:
    assert stop_on_collection_errors(session()) is True
    assert stop_on_collection_errors(session(collect_only=True)) is False


@pytest.mark.parametrize("failed, words", [(1, "1 error"), (3, "3 errors")])
def test_collection_errors_interrupt_the_loop_as_pytest_does(failed: int, words: str) -> None:
    with pytest.raises(Interrupted, match=f"^{words} during collection$"):
        stop_on_collection_errors(session(failed))
    # --continue-on-collection-errors: run what was collected
    assert stop_on_collection_errors(session(failed, keep_going=True)) is True


def test_seeding_is_handed_over_only_where_pytest_randomly_is_installed() -> None:
    with_randomly = config(randomly_reset_seed=True, randomly_reorganize=True)
    hand_seeding_to_the_hunt(with_randomly)
    assert vars(with_randomly.option) == {
        "randomly_reset_seed": False,
        "randomly_reorganize": False,
    }
    without = config(verbose=0)
    hand_seeding_to_the_hunt(without)
    assert vars(without.option) == {"verbose": 0}


def test_a_forked_child_resumes_the_parents_stream_where_collection_left_it() -> None:
    saved = random.getstate()
    try:
        random.seed(1234)
        random.random()  # collection drew from it
        state = rng.stream_state()
        expected = [random.random() for _ in range(3)]
        random.seed()  # what a fork does to the child's stream
        rng.resume(state)
        assert [random.random() for _ in range(3)] == expected
        before = random.getstate()
        rng.resume(None)  # no import-time seed: the stream is left alone
        assert random.getstate() == before
    finally:
        random.setstate(saved)


def test_import_time_seeds_under_the_rootdir_are_noted_with_their_line(tmp_path: Path) -> None:
    watch = rng.ImportSeeds(str(tmp_path))
    inside = tmp_path / "tests" / "test_seeded.py"
    inside.parent.mkdir()
    inside.write_text("import random\nrandom.seed(1234)\nrandom.seed()\n")
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere.py"
    outside.write_text("import random\n\nrandom.seed(99)\n")
    saved, real = random.getstate(), random.seed
    try:
        hook = watch.pytest_collection(session=None)  # type: ignore[arg-type]
        next(hook)  # collection starts: random.seed is watched
        assert random.seed is not real
        for path in (inside, outside):
            exec(compile(path.read_text(), str(path), "exec"), {})
        with pytest.raises(StopIteration):
            hook.send(None)  # collection ends
    finally:
        random.setstate(saved)
    assert random.seed is real
    # seed(None) reseeds from the OS: no fixed stream, not noted; a seed outside is not the suite's
    assert watch.calls == ["tests/test_seeded.py:2"]
    assert watch.where == "tests/test_seeded.py:2"
    assert rng.ImportSeeds(str(tmp_path)).where is None
