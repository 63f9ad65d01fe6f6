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
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hermetic_hunt import _compat, options
from hermetic_hunt.errors import BadDatabase, BadOption, HuntError
from hermetic_hunt.models import (
    DEFAULT_INTEGRATION_MARKER,
    DEFAULT_ISOLATE_BUDGET,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_TEST_TIMEOUT,
    MIN_ISOLATE_SECONDS,
    MODES,
    ORDERS,
    Settings,
    database_path,
)
from hermetic_hunt.seeds import new_base_seed

_compat.plain_imports("hermetic_hunt")  # (the modules above are already in)

if TYPE_CHECKING:
    from hermetic_hunt.engine.engine import Conflicts
    from hermetic_hunt.hunt.controller import HuntController


@dataclass(frozen=True)
class HuntOption:
    """One hunt option that takes a value: written once, read by a loop.

    ``settings`` turns the option's flag and text into the :class:`Settings`
    fields it sets (raising :class:`~hermetic_hunt.errors.BadOption` with the fix);
    fields of options not given keep the defaults declared on ``Settings``.
    ``ini``: the option can also be set as an ini key of the same name.
    """

    flag: str
    help: str
    settings: Callable[[str, str], dict[str, Any]]
    ini: bool = True

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def ini_key(self) -> str | None:
        return self.dest if self.ini else None


def _budget_fields(flag: str, text: str) -> dict[str, Any]:
    probes, seconds, _ = options.parse_isolate_budget(text, flag)
    return {"isolate_seconds": seconds, **({"isolate_budget": probes} if probes else {})}


#: Every hunt option that takes a value (ini key = dest without the dashes).
HUNT_OPTIONS: tuple[HuntOption, ...] = (
    HuntOption(
        "--hermetic-hunt-db",
        "SQLite database the hunt writes (default: flakes.db in the invocation directory).",
        lambda _, text: {"db_path": Path(os.path.expanduser(text))},
    ),
    HuntOption(
        "--hermetic-hunt-mode",
        "seeded (default: seeded time and randomness, replay by seed), record (real time "
        "and entropy, journaled; replay by journal) or off (no sandbox).",
        lambda flag, text: {"mode": options.parse_choice(flag, text, MODES)},
    ),
    HuntOption(
        "--hermetic-hunt-order",
        "Order of each round: auto (default: shuffle, reversed, grouped in turn), shuffle, "
        "grouped (module -> class -> function) or reversed.",
        lambda flag, text: {"order": options.parse_choice(flag, text, ORDERS)},
    ),
    HuntOption(
        "--hermetic-hunt-isolate",
        "on (default): after the rounds, isolate why each flaky test flakes; off: skip it.",
        lambda flag, text: {"isolate": options.parse_choice(flag, text, ("on", "off")) == "on"},
    ),
    HuntOption(
        "--hermetic-hunt-isolate-budget",
        f"Isolation budget: probes per flaky test (default {DEFAULT_ISOLATE_BUDGET}) and/or "
        "overall time, e.g. 300, 15m or 300,15m (default time: auto, as long as the rounds "
        f"took, at least {MIN_ISOLATE_SECONDS:g}s).",
        _budget_fields,
    ),
    HuntOption(
        "--hermetic-hunt-probe-timeout",
        "Seconds (or 30s, 2m) after which an isolation probe is stopped "
        f"(default {DEFAULT_PROBE_TIMEOUT:g}).",
        lambda flag, text: {"probe_timeout": options.parse_seconds(flag, text)},
    ),
    HuntOption(
        "--hermetic-hunt-timeout",
        "Seconds (or 30s, 2m) one attempt of a test may run: a test that runs longer "
        "(hangs) is stopped, its attempt fails as Timeout with where it was, and the "
        f"round goes on (default {DEFAULT_TEST_TIMEOUT:g}).",
        lambda flag, text: {"test_timeout": options.parse_seconds(flag, text)},
    ),
    HuntOption(
        "--hermetic-hunt-integration-marker",
        f"Tests with this marker keep real network during a hunt (default: "
        f"{DEFAULT_INTEGRATION_MARKER}).",
        lambda flag, text: {"integration_marker": options.parse_marker_name(flag, text)},
    ),
    HuntOption(
        "--hermetic-hunt-time",
        "Timing conditions of the rounds: default (most rounds exact; jitter 20%, slow 10%, "
        "stress 10%, switch 10%, edge 10% of rounds), exact (none), or percents like "
        "jitter=30,switch=10.",
        lambda _, text: {"time": options.parse_time(text)},
    ),
    HuntOption(
        "--hermetic-hunt-horizon",
        "How far ahead of today round start dates reach (month ends, Feb 29, DST changes, "
        "2038...): 4y (default), 26w, 90d.",
        lambda _, text: {"horizon_days": options.parse_horizon(text)},
    ),
    HuntOption(
        "--hermetic-hunt-today",
        "Where start dates begin: now (default), commit (HEAD's commit date, for an old "
        "checkout) or a day like 2024-02-29. Failures only before the real today are "
        "'past dates only'.",
        lambda _, text: {"dates_from": _dates_from(text)},
    ),
    HuntOption(
        "--hermetic-hunt-shard",
        "K/M: this machine runs shard K of M; shards' rounds never repeat each other.",
        lambda _, text: {"shard": options.parse_shard(text)},
        ini=False,
    ),
)


