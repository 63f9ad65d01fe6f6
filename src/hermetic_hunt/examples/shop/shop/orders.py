"""Order numbers: short and human-friendly (too short: they collide)."""

import random
import string

_ALPHABET = string.ascii_uppercase[:6]


def order_id() -> str:
    return "".join(random.choice(_ALPHABET) for _ in range(2))
