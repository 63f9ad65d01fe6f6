"""The isolation stage: why each flaky test flakes, in fresh processes.

:mod:`.run` drives it, :mod:`.classifier` decides one test (phases in
:mod:`.alone` and :mod:`.order`, delta debugging in :mod:`.search`), and
:mod:`.probes` runs the probes in probe servers (:mod:`.server`).
"""
