"""The "eps so far" column: privacy spent after each round.

The numbers come from the project's accountant, :mod:`cepam.accounting`,
when the installed cepam has it: for the Gaussian methods (``cepam-gaussian``,
``fl-gaussian``, ``fl-gaussian-sdq``) it composes the per-round guarantee of
the setting (clip gamma, K clients, tau * B samples drawn with replacement
per round from each client's |D| samples, taking the smallest client) over
the rounds run so far, at the run's ``delta``, against the other clients
(the accountant's default threat model).  The Gaussian noise of
``fl-gaussian-sdq`` is added before quantization, so SDQ is post-processing
and the same guarantee holds.

The column is NaN where no number is available: a cepam without
:mod:`cepam.accounting`, the Laplace methods (the accountant's composition
is for Gaussian noise), or an accountant whose interface is not the one
used here (a warning says so).  ``fl`` and ``fl-sdq`` add no noise: their
eps is infinite.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

__all__ = ["epsilon_function", "GAUSSIAN_METHODS"]

GAUSSIAN_METHODS = ("cepam-gaussian", "fl-gaussian", "fl-gaussian-sdq")
_NOT_PRIVATE = ("fl", "fl-sdq")


def _nan(rounds: int) -> float:
    return math.nan


def epsilon_function(*, method: str, sigma: float, delta: float, clip: float, clients: int,
                     samples_per_round: int, dataset_size: int) -> Callable[[int], float]:
    """A function ``rounds -> eps`` for this setting (NaN where unknown)."""
    if method in _NOT_PRIVATE:
        return lambda rounds: math.inf
    if method not in GAUSSIAN_METHODS:
        return _nan
    try:
        import cepam.accounting as acc
    except ImportError:
        return _nan
    try:
        setting = acc.FLSetting(clip=clip, clients=clients, local_steps=samples_per_round,
                                dataset_size=dataset_size)
        compute = acc.epsilon_after_rounds
    except (AttributeError, TypeError, ValueError) as exc:
        warnings.warn(f"cepam.accounting cannot be used for the eps column ({exc}); "
                      "the column is left empty", RuntimeWarning, stacklevel=2)
        return _nan
    key = (sigma, delta, clip, clients, samples_per_round, dataset_size)

    def eps(rounds: int) -> float:
        if rounds <= 0:
            return 0.0
        if (key, rounds) not in _CACHE:
            _CACHE[(key, rounds)] = float(compute(sigma=sigma, delta=delta, rounds=rounds,
                                                  setting=setting))
        return _CACHE[(key, rounds)]

    return eps


# eps depends on the setting and the round count only, not on the seed or the
# method: computed once per process for all the runs of a grid.
_CACHE: dict[tuple, float] = {}
