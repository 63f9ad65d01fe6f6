"""Archive jobs write into one fixed folder under the test directory.

``setup_function`` creates ``tests/_archive`` and ``teardown_function``
removes it: fine one test after another (``-n 0``), but when another xdist
worker runs ``test_backup.py::test_backup_catalog`` (which uses the same
folder) at the same time, ``test_archive_orders`` fails: its ``mkdir``
raises ``FileExistsError`` when the backup came first, and its file is gone
when the backup removed the folder first. Each job holds the folder for 0.2
seconds of real time, so two workers that reach them at about the same time
always overlap.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from shop import archive

FOLDER = Path(__file__).parent / "_archive"


def setup_function(function):
    if function.__name__ == "test_archive_orders":
        FOLDER.mkdir()


def teardown_function(function):
    if function.__name__ == "test_archive_orders":
        shutil.rmtree(FOLDER, ignore_errors=True)


def test_archive_orders():
    path = archive.archive(FOLDER, "orders.json", [{"id": 1, "total": 12}])
    assert path.read_text().startswith("[")


def test_archive_names_end_in_json(tmp_path):
    assert archive.archive.__name__ == "archive"
    assert (tmp_path / "x.json").suffix == ".json"
