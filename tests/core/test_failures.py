"""A failure's signature: exception type and the project's own location."""

from __future__ import annotations

from types import SimpleNamespace

from hermetic_hunt.failures import from_report, normalise


def _report(crash_path, crash_line, message, entries=(), exc_type=None):
    longrepr = SimpleNamespace(
        reprcrash=SimpleNamespace(path=crash_path, lineno=crash_line, message=message),
        reprtraceback=SimpleNamespace(
            reprentries=[
                SimpleNamespace(reprfileloc=SimpleNamespace(path=p, lineno=n)) for p, n in entries
            ]
        ),
    )
    return SimpleNamespace(
        longrepr=longrepr, longreprtext=message, wasxfail=None, passed=False, known=exc_type
    )


def _failure(report, rootdir, location=None):
    """What the executor passes along: the exception's type (and own location), never on the report."""
    return from_report(report, rootdir, exc_type=report.known, location=location)


def test_a_crash_in_the_project_is_located_relative_to_the_rootdir(tmp_path):
    report = _report(str(tmp_path / "shop" / "cart.py"), 42, "KeyError: 'sku'")
    failure = _failure(report, str(tmp_path))
    assert (failure.exc_type, failure.message, failure.location) == (
        "KeyError",
        "'sku'",
        "shop/cart.py:42",
    )
    assert failure.signature == "KeyError at shop/cart.py:42"


def test_a_crash_in_the_standard_library_is_located_in_the_projects_own_code(tmp_path):
    report = _report(
        "/usr/lib/python3.11/urllib/request.py",
        1351,
        "urllib.error.URLError: <urlopen error blocked>",
        entries=[
            (str(tmp_path / "tests" / "test_net.py"), 7),
            (str(tmp_path / "shop" / "telemetry.py"), 19),
            ("/usr/lib/python3.11/urllib/request.py", 1351),
        ],
        exc_type="URLError",
    )
    failure = _failure(report, str(tmp_path))
    assert failure.location == "shop/telemetry.py:19"
    assert failure.exc_type == "URLError"


def test_code_installed_inside_the_rootdir_is_not_the_projects_own(tmp_path):
    venv_file = str(tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "lib" / "x.py")
    report = _report(venv_file, 3, "ValueError: bad", entries=[(str(tmp_path / "t.py"), 9)])
    assert _failure(report, str(tmp_path)).location == "t.py:9"


def test_an_assertion_keeps_its_type_from_the_executing_process(tmp_path):
    report = _report(
        str(tmp_path / "t.py"), 5, "assert 2 == 3\n +  where 2 = f()", exc_type="AssertionError"
    )
    failure = _failure(report, str(tmp_path))
    assert (failure.exc_type, failure.message) == ("AssertionError", "assert 2 == 3")


def test_messages_mask_addresses_and_temporary_paths():
    text = normalise("<object at 0x7f3a2b1c9d40> in /tmp/pytest-of-ci/pytest-12/test_x0/out")
    assert text == "<object at 0x…> in <tmp>/test_x0/out"


def test_the_executing_process_location_wins_whatever_the_traceback_style(tmp_path):
    # --tb=line keeps no traceback entries: the executor's own frame walk decides.
    report = _report(
        "/usr/lib/python3.11/urllib/request.py", 1351, "URLError: x", exc_type="URLError"
    )
    assert (
        _failure(report, str(tmp_path), "shop/telemetry.py:19").location == "shop/telemetry.py:19"
    )


def test_own_location_skips_frames_outside_the_project(tmp_path):
    from hermetic_hunt.failures import own_location

    frames = [(str(tmp_path / "t.py"), 3), ("/usr/lib/python3.11/json/decoder.py", 355)]
    assert own_location(frames, str(tmp_path)) == "t.py:3"
    assert own_location(frames[1:], str(tmp_path)) is None
