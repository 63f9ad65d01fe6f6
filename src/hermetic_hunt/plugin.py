"""The pytest plugin: options, and nothing else until a hunt or replay is asked for.

With hermetic-hunt installed, a plain ``pytest`` run behaves exactly as
without it: this module only registers options. ``--hermetic-hunt`` (or
``--hermetic-replay-db``) registers the objects that do the work: the hunt's
controller (:mod:`hermetic_hunt.hunt.controller`), the attempt executor
(:mod:`hermetic_hunt.engine.executor`) and, under xdist, the scheduler glue
(:mod:`hermetic_hunt.hunt.xdist`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hermetic_hunt import options
from hermetic_hunt.errors import HuntError
from hermetic_hunt.hunt.schedule import Shard
from hermetic_hunt.models import HuntSettings
from hermetic_hunt.seeds import new_base_seed

#: (option, dest, ini key, help) of every hunt option that takes a value.
HUNT_OPTIONS: tuple[tuple[str, str, str | None, str], ...] = (
    (
        "--hermetic-hunt-db",
        "hermetic_hunt_db",
        "hermetic_hunt_db",
        "SQLite database the hunt writes (default: flakes.db in the invocation directory).",
    ),
    (
        "--hermetic-hunt-mode",
        "hermetic_hunt_mode",
        "hermetic_hunt_mode",
        "seeded (default: seeded time and randomness, replay by seed), record (real time "
        "and entropy, journaled; replay by journal) or off (no sandbox).",
    ),
    (
        "--hermetic-hunt-order",
        "hermetic_hunt_order",
        "hermetic_hunt_order",
        "Order of each round: auto (default: shuffle, reversed, grouped in turn), shuffle, "
        "grouped (module -> class -> function) or reversed.",
    ),
    (
        "--hermetic-hunt-isolate",
        "hermetic_hunt_isolate",
        "hermetic_hunt_isolate",
        "on (default): after the rounds, isolate why each flaky test flakes; off: skip it.",
    ),
    (
        "--hermetic-hunt-isolate-budget",
        "hermetic_hunt_isolate_budget",
        "hermetic_hunt_isolate_budget",
        "Most isolation probes per flaky test (default 200).",
    ),
    (
        "--hermetic-hunt-probe-timeout",
        "hermetic_hunt_probe_timeout",
        "hermetic_hunt_probe_timeout",
        "Seconds (or 30s, 2m) after which an isolation probe is stopped (default 120).",
    ),
    (
        "--hermetic-hunt-integration-marker",
        "hermetic_hunt_integration_marker",
        "hermetic_hunt_integration_marker",
        "Tests with this marker keep real network during a hunt (default: integration).",
    ),
    (
        "--hermetic-hunt-shard",
        "hermetic_hunt_shard",
        None,
        "K/M: this machine runs shard K of M; shards' rounds never repeat each other.",
    ),
)

_STASH = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hermetic-hunt", "hermetic-hunt: hunt flaky tests")
    group.addoption(
        "--hermetic-hunt",
        dest="hermetic_hunt",
        default=None,
        metavar="N|DURATION",
        help="Hunt flaky tests: run N shuffled rounds (or as many as fit in a duration "
        "like 10m) with every attempt sandboxed and stored. Base seed: --hermetic-seed.",
    )
    for flag, dest, ini, text in HUNT_OPTIONS:
        group.addoption(flag, dest=dest, default=None, help=text)
        if ini is not None:
            parser.addini(ini, text, type="string", default=None)
    group.addoption(
        "--hermetic-replay-db",
        dest="hermetic_replay_db",
        default=None,
        metavar="PATH::ID",
        help="Replay a flake (F3), an attempt (A1207) or a test's newest flake from a "
        "hermetic-hunt database, and say whether the recorded failure came back.",
    )


def _value(config: pytest.Config, dest: str, ini: str | None) -> str | None:
    value = config.getoption(dest)
    if value is None and ini is not None:
        value = config.getini(ini) or None
    return str(value) if value is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    hunt = config.getoption("hermetic_hunt")
    replay = config.getoption("hermetic_replay_db")
    if hunt is None and replay is None:
        stray = [flag for flag, dest, _, _ in HUNT_OPTIONS if config.getoption(dest) is not None]
        if stray:
            raise pytest.UsageError(
                f"{stray[0]} only applies to a hunt: add --hermetic-hunt=N (or a duration)"
            )
        return
    if hunt is not None and replay is not None:
        raise pytest.UsageError(
            "--hermetic-hunt and --hermetic-replay-db cannot be combined: hunt first, "
            "then replay what it found"
        )
    try:
        if replay is not None:
            from hermetic_hunt.replay.session import configure_replay

            configure_replay(config, str(replay))
        else:
            _configure_hunt(config, str(hunt))
    except HuntError as exc:
        raise pytest.UsageError(str(exc)) from None


def settings_from_config(config: pytest.Config, hunt_value: str, base_seed: int) -> HuntSettings:
    rounds, budget = options.parse_hunt(hunt_value)
    mode = _value(config, "hermetic_hunt_mode", "hermetic_hunt_mode")
    order = _value(config, "hermetic_hunt_order", "hermetic_hunt_order")
    isolate = _value(config, "hermetic_hunt_isolate", "hermetic_hunt_isolate")
    budget_probes = _value(config, "hermetic_hunt_isolate_budget", "hermetic_hunt_isolate_budget")
    timeout = _value(config, "hermetic_hunt_probe_timeout", "hermetic_hunt_probe_timeout")
    marker = _value(config, "hermetic_hunt_integration_marker", "hermetic_hunt_integration_marker")
    shard = _value(config, "hermetic_hunt_shard", None)
    db = _value(config, "hermetic_hunt_db", "hermetic_hunt_db") or "flakes.db"
    db_path = Path(config.invocation_params.dir, os.path.expanduser(db)).resolve()
    return HuntSettings(
        rounds=rounds,
        budget_seconds=budget,
        base_seed=base_seed,
        mode=options.parse_mode(mode) if mode else "seeded",
        order=options.parse_order(order) if order else "auto",
        db_path=db_path,
        isolate=options.parse_isolate(isolate) if isolate else True,
        isolate_budget=options.parse_positive_int("--hermetic-hunt-isolate-budget", budget_probes)
        if budget_probes
        else 200,
        probe_timeout=options.parse_seconds("--hermetic-hunt-probe-timeout", timeout)
        if timeout
        else 120.0,
        integration_marker=options.parse_marker_name("--hermetic-hunt-integration-marker", marker)
        if marker
        else "integration",
        shard=options.parse_shard(shard) if shard else Shard(),
    )


#: Options a hunt cannot honour, with the reason shown to the user.
_CONFLICTS: tuple[tuple[str, str], ...] = (
    ("hermetic_all", "--hermetic-all: a hunt sandboxes every attempt itself"),
    ("hermetic_record", "--hermetic-record: use --hermetic-hunt-mode=record instead"),
    ("hermetic_replay", "--hermetic-replay: replay hunt results with --hermetic-replay-db"),
    ("count", "--count (pytest-repeat): a hunt already repeats every test once per round"),
    ("flake_finder_enable", "--flake-finder: a hunt already repeats every test"),
    ("looponfail", "--looponfail: a hunt is a single session"),
    ("stepwise", "--stepwise: a hunt must run every test in every round"),
)


def _check_conflicts(config: pytest.Config) -> None:
    for dest, reason in _CONFLICTS:
        value = getattr(config.option, dest, None)
        if value in (None, False, 0) or (dest == "count" and value == 1):
            continue
        raise pytest.UsageError(f"--hermetic-hunt cannot be combined with {reason}")
    dist = getattr(config.option, "dist", "no")
    if dist not in ("no", "load"):
        raise pytest.UsageError(
            f"--hermetic-hunt cannot be combined with --dist={dist}: the hunt schedules "
            "workers itself (use -n N or --tx, without --dist)"
        )


def _hand_seeding_to_the_hunt(config: pytest.Config) -> None:
    # pytest-randomly reseeds `random` at every phase and shuffles the
    # collection with its own seed: inside a hunt, both belong to the hunt.
    if hasattr(config.option, "randomly_reset_seed"):
        config.option.randomly_reset_seed = False
    if hasattr(config.option, "randomly_reorganize"):
        config.option.randomly_reorganize = False


def _configure_hunt(config: pytest.Config, hunt_value: str) -> None:
    from hermetic_hunt.engine.executor import AttemptExecutor, ExecSettings
    from hermetic_hunt.hunt import xdist as _xdist

    _hand_seeding_to_the_hunt(config)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        facts = workerinput.get(_xdist.WORKERINPUT_KEY)
        if not isinstance(facts, dict):
            return  # a worker of a session whose controller is not hunting
        if config.getoption("hermetic_seed") is None:
            config.option.hermetic_seed = int(facts["base_seed"])
        worker = _xdist.XdistWorker(config)
        config.pluginmanager.register(worker, "hermetic-hunt-worker")
        executor = AttemptExecutor(
            ExecSettings(
                int(facts["base_seed"]), str(facts["mode"]), str(facts["integration_marker"])
            ),
            worker.locate,
        )
        _register_executor(config, executor)
        config.addinivalue_line(  # workers check markers too (PytestUnknownMarkWarning)
            "markers",
            f"{facts['integration_marker']}: keeps real network during a hermetic-hunt hunt",
        )
        return

    _check_conflicts(config)
    seed_option = config.getoption("hermetic_seed")
    base_seed = int(seed_option) if seed_option is not None else new_base_seed()
    if not 0 <= base_seed < 2**63:
        raise pytest.UsageError(
            f"--hermetic-seed: expected a seed between 0 and 2**63-1, got {base_seed}"
        )
    # hermetic-sandbox's own plugin reads the same option: one base seed.
    config.option.hermetic_seed = base_seed
    settings = settings_from_config(config, hunt_value, base_seed)

    from hermetic_hunt.hunt.controller import HuntController
    from hermetic_hunt.store import Store

    store = Store.open(settings.db_path)
    config.add_cleanup(store.close)
    distributed = config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))
    if distributed:
        from xdist.workermanage import parse_tx_spec_config

        specs = parse_tx_spec_config(config)
        controller = HuntController(config, settings, store, len(specs), specs)
        config.pluginmanager.register(controller, "hermetic-hunt")
        config.pluginmanager.register(
            _xdist.XdistController(controller, len(specs)), "hermetic-hunt-xdist"
        )
    else:
        controller = HuntController(config, settings, store, 1, ["main"])
        config.pluginmanager.register(controller, "hermetic-hunt")
        executor = AttemptExecutor(
            ExecSettings(base_seed, settings.mode, settings.integration_marker),
            controller.locate,
        )
        controller.executor = executor
        _register_executor(config, executor)
    config.stash[_STASH] = controller
    config.addinivalue_line(
        "markers",
        f"{settings.integration_marker}: keeps real network during a hermetic-hunt hunt",
    )


def _register_executor(config: pytest.Config, executor: Any) -> None:
    from hermetic_hunt.engine import fixture
    from hermetic_hunt.engine.executor import RepeatGuard

    config.pluginmanager.register(RepeatGuard(), "hermetic-hunt-repeat-guard")
    config.pluginmanager.register(executor, "hermetic-hunt-executor")
    fixture.bind(config, executor)
    # Registered after hermetic-sandbox's plugin, so this hermetic_sandbox
    # fixture is the one tests get during a hunt.
    config.pluginmanager.register(fixture, "hermetic-hunt-fixture")
