"""The catalog backup uses the same fixed folder as the order archive.

Run beside ``test_archive.py::test_archive_orders`` on another worker, the
second of the two to create ``tests/_archive`` fails (see test_archive.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from shop import archive

FOLDER = Path(__file__).parent / "_archive"


def setup_function(function):
    if function.__name__ == "test_backup_catalog":
        FOLDER.mkdir()


def teardown_function(function):
    if function.__name__ == "test_backup_catalog":
        shutil.rmtree(FOLDER)


def test_backup_catalog():
    path = archive.archive(FOLDER, "catalog.json", [{"sku": "tea"}])
    assert path.exists()


def test_backup_keeps_the_flush_short():
    assert 0 < archive.FLUSH_SECONDS <= 1
