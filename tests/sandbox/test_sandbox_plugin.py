"""In a hunt: marker kwargs, the hermetic_sandbox fixture, hermetic.current(), violations."""

from __future__ import annotations

import json

import pytest
from helpers import rows

SUITE = """
import json, os, random, socket, time

import hermetic
import pytest

from hermetic_hunt.sandbox import clock, entropy, netguard


def note(**facts):
    with open(os.environ["HH_NOTES"], "a") as out:
        out.write(json.dumps(facts) + "\\n")


@pytest.fixture
def listener():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()


def test_fixture_is_the_attempts_handle(hermetic_sandbox):
    assert hermetic.current() is hermetic_sandbox
    before = time.time()
    hermetic_sandbox.clock.advance(3600)
    assert 3600 < time.time() - before < 3600.001
    note(test="fixture", seed=hermetic_sandbox.seed, now=before)


@pytest.mark.hermetic(seed=7, now="2024-02-29T12:00:00+00:00")
def test_marker_sets_seed_and_now():
    assert time.time() == 1709208000.0
    assert hermetic.current().seed == 7
    assert random.random() == random.Random(7).random()


@pytest.mark.hermetic(clock="off", rng="seed")
def test_marker_turns_the_clock_and_urandom_off():
    assert time.time is clock.REAL_TIME
    assert os.urandom is entropy.REAL_URANDOM
    assert hermetic.current() is not None


@pytest.mark.hermetic(network="off")
def test_marker_turns_the_guard_off():
    # the wrappers may stay in place (the guard between attempts): nothing judges
    assert netguard._active is None


@pytest.mark.hermetic(off=True)
def test_marker_off_runs_unsandboxed(hermetic_sandbox):
    assert hermetic_sandbox is None and hermetic.current() is None
    assert time.time is clock.REAL_TIME


@pytest.mark.hermetic(env={"HH_FROM_MARKER": "yes"}, fs="isolate")
def test_marker_env_and_fs(hermetic_sandbox):
    assert os.environ["HH_FROM_MARKER"] == "yes"
    assert os.getcwd() == str(hermetic_sandbox.fs.cwd)


@pytest.mark.integration
@pytest.mark.hermetic(allow_loopback=False)
def test_integration_keeps_the_network(listener):
    socket.create_connection(listener, timeout=5).close()


@pytest.mark.hermetic(allow_loopback=False)
def test_loopback_blocked_when_configured(listener):
    with pytest.raises(hermetic.NetworkBlockedError):
        socket.create_connection(listener, timeout=5)


def test_swallowed_call_is_still_a_violation():
    try:
        socket.create_connection(("status.example.invalid", 443), timeout=1)
    except OSError:
        pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_markers_fixture_and_violations_in_a_hunt(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    pytester.makepyfile(test_marked=SUITE)
    notes = pytester.path / "notes.jsonl"
    monkeypatch.setenv("HH_NOTES", str(notes))
    notes.write_text("")  # there before the hunt: never removed between rounds
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-seed=9", "--hermetic-hunt=2",
        "--hermetic-hunt-isolate=off", "-W", "error::pytest.PytestUnknownMarkWarning", *workers,
    )  # fmt: skip
    db = pytester.path / "flakes.db"
    outcomes = rows(db, "SELECT outcome, count(*) FROM attempts GROUP BY outcome")
    assert outcomes == [("passed", 18)], result.stdout.str()
    assert result.ret == 1  # violations make the hunt fail
    violations = rows(
        db,
        "SELECT t.nodeid, v.op, v.host, v.port, v.detail FROM violations v "
        "JOIN attempts a ON a.id = v.attempt_id JOIN tests t ON t.id = a.test_id "
        "ORDER BY t.nodeid, a.round",
    )
    test_file = str(pytester.path / "test_marked.py")
    assert [(n.split("::")[1], op, host) for n, op, host, _, _ in violations] == [
        ("test_loopback_blocked_when_configured", "create_connection", "127.0.0.1"),
        ("test_loopback_blocked_when_configured", "create_connection", "127.0.0.1"),
        ("test_swallowed_call_is_still_a_violation", "create_connection", "status.example.invalid"),
        ("test_swallowed_call_is_still_a_violation", "create_connection", "status.example.invalid"),
    ]
    assert all(isinstance(port, int) for _, _, _, port, _ in violations)
    swallowed = [detail for nodeid, *_, detail in violations if "swallowed" in nodeid]
    line = SUITE.splitlines().index(
        '        socket.create_connection(("status.example.invalid", 443), timeout=1)'
    )
    assert swallowed == [f"{test_file}:{line}"] * 2  # makepyfile drops the first newline
    seeds = dict(
        rows(
            db,
            "SELECT a.round, a.seed FROM attempts a JOIN tests t ON t.id = a.test_id "
            "WHERE t.nodeid LIKE '%test_fixture_is_the_attempts_handle'",
        )
    )
    noted = [json.loads(line) for line in notes.read_text().splitlines()]
    assert sorted(n["seed"] for n in noted) == sorted(seeds.values())
    marker_seeds = rows(
        db,
        "SELECT DISTINCT a.seed, a.now, a.mode FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid LIKE '%test_marker_sets_seed_and_now'",
    )
    assert marker_seeds == [(7, 1709208000.0, "seeded")]
    off = rows(
        db,
        "SELECT DISTINCT a.seed, a.mode FROM attempts a JOIN tests t ON t.id = a.test_id "
        "WHERE t.nodeid LIKE '%test_marker_off_runs_unsandboxed'",
    )
    assert off == [(None, "off")]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_a_bad_marker_argument_fails_the_attempt_with_one_line(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.fixture
        def resource():
            yield "ok"

        @pytest.mark.hermetic(clock="frozen")
        def test_x(resource):
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--hermetic-seed=9", "--hermetic-hunt=2",
        "--hermetic-hunt-isolate=off", *workers,
    )  # fmt: skip
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    result.stdout.fnmatch_lines(
        [
            "*failure: Failed: test_bad.py::test_x: @pytest.mark.hermetic(clock=...): expected "
            "one of 'virtual', 'off', got 'frozen' at *"
        ]
    )
    assert (
        rows(pytester.path / "flakes.db", "SELECT outcome, phase, mode FROM attempts")
        == [("failed", "setup", "off")] * 2
    )
    assert result.ret == 1


def test_the_marker_accepts_what_hermetic_accepts(pytester: pytest.Pytester) -> None:
    from hermetic_hunt.sandbox import SandboxSpec, spec_from_marker

    base = SandboxSpec(seed=1, now=0.0)
    spec = spec_from_marker(
        base,
        {"seed": 5, "now": "2021-06-01T00:00:00+00:00", "tick": 0, "clock": "virtual",
         "rng": "seed", "network": ["api.example.invalid:443"], "allow_loopback": False,
         "allow_unix": False, "fs": "isolate", "chdir": False, "env": {"A": None},
         "scrub_env": True, "strict_replay": False, "deep_datetime": False, "spin_limit": 0},
    )  # fmt: skip
    assert spec is not None
    assert (spec.seed, spec.now, spec.network, spec.env) == (
        5, 1622505600.0, ("api.example.invalid:443",), (("A", None),)
    )  # fmt: skip
    assert spec_from_marker(base, {"off": True}) is None
