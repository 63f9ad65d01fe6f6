from shop.cart import Cart
from shop.checkout import checkout


def test_checkout_reports_metrics():
    cart = Cart()
    cart.add("honey")
    assert checkout(cart)["total"] == 899
