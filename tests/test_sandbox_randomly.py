"""pytest-randomly: inside a hunt the attempt seed owns `random`; outside, randomly does."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from helpers import rows

pytest.importorskip("pytest_randomly")

DRAWS = """
import random

def test_draw():
    assert False, f"value={random.random()!r}"

def test_other_draw():
    random.random()
    assert False, f"value={random.random()!r}"
"""


def hunt_values(pytester: pytest.Pytester, randomly_seed: int, workers: list[str]) -> set[Any]:
    db = pytester.path / f"randomly-{randomly_seed}.db"
    result = pytester.runpytest_subprocess(
        "-p", "randomly", f"--randomly-seed={randomly_seed}", "--hermetic-seed=4",
        "--hermetic-hunt=3", "--hermetic-hunt-isolate=off", f"--hermetic-hunt-db={db}",
        *workers,
    )  # fmt: skip
    assert result.ret == 1
    found = rows(
        db,
        "SELECT t.nodeid, a.round, a.seed, f.message FROM attempts a "
        "JOIN tests t ON t.id = a.test_id JOIN failures f ON f.attempt_id = a.id",
    )
    assert len(found) == 6
    values = set()
    for nodeid, round_no, seed, message in found:
        value = float(re.search(r"value=([0-9.e-]+)", message).group(1))  # type: ignore[union-attr]
        stream = random.Random(seed)
        if nodeid.endswith("test_other_draw"):
            stream.random()
        assert value == stream.random(), (nodeid, message)  # the attempt seed's stream
        values.add((nodeid, round_no, value))
    return values


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_in_a_hunt_the_random_stream_follows_the_attempt_seed_not_randomly(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_draws=DRAWS)
    assert hunt_values(pytester, 1, workers) == hunt_values(pytester, 2, workers)


ORDERED = "\n".join(f"def test_{index:02d}():\n    pass\n" for index in range(12))


def order(result: pytest.RunResult) -> list[str]:
    return re.findall(r"::(test_\d\d) PASSED", result.stdout.str())


def test_outside_a_hunt_randomly_still_shuffles_and_reseeds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_order=ORDERED)
    plain = order(pytester.runpytest_subprocess("-p", "no:randomly", "-v"))
    first = order(pytester.runpytest_subprocess("-p", "randomly", "--randomly-seed=1", "-v"))
    again = order(pytester.runpytest_subprocess("-p", "randomly", "--randomly-seed=1", "-v"))
    other = order(pytester.runpytest_subprocess("-p", "randomly", "--randomly-seed=2", "-v"))
    assert plain == [f"test_{index:02d}" for index in range(12)]
    assert sorted(first) == plain and first == again
    assert first != plain and other != first
    pytester.makepyfile(
        test_order="import random\n\ndef test_value():\n    print('drawn', random.random())\n"
    )
    drawn = [
        re.search(r"drawn (\S+)", run.stdout.str()).group(1)  # type: ignore[union-attr]
        for run in (
            pytester.runpytest_subprocess("-p", "randomly", f"--randomly-seed={seed}", "-s")
            for seed in (1, 1, 2)
        )
    ]
    assert drawn[0] == drawn[1] != drawn[2]  # randomly's per-test reseed is in charge
