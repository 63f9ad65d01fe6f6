"""Product tags, rendered for the shop front."""


def tags_for(sku: str) -> set[str]:
    return {"organic", "fair-trade"} if sku == "tea" else {"handmade"}


def render(sku: str) -> str:
    return ", ".join(tags_for(sku))  # bug: set order follows PYTHONHASHSEED
