"""How many native threads encode and decode may use.

``threads=None`` (the default everywhere) means: the ``CEPAM_THREADS``
environment variable if it is set, else the number of cores this process may
run on (``os.sched_getaffinity``, where the platform has it, else
``os.cpu_count()``; read again at most once a second).  The payload bytes
and decoded values are the same for every thread count; only the speed
differs.
"""

from __future__ import annotations

import math
import os
from time import monotonic as _clock

from ._native import core as _core
from .errors import InvalidArgumentError
from .keys import check_integer

__all__ = ["MAX_THREADS", "THREADS_ENV", "AFFINITY_SECONDS", "available_cores",
           "resolve_threads"]

MAX_THREADS: int = _core.MAX_THREADS
THREADS_ENV = "CEPAM_THREADS"


#: Seconds for which :func:`available_cores` keeps the affinity it read.
#: The affinity is a system call, which costs a microsecond and slows the
#: call's next few (the kernel's entry and exit): read on every call, it
#: added 1 to 5 us to a decode of 10 coordinates of about 26 here.
AFFINITY_SECONDS = 1.0
_affinity = [-math.inf, 1]  # (when read, on _clock; the cores)


def available_cores() -> int:
    """The number of cores this process may run on (at least 1), as
    ``os.sched_getaffinity`` gave it at most :data:`AFFINITY_SECONDS` ago
    (``os.cpu_count()`` where the platform has no affinity)."""
    now = _clock()
    if now - _affinity[0] < AFFINITY_SECONDS:
        return _affinity[1]
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    _affinity[:] = [now, max(1, min(cores, MAX_THREADS))]
    return _affinity[1]


#: THREADS_ENV as CPython's os.environ keys its own mapping (bytes on POSIX).
_ENV_KEY = os.environ.encodekey(THREADS_ENV) if isinstance(os.environ, os._Environ) else None


def _threads_env() -> str | None:
    """``os.environ.get(THREADS_ENV)``, read from the mapping behind
    ``os.environ`` where it is CPython's own: its ``get`` misses by raising
    and catching a KeyError, about 1 us of the 30 that a small update's
    encode or decode costs, read on every call with ``threads=None``."""
    env = os.environ
    data = getattr(env, "_data", None)
    if _ENV_KEY is None or type(env) is not os._Environ or type(data) is not dict:
        return env.get(THREADS_ENV)
    raw = data.get(_ENV_KEY)
    return None if raw is None else env.decodevalue(raw)


def _check_count(what: str, value: int) -> int:
    if not 1 <= value <= MAX_THREADS:
        raise InvalidArgumentError(f"{what} must be between 1 and {MAX_THREADS}, got {value}")
    return value


def resolve_threads(threads: object) -> int:
    """The thread count for ``threads=``: an integer in [1, MAX_THREADS], or
    None for the default (``CEPAM_THREADS``, else :func:`available_cores`).

    Raises:
        InvalidTypeError: threads is neither None nor an integer.
        InvalidArgumentError: threads, or ``CEPAM_THREADS``, is out of range
            (or the variable is not a decimal integer).
    """
    if type(threads) is int and 1 <= threads <= MAX_THREADS:
        return threads  # (the common case, checked)
    if threads is None:
        env = _threads_env()
        if env is None or env.strip() == "":
            return available_cores()
        try:
            value = int(env.strip(), 10)
        except ValueError:
            raise InvalidArgumentError(
                f"{THREADS_ENV} must be a positive integer, got {env!r}") from None
        return _check_count(THREADS_ENV, value)
    return _check_count("threads", check_integer("threads", threads))
