"""The per-attempt sandbox engine's parts (no hermetic import here).

:mod:`hermetic_hunt.sandbox` composes them and is the only module that talks
to hermetic-sandbox.
"""
