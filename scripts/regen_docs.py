"""Regenerate the output samples in docs/ by running the commands they show.

    python scripts/regen_docs.py            # rewrite every sample in docs/
    python scripts/regen_docs.py --check    # exit 1 naming each sample that no longer matches

A sample is the fenced block right after a ``<!-- sample: NAME -->`` line in
a page of docs/; :data:`SAMPLES` says which command prints it and which of
its lines the page shows (cut lines become ``...``). Every sample comes
from one hunt of the bundled example suite, ``hermetic-hunt demo -n 2``
(seed 7, 30 rounds: the walkthroughs' hunt, and the one the test suite
shares), and the commands run after it in the demo's directory.
``--check`` compares after :func:`normalise`:
times, dates, durations, temporary paths, ids and counts may differ from
one machine (or one change of the example suite) to the next; the words
and the shape of every line may not. Like every hunt of the example suite,
run it inside an empty network namespace (``unshare -n``).
tests/test_docs_samples.py holds the page markers to this table (fast) and
compares the samples with the test session's shared demo hunt (slow).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The hunt's own output (the demo's, up to its report).
HUNT = ("pytest", "--hermetic-hunt=30", "-n", "2", "--hermetic-seed=7")
MARKER = re.compile(r"^<!-- sample: ([\w-]+) -->\n```(\w*)\n(.*?)^```\n", re.M | re.S)
CUT = "..."

Pick = Callable[[list[str]], list[str]]


@dataclass(frozen=True)
class Sample:
    """``argv`` (run in the hunted copy; ``HUNT``: the hunt's own output) and the lines shown."""

    argv: tuple[str, ...]
    pick: Pick


def head(count: int, *, tail: int = 0) -> Pick:
    """The first ``count`` lines (and the last ``tail``), ``...`` between."""

    def pick(lines: list[str]) -> list[str]:
        if len(lines) <= count + tail:
            return lines
        return [*lines[:count], CUT, *(lines[-tail:] if tail else [])]

    return pick


def spans(*wanted: tuple[str, int]) -> Pick:
    """For each ``(prefix, n)``: the first line starting with ``prefix`` and the ``n - 1``
    after it; ``...`` wherever lines are left out."""

    def pick(lines: list[str]) -> list[str]:
        out: list[str] = []
        last = -1
        for prefix, count in wanted:
            start = next(
                (i for i, line in enumerate(lines) if i > last and line.startswith(prefix)), None
            )
            if start is None:
                continue
            if start != last + 1:
                out.append(CUT)
            out.extend(lines[start : start + count])
            last = start + count - 1
        if last < len(lines) - 1:
            out.append(CUT)
        return out

    return pick


SAMPLES: dict[str, Sample] = {
    "quickstart-hunt": Sample(
        HUNT,
        spans(
            ("hermetic-hunt: run 1 · 30 rounds", 1),
            ("hermetic-hunt: round  1/30", 2),
            ("hermetic-hunt: run 1 · 30 round(s)", 3),
            ("hermetic-hunt isolation:", 1),
            ("  F", 2),  # the first finding (a slow machine may add a budget line before it)
            ("next:", 3),
        ),
    ),
    "reports-header": Sample(("hermetic-hunt", "report"), head(4)),
    "cli-list": Sample(("hermetic-hunt", "list"), head(2, tail=1)),
}


def normalise(text: str) -> str:
    """What may differ between two honest runs, replaced by placeholders."""
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?( UTC|\+00:00)?", "<when>", text)
    text = re.sub(re.escape(tempfile.gettempdir()) + r"/[\w./-]+", "<tmp>", text)
    text = re.sub(r"\((in \d+ days?|today)\)", "(<ahead>)", text)
    text = re.sub(r"\b\d+(\.\d+)?(ms|s)\b|\b\d+m\d+s\b|\b\d+:\d\d(:\d\d)?\b", "<time>", text)
    text = re.sub(r"\b([FA])\d+\b", r"\1#", text)
    text = re.sub(r"\d[\d,.]*", "#", text)
    return "\n".join(re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines())


def hunt(where: Path) -> tuple[Path, str]:
    """``hermetic-hunt demo -n 2`` into ``where/shop``: the directory and what it printed."""
    target = where / "shop"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HERMETIC_HUNT"))}
    done = subprocess.run(
        [sys.executable, "-c", "from hermetic_hunt.cli import main; main()",
         "demo", "-n", "2", "--dir", str(target)],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the demo's hunt failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return target, done.stdout


def samples_of(target: Path, hunt_output: str) -> dict[str, str]:
    """Every sample's text: the hunt's from its output, the rest run in ``target``
    (read-only commands: the demo's directory is not changed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HERMETIC_HUNT"))}
    bindir = Path(sys.executable).parent
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    out: dict[str, str] = {}
    for name, sample in SAMPLES.items():
        if sample.argv == HUNT:
            printed = hunt_output.split("\nhermetic-hunt report · ", 1)[0]
        else:
            printed = subprocess.run(
                list(sample.argv), cwd=target, env=env, capture_output=True, text=True,
                check=False,
            ).stdout  # fmt: skip
        lines = [line.rstrip() for line in printed.splitlines()]
        out[name] = "\n".join(sample.pick(lines)) + "\n"
    return out


def pages() -> dict[Path, list[tuple[str, str]]]:
    """``{page: [(sample name, block text)]}`` of every marked block in docs/."""
    found: dict[Path, list[tuple[str, str]]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for match in MARKER.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(page, []).append((match.group(1), match.group(3)))
    return found


def write(samples: dict[str, str]) -> list[str]:
    """Put each sample into its blocks; the names of the blocks that changed."""
    changed = []
    for page in pages():
        text = page.read_text(encoding="utf-8")

        def fill(match: re.Match[str], page: Path = page) -> str:
            name, lang, old = match.group(1), match.group(2), match.group(3)
            new = samples.get(name, old)
            if new != old:
                changed.append(f"{page.name}: {name}")
            return f"<!-- sample: {name} -->\n```{lang}\n{new}```\n"

        page.write_text(MARKER.sub(fill, text), encoding="utf-8")
    return changed


def stale(samples: dict[str, str]) -> list[str]:
    """The blocks whose text no longer matches the command's output, normalised, each
    with the normalised lines that differ."""
    out = []
    for page, blocks in pages().items():
        for name, old in blocks:
            if name in samples and normalise(old) != normalise(samples[name]):
                diff = difflib.unified_diff(
                    normalise(old).splitlines(), normalise(samples[name]).splitlines(),
                    "in the page", "printed now", lineterm="", n=0,
                )  # fmt: skip
                out.append(f"{page.name}: {name}\n" + "\n".join(diff))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hermetic-hunt-docs-") as where:
        samples = samples_of(*hunt(Path(where)))
    if args.check:
        bad = stale(samples)
        for line in bad:
            print(f"stale sample: {line} (python scripts/regen_docs.py rewrites it)")
        return 1 if bad else 0
    for line in write(samples):
        print(f"rewrote {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
