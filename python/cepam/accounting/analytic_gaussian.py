"""The analytic Gaussian mechanism: exact privacy profile and its inverses.

Balle and Wang (2018), "Improving the Gaussian Mechanism for Differential
Privacy: Analytical Calibration and Optimal Denoising", Theorem 8 (cited as
Theorem "analyGaussian" in the paper, Ling et al.): the mechanism ``q(X) + N(0,
s^2 I)`` whose query has l2 sensitivity ``Delta`` is ``(eps, delta)``-DP iff

    delta >= Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu),   mu = Delta / s.

Everything here is a function of ``mu`` (sensitivity over noise std; the
reciprocal of the usual *noise multiplier*). The profile is evaluated in a form
that never subtracts two nearly equal large numbers: with ``a = mu/2 - eps/mu``
and ``b = -mu/2 - eps/mu`` one has ``eps - b^2/2 = -a^2/2``, so
``e^eps Phi(b) = e^{-a^2/2} erfcx(-b/sqrt 2) / 2`` and, for ``a < 0``,
``delta = e^{-a^2/2} (erfcx(-a/sqrt 2) - erfcx(-b/sqrt 2)) / 2``. It does not
overflow for eps up to 1e9 and gives no NaN for mu in [1e-13, 1e13].

>>> round(gaussian_delta(1.0, mu=1.0), 6)
0.126937
>>> round(gaussian_epsilon(0.126937, mu=1.0), 4)
1.0
>>> round(gaussian_mu(1.0, 1e-5), 4)
0.2681
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from ..errors import InvalidArgumentError
from . import _validation as _v

__all__ = [
    "gaussian_delta",
    "gaussian_log_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "gaussian_noise_multiplier",
]

_SQRT2 = math.sqrt(2.0)
_LOG2 = math.log(2.0)


def gaussian_log_delta(epsilon: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log of the exact delta(eps) of the Gaussian mechanism, elementwise.

    ``epsilon`` (any real, +inf allowed) and ``mu`` >= 0 (+inf allowed)
    broadcast. Returns ``-inf`` where delta is 0. No validation: the public
    wrappers validate.
    """
    eps = np.asarray(epsilon, dtype=float)
    mu = np.asarray(mu, dtype=float)
    eps, mu = np.broadcast_arrays(eps, mu)
    out = np.full(eps.shape, -np.inf)
    with np.errstate(all="ignore"):
        inf_mu = np.isinf(mu)
        zero_mu = mu == 0
        inf_eps = np.isposinf(eps)
        regular = ~(inf_mu | zero_mu | inf_eps)
        out[inf_mu & ~inf_eps] = 0.0  # no noise: delta = 1 for every finite eps
        e = eps[regular]
        m = mu[regular]
        a = m / 2 - e / m
        b = -m / 2 - e / m
        res = np.empty_like(a)
        hi = a >= 0
        # a >= 0: delta = Phi(a) - e^{-a^2/2} erfcx(-b/sqrt2)/2, both terms O(1).
        t = np.exp(-0.5 * a[hi] ** 2) * special.erfcx(-b[hi] / _SQRT2) / 2
        res[hi] = np.log(np.maximum(special.ndtr(a[hi]) - t, 0.0))
        lo = ~hi
        diff = special.erfcx(-a[lo] / _SQRT2) - special.erfcx(-b[lo] / _SQRT2)
        res[lo] = -0.5 * a[lo] ** 2 - _LOG2 + np.log(np.maximum(diff, 0.0))
        out[regular] = np.minimum(res, 0.0)
    return out


def gaussian_delta(epsilon: float | np.ndarray, *, mu: float) -> float | np.ndarray:
    """Exact ``delta(eps)`` of the Gaussian mechanism with ``mu = Delta/s``.

    Args:
        epsilon: eps >= 0 (scalar or array; +inf gives 0).
        mu: sensitivity over noise standard deviation, > 0 (+inf: no noise).

    Returns:
        delta in [0, 1], a float for scalar ``epsilon``, else an array.

    Raises:
        InvalidArgumentError: eps < 0 or NaN, mu <= 0 or NaN.
    """
    eps, scalar = _v.epsilons("epsilon", epsilon)
    mu = _v.positive("mu", mu, allow_inf=True)
    d = np.exp(gaussian_log_delta(eps, mu))
    return float(d) if scalar else d


def gaussian_epsilon(delta: float, *, mu: float) -> float:
    """Smallest eps >= 0 with ``delta(eps) <= delta`` for the Gaussian mechanism.

    Args:
        delta: target delta in (0, 1).
        mu: sensitivity over noise standard deviation, > 0 (finite).

    Returns:
        eps >= 0 (natural-log units); ``math.inf`` where it is beyond float64
        (mu above about 1e154).

    Raises:
        InvalidArgumentError: delta outside (0, 1), mu <= 0 or infinite.
    """
    delta = _v.probability_open("delta", delta)
    mu = _v.positive("mu", mu)
    log_target = math.log(delta)

    def f(e: float) -> float:
        return float(gaussian_log_delta(e, mu)) - log_target

    if f(0.0) <= 0:
        return 0.0
    hi = max(1.0, mu * mu)
    while math.isfinite(hi) and f(hi) > 0:  # delta(eps) -> 0 as eps -> inf
        hi *= 2.0
    if math.isinf(hi):  # (mu above about 1e154: eps beyond float64)
        return math.inf
    xtol, rtol = 1e-14 * max(1.0, hi), 1e-13
    eps = float(optimize.brentq(f, 0.0, hi, xtol=xtol, rtol=rtol))
    if f(eps) > 0:  # Brent's answer is within its tolerance of the root, on either side
        eps = min(hi, eps + 2.0 * (xtol + rtol * eps))
    return eps


def gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest ``mu = Delta/s`` for which the Gaussian mechanism is
    ``(eps, delta)``-DP (Balle and Wang's analytic calibration).

    Args:
        epsilon: target eps >= 0 (finite).
        delta: target delta in (0, 1).

    Returns:
        ``mu`` > 0.

    Raises:
        InvalidArgumentError: arguments out of range.
    """
    eps = _v.nonnegative("epsilon", epsilon)
    delta = _v.probability_open("delta", delta)
    log_target = math.log(delta)

    def f(log_mu: float) -> float:
        return float(gaussian_log_delta(eps, math.exp(log_mu))) - log_target

    lo, hi = -1.0, 1.0
    while f(lo) > 0:  # delta increases with mu
        lo *= 2.0
        if lo < -700:
            raise InvalidArgumentError(f"no mu > 0 reaches delta={delta} at eps={eps}")
    while f(hi) < 0:
        hi *= 2.0
        if hi > 700:  # pragma: no cover - needs eps ~ 1e300
            raise InvalidArgumentError(f"delta={delta} at eps={eps} holds for every mu")
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-13))


def gaussian_noise_multiplier(epsilon: float, delta: float) -> float:
    """Smallest noise multiplier ``s/Delta = 1/mu`` giving ``(eps, delta)``-DP.

    Args:
        epsilon: target eps >= 0 (finite).
        delta: target delta in (0, 1).

    Returns:
        The noise multiplier ``1 / mu`` (> 0).

    Raises:
        InvalidArgumentError: arguments out of range.

    >>> round(gaussian_noise_multiplier(1.0, 1e-5), 4)
    3.7306
    """
    return 1.0 / gaussian_mu(epsilon, delta)
