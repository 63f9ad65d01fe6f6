import os

from shop import pages


def test_page_path_is_absolute():
    # Fails after test_render_in_scratch_dir: the cwd is a deleted directory.
    assert os.path.isabs(os.path.abspath("index.html"))


def test_export_directory_is_known():
    # Fails after test_render_in_scratch_dir too.
    assert os.getcwd()


def test_render_writes_html(tmp_path):
    path = pages.render(str(tmp_path / "a.html"), "hi")
    assert path.read_text() == "<p>hi</p>"
