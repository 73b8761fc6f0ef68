"""Privacy profiles: delta as a function of epsilon, and its inverse.

A *privacy profile* ``delta(eps)``, ``eps >= 0``, of a mechanism is the
largest hockey-stick divergence ``sup_{D ~ D'} H_{e^eps}(M(D) || M(D'))``
(Balle, Barthe and Gaboardi 2018); an upper bound on it is a family of
``(eps, delta(eps))``-DP statements. Profiles here are vectorised callables
``np.ndarray -> np.ndarray``, non-increasing in eps, valued in [0, 1].

>>> import numpy as np
>>> from cepam.accounting.analytic_gaussian import gaussian_delta
>>> round(epsilon_for_delta(lambda e: gaussian_delta(e, mu=1.0), 1e-5), 4)
4.3772
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from . import _validation as _v

__all__ = ["PrivacyProfile", "epsilon_for_delta", "EPSILON_CAP"]

PrivacyProfile = Callable[[np.ndarray], np.ndarray]

#: Largest epsilon the accountants search; beyond it a guarantee is reported
#: as eps = inf (no finite eps certified at that delta).
EPSILON_CAP = 1e9


def epsilon_for_delta(profile: PrivacyProfile, delta: float, *, rtol: float = 1e-10) -> float:
    """Smallest eps >= 0 at which ``profile(eps) <= delta`` (to relative ``rtol``).

    The profile need not be monotone (the paper's bound is not: its group
    privacy factor grows with eps): it is scanned on a log grid from 0 to
    :data:`EPSILON_CAP` and the first crossing is refined by bisection. The
    returned eps always satisfies ``profile(eps) <= delta``; a dip narrower
    than the grid could be missed, which only makes the answer conservative.
    Returns ``math.inf`` when no grid point up to the cap qualifies.

    Args:
        profile: a privacy profile, eps (an array) to delta (an array).
        delta: target delta in (0, 1).
        rtol: relative precision of the answer (> 0).

    Returns:
        eps >= 0, or ``math.inf``.

    Raises:
        InvalidArgumentError: delta outside (0, 1).
    """
    delta = _v.probability_open("delta", delta)
    grid = np.concatenate(([0.0], np.logspace(-6, math.log10(EPSILON_CAP), 601)))
    ok = np.asarray(profile(grid)) <= delta
    if not ok.any():
        return math.inf
    k = int(np.argmax(ok))
    if k == 0:
        return 0.0
    lo, hi = float(grid[k - 1]), float(grid[k])
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if float(profile(np.asarray(mid))) <= delta:
            hi = mid
        else:
            lo = mid
    return hi
