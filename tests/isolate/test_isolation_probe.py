"""The probe runner: fresh processes (forked from a collected server, or one each)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hermetic_hunt.findings import Probe
from hermetic_hunt.isolate.probes import ProbeRunner, ProbeTarget, fork_available
from hermetic_hunt.isolate.wire import probe_args
from hermetic_hunt.models import Settings, Step

SUITE = {
    "state.py": "POLLUTED = []\n",
    "test_state.py": """
        import os
        import select

        import state

        def test_polluter():
            state.POLLUTED.append(os.getpid())

        def test_victim():
            assert not state.POLLUTED, "polluted"

        def test_hash_seed_is_77():
            assert os.environ["PYTHONHASHSEED"] == "77"

        def test_hangs_when_polluted():
            if state.POLLUTED:
                select.select([], [], [], 120)  # a real wait: no sandbox clock involved

        def test_waits_forever():
            pid_file = os.environ["PROBE_PID_FILE"]
            with open(pid_file, "w") as handle:
                handle.write(str(os.getpid()))
            select.select([], [], [], 600)

        def test_blocked_call():
            import socket
            try:
                socket.create_connection(("probe.example.invalid", 80), timeout=1)
            except OSError:
                pass
    """,
}

MODES = [
    pytest.param(True, id="fork", marks=pytest.mark.skipif(not fork_available(), reason="no fork")),
    pytest.param(False, id="process-per-probe"),
]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(**{name[:-3]: text for name, text in SUITE.items()})
    pytester.makeini("[pytest]\npythonpath = .\n")
    return pytester.path


def runner(
    path: Path, fork: bool, timeout: float = 60.0, args: tuple[str, ...] = ()
) -> ProbeRunner:
    target = ProbeTarget(
        str(path),
        ("-p", "no:randomly", *args),
        Settings(rounds=1, budget_seconds=None, base_seed=7),
    )
    return ProbeRunner(target, parallel=2, timeout=timeout, fork=fork)


def probe(*nodeids: str, hash_seed: int = 1) -> Probe:
    steps = tuple(Step(f"test_state.py::{n}", 11, 1.0e9) for n in nodeids)
    return Probe("test", steps, hash_seed)


@pytest.mark.parametrize("fork", MODES)
def test_a_probe_runs_its_steps_in_order_in_one_fresh_process(suite: Path, fork: bool) -> None:
    with runner(suite, fork) as r:
        polluted = r.run(probe("test_polluter", "test_victim"))
        alone = r.run(probe("test_victim"))
    assert polluted.status == "completed"
    assert [s.outcome for s in polluted.steps] == ["passed", "failed"]
    assert polluted.steps[-1].exc_type == "AssertionError"
    assert polluted.steps[-1].location == "test_state.py:10"
    assert polluted.steps[-1].message.startswith("polluted")
    # The polluter of the first probe left nothing behind for the second.
    assert alone.outcome == "passed"


@pytest.mark.parametrize("fork", MODES)
def test_each_probe_runs_with_the_hash_seed_it_asks_for(suite: Path, fork: bool) -> None:
    with runner(suite, fork) as r:
        results = r.run_many([probe("test_hash_seed_is_77", hash_seed=h) for h in (77, 78)])
    assert [res.outcome for res in results] == ["passed", "failed"]


@pytest.mark.parametrize("fork", MODES)
def test_a_probe_that_hangs_is_stopped_and_reported_as_a_timeout(suite: Path, fork: bool) -> None:
    with runner(suite, fork, timeout=1.0) as r:
        hung = r.run(probe("test_polluter", "test_hangs_when_polluted"))
        after = r.run(probe("test_hangs_when_polluted"))
    assert hung.status == "timeout"
    assert hung.outcome == "timeout"
    assert hung.detail == "stopped after 1s"
    assert after.outcome == "passed"  # the runner goes on


@pytest.mark.parametrize("fork", MODES)
def test_blocked_calls_come_back_with_the_step(suite: Path, fork: bool, safety_net) -> None:
    with runner(suite, fork) as r:
        result = r.run(probe("test_blocked_call"))
    assert result.outcome == "passed"
    (violation,) = result.steps[-1].violations
    assert (violation.host, violation.port) == ("probe.example.invalid", 80)
    assert safety_net == []


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True
    return state == "Z"  # killed; nobody left to reap it in some containers


@pytest.mark.parametrize("fork", MODES)
def test_abort_stops_running_probes_and_their_processes(
    suite: Path, fork: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = suite / "probe.pid"
    monkeypatch.setenv("PROBE_PID_FILE", str(pid_file))
    r = runner(suite, fork, timeout=600)
    results: list = []
    worker = threading.Thread(target=lambda: results.append(r.run(probe("test_waits_forever"))))
    worker.start()
    for _ in range(600):  # until the probe runs (or 60s)
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    r.abort()
    worker.join(timeout=60)
    r.close()
    assert not worker.is_alive()
    assert results[0].status in ("error", "timeout")
    for _ in range(100):
        if _gone(pid):
            break
        time.sleep(0.1)
    assert _gone(pid)


def test_a_test_that_is_not_collected_is_an_error_naming_it(suite: Path) -> None:
    with runner(suite, fork_available()) as r:
        assert "test_state.py::test_victim" in (r.collected(1) or ())
        result = r.run(probe("test_renamed"))
    assert result.status == "error"
    assert "'test_state.py::test_renamed' is not collected any more" in result.detail


def test_a_server_that_cannot_start_says_why(suite: Path) -> None:
    with runner(suite, fork_available(), args=("--no-such-option",)) as r:
        assert r.collected(1) is None
        assert "--no-such-option" in r.startup_error
        result = r.run(probe("test_victim"))
    assert result.status == "error"


@pytest.mark.skipif(not fork_available(), reason="no fork")
def test_forked_probes_share_one_server_and_leave_no_temporary_files(
    suite: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path_factory.mktemp("probe-temp")
    monkeypatch.setenv("TMPDIR", str(temp))
    with runner(suite, True) as r:
        for _ in range(4):
            assert r.run(probe("test_polluter", "test_victim")).outcome == "failed"
        assert r.started_servers == 1
    assert list(temp.iterdir()) == []


def test_the_hunts_own_options_are_dropped_from_a_probe_servers_arguments() -> None:
    argv = [
        "--hermetic-hunt=30", "-n", "2", "--hermetic-seed=7", "-p", "no:randomly", "shop",
        "-x", "-n4", "--hermetic-hunt-isolate", "off", "-k", "cart", "--junitxml=out.xml",
        "--basetemp", "/tmp/b", "--maxfail=3", "-nauto", "--lf", "-m", "not slow", "--", "-x",
    ]  # fmt: skip
    assert probe_args(argv) == [
        "-p", "no:randomly", "shop", "-k", "cart", "-m", "not slow", "--", "-x",
    ]  # fmt: skip


def test_a_stored_journal_of_another_test_is_an_error_before_any_process_starts(
    tmp_path: Path,
) -> None:
    from hermetic_hunt import journal as journal_format

    other = journal_format.Journal(
        test="test_state.py::test_other", mode="record", seed=1, now=2.0, random_seed=None,
        config={}, events={}, counts={},
    )  # fmt: skip
    target = ProbeTarget(str(tmp_path), (), Settings(rounds=1, budget_seconds=None, base_seed=1))
    step = Step("test_state.py::test_victim", mode="record", attempt_id=7)
    with ProbeRunner(target, journals=lambda attempt_id: journal_format.encode(other)) as runner:
        result = runner.run(Probe("replay", (step,), 0))
        assert runner.started_servers == 0
    assert result.status == "error"
    assert "the journal of A7: journal was recorded for" in result.detail
