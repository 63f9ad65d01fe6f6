"""The catalog backup uses the same fixed folder as the order archive.

It is tolerant (``exist_ok``, ``ignore_errors``) and never fails itself; run
beside ``test_archive.py::test_archive_orders`` on another worker it breaks
that test (see test_archive.py): it is the collision's partner.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from shop import archive

FOLDER = Path(__file__).parent / "_archive"


def setup_function(function):
    if function.__name__ == "test_backup_catalog":
        FOLDER.mkdir(exist_ok=True)


def teardown_function(function):
    if function.__name__ == "test_backup_catalog":
        shutil.rmtree(FOLDER, ignore_errors=True)


def test_backup_catalog():
    # A backup is best effort: a folder that another job removed is no failure.
    with contextlib.suppress(FileNotFoundError):
        archive.archive(FOLDER, "catalog.json", [{"sku": "tea"}])
    assert FOLDER.name == "_archive"


def test_backup_keeps_the_flush_short():
    assert 0 < archive.FLUSH_SECONDS <= 1
