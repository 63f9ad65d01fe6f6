from shop import tags


def test_tags_are_listed_in_order():
    assert tags.render("tea") == "organic, recycled"


def test_single_tag():
    assert tags.render("mug") == "handmade"
