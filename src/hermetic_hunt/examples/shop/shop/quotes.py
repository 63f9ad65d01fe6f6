"""Shipping quotes from a courier's API (simulated: it answers in about 90 ms)."""

import asyncio


async def fetch_quote(sku: str) -> int:
    await asyncio.sleep(0.09)  # the courier's usual answer time
    return 495 if sku == "mug" else 395


async def quote(sku: str, timeout: float) -> int:
    """The courier's quote, or TimeoutError when it does not answer in ``timeout`` seconds."""
    return await asyncio.wait_for(fetch_quote(sku), timeout=timeout)
