"""The payment-provider registry, loaded on first use (bug: not thread-safe)."""

_REGISTRY: dict[str, int] | None = None
_LOADS = 0


def _load() -> dict[str, int]:
    """Parse the providers' metadata: pure Python work, about half a millisecond."""
    global _LOADS
    _LOADS += 1
    providers = {f"provider-{i}": i for i in range(2000)}
    providers.update(card=1, invoice=2)
    return providers


def registry() -> dict[str, int]:
    global _REGISTRY
    if _REGISTRY is None:  # bug: two threads can both see None and both load
        _REGISTRY = _load()
    return _REGISTRY


def loads() -> int:
    return _LOADS


def reset() -> None:
    global _REGISTRY, _LOADS
    _REGISTRY, _LOADS = None, 0
