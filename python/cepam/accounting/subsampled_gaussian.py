"""The Poisson-subsampled Gaussian mechanism under add/remove: its two
directed privacy profiles, in closed form.

A mechanism that, with probability ``q``, adds one record's contribution
(l2 norm at most ``Delta``) to a sum that carries Gaussian noise of standard
deviation ``s`` (``mu = Delta / s``) has, on the line through the
contribution, the output laws ``Q = N(0, 1)`` without the record and
``(1 - q) Q + q P``, ``P = N(mu, 1)``, with it (DP-SGD's and DP-FedAvg's
mechanism; dp_accounting's ``PoissonSampledDpEvent(q, GaussianDpEvent(1 /
mu))``).  Under add/remove the two directions differ, and each is composed
on its own (Zhu, Dong and Wang 2022); both follow from the Gaussian's exact
profile ``delta_G`` (:mod:`.analytic_gaussian`) through two identities, for
``alpha = e^eps`` > 0 and any real ``eps``:

* *remove* (the record present, then absent): ``H_alpha((1-q) Q + q P || Q)
  = q delta_G(log alpha')`` with ``alpha' = (alpha - (1 - q)) / q`` when
  ``alpha > 1 - q``, and ``1 - alpha`` otherwise;
* *add* (absent, then present): ``H_alpha(Q || (1-q) Q + q P) = c
  delta_G(log(alpha q / c))`` with ``c = 1 - alpha (1 - q)`` when ``c > 0``,
  and 0 otherwise (``H(Q || P) = H(P || Q)`` for two Gaussians of one
  variance).

Both are exact (they are the hockey-stick divergences of the pair, not
bounds), so a privacy loss distribution built from each on a grid
(:meth:`.pld.PrivacyLossDistribution.from_directed_profile`) is the
pessimistic discretisation of the mechanism itself.

>>> round(float(subsampled_gaussian_delta(1.0, mu=1.0, sample_rate=1.0)), 6)   # = Gaussian
0.126937
>>> round(float(subsampled_gaussian_delta(1.0, mu=1.0, sample_rate=0.1)), 6)
0.000207
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validation as _v
from .analytic_gaussian import gaussian_log_delta

__all__ = ["subsampled_gaussian_remove_delta", "subsampled_gaussian_add_delta",
           "subsampled_gaussian_delta"]


def _gaussian(eps: np.ndarray, mu: float) -> np.ndarray:
    """The Gaussian pair's ``H_{e^eps}`` for every real eps: below 0 through the
    pair's symmetry, ``delta(eps) = 1 - e^eps + e^eps delta(-eps)``, which
    never overflows."""
    eps = np.asarray(eps, dtype=float)
    pos = np.exp(gaussian_log_delta(np.abs(eps), mu))
    return np.where(eps >= 0, pos, -np.expm1(np.minimum(eps, 0.0)) + np.exp(
        np.minimum(eps, 0.0)) * pos)


def _remove(eps: np.ndarray, mu: float, q: float) -> np.ndarray:
    """H_{e^eps}((1-q) Q + q P || Q) for real eps (no validation)."""
    eps = np.asarray(eps, dtype=float)
    out = -np.expm1(np.minimum(eps, 0.0))  # 1 - alpha, used where alpha <= 1 - q
    if q >= 1.0:
        return _gaussian(eps, mu)
    above = eps > math.log1p(-q)
    e = eps[above]
    # log alpha' = log(alpha - (1 - q)) - log q, without cancellation
    log_a = e + np.log1p(-(1.0 - q) * np.exp(-e)) - math.log(q)
    out[above] = q * _gaussian(log_a, mu)
    return out


def _add(eps: np.ndarray, mu: float, q: float) -> np.ndarray:
    """H_{e^eps}(Q || (1-q) Q + q P) for real eps (no validation)."""
    eps = np.asarray(eps, dtype=float)
    if q >= 1.0:
        return _gaussian(eps, mu)
    out = np.zeros_like(eps)
    below = eps < -math.log1p(-q)  # c = 1 - alpha (1 - q) > 0
    e = eps[below]
    log_c = np.log1p(-(1.0 - q) * np.exp(e))
    out[below] = np.exp(log_c) * _gaussian(e + math.log(q) - log_c, mu)
    return out


def _checked(epsilon: object, mu: object, sample_rate: object) -> tuple[np.ndarray, bool, float,
                                                                          float]:
    if isinstance(epsilon, bool):
        raise InvalidTypeError("epsilon must be a real number or an array of them")
    eps = np.asarray(epsilon)
    if eps.dtype.kind not in "iuf":
        raise InvalidTypeError(f"epsilon must be a real number or an array of them, got "
                                  f"{epsilon!r}")
    eps = eps.astype(float)
    if np.any(np.isnan(eps)):
        raise InvalidArgumentError("epsilon must not be NaN")
    q = _v.positive("sample_rate", sample_rate)
    if q > 1.0:
        raise InvalidArgumentError(f"sample_rate must be in (0, 1], got {q!r}")
    return eps, eps.ndim == 0, _v.positive("mu", mu), q


def subsampled_gaussian_remove_delta(epsilon: float | np.ndarray, *, mu: float,
                                     sample_rate: float) -> float | np.ndarray:
    """``H_{e^eps}`` of the *remove* direction (see the module), for any real eps.

    Args:
        epsilon: real (scalar or array).
        mu: sensitivity over the noise's standard deviation (> 0).
        sample_rate: ``q`` in (0, 1].

    Raises:
        InvalidArgumentError, InvalidTypeError: values out of range or of the wrong type.
    """
    eps, scalar, mu_, q = _checked(epsilon, mu, sample_rate)
    d = _remove(np.atleast_1d(eps), mu_, q)
    return float(d[0]) if scalar else d.reshape(eps.shape)


def subsampled_gaussian_add_delta(epsilon: float | np.ndarray, *, mu: float,
                                  sample_rate: float) -> float | np.ndarray:
    """``H_{e^eps}`` of the *add* direction (see the module), for any real eps.

    Args and Raises as :func:`subsampled_gaussian_remove_delta`.
    """
    eps, scalar, mu_, q = _checked(epsilon, mu, sample_rate)
    d = _add(np.atleast_1d(eps), mu_, q)
    return float(d[0]) if scalar else d.reshape(eps.shape)


def subsampled_gaussian_delta(epsilon: float | np.ndarray, *, mu: float,
                              sample_rate: float) -> float | np.ndarray:
    """The privacy profile ``max(remove, add)`` at eps >= 0: the smallest delta
    for which one subsampled round is ``(eps, delta)``-DP under add/remove.

    Args:
        epsilon: eps >= 0, a number or an array of them.
        mu: sensitivity over the noise's std for the whole round (> 0).
        sample_rate: Poisson sampling rate ``q`` in (0, 1].

    Returns:
        delta, a float for a number, an array of ``epsilon``'s shape for an array.

    Raises:
        InvalidArgumentError: eps < 0 or not finite, mu <= 0, q outside (0, 1].
        InvalidTypeError: an argument that is not a number.
    """
    eps, scalar = _v.epsilons("epsilon", epsilon)
    _, _, mu_, q = _checked(eps, mu, sample_rate)
    e = np.atleast_1d(eps)
    d = np.maximum(_remove(e, mu_, q), _add(e, mu_, q))
    return float(d[0]) if scalar else d.reshape(eps.shape)
