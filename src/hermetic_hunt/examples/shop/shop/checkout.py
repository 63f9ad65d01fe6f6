"""Checkout: totals, order id, metrics."""

from shop import orders, telemetry
from shop.cart import Cart


def checkout(cart: Cart) -> dict:
    order = {"id": orders.order_id(), "total": cart.total()}
    telemetry.report("checkout", {"total": order["total"]})
    return order
