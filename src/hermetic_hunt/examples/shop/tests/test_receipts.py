import time

from shop import receipts


def test_receipt_is_stamped_in_the_second_it_was_ordered():
    # Flaky: fails when the 20 ms it takes to issue crosses a second boundary.
    ordered = int(time.time())
    assert receipts.issue("tea").second == ordered


def test_receipt_is_stamped_within_a_second_of_ordering():
    ordered = int(time.time())
    assert 0 <= receipts.issue("tea").second - ordered <= 1


def test_receipt_names_its_product():
    assert receipts.issue("mug").sku == "mug"
