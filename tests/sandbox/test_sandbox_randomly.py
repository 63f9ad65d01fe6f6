"""pytest-randomly: inside a hunt the attempt seed owns `random`; outside, randomly does."""

from __future__ import annotations

import random
import re
import zlib
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


ORDERED = "import random\n\n" + "\n".join(
    f"def test_{index:02d}():\n    print('drawn', {index}, random.random())\n"
    for index in range(12)
)


def run(pytester: pytest.Pytester, *args: str) -> tuple[list[str], dict[str, float]]:
    out = pytester.runpytest_subprocess("-v", "-s", *args).stdout.str()
    drawn = {f"test_{int(i):02d}": float(v) for i, v in re.findall(r"drawn (\d+) (\S+)", out)}
    return re.findall(r"::(test_\d\d) ", out), drawn


def test_outside_a_hunt_randomly_still_shuffles_and_reseeds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_order=ORDERED)
    plain, _ = run(pytester, "-p", "no:randomly")
    first, drawn = run(pytester, "-p", "randomly", "--randomly-seed=1")
    other, _ = run(pytester, "-p", "randomly", "--randomly-seed=2")
    assert plain == [f"test_{index:02d}" for index in range(12)]
    assert sorted(first) == plain and first != plain and other != first
    assert len(drawn) == 12
    # randomly's per-test reseed is still in charge: seed + crc32(nodeid) at the call.
    for name, value in drawn.items():
        expected = random.Random(1 + zlib.crc32(f"test_order.py::{name}".encode())).random()
        assert value == expected, name
