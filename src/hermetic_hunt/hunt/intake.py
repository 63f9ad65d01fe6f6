"""The hunt's hot path: lines of finished steps in, attempts stored in batches.

The path of a batch (one parse, plain attempts checked a column at a time
and kept as columns, the rest decoded whole) is in docs/architecture.md,
"The path of one attempt", step 5. Decoded attempts wait in
:attr:`Intake.pending`, in the order they came, and are written in one
transaction every :data:`FLUSH_EVERY` attempts or :data:`FLUSH_SECONDS`
(and at each round's barrier).

A line that is no JSON object, an attempt that fails its checks, a test the
hunt did not schedule: rejected and counted (:attr:`Intake.rejected`), never
an error. Leaks wait for their round's barrier (:meth:`Intake.store_leaks`),
each tied to its attempt by worker and position (:class:`RoundLeak`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from time import perf_counter
from typing import Any, cast

from hermetic_hunt.engine import wire
from hermetic_hunt.hunt.tally import Tallies
from hermetic_hunt.models import FAILING, Attempt, Columns, Leak
from hermetic_hunt.store import Store
from hermetic_hunt.store.attempts import first_executions

FLUSH_EVERY = 2000
FLUSH_SECONDS = 2.0


@dataclass(frozen=True)
class RoundLeak:
    """A leak of round ``round_no``: left by the attempt at ``position`` on ``worker``
    (None: by no one attempt, such as a file written while several tests ran);
    ``persisted``: still there when the round ended."""

    round_no: int
    worker: str | None
    position: int | None
    leak: Leak
    persisted: bool = False


class Intake:
    """Decodes, counts and stores what the rounds' processes send.

    ``show(report)``: a failing phase's serialised report, for the terminal;
    ``moved(old path, how, new path)``: a test removed or replaced the database
    (:meth:`Store.reclaim <hermetic_hunt.store.core.Store.reclaim>`);
    ``listing(nodeid, outcome)``: each passing attempt (``-v``), or None.
    """

    def __init__(
        self,
        store: Store,
        show: Callable[[Any], None],
        moved: Callable[[str, str, str], None],
        listing: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.tallies = Tallies()
        #: Ids of the tests the hunt schedules (the only ones it stores).
        self.test_ids: dict[str, int] = {}
        #: Decoded attempts not yet written, and how many they are.
        self.pending: list[Attempt | Columns] = []
        self.waiting = 0
        #: Attempts written to the database.
        self.stored = 0
        #: Lines and attempts on round channels that the rounds' own processes did not
        #: write (forged by a test, or by a process it started).
        self.rejected = 0
        self.leaks: list[RoundLeak] = []
        self._show = show
        self._moved = moved
        self._listing = listing
        self._last_flush = perf_counter()

    def take(
        self, lines: Sequence[bytes], run_id: int, worker: str, round_no: int
    ) -> tuple[int, list[dict[str, Any]]]:
        """A batch of lines from ``worker``'s process of ``round_no``: how many step
        lines it held, and its end messages (a job's last line)."""
        decoded = wire.decode_batch(lines)
        if None in decoded:  # (lines no round's process wrote)
            self.rejected += decoded.count(None)
            decoded = [message for message in decoded if message is not None]
        messages = cast("list[dict[str, Any]]", decoded)
        # A batch at a time (in C): step lines, the few others picked out.
        ops = list(map(dict.__contains__, messages, itertools.repeat("op")))
        ends: list[dict[str, Any]] = []
        if any(ops):
            ends = [m for m in itertools.compress(messages, ops) if m["op"] == wire.END]
            messages = list(itertools.compress(messages, map(operator.not_, ops)))
        found: list[Any] = list(map(dict.get, messages, itertools.repeat("attempts")))
        if set(map(type, found)) <= {list}:
            raws = list(itertools.chain.from_iterable(found))
        else:  # (attempts that are no list: rejected)
            self.rejected += sum(x is not None and type(x) is not list for x in found)
            raws = [raw for x in found if type(x) is list for raw in x]
        sizes = list(map(len, messages))
        if max(sizes, default=0) > 2:  # (a plain step line has 2 keys)
            for message in itertools.compress(messages, map((2).__lt__, sizes)):
                reports = message.get("reports")  # (failing lines, subtests' counts)
                for data in reports if type(reports) is list else ():
                    self._show(data)
        if raws:
            self._decode(raws, run_id, worker, round_no)
        for message in ends:  # (after the attempts whose leaks it says persisted)
            self._ended(worker, round_no, message)
        return len(messages), ends

    def _decode(self, raws: list[Any], run_id: int, worker: str, round_no: int) -> None:
        decoded, rejected = Attempt.many_from_json(raws, run_id=run_id, worker=worker)
        known, tallies, listing = self.test_ids, self.tallies, self._listing
        self.rejected += rejected
        plain: list[Columns] = []  # (counted at once, before any attempt alone)
        for found in decoded:
            if isinstance(found, Columns):
                nodeids = found.nodeids
                columns = found if all(map(known.__contains__, nodeids)) else self._known(found)
                if columns is None:
                    continue
                plain.append(columns)
                if listing is not None:
                    for nodeid, outcome in zip(columns.nodeids, columns.outcomes, strict=True):
                        if outcome not in FAILING:
                            listing(nodeid, outcome)
                for _, attempt in columns.aside:
                    self.leaks.extend(RoundLeak(round_no, worker, attempt.position, leak)
                                      for leak in attempt.leaks)  # fmt: skip
                self.pending.append(columns)
                self.waiting += len(columns)
                continue
            if found.nodeid not in known:
                self.rejected += 1
                continue
            if plain:  # (counted first: a twice round's second run follows its first)
                tallies.add_columns(*plain)
                plain = []
            tallies.add(found)
            if listing is not None and not found.failed:
                listing(found.nodeid, found.outcome)
            self.leaks.extend(RoundLeak(round_no, worker, found.position, leak)
                              for leak in found.leaks)  # fmt: skip
            self.pending.append(found)
            self.waiting += 1
        tallies.add_columns(*plain)

    def _known(self, found: Columns) -> Columns | None:
        """``found`` without the attempts of tests the hunt did not schedule (rejected)."""
        keep = [nodeid in self.test_ids for nodeid in found.nodeids]
        self.rejected += keep.count(False)
        if not any(keep):
            return None
        values = tuple(tuple(itertools.compress(column, keep)) for column in found.values)
        kept = list(itertools.accumulate(keep))  # (the index of a kept row: its count - 1)
        aside = tuple((kept[index] - 1, attempt) for index, attempt in found.aside if keep[index])
        return replace(found, values=values, aside=aside)

    def _ended(self, worker: str, round_no: int, message: dict[str, Any]) -> None:
        """A job's end line: the lines its parent rejected, the leaks still there at its end."""
        rejected = message.get("rejected")
        if type(rejected) is int and rejected > 0:
            self.rejected += rejected
        for position, leaks in wire.round_leaks(message).items():
            kept = {(x.resource, x.name) for x in leaks}
            here = (round_no, worker, position)
            seen = {(x.leak.resource, x.leak.name) for x in self.leaks
                    if (x.round_no, x.worker, x.position) == here}  # fmt: skip
            self.leaks = [
                replace(x, persisted=True)
                if (x.round_no, x.worker, x.position) == here
                and (x.leak.resource, x.leak.name) in kept
                else x
                for x in self.leaks
            ]
            # Known only at the end: what a wider fixture set up at ``position``
            # left running after its teardown (engine.leaks.RoundLeaks.fixture_torn_down).
            self.leaks.extend(
                RoundLeak(round_no, worker, position, leak, persisted=True)
                for leak in leaks
                if (leak.resource, leak.name) not in seen
            )

    def flush(self, *, due: bool = False) -> None:
        """Write what is pending (``due``: only once :data:`FLUSH_EVERY` attempts or
        :data:`FLUSH_SECONDS` are reached). Raises :class:`~hermetic_hunt.errors.HuntError`
        on a full disk: nothing is lost, it stays pending."""
        if due and self.waiting < FLUSH_EVERY and perf_counter() - self._last_flush < FLUSH_SECONDS:
            return
        old = str(self.store.path)
        moved = self.store.reclaim()  # the database is the hunt's: a test that removed it
        if moved is not None:  # or put another file in its place loses nothing
            self._moved(old, moved[0], str(moved[1]))
        if self.pending:
            self.store.add_attempts(self.pending, self.test_ids)
            self.stored += self.waiting
            self.pending, self.waiting = [], 0
        self._last_flush = perf_counter()

    def store_leaks(self, run_id: int, round_no: int | None = None) -> None:
        """Write the leaks of ``round_no`` (None: of every round), each with its attempt's id."""
        rounds = sorted({x.round_no for x in self.leaks if round_no in (None, x.round_no)})
        if not rounds:
            return
        self.flush()
        rows: list[tuple[int, int | None, Leak, bool]] = []
        for number in rounds:
            ids = first_executions(self.store.conn, run_id, number)
            rows.extend(
                (number, ids.get((x.worker, x.position)), x.leak, x.persisted)
                for x in self.leaks
                if x.round_no == number
            )
        self.store.add_leaks(run_id, rows)
        self.leaks = [x for x in self.leaks if x.round_no not in rounds]

    def rejected_text(self) -> str:
        """One line: the lines on round channels that the rounds' own processes did not write."""
        if not self.rejected:
            return ""
        return (
            f"{self.rejected:,} line(s) written to a round's channel by another process "
            "(a test, or a process it started) were ignored"
        )
