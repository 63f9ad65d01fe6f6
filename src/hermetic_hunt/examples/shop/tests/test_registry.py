import threading

from shop import registry


def test_registry_is_loaded_once_by_concurrent_first_users():
    # Flaky: a lazy initialisation without a lock. Threads rarely switch in
    # the middle of it -- unless the interpreter switches threads very often.
    registry.reset()
    start = threading.Barrier(4)

    def first_use():
        start.wait(timeout=10)
        registry.registry()

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert registry.loads() == 1


def test_registry_knows_the_card_provider():
    registry.reset()
    assert registry.registry()["card"] == 1
    assert registry.loads() == 1
