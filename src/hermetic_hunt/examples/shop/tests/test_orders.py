from shop import orders


def test_order_ids_are_unique():
    ids = [orders.order_id() for _ in range(3)]
    assert len(set(ids)) == len(ids)


def test_order_id_format():
    assert len(orders.order_id()) == 2
