"""Delivery routes between depots."""


def build() -> dict[str, list[str]]:
    return {"hub": ["north", "south"], "north": ["hub"], "south": ["hub"]}
