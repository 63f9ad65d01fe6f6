from shop import plugins


def test_register_builtin_plugins():
    assert plugins.register_builtin() == ["card", "invoice"]
