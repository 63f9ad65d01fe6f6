import time

from shop.throughput import pack_in_background, packing_rate


def test_packing_rate_is_positive():
    # Two time.time() readings: on a real machine the second is always later.
    assert packing_rate(["mug", "tea", "pot"]) > 0


def test_background_packer_finishes_before_the_deadline():
    # A thread poll with a 2 s deadline, as CI runs it: the timer fires after 10 ms.
    done = [0]
    timer = pack_in_background(["mug"], done, delay=0.01)
    deadline = time.monotonic() + 2.0
    while done[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    timer.join()
    assert done[0] == 1


def test_a_pause_lasts_longer_than_asked():
    # An exclusive bound after a sleep: a real sleep never ends exactly on time.
    start = time.time()
    time.sleep(0.02)
    assert time.time() - start > 0.02
