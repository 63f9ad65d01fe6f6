"""The product catalog: a registry that tests can extend (and must reset)."""

CORE = {"tea": 450, "mug": 1200, "honey": 899}
_REGISTRY: dict[str, int] = dict(CORE)


def register(sku: str, cents: int) -> None:
    _REGISTRY[sku] = cents


def reset() -> None:
    _REGISTRY.clear()
    _REGISTRY.update(CORE)


def products() -> list[str]:
    return sorted(_REGISTRY)


def price(sku: str) -> int:
    return _REGISTRY[sku]
