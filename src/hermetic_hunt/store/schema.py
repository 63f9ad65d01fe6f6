"""The database schema, as forward-only migrations.

Each migration is applied once, in order, inside a transaction (sqlite-utils
``Migrations``); ``PRAGMA user_version`` mirrors the number applied so the
schema version is visible from the ``sqlite3`` shell. A database that has a
migration this version does not know was written by a newer hermetic-hunt
and is refused rather than guessed at.

Never edit a released migration: add a new one.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlite_utils import Migrations

MIGRATION_SET = "hermetic_hunt"
migrations = Migrations(MIGRATION_SET)
#: Names of the migrations this version knows, in order.
NAMES: list[str] = []


def _script(db: Any, sql: str) -> None:
    """Run ``sql``'s statements in the migration's transaction, one at a time.

    (sqlite-utils' ``executescript`` inside a transaction finds the statements'
    ends by testing every prefix of the script, character by character: a
    tenth of a second per database, for every hunt and every reader that opens
    one. These scripts are ours; a statement ends on a line that completes it.)
    """
    statement = ""
    for line in sql.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        db.execute(statement)


def _migration(name: str) -> Any:
    NAMES.append(name)
    return migrations(name=name)


def _test_stats(where: str) -> str:
    """The views ``test_stats`` (per run and test), ``test_stats_all`` (per test) and
    ``flaky_tests`` over the attempts ``where`` keeps ("": all), as 0001, 0002 and 0006
    create them (the text SQLite keeps of each view is the one they always wrote)."""
    where = f"        {where}\n" if where else ""
    views = [
        f"""        CREATE VIEW {view} AS
        SELECT {keys},
               count(*) AS attempts,
               sum(a.outcome IN ('passed', 'xfailed')) AS passed,
               sum(a.outcome IN ('failed', 'crashed', 'xpassed')) AS failed,
               sum(a.outcome = 'skipped') AS skipped,
               sum(a.outcome = 'crashed') AS crashed,
               sum(a.violations > 0) AS with_violations,
               round(1.0 * sum(a.outcome IN ('failed', 'crashed', 'xpassed'))
                     / max(1, sum(a.outcome != 'skipped')), 4) AS fail_rate
        FROM attempts a JOIN tests t ON t.id = a.test_id
{where}        GROUP BY {keys};
"""  # noqa: S608 - constant text
        for view, keys in (("test_stats", "a.run_id, t.nodeid"), ("test_stats_all", "t.nodeid"))
    ]
    return "\n".join(views) + (  # noqa: S608 - constant text
        "\n        CREATE VIEW flaky_tests AS\n"
        "        SELECT * FROM test_stats_all WHERE passed > 0 AND failed > 0;\n"
    )


def _flake_history(plain: str) -> str:
    """The view ``flake_history`` over the attempts ``plain`` keeps, as 0003 and 0006
    create it."""
    return f"""        CREATE VIEW flake_history AS
        SELECT fl.flake_id, t.nodeid, a.run_id, r.started_at, r.git_sha, r.git_branch,
               count(*) AS attempts,
               sum(a.outcome IN ('passed', 'xfailed')) AS passed,
               sum(a.outcome IN ('failed', 'crashed', 'xpassed')) AS failed
        FROM flakes fl JOIN tests t ON t.id = fl.test_id
        JOIN attempts a ON a.test_id = t.id AND {plain}
        JOIN runs r ON r.id = a.run_id
        GROUP BY fl.id, a.run_id;
        """  # noqa: S608 - constant text


@_migration("0001_initial")  # type: ignore[untyped-decorator]
def _initial(db: Any) -> None:
    _script(
        db,
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL UNIQUE,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,              -- running | complete | incomplete | interrupted
            argv TEXT NOT NULL,                -- JSON list
            invocation_dir TEXT NOT NULL,
            rootdir TEXT NOT NULL,
            base_seed INTEGER NOT NULL,
            rounds_planned INTEGER,            -- NULL for a time budget
            budget_seconds REAL,
            rounds_done INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            tests INTEGER NOT NULL DEFAULT 0,
            workers INTEGER NOT NULL,
            worker_spec TEXT NOT NULL,         -- JSON list of xdist specs, or ["main"]
            mode TEXT NOT NULL,                -- seeded | record | off
            order_strategy TEXT NOT NULL,
            shard TEXT NOT NULL DEFAULT '1/1',
            environment TEXT NOT NULL,         -- JSON: python, platform, git sha, versions...
            exit_status INTEGER
        );
        CREATE TABLE tests (
            id INTEGER PRIMARY KEY,
            nodeid TEXT NOT NULL UNIQUE
        );
        CREATE TABLE attempts (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            round INTEGER NOT NULL,
            worker TEXT NOT NULL,              -- xdist gateway id (gw0...) or 'main'
            position INTEGER NOT NULL,         -- index in that worker process's sequence
            test_id INTEGER NOT NULL REFERENCES tests(id),
            execution INTEGER NOT NULL DEFAULT 1,  -- 2, 3... = rerunfailures reruns
            outcome TEXT NOT NULL,             -- passed failed skipped xfailed xpassed crashed
            phase TEXT,                        -- failing phase: setup | call | teardown
            duration REAL NOT NULL,
            seed INTEGER,                      -- 63-bit sandbox seed
            now REAL,                          -- virtual start time, UTC epoch seconds
            mode TEXT NOT NULL,
            hash_seed INTEGER,                 -- PYTHONHASHSEED of the process, if known
            counts TEXT,                       -- JSON {source: reads}, NULL if none
            violations INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX attempts_test ON attempts(test_id, outcome);
        CREATE INDEX attempts_sequence ON attempts(run_id, worker, position);
        CREATE TABLE failures (
            attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id),
            exc_type TEXT NOT NULL,
            message TEXT NOT NULL,
            location TEXT NOT NULL,
            excerpt TEXT NOT NULL
        );
        CREATE TABLE violations (
            id INTEGER PRIMARY KEY,
            attempt_id INTEGER NOT NULL REFERENCES attempts(id),
            op TEXT NOT NULL,
            host TEXT NOT NULL,
            port INTEGER,
            detail TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX violations_attempt ON violations(attempt_id);
        CREATE TABLE journals (
            attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id),
            format TEXT NOT NULL,
            size INTEGER NOT NULL,             -- stored (compressed) bytes
            data BLOB NOT NULL                 -- gzip-compressed JSON
        );
        CREATE TABLE flakes (
            id INTEGER PRIMARY KEY,
            flake_id TEXT NOT NULL UNIQUE,     -- F1, F2, ...
            test_id INTEGER NOT NULL UNIQUE REFERENCES tests(id),
            first_run_id INTEGER REFERENCES runs(id),
            last_run_id INTEGER REFERENCES runs(id),
            kinds TEXT NOT NULL DEFAULT '[]',  -- JSON list of kinds
            status TEXT NOT NULL DEFAULT 'pending',  -- see docs/isolation.md
            evidence TEXT NOT NULL DEFAULT '{}',
            reproducer TEXT,                   -- JSON (see docs/database.md)
            polluters TEXT NOT NULL DEFAULT '[]',     -- JSON list of minimal sets
            cleaners TEXT NOT NULL DEFAULT '[]',
            state_setters TEXT NOT NULL DEFAULT '[]',
            confirmed INTEGER,                 -- 1 / 0 / NULL (not tried)
            probes INTEGER NOT NULL DEFAULT 0,
            probe_seconds REAL NOT NULL DEFAULT 0,
            note TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE isolation_steps (
            id INTEGER PRIMARY KEY,
            flake_id INTEGER NOT NULL REFERENCES flakes(id),
            run_id INTEGER REFERENCES runs(id),
            step INTEGER NOT NULL,
            purpose TEXT NOT NULL,
            sequence TEXT NOT NULL,            -- JSON list of nodeids, in order
            environment TEXT NOT NULL,         -- JSON: seed, now, hash_seed, mode
            outcome TEXT NOT NULL,             -- passed | failed | timeout | error
            detail TEXT NOT NULL DEFAULT '',
            duration REAL NOT NULL,
            journal BLOB,                      -- record-mode probe that failed: its journal
            created_at TEXT NOT NULL
        );
        CREATE INDEX isolation_steps_flake ON isolation_steps(flake_id, step);
        CREATE TABLE test_checks (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            test_id INTEGER NOT NULL REFERENCES tests(id),
            check_name TEXT NOT NULL,          -- e.g. 'sandbox-off' for always-failing tests
            outcome TEXT NOT NULL,             -- passed | failed | timeout | error
            detail TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        );
        CREATE TABLE replays (
            id INTEGER PRIMARY KEY,
            target TEXT NOT NULL,              -- F3, A1207 or a nodeid as given
            flake_id INTEGER REFERENCES flakes(id),
            attempt_id INTEGER REFERENCES attempts(id),
            started_at TEXT NOT NULL,
            outcome TEXT NOT NULL,             -- reproduced | not-reproduced | failed-differently
            detail TEXT NOT NULL DEFAULT '',
            environment TEXT NOT NULL DEFAULT '{}'
        );

        CREATE VIEW attempts_view AS
        SELECT a.id, 'A' || a.id AS attempt_ref, a.run_id, a.round, a.worker, a.position,
               t.nodeid, a.execution, a.outcome, a.phase, a.duration, a.seed,
               a.now, strftime('%Y-%m-%dT%H:%M:%fZ', a.now, 'unixepoch') AS now_iso,
               a.mode, a.hash_seed, a.counts, a.violations,
               f.exc_type, f.message, f.location
        FROM attempts a JOIN tests t ON t.id = a.test_id
        LEFT JOIN failures f ON f.attempt_id = a.id;

        """  # noqa: S608 - constant text
        + _test_stats("")
        + """

        CREATE VIEW flakes_view AS
        SELECT fl.flake_id, t.nodeid, fl.kinds, fl.status, fl.confirmed, fl.polluters,
               fl.cleaners, fl.state_setters, fl.reproducer, fl.probes, fl.probe_seconds,
               fl.first_run_id, fl.last_run_id, fl.note
        FROM flakes fl JOIN tests t ON t.id = fl.test_id;
        """,
    )


