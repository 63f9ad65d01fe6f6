"""Other processes' temp files are no test's leak; a test's own still is."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from helpers import hunt, one, rows

SUITE = """
import tempfile
import threading


def test_leaves_a_temp_file():
    fd, name = tempfile.mkstemp(prefix="hh-mine-")
    import os
    os.close(fd)


def test_cleans_up():
    with tempfile.TemporaryDirectory() as folder:
        open(folder + "/x", "w").close()


def test_waits_a():
    threading.Event().wait(0.15)  # real time: the background process works meanwhile


def test_waits_b():
    threading.Event().wait(0.15)
"""

BACKGROUND = """
import os, sys, tempfile, time
where = sys.argv[1]
for i in range(100000):
    folder = tempfile.mkdtemp(prefix="hh-bg-", dir=where)
    time.sleep(0.01)
    if i % 4:
        os.rmdir(folder)  # every fourth stays, as pip's build folders sometimes do
"""


@pytest.mark.slow
def test_a_background_process_in_the_temp_dir_is_no_leak_and_a_tests_file_is(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_temp=SUITE)
    system = tempfile.gettempdir()
    loop = subprocess.Popen([sys.executable, "-c", textwrap.dedent(BACKGROUND), system])
    try:
        result = hunt(pytester, "--hermetic-hunt=3", "--hermetic-hunt-isolate=off", "-n", "2")
    finally:
        loop.kill()
        loop.wait()
        for left in Path(system).glob("hh-bg-*"):
            shutil.rmtree(left, ignore_errors=True)
    db = pytester.path / "flakes.db"
    assert one(db, "SELECT status FROM runs") == "complete", result.stdout.str()[-3000:]
    found = rows(db, "SELECT resource, name, nodeid, persisted FROM leaks_view")
    assert not [row for row in found if "hh-bg-" in row[1]], found
    mine = {
        (nodeid.split("::")[-1], persisted)
        for resource, name, nodeid, persisted in found
        if resource == "tempfile" and "hh-mine-" in name
    }
    assert mine == {("test_leaves_a_temp_file", 1)}, found
    assert not [row for row in found if row[2] and row[2].endswith("test_cleans_up")]
    assert "hh-bg-" not in result.stdout.str()
