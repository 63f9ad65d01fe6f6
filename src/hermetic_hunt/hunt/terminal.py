"""What pytest's terminal shows of a hunt's attempts.

A failing attempt's report is shown as pytest would show it, without a
letter per attempt (the round's progress line counts them); a passing one is
listed only with ``-v``. At the end, FAILURES and the short summary keep one
failure per test, and pytest's last line counts the passes.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from hermetic_hunt import _compat
from hermetic_hunt.engine import wire


class Terminal:
    """What pytest's terminal shows of the rounds' attempts."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.verbose = config.get_verbosity() > 0
        #: ids of the failing reports shown for attempts (see :meth:`condense`).
        self._shown: set[int] = set()

    @property
    def reporter(self) -> Any:
        return self.config.pluginmanager.getplugin("terminalreporter")

    def line(self, text: str) -> None:
        """``text`` on a line of its own (after the F of a failed attempt, if any)."""
        if self.reporter is None:
            return
        writer = self.config.get_terminal_writer()
        if writer.width_of_current_line:
            writer.line()
        self.reporter.write_line(text)

    def listing(self, nodeid: str, outcome: str) -> None:
        """A passing attempt (``-v``: it came without a report)."""
        if self.reporter is not None:
            self.reporter.write_line(f"{nodeid} {outcome.upper()}")

    def show(self, data: Any) -> None:
        """A failing phase report, for pytest's terminal (its F and FAILURES section)."""
        if not isinstance(data, dict):
            return
        counts = wire.report_counts(data)
        if counts:  # a step's passing subtests, counted where they ran
            self.count(counts)
            return
        try:
            report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        except Exception:  # a report pytest cannot rebuild: the attempt is stored anyway
            return
        if report is not None:
            _keep_subtest_values(report, data)
            self._shown.add(id(report))
            self.config.hook.pytest_runtest_logreport(report=report)

    def status(self, report: Any, status: Any) -> Any:
        """pytest's test status for ``report``: no letter for a round's failed attempt."""
        if status is None or self.verbose or id(report) not in self._shown:
            return status
        category, _, word = status
        return category, "", word

    def count(self, counts: dict[str, int]) -> None:
        """What was counted, never sent as reports (passing attempts, a step's passing
        subtests), by pytest's category: for pytest's last line."""
        # A report that stands for one that was counted, not sent (for pytest's last line).
        counted = pytest.TestReport("hermetic-hunt", ("", None, ""), {}, "passed", None, "call")
        for category, count in counts.items():
            if self.reporter is not None and count:
                _compat.add_stats(self.reporter, category, [counted] * count)

    def hide_tracebacks(self) -> None:
        """A hunt's failures are expected: no traceback per attempt unless ``--tb`` asks.

        pytest's default (``--tb=auto``) becomes ``--tb=no`` for the end of the
        session: the short summary keeps one line per failing test, and the
        hunt's summary and the report say what each failure is. Set after the
        rounds, so every stored failure has its full text.
        """
        if self.config.option.tbstyle == "auto":
            self.config.option.tbstyle = "no"

    def condense(self) -> None:
        """Show each failure and each error once (per test and phase, and location
        with ``--tb``); count the repeats apart.

        A round's failing report that repeats one already shown moves from
        pytest's ``failed`` list to ``repeated failures``, an error (a setup or
        teardown that failed) from ``error`` to ``repeated errors``: the last
        line still counts every attempt's, FAILURES, ERRORS and the short
        summary show each distinct one once. Every attempt is in the database.
        """
        terminal = self.reporter
        if terminal is None:
            return
        tracebacks = self.config.option.tbstyle != "no"
        for category, repeated in REPEATED.items():
            seen: set[tuple[str, str, str]] = set()
            kept, repeats = [], []
            for report in terminal.stats.get(category, []):
                key = _shown_once(report, tracebacks)
                if key in seen and id(report) in self._shown:
                    repeats.append(report)
                else:
                    seen.add(key)
                    kept.append(report)
            if repeats:
                terminal.stats[category] = kept
                _compat.add_stats(terminal, repeated, repeats)


#: pytest's categories of failing reports, and where their repeats are counted.
REPEATED = {"failed": "repeated failures", "error": "repeated errors"}


def _keep_subtest_values(report: Any, data: dict[str, Any]) -> None:
    """A subtest's parameters as the test's own process showed them (``i=2``).

    pytest's ``subtests`` turns them into reprs to send them, and again when it
    rebuilds the report (``i='2'``, plain ``pytest -n 2`` shows that too).
    """
    context = getattr(report, "context", None)
    raw = data.get("_subtest.context")
    values = raw.get("kwargs") if isinstance(raw, dict) else None
    if context is None or not isinstance(values, dict):
        return
    if all(isinstance(key, str) and isinstance(value, str) for key, value in values.items()):
        with contextlib.suppress(AttributeError, TypeError):
            object.__setattr__(context, "kwargs", dict(values))


def _shown_once(report: Any, tracebacks: bool) -> tuple[str, str, str]:
    """What makes a failing report a new one: its test and phase (a subtest: and
    its parameters), and with tracebacks its location (the rest of a hunt's
    reports of it are repeats)."""
    where = ""
    if tracebacks:
        crash = getattr(report.longrepr, "reprcrash", None)
        where = f"{getattr(crash, 'path', '')}:{getattr(crash, 'lineno', '')}"
    phase = str(getattr(report, "when", ""))
    if getattr(report, "context", None) is not None:
        phase += str(getattr(report, "head_line", ""))
    return (report.nodeid, phase, where)