@_migration("0002_fresh_rounds")  # type: ignore[untyped-decorator]
def _fresh_rounds(db: Any) -> None:
    """Rounds in fresh processes: settings, leaks, twice rounds, timing conditions."""
    _script(
        db,
        """
        ALTER TABLE runs ADD COLUMN settings TEXT;     -- JSON: the resolved hunt settings
        ALTER TABLE attempts ADD COLUMN repeat INTEGER NOT NULL DEFAULT 0;
            -- 0 ordinary; 1 / 2: first / second run of a test in a 'twice' round
        ALTER TABLE attempts ADD COLUMN started REAL;  -- real start time, UTC epoch seconds
        ALTER TABLE attempts ADD COLUMN profile TEXT;  -- clock profile of a seeded attempt
        ALTER TABLE attempts ADD COLUMN switch_interval REAL;  -- sys.setswitchinterval
        ALTER TABLE attempts ADD COLUMN stress INTEGER NOT NULL DEFAULT 0;  -- CPU stress
        CREATE TABLE leaks (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            round INTEGER NOT NULL,
            attempt_id INTEGER REFERENCES attempts(id),  -- NULL: not one attempt's
            resource TEXT NOT NULL,            -- env cwd tz locale sys.path module warnings
                                               -- logging signal thread process fd file
                                               -- tempfile socket-timeout recursion-limit
                                               -- switch-interval tempfile.tempdir asyncio-policy
            name TEXT NOT NULL,                -- which one: a variable, a path, a thread name
            change TEXT NOT NULL,              -- added | changed | removed | deleted
            detail TEXT NOT NULL DEFAULT '',   -- the new value, bounded (secrets masked)
            persisted INTEGER NOT NULL DEFAULT 1  -- still in place when the round ended
        );
        CREATE INDEX leaks_attempt ON leaks(attempt_id);
        CREATE INDEX leaks_run ON leaks(run_id, round);

        DROP VIEW attempts_view;
        CREATE VIEW attempts_view AS
        SELECT a.id, 'A' || a.id AS attempt_ref, a.run_id, a.round, a.worker, a.position,
               t.nodeid, a.execution, a.repeat, a.outcome, a.phase, a.duration, a.seed,
               a.now, strftime('%Y-%m-%dT%H:%M:%fZ', a.now, 'unixepoch') AS now_iso,
               a.mode, a.hash_seed, a.profile, a.switch_interval, a.stress, a.counts,
               a.violations, f.exc_type, f.message, f.location
        FROM attempts a JOIN tests t ON t.id = a.test_id
        LEFT JOIN failures f ON f.attempt_id = a.id;

        DROP VIEW flaky_tests;
        DROP VIEW test_stats;
        DROP VIEW test_stats_all;
        """  # noqa: S608 - constant text
        + _test_stats("WHERE a.repeat = 0")
        + """

        CREATE VIEW leaks_view AS
        SELECT l.run_id, l.round, l.attempt_id, t.nodeid, l.resource, l.name, l.change,
               l.detail, l.persisted
        FROM leaks l LEFT JOIN attempts a ON a.id = l.attempt_id
        LEFT JOIN tests t ON t.id = a.test_id;
        """,
    )


