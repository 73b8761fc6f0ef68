"""Python threads kept from call to call, for the work the library does in
Python on several threads: the payload tag's segments (hashlib releases the
GIL over large buffers) and ``lattice="auto"``'s sample bodies (the native
core releases it).  The native core has its own pool
(``csrc/common/worker_pool.hpp``).

A pool started for each call cost its caller about 0.4 ms of CPU and 0.8
ms of wall clock for 16 threads (measured on a 2-core machine).  The pool
here grows to the most threads asked for and is made anew in a forked
child (whose parent's threads do not exist there).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Callable, Sequence, TypeVar

__all__ = ["map_on_threads"]

T = TypeVar("T")
R = TypeVar("R")

_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_threads = 0


def _forget_pool() -> None:
    """In a forked child: the parent's pool and lock are not usable here."""
    global _lock, _pool, _pool_threads
    _lock, _pool, _pool_threads = threading.Lock(), None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _threads(count: int) -> concurrent.futures.ThreadPoolExecutor:
    """The pool, with room for ``count`` threads at least (call with
    ``_lock`` held: a pool outgrown is shut down, and takes no more work)."""
    global _pool, _pool_threads
    if _pool is None or _pool_threads < count:
        old = _pool
        _pool, _pool_threads = concurrent.futures.ThreadPoolExecutor(
            count, thread_name_prefix="cepam"), count
        if old is not None:
            old.shutdown(wait=False)  # its threads end once idle
    return _pool


def map_on_threads(fn: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``[fn(item) for item in items]``, on up to ``threads`` threads at once:
    the caller's and pooled ones, thread w taking items w, w + k, w + 2k,
    ... of k shares.  A share no pooled thread has started by the time the
    caller's is done, the caller takes too (so a call never waits for a busy
    pool).  The first exception, in share order, is raised once every
    started share has ended."""
    shares = min(threads, len(items))
    if shares <= 1:
        return [fn(item) for item in items]
    results: list[R] = [None] * len(items)  # type: ignore[list-item]

    def share(w: int) -> None:
        for i in range(w, len(items), shares):
            results[i] = fn(items[i])

    with _lock:  # (no other caller shuts the pool down between these)
        pool = _threads(shares - 1)
        futures = [pool.submit(share, w) for w in range(1, shares)]
    errors: list[BaseException] = []

    def settle(run: Callable[[], object]) -> None:
        try:
            run()
        except BaseException as e:  # (every share still runs or is waited for)
            errors.append(e)

    settle(lambda: share(0))
    for w, future in enumerate(futures, start=1):
        settle((lambda w=w: share(w)) if future.cancel() else future.result)
    if errors:
        raise errors[0]
    return results
