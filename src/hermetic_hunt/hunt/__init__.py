"""The hunt stage: ``pytest --hermetic-hunt=N``.

The controller (run row, results in, summary out), the schedule (which
worker runs what, a pure function of the base seed), the xdist glue and the
terminal progress line.
"""
