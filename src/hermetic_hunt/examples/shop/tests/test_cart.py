import pytest

from shop.cart import Cart


def test_empty_cart_costs_nothing():
    assert Cart().total() == 0


def test_cart_total_adds_lines():
    cart = Cart()
    cart.add("tea", 2)
    cart.add("mug")
    assert cart.total() == 2 * 450 + 1200


@pytest.mark.parametrize("percent, expected", [(0, 1200), (10, 1080), (100, 0)])
def test_discounted_total(percent, expected):
    cart = Cart()
    cart.add("mug")
    assert cart.discounted_total(percent) == expected


def test_unknown_product_is_refused():
    with pytest.raises(KeyError):
        Cart().add("caviar")
