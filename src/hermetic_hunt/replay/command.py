"""``hermetic-hunt replay ID``: check the id against the database, print (or run) the command."""

from __future__ import annotations

from hermetic_hunt import pasteable
from hermetic_hunt.replay.plan import location_arg, resolve, target_of
from hermetic_hunt.store import Store
from hermetic_hunt.store.replay import ReplaySource


def prepare(
    db_path: str, ref: str, cwd: str, extra: tuple[str, ...] = ()
) -> tuple[list[str], int | None]:
    """The argv that replays ``ref``, and the hash seed it runs under.

    Resolve ``ref`` once (an unknown id or a corrupt journal is said now, not when the
    command runs) and build the command; when the hunt's rootdir is a directory below
    ``cwd``, it becomes the command's argument (see :func:`location_arg`)."""
    with Store.open(db_path, create=False, base=cwd, write=False) as store:
        source = ReplaySource(store)
        plan = resolve(target_of(str(db_path), ref), source)
        where = source.run_location(plan.run_id) if plan.run_id is not None else None
    location = location_arg(where[0], where[1], cwd) if where else None
    argv = pasteable.replay_argv(db_path, plan.target.ref, cwd)
    if location:
        argv.append(location if not location.startswith("-") else f"./{location}")
    return [*argv, *extra], plan.hash_seed
