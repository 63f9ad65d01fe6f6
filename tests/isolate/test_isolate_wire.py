"""Tests for hermetic_hunt.isolate.wire: what a probe server is started with."""

from __future__ import annotations

from hermetic_hunt.isolate.wire import cache_args


def test_a_probe_server_keeps_pytests_cache_in_a_folder_of_its_own():
    assert cache_args(["tests"], "", "/tmp/c") == ["-o", "cache_dir=/tmp/c"]


def test_a_session_without_the_cache_plugin_gets_no_cache_option():
    assert cache_args(["-p", "no:cacheprovider", "tests"], "", "/tmp/c") == []
    assert cache_args(["-pno:cacheprovider"], "", "/tmp/c") == []
    assert cache_args([], "-q -p no:cacheprovider", "/tmp/c") == []


def test_a_session_with_no_arguments_at_all_gets_the_private_cache():
    assert cache_args([], "", "/tmp/c") == ["-o", "cache_dir=/tmp/c"]
