"""Receipts, stamped with the second they were issued."""

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Receipt:
    sku: str
    second: int


def issue(sku: str) -> Receipt:
    time.sleep(0.02)  # rendering the receipt takes a moment
    return Receipt(sku, int(time.time()))
