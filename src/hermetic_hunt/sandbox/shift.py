"""A whole process on another date: its wall clock moved from (nearly) its first import on.

A hunt's rounds and probes run in children forked from a session that
collected the suite at the real time, so a value a module computed at import
(``STARTED = time.time()``, a certificate valid for thirty days from
``datetime.now()``) is from today even when the attempt's virtual clock
starts on a coming date. On that date a plain ``pytest`` run imports and
runs together, and the two agree. :func:`shift_process` puts the whole
process on ``epoch``: the ``time`` functions and ``datetime.now``/
``utcnow``/``date.today`` read the real clock moved by a fixed offset
outside attempts (an attempt's own virtual clock still takes over inside
it). The probe server calls it when it is imported, before the initial
conftests and the test modules are (``-p hermetic_hunt.isolate.server``),
for the probes that confirm a time flake's coming date
(:mod:`hermetic_hunt.isolate.dates`).

Only the clocks move: files keep the mtimes the real clock gave them.
"""

from __future__ import annotations

from hermetic_hunt.sandbox import clock, datetimes
from hermetic_hunt.sandbox.patches import Patches

#: The process-wide patches (never undone: the process ends on the shifted date).
_PATCHES = Patches()


def shift_process(epoch: float) -> None:
    """Move this process's wall clock to ``epoch`` (UTC seconds), for good."""
    source = clock.ShiftedClock(epoch - clock.REAL_TIME())
    clock.rest_on(source)
    _PATCHES.update(clock.TIME_NAMESPACE, clock.TIME_PATCH)
    datetimes.install(_PATCHES)