def _dates_from(text: str) -> float | None:
    """``--hermetic-hunt-today``'s first start date (None: the run's today)."""
    value = options.parse_today(text)
    if not isinstance(value, str):
        return value
    from hermetic_hunt import vcs

    when = vcs.commit_time("HEAD", os.getcwd())
    if when is None:
        raise BadOption(
            f"--hermetic-hunt-today=commit: {os.getcwd()} is not in a git checkout with "
            "a commit: use now or a day like 2024-02-29"
        )
    return when


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hermetic-hunt", "hermetic-hunt: hunt flaky tests")

    def add(flag: str, text: str, **more: Any) -> None:
        # argparse %-formats option help (not ini help): a literal "20%" is written "20%%".
        dest = flag.lstrip("-").replace("-", "_")
        group.addoption(flag, dest=dest, default=None, help=text.replace("%", "%%"), **more)

    add(
        "--hermetic-hunt",
        "Hunt flaky tests: run N shuffled rounds (or as many as fit in a duration "
        "like 10m) with every attempt sandboxed and stored. Base seed: --hermetic-seed.",
        metavar="N|DURATION",
    )
    for option in HUNT_OPTIONS:
        add(option.flag, option.help)
        if option.ini_key is not None:
            parser.addini(option.ini_key, option.help, type="string", default=None)
    add(
        "--hermetic-hunt-changed",
        "Hunt only the tests in files changed or added since BASE (a branch, tag or "
        "sha; default: the merge base with the default branch) and the tests that import "
        "changed modules. Write it as --hermetic-hunt-changed=BASE.",
        nargs="?",
        const="",
        metavar="BASE",
    )
    add(
        "--hermetic-quarantine",
        "Run the tests FILE lists (hermetic-hunt quarantine -o FILE) as usual, but do "
        "not let their failures fail the session; name those that passed often enough to leave.",
        metavar="FILE",
    )
    add(
        "--hermetic-replay-db",
        "Replay a flake (F3), an attempt (A1207) or a test's newest flake from a "
        "hermetic-hunt database, and say whether the recorded failure came back.",
        metavar="PATH::ID",
    )
    add(
        "--hermetic-replay-runs",
        "A replay runs its reproducer up to N times, each in a fresh forked process, "
        "until it reproduces (default: as many as make a failure at the hunt's rate 95% "
        "expected, at most 100).",
        metavar="N",
    )


