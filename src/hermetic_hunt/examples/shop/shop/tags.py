"""Product tags, rendered for the shop front."""


def tags_for(sku: str) -> set[str]:
    # (The words are chosen so that the demo's two workers, whose hash
    # seeds derive from its --hermetic-seed, list them in different orders
    # on every Python 3.10-3.13: 3.11 changed how str is hashed.)
    return {"organic", "recycled"} if sku == "tea" else {"handmade"}


def render(sku: str) -> str:
    return ", ".join(tags_for(sku))  # bug: set order follows PYTHONHASHSEED
