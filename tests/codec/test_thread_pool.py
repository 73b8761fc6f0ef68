"""cepam._thread_pool: the Python threads the payload tag and lattice="auto"
use, kept from call to call (results in order, errors in share order, a
busy pool never waited for, callers growing it at once, a forked child's own
pool)."""

from __future__ import annotations

import os
import threading

import pytest

from cepam import _thread_pool
from cepam._thread_pool import map_on_threads
from helpers.forking import in_forked_child, run_script


@pytest.mark.parametrize("threads", [1, 2, 3, 8, 64])
def test_results_are_in_order(threads):
    assert map_on_threads(lambda i: i * i, range(11), threads) == [i * i for i in range(11)]
    assert map_on_threads(lambda i: i, [], threads) == []


def test_threads_are_kept_and_shared():
    map_on_threads(lambda i: i, range(4), 4)
    pool = _thread_pool._pool
    map_on_threads(lambda i: i, range(4), 4)
    assert _thread_pool._pool is pool
    seen = set()
    map_on_threads(lambda i: seen.add(threading.get_ident()), range(40), 3)
    assert threading.get_ident() in seen  # the caller takes a share


def test_the_first_error_in_share_order_is_raised_after_every_share():
    ran = []

    def fn(i):
        ran.append(i)
        if i in (2, 4):  # shares of 3: (0, 3, 6), (1, 4, 7), (2, 5, 8)
            raise ValueError(i)
        return i

    with pytest.raises(ValueError, match="^4$"):
        map_on_threads(fn, range(9), 3)
    assert sorted(ran) == [0, 1, 2, 3, 4, 6]  # each share stops at its error


def test_a_busy_pool_is_not_waited_for():
    threads = 3
    with _thread_pool._lock:
        pool = _thread_pool._threads(threads - 1)
    release = threading.Event()
    blockers = [pool.submit(release.wait) for _ in range(_thread_pool._pool_threads)]
    try:
        who = map_on_threads(lambda i: threading.get_ident(), range(30), threads)
        assert set(who) == {threading.get_ident()}  # the caller took every share
    finally:
        release.set()
        for b in blockers:
            b.result()


def test_callers_asking_for_more_threads_at_once_all_get_their_results():
    # A caller that grows the pool shuts the smaller one down: no caller may
    # be left submitting to it.
    out = {}

    def call(threads):
        out[threads] = [map_on_threads(lambda i: i * threads, range(20), threads)
                        for _ in range(50)]

    callers = [threading.Thread(target=call, args=(t,)) for t in (2, 3, 5, 9, 17, 33)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    for threads, results in out.items():
        assert results == [[i * threads for i in range(20)]] * 50
    assert len(out) == 6


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_its_own_pool():
    run_script("""
from cepam import _thread_pool
from cepam._thread_pool import map_on_threads
assert map_on_threads(lambda i: i + 1, range(8), 4) == list(range(1, 9))
parents = _thread_pool._pool
""" + in_forked_child("map_on_threads(lambda i: i * 2, range(8), 4) == [i * 2 for i in range(8)]"
                      " and _thread_pool._pool is not parents"))
