"""The HTML report in a real browser (Debian's chromium, headless).

Runs when ``/usr/bin/chromium`` exists (``.ci/run`` installs it), skipped
otherwise. Chromium gets a fresh profile and no network features; the page
is a ``file://`` URL and its own Content-Security-Policy refuses any fetch.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import Rows

from hermetic_hunt.models import Failure, Violation
from hermetic_hunt.report.load import write_report

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium is not installed"),
]

PAYLOAD = "<script>document.body.setAttribute('data-pwned','1')</script>"
IMG = "<img src=x onerror=\"document.title='pwned'\">"


def dump_dom(page: Path, profile: Path) -> str:
    result = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.process
def test_hostile_test_ids_and_failure_text_render_as_text_in_chromium(tmp_path):
    rows = Rows(tmp_path / "flakes.db")
    run = rows.run()
    nodeid = f"tests/test_x.py::test_y[{PAYLOAD}]"
    rows.attempts(
        run, nodeid, "PFPFF",
        failure=Failure("AssertionError", IMG, "tests/test_x.py:1", PAYLOAD),
        violations=[Violation("connect", "<b>evil</b>.invalid", 80)],
    )  # fmt: skip
    rows.attempts(run, "tests/test_ok.py::test_ok", "PPPPP")
    rows.close()
    outcome = write_report(
        tmp_path / "flakes.db", run=None, fmt="html", output=None, cwd=str(tmp_path)
    )
    assert outcome.path == tmp_path / "reports" / "hermetic-hunt.html"

    dom = dump_dom(outcome.path, tmp_path / "profile")

    # The payloads are text in the page, never elements or handlers.
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "<title>pwned</title>" not in dom
    assert re.search(r"<title>hermetic-hunt report · flakes\.db", dom)
    assert "&lt;script&gt;document.body.setAttribute('data-pwned','1')&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=\"document.title='pwned'\"&gt;" in dom
    assert "&lt;b&gt;evil&lt;/b&gt;.invalid" in dom
    assert "<img" not in dom
    # The page's own script ran: it made every table header sortable.
    headers = re.findall(r"<th(?:\s[^>]*)?>", dom)
    assert headers and all('tabindex="0"' in th for th in headers)
    # The charts rendered as inline SVG.
    assert dom.count('<rect class="bar"') == 1
    assert '<rect class="fail"' in dom and '<rect class="pass"' in dom
