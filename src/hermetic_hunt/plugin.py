"""The pytest plugin: options, and nothing else until a hunt or replay is asked for.

With hermetic-hunt installed, a plain ``pytest`` run behaves exactly as
without it: this module only registers options. ``--hermetic-hunt`` (or
``--hermetic-replay-db``) registers the objects that do the work: the hunt's
controller (:mod:`hermetic_hunt.hunt.controller`) with its run loop
(:mod:`hermetic_hunt.hunt.local`, or the xdist glue in
:mod:`hermetic_hunt.hunt.xdist`), and the engine (:mod:`hermetic_hunt.engine`)
wherever tests run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hermetic_hunt import options
from hermetic_hunt.errors import BadDatabase, HuntError
from hermetic_hunt.models import (
    DEFAULT_DB,
    DEFAULT_INTEGRATION_MARKER,
    DEFAULT_ISOLATE_BUDGET,
    DEFAULT_MODE,
    DEFAULT_ORDER,
    DEFAULT_PROBE_TIMEOUT,
    MIN_ISOLATE_SECONDS,
    Settings,
    Shard,
)
from hermetic_hunt.seeds import new_base_seed

if TYPE_CHECKING:
    from hermetic_hunt.hunt.controller import HuntController
from hermetic_hunt.timing import DEFAULT_TIME_MIX

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
        f"Isolation budget: probes per flaky test (default {DEFAULT_ISOLATE_BUDGET}) and/or "
        "overall time, e.g. 300, 15m or 300,15m (default time: auto, as long as the rounds "
        f"took, at least {MIN_ISOLATE_SECONDS:g}s).",
    ),
    (
        "--hermetic-hunt-probe-timeout",
        "hermetic_hunt_probe_timeout",
        "hermetic_hunt_probe_timeout",
        "Seconds (or 30s, 2m) after which an isolation probe is stopped "
        f"(default {DEFAULT_PROBE_TIMEOUT:g}).",
    ),
    (
        "--hermetic-hunt-integration-marker",
        "hermetic_hunt_integration_marker",
        "hermetic_hunt_integration_marker",
        f"Tests with this marker keep real network during a hunt (default: "
        f"{DEFAULT_INTEGRATION_MARKER}).",
    ),
    (
        "--hermetic-hunt-time",
        "hermetic_hunt_time",
        "hermetic_hunt_time",
        "Timing conditions of the rounds: default (most rounds exact; jitter 20%, slow 10%, "
        "stress 10%, switch 10% of rounds), exact (none), or percents like jitter=30,switch=10.",
    ),
    (
        "--hermetic-hunt-shard",
        "hermetic_hunt_shard",
        None,
        "K/M: this machine runs shard K of M; shards' rounds never repeat each other.",
    ),
)


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
        "--hermetic-hunt-changed",
        dest="hermetic_hunt_changed",
        nargs="?",
        const="",
        default=None,
        metavar="BASE",
        help="Hunt only the tests in files changed or added since BASE (a branch, tag or "
        "sha; default: the merge base with the default branch) and the tests that import "
        "changed modules. Write it as --hermetic-hunt-changed=BASE.",
    )
    group.addoption(
        "--hermetic-quarantine",
        dest="hermetic_quarantine",
        default=None,
        metavar="FILE",
        help="Run the tests FILE lists (hermetic-hunt quarantine -o FILE) as usual, but do "
        "not let their failures fail the session; name those that passed often enough to leave.",
    )
    group.addoption(
        "--hermetic-replay-db",
        dest="hermetic_replay_db",
        default=None,
        metavar="PATH::ID",
        help="Replay a flake (F3), an attempt (A1207) or a test's newest flake from a "
        "hermetic-hunt database, and say whether the recorded failure came back.",
    )


#: The changed-tests option (flag, dest, ini, help): a hunt option with an optional value.
_CHANGED = ("--hermetic-hunt-changed", "hermetic_hunt_changed", None, "")


def option_value(config: pytest.Config, dest: str, ini: str | None) -> str | None:
    """An option's value, else its ini key's (None: neither is set)."""
    value = config.getoption(dest)
    if value is None and ini is not None:
        value = config.getini(ini) or None
    return str(value) if value is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    hunt = config.getoption("hermetic_hunt")
    replay = config.getoption("hermetic_replay_db")
    quarantine = config.getoption("hermetic_quarantine")
    if hunt is None and replay is None:
        stray = [flag for flag, dest, _, _ in (*HUNT_OPTIONS, _CHANGED)
                 if config.getoption(dest) is not None]  # fmt: skip
        if stray:
            raise pytest.UsageError(
                f"{stray[0]} only applies to a hunt: add --hermetic-hunt=N (or a duration)"
            )
        if quarantine is not None:
            from hermetic_hunt.quarantine.session import Quarantine

            Quarantine.install(config, str(quarantine))
        return
    if hunt is not None and replay is not None:
        raise pytest.UsageError(
            "--hermetic-hunt and --hermetic-replay-db cannot be combined: hunt first, "
            "then replay what it found"
        )
    if quarantine is not None:
        raise pytest.UsageError(
            "--hermetic-quarantine applies to plain pytest sessions, not to a hunt or a replay "
            "(they run the quarantined tests to see them fail)"
        )
    if replay is not None and config.getoption(_CHANGED[1]) is not None:
        raise pytest.UsageError(
            f"{_CHANGED[0]} only applies to a hunt: a replay runs the steps it recorded"
        )
    import sqlite3  # only now: a hunt or a replay was asked for

    try:
        if replay is not None:
            from hermetic_hunt.replay.session import configure_replay

            marker = option_value(
                config, "hermetic_hunt_integration_marker", "hermetic_hunt_integration_marker"
            )
            configure_replay(config, str(replay), marker)
        else:
            _configure_hunt(config, str(hunt))
    except HuntError as exc:
        raise pytest.UsageError(str(exc)) from None
    except sqlite3.Error as exc:  # a page that cannot be read (a damaged file)
        raise pytest.UsageError(str(BadDatabase(f"the database cannot be read: {exc}"))) from None


def settings_from_config(config: pytest.Config, hunt_value: str, base_seed: int) -> Settings:
    """The hunt's :class:`Settings` from its options and ini keys (BadOption if wrong)."""
    rounds, budget = options.parse_hunt(hunt_value)

    def value(dest: str, ini: bool = True) -> str | None:
        return option_value(config, dest, dest if ini else None)

    mode, order = value("hermetic_hunt_mode"), value("hermetic_hunt_order")
    isolate = value("hermetic_hunt_isolate")
    budget_probes, budget_seconds, _ = options.parse_isolate_budget(
        value("hermetic_hunt_isolate_budget") or "auto"
    )
    timeout = value("hermetic_hunt_probe_timeout")
    marker = value("hermetic_hunt_integration_marker")
    timing = value("hermetic_hunt_time")
    shard = value("hermetic_hunt_shard", ini=False)
    db = value("hermetic_hunt_db") or DEFAULT_DB
    db_path = Path(config.invocation_params.dir, os.path.expanduser(db)).resolve()
    return Settings(
        rounds=rounds,
        budget_seconds=budget,
        base_seed=base_seed,
        mode=options.parse_mode(mode) if mode else DEFAULT_MODE,
        order=options.parse_order(order) if order else DEFAULT_ORDER,
        db_path=db_path,
        isolate=options.parse_isolate(isolate) if isolate else True,
        isolate_budget=budget_probes or DEFAULT_ISOLATE_BUDGET,
        isolate_seconds=budget_seconds,
        probe_timeout=options.parse_seconds("--hermetic-hunt-probe-timeout", timeout)
        if timeout
        else DEFAULT_PROBE_TIMEOUT,
        integration_marker=options.parse_marker_name("--hermetic-hunt-integration-marker", marker)
        if marker
        else DEFAULT_INTEGRATION_MARKER,
        shard=options.parse_shard(shard) if shard else Shard(),
        time=options.parse_time(timing) if timing else DEFAULT_TIME_MIX,
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


def _configure_hunt(config: pytest.Config, hunt_value: str) -> None:
    from hermetic_hunt.engine.engine import Engine, hand_seeding_to_the_hunt
    from hermetic_hunt.hunt import xdist

    hand_seeding_to_the_hunt(config)
    if config.getoption("hermetic_hunt_changed") is not None:
        from hermetic_hunt.hunt.changed import ChangedFilter

        ChangedFilter.install(config)
    if getattr(config, "workerinput", None) is not None:
        settings = xdist.worker_settings(config)
        if settings is None:
            return  # a worker of a session whose controller is not hunting
        if config.getoption("hermetic_seed") is None:
            config.option.hermetic_seed = settings.base_seed
        config.pluginmanager.register(
            xdist.XdistWorker(config, Engine(config, settings)), "hermetic-hunt-worker"
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
        from hermetic_hunt import _compat

        specs = _compat.parse_tx_specs(config)
        controller = HuntController(config, settings, store, len(specs), specs)
        config.pluginmanager.register(controller, "hermetic-hunt")
        config.pluginmanager.register(
            xdist.XdistController(controller, len(specs)), "hermetic-hunt-xdist"
        )
    else:
        from hermetic_hunt.hunt.local import LocalLoop

        controller = HuntController(config, settings, store, 1, ["main"])
        config.pluginmanager.register(controller, "hermetic-hunt")
        config.pluginmanager.register(
            LocalLoop(controller, Engine(config, settings)), "hermetic-hunt-loop"
        )
    config.pluginmanager.register(EndOfHunt(controller), "hermetic-hunt-summary")
    from hermetic_hunt.engine.engine import declare_marker

    declare_marker(config, settings.integration_marker)


class EndOfHunt:
    """The hunt's end summary, after pytest's (counts as ``hermetic-hunt report``)."""

    def __init__(self, controller: HuntController) -> None:
        self.controller = controller

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from hermetic_hunt.report.summary import end_of_hunt

        hunt = self.controller
        if not hunt.run_id:
            return
        for line in end_of_hunt(
            hunt.store, hunt.run_id, hunt.summary_header(),
            cwd=str(hunt.config.invocation_params.dir), attempts=hunt.tallies.attempts,
            error=hunt.error, stored=hunt.stored, rounds=hunt.rounds_completed,
            isolation=hunt.isolation,
        ):  # fmt: skip
            terminalreporter.write_line(line)