#: The changed-tests option (flag, dest): a hunt option with an optional value.
_CHANGED = ("--hermetic-hunt-changed", "hermetic_hunt_changed")


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
    if replay is None and config.getoption("hermetic_replay_runs") is not None:
        raise pytest.UsageError(
            "--hermetic-replay-runs only applies to a replay: add --hermetic-replay-db=PATH::ID"
        )
    if hunt is None and replay is None:
        given = [(o.flag, o.dest) for o in HUNT_OPTIONS] + [_CHANGED]
        stray = [flag for flag, dest in given if config.getoption(dest) is not None]
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
    fields: dict[str, Any] = {}
    for option in HUNT_OPTIONS:
        text = option_value(config, option.dest, option.ini_key)
        if text is not None:
            fields.update(option.settings(option.flag, text))
    # The run's today, fixed now and stored: start dates, the coming dates and
    # "past dates only" are measured from it, in this run and in its replays.
    fields["today"] = float(int(time.time()))
    settings = Settings(rounds=rounds, budget_seconds=budget, base_seed=base_seed, **fields)
    # Resolved now, before any sandbox or test can change the working directory.
    return replace(settings, db_path=database_path(settings.db_path, config.invocation_params.dir))


#: Options a hunt cannot honour, with the reason shown to the user. (``--dist``
#: load, loadscope, loadfile, loadgroup and worksteal all mean the same to a hunt:
#: its own scheduler decides which worker runs what, from the seed.)
_CONFLICTS: Conflicts = (
    ("hermetic_all", "--hermetic-all: a hunt sandboxes every attempt itself"),
    ("hermetic_record", "--hermetic-record: use --hermetic-hunt-mode=record instead"),
    ("hermetic_replay", "--hermetic-replay: replay hunt results with --hermetic-replay-db"),
    ("count", "--count (pytest-repeat): a hunt already repeats every test once per round"),
    ("flake_finder_enable", "--flake-finder: a hunt already repeats every test"),
    ("looponfail", "--looponfail: a hunt is a single session"),
    ("stepwise", "--stepwise: a hunt must run every test in every round"),
)


def _configure_hunt(config: pytest.Config, hunt_value: str) -> None:
    from hermetic_hunt.engine import engine
    from hermetic_hunt.hunt import xdist

    plugins = config.pluginmanager
    engine.hand_seeding_to_the_hunt(config)
    if config.getoption("hermetic_hunt_changed") is not None:
        from hermetic_hunt.hunt.changed import ChangedFilter

        ChangedFilter.install(config)
    if getattr(config, "workerinput", None) is not None:
        settings = xdist.worker_settings(config)
        if settings is None:
            return  # a worker of a session whose controller is not hunting
        if config.getoption("hermetic_seed") is None:
            config.option.hermetic_seed = settings.base_seed
        plugins.register(
            xdist.XdistWorker(config, engine.Engine(config, settings)), "hermetic-hunt-worker"
        )
        return

    engine.refuse_conflicts(config, "--hermetic-hunt", _CONFLICTS)
    if getattr(config.option, "dist", "no") == "each":
        raise pytest.UsageError(
            "--hermetic-hunt cannot be combined with --dist=each: every worker would run "
            "every test; the hunt gives each worker its share of each round "
            "(use -n N or --tx with another --dist, or none)"
        )
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
    from hermetic_hunt.hunt.local import LocalLoop
    from hermetic_hunt.store import Store

    store = Store.open(settings.db_path)
    config.add_cleanup(store.close)
    distributed = config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))
    specs = _compat.parse_tx_specs(config) if distributed else ["main"]
    controller = HuntController(config, settings, store, len(specs), specs)
    plugins.register(controller, "hermetic-hunt")
    if distributed:
        plugins.register(xdist.XdistController(controller, len(specs)), "hermetic-hunt-xdist")
    else:
        plugins.register(
            LocalLoop(controller, engine.Engine(config, settings)), "hermetic-hunt-loop"
        )
    plugins.register(EndOfHunt(controller), "hermetic-hunt-summary")
    config.add_cleanup(controller.interrupts.install().uninstall)
    engine.declare_marker(config, settings.integration_marker)


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
            cwd=str(hunt.config.invocation_params.dir), attempts=hunt.intake.tallies.attempts,
            error=hunt.error, stored=hunt.intake.stored, rounds=hunt.rounds.completed,
            isolation=hunt.isolation, incomplete=hunt.rounds.incomplete_text(),
            rejected=hunt.intake.rejected_text(),
        ):  # fmt: skip
            terminalreporter.write_line(line)
