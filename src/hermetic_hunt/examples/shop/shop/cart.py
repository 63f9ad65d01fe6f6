"""A shopping cart."""

from dataclasses import dataclass, field

from shop import catalog


@dataclass
class Cart:
    lines: dict[str, int] = field(default_factory=dict)

    def add(self, sku: str, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValueError("quantity must be positive")
        catalog.price(sku)  # KeyError for unknown products
        self.lines[sku] = self.lines.get(sku, 0) + quantity

    def total(self) -> int:
        return sum(catalog.price(sku) * qty for sku, qty in self.lines.items())

    def discounted_total(self, percent: int) -> int:
        if not 0 <= percent <= 100:
            raise ValueError("percent must be between 0 and 100")
        return self.total() * (100 - percent) // 100
