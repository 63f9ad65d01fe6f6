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
from hermetic_hunt.untrusted import clean

#: Passes in a row that release a test whose list line gives no fail rate.
DEFAULT_RELEASE = 20
#: At most this many passes in a row are ever asked for (a 1% flake needs 299).
MAX_RELEASE = 300
#: Where a line's note starts: two blanks and ``#`` (the first such place).
#: One fixed-width pattern: a search is linear in the line, whatever it holds.
_SEPARATOR = re.compile(r"\s\s#")
#: One word of a note: searched and matched in linear time (no nested quantifiers).
_WORD = re.compile(r"[A-Za-z0-9.%-]+|,|[^\sA-Za-z0-9.%,-]+")
_FLAKE_ID = re.compile(r"F\d+")
_KIND = re.compile(r"[a-z-]+")
_RATE = re.compile(r"\d+(?:\.\d+)?%")


class Unwritable(BadOption):
    """A test id that would not read back as itself from a list line."""


def check_nodeid(nodeid: str) -> None:
    """:class:`Unwritable` unless ``nodeid`` reads back, alone and whole, from its line.

    Refused: a line break of any kind (``\\n``, ``\\r``, U+2028...), any other
    control or blank character but the space, blanks at either end, a
    leading ``#``, two blanks before a ``#`` (the start of a note), and an id
    that is neither a file nor ``file::name`` -- a list line never
    quarantines more than the test it names.
    """
    why = ""
    if not nodeid or nodeid != nodeid.strip():
        why = "it is empty or starts or ends with a blank"
    elif any((c.isspace() and c != " ") or not c.isprintable() for c in nodeid):
        why = "it holds a line break or another control character"
    elif nodeid.startswith("#") or _SEPARATOR.search(nodeid):
        why = "it would read as a comment"
    elif "::" not in nodeid:
        why = "it is not a test id (file::name)"
    if why:
        shown = clean(nodeid)[:200]
        raise Unwritable(f"test id '{shown}' cannot be written to a list line: {why}")


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
        """The entry's line (:class:`Unwritable` for a test id that would not read back)."""
        check_nodeid(self.nodeid)
        note = " ".join(p for p in (self.flake_id, ", ".join(self.kinds)) if p)
        if self.rate is not None:
            note += f" {stats.percent(self.rate)}"
        if self.reason:
            note += f": {_one_line(self.reason)}"
        note = _one_line(note)
        return f"{self.nodeid}  # {note}" if note else self.nodeid


def _one_line(text: str) -> str:
    """``text`` on one line: every run of blanks and line breaks is one space,
    control characters are escaped (:func:`hermetic_hunt.untrusted.clean`)."""
    return clean(" ".join(text.split()))


def render(entries: Iterable[Entry], header: Iterable[str] = ()) -> str:
    lines = [f"# {_one_line(h)}" if h else "#" for h in header]
    if lines:
        lines.append("")
    lines.extend(e.format() for e in entries)
    return "\n".join(lines) + "\n"


def parse(text: str, source: str = "the quarantine list") -> list[Entry]:
    """Entries of a list file; BadOption naming the line for anything else.

    Linear in the size of the file: one fixed-width search per line for the
    note, then the note read word by word.
    """
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = _SEPARATOR.search(line)
        if found is None:
            nodeid, note = line, ""
        else:
            nodeid, note = line[: found.start()].rstrip(), line[found.end() :].strip()
        if "::" not in nodeid and not nodeid.endswith(".py"):
            raise BadOption(
                f"{source}, line {number}: expected a test id such as "
                f"tests/test_x.py::test_y, got {clean(nodeid[:80])!r}"
            )
        out.append(_entry(nodeid, note, number))
    return out


def _entry(nodeid: str, note: str, number: int) -> Entry:
    """An entry from its test id and note: ``F3 victim, time 24%: why`` (every part optional;
    a note that does not read so is kept whole as the reason)."""
    head, colon, reason = note.partition(":")
    words = _WORD.findall(head)
    index = 0
    flake_id = None
    if index < len(words) and _FLAKE_ID.fullmatch(words[index]):
        flake_id, index = words[index], index + 1
    kinds: list[str] = []
    if index < len(words) and _KIND.fullmatch(words[index]):
        kinds.append(words[index])
        index += 1
        while index + 1 < len(words) and words[index] == "," and _KIND.fullmatch(words[index + 1]):
            kinds.append(words[index + 1])
            index += 2
    rate = None
    if index < len(words) and _RATE.fullmatch(words[index]):
        rate, index = float(words[index][:-1]) / 100, index + 1
    if index != len(words):
        return Entry(nodeid, reason=note, line=number)
    return Entry(nodeid, flake_id, tuple(kinds), rate, reason.strip() if colon else "", number)


def entry_for(entries: list[Entry], nodeid: str) -> Entry | None:
    """The entry that quarantines ``nodeid`` (an exact line wins over its base name)."""
    exact = next((e for e in entries if e.nodeid == nodeid), None)
    return exact or next((e for e in entries if e.covers(nodeid)), None)
