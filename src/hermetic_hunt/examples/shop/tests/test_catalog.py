from shop import catalog


def test_register_seasonal_product():
    catalog.register("pumpkin-spice", 650)
    assert "pumpkin-spice" in catalog.products()


def test_catalog_reset():
    catalog.reset()
    assert catalog.products() == ["honey", "mug", "tea"]


def test_catalog_lists_core_products():
    assert catalog.products() == ["honey", "mug", "tea"]


def test_price_lookup(price_feed):
    assert catalog.price("tea") == 450
    assert price_feed.quote("mug") == 1200
