"""The quarantine list: a plain text file made to be reviewed and committed.

::

    # hermetic-hunt quarantine list: pytest --hermetic-quarantine=quarantine.txt
    # ...
    tests/test_settings.py::test_default_currency_is_usd  # F16 victim 24%: fails after ...

One test per line; after two spaces and ``#``, its flake id, kinds, fail
rate and why (all optional: a line may be a bare nodeid, added by hand).
Lines starting with ``#`` and blank lines are comments. A nodeid without
parameters (``tests/t.py::test_x``) quarantines all its parametrizations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hermetic_hunt import stats
from hermetic_hunt.errors import BadOption

#: Passes in a row that release a test whose list line gives no fail rate.
DEFAULT_RELEASE = 20
#: At most this many passes in a row are ever asked for (a 1% flake needs 299).
MAX_RELEASE = 300
_SPLIT = re.compile(r"^(?P<nodeid>.*?\S)\s{2,}#\s?(?P<note>.*)$")
_NOTE = re.compile(
    r"^\s*(?P<id>F\d+)?\s*(?P<kinds>[a-z-]+(?:\s*,\s*[a-z-]+)*)?\s*"
    r"(?:(?P<rate>\d+(?:\.\d+)?)%)?\s*(?::\s*(?P<reason>.*))?$"
)


@dataclass(frozen=True)
class Entry:
    """One quarantined test."""

    nodeid: str
    flake_id: str | None = None
    kinds: tuple[str, ...] = ()
    rate: float | None = None
    reason: str = ""
    line: int = 0

    @property
    def label(self) -> str:
        """``F3 victim`` (what a report shows for it)."""
        parts = [p for p in (self.flake_id, ", ".join(self.kinds)) if p]
        return " ".join(parts) or "quarantined by hand"

    @property
    def release_after(self) -> int:
        """Passes in a row that make 95% sure the flake is gone at its recorded rate."""
        if not self.rate:
            return DEFAULT_RELEASE
        return min(MAX_RELEASE, stats.attempts_for_bound(min(max(self.rate, 0.01), 0.95)))

    def covers(self, nodeid: str) -> bool:
        """``nodeid`` is this test, a parametrization of it, or (an entry that
        is a file, ``tests/test_x.py``) any test of that file."""
        if "::" not in self.nodeid:
            return nodeid.startswith(self.nodeid + "::")
        return nodeid == self.nodeid or (
            "[" not in self.nodeid and nodeid.startswith(self.nodeid + "[")
        )

    def format(self) -> str:
        note = " ".join(p for p in (self.flake_id, ", ".join(self.kinds)) if p)
        if self.rate is not None:
            note += f" {stats.percent(self.rate)}"
        if self.reason:
            note += f": {_one_line(self.reason)}"
        return f"{self.nodeid}  # {note.strip()}" if note.strip() else self.nodeid


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render(entries: Iterable[Entry], header: Iterable[str] = ()) -> str:
    lines = [f"# {_one_line(h)}" if h else "#" for h in header]
    if lines:
        lines.append("")
    lines.extend(e.format() for e in entries)
    return "\n".join(lines) + "\n"


def parse(text: str, source: str = "the quarantine list") -> list[Entry]:
    """Entries of a list file; BadOption naming the line for anything else."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SPLIT.match(line)
        nodeid, note = (match.group("nodeid"), match.group("note")) if match else (line, "")
        if "::" not in nodeid and not nodeid.endswith(".py"):
            raise BadOption(
                f"{source}, line {number}: expected a test id such as "
                f"tests/test_x.py::test_y, got {nodeid[:80]!r}"
            )
        fields = _NOTE.match(note) if note else None
        if fields is None:
            out.append(Entry(nodeid, reason=note, line=number))
            continue
        rate = fields.group("rate")
        kinds = tuple(k.strip() for k in (fields.group("kinds") or "").split(",") if k.strip())
        out.append(
            Entry(
                nodeid=nodeid,
                flake_id=fields.group("id"),
                kinds=kinds,
                rate=float(rate) / 100 if rate else None,
                reason=(fields.group("reason") or "").strip(),
                line=number,
            )
        )
    return out


def entry_for(entries: list[Entry], nodeid: str) -> Entry | None:
    """The entry that quarantines ``nodeid`` (an exact line wins over its base name)."""
    exact = next((e for e in entries if e.nodeid == nodeid), None)
    return exact or next((e for e in entries if e.covers(nodeid)), None)