@_migration("0003_history_fixes")  # type: ignore[untyped-decorator]
def _history_fixes(db: Any) -> None:
    """Flake history across commits (each run's git commit and branch) and verified fixes."""
    _script(
        db,
        """
        ALTER TABLE runs ADD COLUMN git_sha TEXT;      -- commit the hunt ran on (NULL: no git)
        ALTER TABLE runs ADD COLUMN git_branch TEXT;   -- its branch (NULL: detached, unknown)
        UPDATE runs SET git_sha = json_extract(environment, '$.git_sha')
            WHERE json_valid(environment) AND json_type(environment, '$.git_sha') = 'text';
        CREATE INDEX runs_git ON runs(git_sha);

        CREATE TABLE fixes (
            id INTEGER PRIMARY KEY,
            flake_id INTEGER NOT NULL REFERENCES flakes(id),
            created_at TEXT NOT NULL,
            kind TEXT NOT NULL,                -- the kind the suggestion addresses
            patch_sha TEXT NOT NULL,           -- sha256 of the unified diff
            diff TEXT NOT NULL,                -- the unified diff that was verified
            outcome TEXT NOT NULL,             -- verified | not-verified | no-control | error
            runs INTEGER NOT NULL,             -- runs of the reproducer with the patch
            passed INTEGER NOT NULL,           -- how many of them passed
            control TEXT NOT NULL DEFAULT '',  -- the reproducer without the patch
            detail TEXT NOT NULL DEFAULT '',
            git_sha TEXT,                      -- the commit the patch was made against
            applied INTEGER NOT NULL DEFAULT 0 -- 1: written to the checkout (--apply)
        );
        CREATE INDEX fixes_flake ON fixes(flake_id);

        """  # noqa: S608 - constant text
        + _flake_history("a.repeat = 0"),
    )


