"""``pytest --hermetic-quarantine=FILE``: quarantined tests cannot fail the session.

What a quarantined test's failure and pass become (``xfail(strict=False)``,
never an error) and when the summary says it may leave are in
docs/quarantine.md ("Leaving quarantine" for the streaks). The controller
(the only process under xdist that sees every report) counts each
quarantined test's passes in a row across sessions in pytest's cache
(``hermetic-hunt/quarantine``) and names the tests that reached
:attr:`~.listfile.Entry.release_after`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hermetic_hunt.errors import HuntError
from hermetic_hunt.quarantine.listfile import Entry, entry_for, parse

CACHE_KEY = "hermetic-hunt/quarantine"
PREFIX = "quarantined:"


def _clean(text: str) -> str:
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)


@dataclass
class _Seen:
    entry: Entry
    failed: bool = False
    passed: bool = False
    detail: str = ""


@dataclass
class Quarantine:
    """pytest plugin of a session run with ``--hermetic-quarantine``."""

    config: pytest.Config
    path: Path
    entries: list[Entry]
    seen: dict[str, _Seen] = field(default_factory=dict)
    streaks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def install(cls, config: pytest.Config, value: str) -> None:
        path = Path(config.invocation_params.dir, value).expanduser()
        try:
            entries = parse(path.read_text(encoding="utf-8"), value)
        except FileNotFoundError:
            raise pytest.UsageError(
                f"--hermetic-quarantine: {value} does not exist: write one with "
                f"'hermetic-hunt quarantine -o {value}'"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise pytest.UsageError(f"--hermetic-quarantine: cannot read {value}: {exc}") from None
        except HuntError as exc:
            raise pytest.UsageError(f"--hermetic-quarantine: {exc}") from None
        config.pluginmanager.register(cls(config, path, entries), "hermetic-hunt-quarantine")

    @property
    def _controller(self) -> bool:
        return getattr(self.config, "workerinput", None) is None

    def pytest_report_header(self) -> list[str]:
        count = len(self.entries)
        return [
            f"hermetic-hunt: {count} quarantined test{'s' * (count != 1)} from {self.path.name}"
            " (their failures do not fail the session)"
        ]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            entry = entry_for(self.entries, item.nodeid)
            if entry is None:
                continue
            reason = f"{PREFIX} {entry.label} ({self.path.name})"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=False, run=True))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = entry_for(self.entries, report.nodeid)
        if entry is None:
            return
        seen = self.seen.setdefault(report.nodeid, _Seen(entry))
        wasxfail = str(getattr(report, "wasxfail", "") or "")
        if report.skipped and wasxfail.startswith(PREFIX):
            seen.failed = True
            crash = getattr(report.longrepr, "reprcrash", None)
            message = getattr(crash, "message", "") or ""
            if message and not seen.detail:
                seen.detail = message.splitlines()[0][:200]
        elif report.failed:
            seen.failed = True  # a failure xfail does not cover (strict, raises=...)
        elif report.when == "call" and report.passed:
            seen.passed = True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)  # absent with -p no:cacheprovider
        if not self._controller or cache is None or not self.seen:
            return
        raw = cache.get(CACHE_KEY, {})
        streaks: dict[str, int] = raw if isinstance(raw, dict) else {}
        for nodeid, seen in self.seen.items():
            before = streaks.get(nodeid, 0)
            before = before if isinstance(before, int) and before >= 0 else 0
            if seen.failed:
                streaks[nodeid] = 0
            elif seen.passed:
                streaks[nodeid] = before + 1
        self.streaks = streaks
        cache.set(CACHE_KEY, streaks)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._controller or not self.seen:
            return
        streaks = self.streaks
        failed = sorted(n for n, s in self.seen.items() if s.failed)
        passed = sorted(n for n, s in self.seen.items() if s.passed and not s.failed)
        write = terminalreporter.write_line
        terminalreporter.section(f"hermetic-hunt quarantine ({self.path.name})")
        write(
            f"{len(self.seen)} quarantined test(s) ran: {len(failed)} failed without failing "
            f"the session, {len(passed)} passed"
        )
        for nodeid in failed:
            seen = self.seen[nodeid]
            detail = f": {_clean(seen.detail)}" if seen.detail else ""
            write(f"  QUARANTINED FAILURE {_clean(nodeid)} ({_clean(seen.entry.label)}){detail}")
        ready = [n for n in passed if streaks.get(n, 0) >= self.seen[n].entry.release_after]
        for nodeid in ready:
            entry = self.seen[nodeid].entry
            rate = f" at its recorded {entry.rate:.0%} fail rate" if entry.rate else ""
            write(
                f"  warning: {_clean(nodeid)} ({_clean(entry.label)}) passed {streaks[nodeid]} "
                f"times in a row: 95% sure it no longer flakes{rate}; remove line {entry.line} "
                f"of {self.path.name} to release it",
                yellow=True,
            )
