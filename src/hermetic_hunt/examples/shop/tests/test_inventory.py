from shop.inventory import Stock, reserve_concurrently


def test_concurrent_reservations_keep_stock_consistent():
    stock = Stock(10)
    reserve_concurrently(stock)
    assert stock.level == 8


def test_stock_starts_where_told():
    assert Stock(3).level == 3
