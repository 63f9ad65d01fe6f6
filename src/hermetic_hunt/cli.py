"""The ``hermetic-hunt`` command line: a thin dispatcher over the library.

Each command parses its options, calls one function of the core, prints what
it returns and maps :class:`~hermetic_hunt.errors.HuntError` to a one-line
error with a documented exit status (the table is in docs/cli.md, "Exit
statuses").
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from hermetic_hunt import __version__
from hermetic_hunt.errors import BadDatabase, HuntError
from hermetic_hunt.models import DEFAULT_DB

EXIT_FOUND = 1
EXIT_BAD_INPUT = 3

F = TypeVar("F", bound=Callable[..., Any])


class BadInput(click.ClickException):
    """A one-line error about the user's input (exit status 3)."""

    exit_code = EXIT_BAD_INPUT


#: The one ``--db`` option of every command that reads a hunt's database.
DB_OPTION = click.option(
    "--db",
    default=DEFAULT_DB,
    show_default=True,
    metavar="PATH",
    help="The hunt's database (relative paths are taken from the working directory).",
)


def user_errors(func: F) -> F:
    """Turn core errors into one-line CLI errors, never a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HuntError as exc:
            raise BadInput(str(exc)) from None
        except sqlite3.Error as exc:  # a page that cannot be read (a damaged file)
            raise BadInput(str(BadDatabase(f"the database cannot be read: {exc}"))) from None

    return wrapper  # type: ignore[return-value]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Examples:\n\n"
    "\b\n"
    "  pytest --hermetic-hunt=50 -n auto   # hunt: 50 shuffled, sandboxed rounds\n"
    "  hermetic-hunt report                # what is flaky, why, how to replay it\n"
    "  hermetic-hunt demo                  # hunt the bundled example suite\n",
)
@click.version_option(__version__, "--version", prog_name="hermetic-hunt")
def main() -> None:
    """Hunt flaky tests and hand back a reproducer.

    Hunts run inside pytest ('pytest --hermetic-hunt=N'); these commands
    read, explain and replay what a hunt stored in its database.
    """


@main.command(
    context_settings={"ignore_unknown_options": True},
    epilog="Examples:\n\n\b\n"
    "  hermetic-hunt replay F3                  # print the replay command of flake F3\n"
    "  hermetic-hunt replay A1207 --db ci.db    # of an attempt, from another database\n"
    "  hermetic-hunt replay F3 --run -- --pdb   # run it, with pytest options\n",
)
@click.argument("ref", metavar="ID")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- PYTEST_ARGS]...")
@DB_OPTION
@click.option("--run", is_flag=True, help="Run the command (PYTEST_ARGS appended); don't print it.")
@user_errors
def replay(ref: str, pytest_args: tuple[str, ...], db: str, run: bool) -> None:
    """Print (or --run) the pytest command that replays a flake or an attempt.

    ID is a flake id (F3), an attempt id (A1207) or a test's nodeid (its
    newest flake). The command is `pytest --hermetic-replay-db=PATH::ID`.
    """
    import shlex
    import subprocess
    import sys

    from hermetic_hunt.replay.command import prepare

    if pytest_args and not run:
        raise click.UsageError("pytest arguments after ID only apply with --run")
    argv, hash_seed = prepare(db, ref, os.getcwd(), pytest_args)
    if not run:
        click.echo(shlex.join(argv))
        return
    click.echo(f"$ {shlex.join(argv)}", err=True)
    env = dict(os.environ)
    if hash_seed is not None:
        # The replay would restart pytest under this seed: start it so.
        env["PYTHONHASHSEED"] = str(hash_seed)
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", *argv[1:]], env=env))


def _run_option(help: str) -> Callable[[F], F]:
    return click.option("--run", "run_id", type=click.IntRange(min=1), metavar="R", help=help)


_RUN_OPTION = _run_option("Only run R of the database (default: every run in it).")


def _examples(*lines: str) -> str:
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines) + "\n"


@main.command(
    epilog=_examples(
        "hermetic-hunt report                                # text, every run",
        "hermetic-hunt report --run 3 --db ci.db              # one run of ci.db",
        'hermetic-hunt report --format markdown >> "$GITHUB_STEP_SUMMARY"',
        "hermetic-hunt report --format html                  # reports/hermetic-hunt.html",
        "hermetic-hunt report --format json -o report.json",
        "hermetic-hunt report --since origin/main        # runs on main's tip or later",
    )
)
@DB_OPTION
@_RUN_OPTION
@click.option(
    "--format",
    "fmt",
    # report.FORMATS and report.ALIASES (not imported here: the CLI starts light).
    type=click.Choice(["text", "markdown", "md", "html", "json"]),
    default="text",
    show_default=True,
    help="text for a terminal, markdown (or md) for a CI step summary, html for one "
    "self-contained page, json for other tools (docs/json-format.md).",
)
@click.option(
    "-o",
    "--output",
    metavar="PATH",
    help="Write the report to PATH instead of stdout (html: default reports/hermetic-hunt.html).",
)
@click.option(
    "--exit-zero", is_flag=True, help="Exit 0 even when flaky tests or violations were found."
)
@click.option(
    "--since",
    metavar="DATE|REV",
    help="Only the runs since a date (2025-01-31) or a git revision (runs on that commit "
    "or a later one).",
)
@user_errors
def report(
    db: str, run_id: int | None, fmt: str, output: str | None, exit_zero: bool, since: str | None
) -> None:
    """What is flaky, why, how sure we are, and how to replay it.

    Flaky tests ranked by how surely they fail (fail rate with a 95% Wilson
    interval), with their kinds, polluters, cleaners and state-setters and a
    replay command; broken and sandbox-incompatible tests; network
    violations; and, for tests that never failed, the flake rate their clean
    attempts rule out. Exit status 1 when anything was found.
    """
    from hermetic_hunt.pasteable import display_path
    from hermetic_hunt.report.load import write_report

    outcome = write_report(db, run=run_id, fmt=fmt, output=output, since=since)
    if outcome.path is not None:
        click.echo(f"wrote {display_path(outcome.path)} · {outcome.summary}")
    else:
        click.echo(outcome.text or "", nl=False)
    if outcome.findings and not exit_zero:
        click.get_current_context().exit(EXIT_FOUND)


@main.command(
    "list",
    epilog=_examples(
        "hermetic-hunt list",
        "hermetic-hunt list --db shards/merged.db --run 2",
    ),
)
@DB_OPTION
@_RUN_OPTION
@user_errors
def list_flakes(db: str, run_id: int | None) -> None:
    """One line per flake: id, kinds, fail rate, test, replay command.

    Flaky tests that were not isolated (--hermetic-hunt-isolate=off) are
    listed with '-' for an id and replay their first failing attempt. Exit
    status 1 when anything is listed.
    """
    from hermetic_hunt.report.load import list_flakes as list_lines

    lines, found = list_lines(db, run=run_id)
    click.echo("\n".join(lines))
    if found:
        click.get_current_context().exit(EXIT_FOUND)


@main.command(
    epilog=_examples(
        "hermetic-hunt isolate                   # every flaky test of the newest run",
        "hermetic-hunt isolate F3 F5 --budget 500,10m",
        "hermetic-hunt isolate --run 2 tests/test_x.py::test_y",
    )
)
@click.argument("ids", nargs=-1, metavar="[ID]...")
@DB_OPTION
@_run_option("Run R (default: the newest).")
@click.option(
    "--budget",
    metavar="BUDGET",
    help="Probes per flaky test and/or overall time: 500, 15m or 500,15m (default: the hunt's).",
)
@click.option("--probe-timeout", type=click.FloatRange(min=0.1), help="Seconds per probe.")
@click.option(
    "-n", "--workers", type=click.IntRange(min=1), help="Probes at a time (default: the hunt's -n)."
)
@user_errors
def isolate(
    ids: tuple[str, ...],
    db: str,
    run_id: int | None,
    budget: str | None,
    probe_timeout: float | None,
    workers: int | None,
) -> None:
    """Find out why each flaky test of a run flakes (what a hunt does at its end).

    IDs are flake ids (F3) or test nodeids; none: every flaky test of the run.
    Probes run in fresh processes with the recorded seeds, start times and
    hash seeds, from the directory the hunt ran in. Results go to the
    database (flakes, isolation_steps) and are printed.
    """
    from hermetic_hunt.isolate.run import isolate_database
    from hermetic_hunt.options import parse_isolate_budget
    from hermetic_hunt.report.isolation import isolation_lines

    probes, seconds, _ = parse_isolate_budget(budget, "--budget") if budget else (None, None, False)
    report = isolate_database(
        db, run_id, ids, budget=probes, seconds=seconds, timeout=probe_timeout, workers=workers,
        say=click.echo,
    )  # fmt: skip
    lines = isolation_lines(report, os.getcwd())
    nothing = f"run {report.run_id}: nothing to isolate (no flaky or always-failing test)"
    click.echo("\n".join(lines or [nothing]))


@main.command(
    epilog=_examples(
        "hermetic-hunt show F3           # a flake: kinds, polluters, reproducer, probes",
        "hermetic-hunt show A1207        # an attempt: seed, now, failure, journal",
    )
)
@click.argument("ref", metavar="ID")
@DB_OPTION
@user_errors
def show(ref: str, db: str) -> None:
    """Everything stored about a flake (F3) or an attempt (A1207).

    Includes the journal comparison between a failing and a passing attempt
    of the same test (what each read from clocks and entropy sources) and
    the replay command.
    """
    from hermetic_hunt.report.load import show as show_text

    click.echo(show_text(db, ref), nl=False)


@main.command(
    "fix",
    epilog=_examples(
        "hermetic-hunt fix F3              # suggest, verify on a copy, print the diff",
        "hermetic-hunt fix F3 --apply      # ... and write the verified patch",
        "hermetic-hunt fix F3 --diff | git apply",
        "hermetic-hunt fix F3 --runs 50 --db ci.db",
    ),
)
@click.argument("ref", metavar="ID")
@DB_OPTION
@click.option(
    "--verify/--no-verify",
    "check",
    default=True,
    show_default=True,
    help="Run the reproducer on a patched copy of the rootdir before saying anything works.",
)
@click.option(
    "--runs",
    type=click.IntRange(1, 10_000),
    help="Runs of the reproducer with the patch (default: enough for 95% confidence at the "
    "flake's fail rate).",
)
@click.option(
    "--apply", is_flag=True, help="Write the patch to your files (only once it is verified)."
)
@click.option("--diff", "diff_only", is_flag=True, help="Print only the unified diff; run nothing.")
@user_errors
def fix_flake(
    ref: str, db: str, check: bool, runs: int | None, apply: bool, diff_only: bool
) -> None:
    """Suggest a fix for a flake, verify it, and (with --apply) apply it.

    Prints the concrete change for the flake's kind, with file and line,
    and a unified diff where one can be written. The diff is verified on a
    temporary copy of the rootdir: the reproducer must fail there without
    it and pass every run with it. Your files are only written with
    --apply. Exit status 1 when the patch did not pass its verification.
    """
    from hermetic_hunt.fix.command import fix

    if diff_only and apply:
        raise click.UsageError("--diff prints the patch only; leave it out to --apply")
    outcome = fix(db, ref, check=check, runs=runs, apply=apply, diff_only=diff_only,
                  say=lambda text: click.echo(text, err=True))  # fmt: skip
    if outcome.lines:
        click.echo("\n".join(outcome.lines))
    click.get_current_context().exit(outcome.exit_status)


@main.command(
    epilog=_examples(
        "hermetic-hunt quarantine -o quarantine.txt     # review it, commit it",
        "pytest --hermetic-quarantine=quarantine.txt   # CI: known flakes cannot fail it",
        "hermetic-hunt quarantine --db ci.db --confirmed-only",
    )
)
@DB_OPTION
@click.option("-o", "--output", metavar="FILE", help="Write the list to FILE (default: print it).")
@click.option(
    "--confirmed-only",
    is_flag=True,
    help="Only flakes whose reproducer was confirmed (default: every test the hunt saw fail).",
)
@user_errors
def quarantine(db: str, output: str | None, confirmed_only: bool) -> None:
    """Write every test the hunt saw fail as a quarantine list.

    pytest reads it with --hermetic-quarantine=FILE. One test per line, with
    its flake id, kinds, fail rate, why it flakes and whether its reproducer
    was confirmed in a comment: a plain file to review and commit. Flakes
    whose history says they are fixed are left out (named in the header).
    """
    from pathlib import Path

    from hermetic_hunt.pasteable import display_path
    from hermetic_hunt.quarantine.build import quarantine_list

    made = quarantine_list(db, output=output, confirmed_only=confirmed_only)
    if output is None:
        click.echo(made.text, nl=False)
        return
    target = Path(os.getcwd(), output)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(made.text, encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"-o {output}: cannot write the list ({exc.strerror or exc})") from None
    count = len(made.entries)
    click.echo(f"wrote {display_path(target)}: {count} quarantined test{'s' * (count != 1)}")


@main.command(
    epilog=_examples(
        "hermetic-hunt merge shard-1.db shard-2.db shard-3.db -o flakes.db",
        "hermetic-hunt merge new.db -o flakes.db     # fold one database into another",
    )
)
@click.argument("inputs", nargs=-1, required=True, metavar="A.db [B.db]...")
@click.option(
    "-o", "--output", required=True, metavar="OUT.db", help="Database to merge into (created)."
)
@user_errors
def merge(inputs: tuple[str, ...], output: str) -> None:
    """Combine databases from several machines (CI shards) into OUT.db.

    Runs are identified by their uuid: none is lost or stored twice, so
    merging the same database again changes nothing. Attempt and flake ids
    are renumbered in OUT.db; a test flaky on several shards gets one flake.
    """
    from hermetic_hunt.store.merge import merge_databases

    for line in merge_databases(list(inputs), output).lines(os.getcwd()):
        click.echo(line)


@main.command(
    epilog=_examples(
        "hermetic-hunt demo",
        "hermetic-hunt demo --rounds 60 --seed 11 -n 2 --dir ./demo",
    )
)
@click.option(
    "--rounds",
    type=click.IntRange(1, 10_000),
    default=30,
    show_default=True,
    help="Rounds to hunt.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**63 - 1),
    default=7,
    show_default=True,
    help="--hermetic-seed of the hunt (fixed: the demo finds the same flakes every time).",
)
@click.option(
    "-n", "--workers", default="auto", show_default=True, help="pytest-xdist workers (-n)."
)
@click.option(
    "--dir",
    "directory",
    metavar="PATH",
    help="Where to copy the example suite (must not exist or be empty; default: a new "
    "temporary directory, kept so you can replay what the demo found).",
)
@user_errors
def demo(rounds: int, seed: int, workers: str, directory: str | None) -> None:
    """Hunt the bundled example flaky suite end to end and print the report.

    Copies the example suite (a small shop app whose tests flake in every
    way hermetic-hunt knows) to a directory, runs `pytest --hermetic-hunt`
    on it in a subprocess, and prints the report. Exit status 0 when the
    demo ran (finding flakes is the point), 1 when the hunt itself failed.
    """
    from hermetic_hunt.demo import run_demo

    click.get_current_context().exit(run_demo(rounds=rounds, seed=seed, workers=workers,
                                              directory=directory, echo=click.echo))  # fmt: skip