@_migration("0004_incomplete_rounds")  # type: ignore[untyped-decorator]
def _incomplete_rounds(db: Any) -> None:
    """Rounds whose attempts did not add up to the plan (status ``incomplete``)."""
    _script(
        db,
        """
        -- '' or one line per round: what was planned, what came, lines rejected
        ALTER TABLE runs ADD COLUMN incomplete TEXT NOT NULL DEFAULT '';
        """,
    )


@_migration("0005_collisions")  # type: ignore[untyped-decorator]
def _collisions(db: Any) -> None:
    """The paths each attempt wrote: what names the resource two workers collide over."""
    _script(
        db,
        """
        ALTER TABLE attempts ADD COLUMN writes TEXT;  -- JSON list of paths written (NULL: none)
        CREATE INDEX attempts_round ON attempts(run_id, round);
        """,
    )


@_migration("0006_plain_first_runs")  # type: ignore[untyped-decorator]
def _plain_first_runs(db: Any) -> None:
    """A twice round's first run is a plain attempt: the views count every
    attempt but a twice round's second run (``repeat`` 2)."""
    _script(
        db,
        """
        DROP VIEW flaky_tests;
        DROP VIEW test_stats;
        DROP VIEW test_stats_all;
        DROP VIEW flake_history;
        """
        + _test_stats("WHERE a.repeat != 2")
        + _flake_history("a.repeat != 2"),
    )


@_migration("0007_attempts_place")  # type: ignore[untyped-decorator]
def _attempts_place(db: Any) -> None:
    """One index where an attempt ran -- run, round, worker, position -- instead of
    two (every query by worker names the round): a hunt inserts an attempt
    into one index fewer."""
    _script(
        db,
        """
        DROP INDEX attempts_sequence;
        DROP INDEX attempts_round;
        CREATE INDEX attempts_place ON attempts(run_id, round, worker, position);
        """,
    )


SCHEMA_VERSION = len(NAMES)
#: The indexes of ``attempts`` as the migrations leave them, each as a statement that
#: builds it when it is missing (SQLite stores it as the migration wrote it): a hunt
#: into a database without attempts builds them once, at its end
#: (:meth:`Store.defer_indexes <hermetic_hunt.store.core.Store.defer_indexes>`).
ATTEMPT_INDEXES = {
    "attempts_test": "CREATE INDEX IF NOT EXISTS attempts_test ON attempts(test_id, outcome)",
    "attempts_place": (
        "CREATE INDEX IF NOT EXISTS attempts_place ON attempts(run_id, round, worker, position)"
    ),
}
