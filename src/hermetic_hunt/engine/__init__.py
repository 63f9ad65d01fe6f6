"""The engine: how attempts run, for rounds, isolation probes and replays alike.

The executor opens one sandbox per execution of a test, the sequence runner
runs explicit steps in order, the recorder folds pytest's phase reports into
one attempt record per execution.
"""
