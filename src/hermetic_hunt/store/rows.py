"""How the store reads rows (by column name: :func:`named`; one value: :func:`scalar`),
and the rows :mod:`hermetic_hunt.store.queries` returns: plain frozen values.

The store reads them (and validates what it can: a database is untrusted);
the report stage (:mod:`hermetic_hunt.report`) turns them into verdicts and
text. They live here, below both, so the store never imports a stage.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hermetic_hunt.models import FAILING, PASSING, Violation, describe_leak, sql_set
from hermetic_hunt.store.integrity import quote
from hermetic_hunt.untrusted import is_whole, json_or

#: The outcomes that count as failing, and as passing, for an SQL ``IN``.
FAIL_SQL = sql_set(FAILING)
PASS_SQL = sql_set(PASSING)


def named(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    """The rows of ``sql``, each read by column name (``row["nodeid"]``, ``Row(**row)``)."""
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    return cursor.execute(sql, params).fetchall()


def scalar(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The value of a one-column query's first row (None: no row)."""
    for (value,) in conn.execute(sql, params):
        return value
    return None


def insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    """``row`` (column name -> value) as a new row of ``table``: its id. The names are
    quoted (a merge copies columns a user may have altered), the values bound."""
    names = ", ".join(map(quote, row))
    cursor = conn.execute(
        f"INSERT INTO {quote(table)} ({names}) VALUES ({','.join('?' * len(row))})",  # noqa: S608
        list(row.values()),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def update(table: str, columns: Iterable[str]) -> str:
    """``UPDATE table SET column = ?, ... WHERE id = ?`` (the names quoted, as :func:`insert`'s)."""
    sets = ", ".join(f"{quote(column)} = ?" for column in columns)
    return f"UPDATE {quote(table)} SET {sets} WHERE id = ?"  # noqa: S608


def texts(cell: Any) -> tuple[str, ...]:
    """A cell's JSON list, each item as text (anything else: an empty one)."""
    value = json_or(cell)
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def held(conn: sqlite3.Connection, sql: str, none: str, one: str, many: str) -> str:
    """How a refusal names the ids ``sql`` lists (in order): ``none`` when there is
    none, ``only {one}ID`` for one, ``{many}FIRST-LAST`` for more."""
    known = [value for (value,) in conn.execute(sql)]
    if not known:
        return none
    return f"only {one}{known[0]}" if len(known) == 1 else f"{many}{known[0]}-{known[-1]}"


def chunks(values: Iterable[Any]) -> Iterator[tuple[list[Any], str]]:
    """``values`` 500 at a time (SQLite bounds the parameters of a statement), each
    chunk with its placeholders (``?,?,...``) for an ``IN (...)``."""
    found = list(values)
    for start in range(0, len(found), 500):
        chunk = found[start : start + 500]
        yield chunk, ",".join("?" * len(chunk))


@dataclass(frozen=True)
class RunRow:
    id: int
    uuid: str
    started_at: str
    finished_at: str | None
    status: str
    argv: tuple[str, ...]
    base_seed: int
    rounds_planned: int | None
    budget_seconds: float | None
    rounds_done: int
    attempts: int
    tests: int
    workers: int
    mode: str
    order: str
    shard: str
    exit_status: int | None
    git_sha: str | None = None
    git_branch: str | None = None
    #: Attempts that are no plain run (a twice round's repeated runs): counted apart.
    repeated: int = 0
    #: Rounds whose attempts did not add up to the plan ('' when all did).
    incomplete: str = ""


@dataclass(frozen=True)
class FailureRow:
    attempt_id: int
    run_id: int
    exc_type: str
    message: str
    location: str

    def describe(self) -> str:
        text = f"{self.exc_type}: {self.message}" if self.message else self.exc_type
        return f"{text} at {self.location}" if self.location else text


@dataclass(frozen=True)
class TestCounts:
    nodeid: str
    passed: int
    failed: int
    skipped: int
    crashed: int
    with_violations: int
    first_failure: FailureRow | None = None
    #: Twice rounds whose second run of the test failed after a first that passed.
    second_run_failures: int = 0


@dataclass(frozen=True)
class CheckRow:
    run_id: int
    nodeid: str
    check_name: str
    outcome: str
    detail: str


@dataclass(frozen=True)
class ViolationRow:
    nodeid: str
    op: str
    host: str
    port: int | None
    attempts: int
    first_attempt_id: int

    @property
    def target(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class LeakRow:
    """State a test left behind at the end of a round (``leaks``, persisted rows),
    counted over the attempts that left it; ``nodeid`` None: not one test's."""

    nodeid: str | None
    resource: str
    name: str
    change: str
    detail: str
    attempts: int
    first_attempt_id: int | None

    def describe(self) -> str:
        return describe_leak(self.resource, self.name, self.change, self.detail)


@dataclass(frozen=True)
class ConditionRow:
    """One test's outcomes under one timing condition (``exact``, ``jitter``, ``slow``,
    ``stress``, ``switch``; record and off modes' plain rounds count as ``exact``).

    ``stretch``: the smallest "largest sleep stretch" among the failing
    attempts under a noisy clock, in thousandths (1200: sleeps lasted 1.2x).
    """

    nodeid: str
    condition: str
    passed: int
    failed: int
    stretch: int | None = None


@dataclass(frozen=True)
class RoundCell:
    """Outcomes of one test in one round (several with reruns)."""

    nodeid: str
    run_id: int
    round_no: int
    passed: int
    failed: int


@dataclass(frozen=True)
class AttemptDetail:
    """One ``attempts`` row with its failure, journal size and violations."""

    id: int
    run_id: int
    round_no: int
    worker: str
    position: int
    nodeid: str
    execution: int
    outcome: str
    phase: str | None
    duration: float
    seed: int | None
    now: float | None
    mode: str
    hash_seed: int | None
    counts: str | None
    exc_type: str | None
    message: str | None
    location: str | None
    excerpt: str | None
    journal_format: str | None
    journal_size: int | None
    violations: tuple[Violation, ...] = ()

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    def parsed_counts(self) -> dict[str, int]:
        """The per-source read counts (``{}`` when absent or malformed)."""
        value = json_or(self.counts)
        if not isinstance(value, dict):
            return {}
        return {str(k): v for k, v in value.items() if is_whole(v) and v >= 0}


@dataclass(frozen=True)
class StepRow:
    """One isolation probe: the sequence tried and what happened."""

    step: int
    run_id: int | None
    purpose: str
    sequence: str
    environment: str
    outcome: str
    detail: str
    duration: float

    def tests(self) -> list[str]:
        return list(texts(self.sequence))
