"""The "eps so far" column: privacy spent after each round, from :mod:`cepam.accounting`.

* Gaussian methods (``cepam-gaussian``, ``fl-gaussian``, ``fl-gaussian-sdq``):
  :func:`cepam.accounting.epsilon_after_rounds` -- the accountant's tight
  per-round bound (whole-update clipping to gamma, amplification by the
  chance that a sample is drawn at all in the round's tau * B draws with
  replacement from the client's |D| samples), composed over the rounds run so
  far with privacy loss distributions, at the run's ``delta``, against an
  honest-but-curious client (the accountant's default threat model, the
  paper's adversary).  For a non-IID split |D| is the smallest client's.
* Laplace methods (``cepam-laplace``, ``fl-laplace``, ``fl-laplace-sdq``):
  pure DP, ``rounds * eps_round`` with ``eps_round`` from
  :func:`cepam.accounting.tight_laplace_round` (l1 sensitivity
  ``2 gamma sqrt(m)`` of an l2-clipped update of ``m`` coordinates,
  amplified likewise).  ``delta`` is 0.
* ``fl`` and ``fl-sdq`` add no noise: eps is infinite.

The noise of ``fl-gaussian-sdq`` and ``fl-laplace-sdq`` is added before the
quantizer, so SDQ is post-processing and the same guarantees hold.  The
column is NaN when the installed cepam has no :mod:`cepam.accounting`.
The accountant is not cheap (up to about half a second per value), so values
are cached per process: a grid pays once per (setting, noise, rounds).
"""

from __future__ import annotations

import importlib
import math
from typing import Callable

__all__ = ["epsilon_function", "GAUSSIAN_METHODS", "LAPLACE_METHODS"]

GAUSSIAN_METHODS = ("cepam-gaussian", "fl-gaussian", "fl-gaussian-sdq")
LAPLACE_METHODS = ("cepam-laplace", "fl-laplace", "fl-laplace-sdq")
_NOT_PRIVATE = ("fl", "fl-sdq")

# eps depends on the setting, the noise and the round count only (not on the
# seed or which Gaussian method): computed once per process.
_CACHE: dict[tuple, float] = {}


def _nan(rounds: int) -> float:
    return math.nan


def epsilon_function(*, method: str, sigma: float, b: float = math.nan, delta: float,
                     clip: float, clients: int, samples_per_round: int, dataset_size: int,
                     coordinates: int = 1) -> Callable[[int], float]:
    """A function ``rounds -> eps`` for this setting (NaN where unknown).

    Args:
        method: the method's name.
        sigma, b: Gaussian std and Laplace scale per coordinate.
        delta: the total delta of the Gaussian methods.
        clip, clients: gamma and K.
        samples_per_round: tau * B, the draws with replacement per round.
        dataset_size: |D| of the (smallest) client.
        coordinates: m, the number of coordinates of an update (Laplace).
    """
    if method in _NOT_PRIVATE:
        return lambda rounds: math.inf
    try:
        acc = importlib.import_module("cepam.accounting")
    except ImportError:
        return _nan
    setting = acc.FLSetting(clip=clip, clients=clients, local_steps=samples_per_round,
                            dataset_size=dataset_size)
    if method in GAUSSIAN_METHODS:
        key = ("gaussian", sigma, delta, clip, clients, samples_per_round, dataset_size)

        def compute(rounds: int) -> float:
            return float(acc.epsilon_after_rounds(sigma=sigma, delta=delta, rounds=rounds,
                                                  setting=setting))
    elif method in LAPLACE_METHODS:
        key = ("laplace", b, clip, clients, samples_per_round, dataset_size, coordinates)
        per_round = acc.tight_laplace_round(scale=b, setting=setting,
                                            dimension=coordinates).epsilon

        def compute(rounds: int) -> float:
            return rounds * float(per_round)
    else:
        return _nan

    def eps(rounds: int) -> float:
        if rounds <= 0:
            return 0.0
        if (key, rounds) not in _CACHE:
            _CACHE[(key, rounds)] = compute(rounds)
        return _CACHE[(key, rounds)]

    return eps
