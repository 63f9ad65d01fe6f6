"""Quarantine: known flakes run as usual but do not fail CI until they are fixed.

* :mod:`.listfile` -- the quarantine list: one test per line, with its flake
  id, kinds, fail rate and reason in a comment (pure; written and read);
* :mod:`.build` -- ``hermetic-hunt quarantine``: the list of a database's
  confirmed flakes (fixed ones left out);
* :mod:`.session` -- ``pytest --hermetic-quarantine=FILE``: quarantined
  tests run, a failure is reported as quarantined (an ``xfail`` with
  ``strict=False`` and the flake id) instead of failing the session, and a
  test that passed enough times in a row is named so it can leave.
"""
