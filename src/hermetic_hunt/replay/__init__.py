"""The replay stage: ``pytest --hermetic-replay-db=PATH::ID``.

:mod:`.plan` resolves a flake or attempt id into the steps to run (pure),
:mod:`.session` runs them in an ordinary pytest session, :mod:`.verdict`
says whether the recorded failure came back.
"""
