"""A tighter per-round bound for CEPAM: whole-update clipping + amplification.

Why it holds (full argument, with the threat models, in ``docs/privacy.md``):

1. *Sensitivity.* A client's whole update is clipped to l2 norm ``gamma``
   (docs/design.md, section 1; the paper's Algorithm CEPAM). For a fixed
   sequence of sampled indices, replacing one sample changes the clipped
   update by at most ``2 gamma`` -- both updates lie in the ball of radius
   ``gamma`` -- however many times the sample was drawn; in fact *any* two
   clipped updates are within ``2 gamma``. In the adversary's view
   (:mod:`.setting`) this is a Gaussian mechanism with noise multiplier
   ``z = sigma sqrt(m) / (2 gamma)``, i.e. ``mu = 1/z``.
2. *Decomposition.* Let ``p = 1 - (1 - 1/|D|)^tau`` be the chance that the
   replaced sample ``i`` is drawn at least once. Draw the ``tau`` indices as
   i.i.d. uniform indices on the other ``|D| - 1`` samples, each overwritten
   by ``i`` independently with probability ``1/|D|``: the output laws on
   neighbours ``D, D'`` are ``P = (1-p) mu_0 + p mu_1`` and
   ``Q = (1-p) mu_0 + p mu_1'`` with a *common* ``mu_0`` (``i`` not drawn),
   and every pair of mixture components (same index sequence, or one with
   ``i`` and one without) are Gaussians whose means differ by at most the
   sensitivity.
3. *Amplification.* Advanced joint convexity of the hockey-stick divergence
   (Balle, Barthe and Gaboardi 2018, Thm. 2) gives, for
   ``eps = log(1 + p (e^eps_t - 1))``,
   ``H_{e^eps}(P||Q) <= p [(1-beta) H_{e^eps_t}(mu_1||mu_0) + beta H_{e^eps_t}(mu_1||mu_1')]``
   and, by joint convexity over the couplings of step 2, both divergences are
   at most the Gaussian profile ``delta_G(eps_t; mu)`` (Balle and Wang 2018).
   Hence ``delta(eps) = p * delta_G(eps_t; mu)`` for every ``eps >= 0``.

The bound is exactly the ``eps >= 0`` profile of the pair
``((1-p) N(0,1) + p N(mu,1), N(0,1))``, the "remove" pair of a Poisson
subsampled Gaussian, and it is attained: when the clip saturates in opposite
directions (the brute-force test in ``tests/accounting/test_accounting_bruteforce.py``).
Under the symmetric replace-one relation the ``eps < 0`` side is its mirror
image, so the round's tradeoff function is Dong, Roth and Su's (2022)
``C_p(G_mu)``; :mod:`.pld` composes it over rounds (Zhu, Dong and Wang 2022).
It needs the whole update to be clipped (not per tensor) and fresh indices
each round; it is never larger than the paper's bound.

>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666,
...               threat_model="aggregate")
>>> g = tight_gaussian_round(5.9, sigma=0.001, setting=s)
>>> round(g.epsilon, 2), round(g.delta, 5)   # delta = p: no noise to speak of
(1.45, 0.00897)
>>> g = tight_gaussian_round(5.9, sigma=0.2, setting=s)
>>> round(g.epsilon, 2), f"{g.delta:.2e}"
(1.45, '3.58e-05')
"""

from __future__ import annotations

import math

import numpy as np

from . import _validation as _v
from ._numeric import amplified_epsilon, base_epsilon
from .analytic_gaussian import gaussian_log_delta
from .guarantee import RoundGuarantee
from .profile import epsilon_for_delta
from .setting import FLSetting, check_setting as _check_setting

__all__ = [
    "tight_gaussian_mu",
    "tight_gaussian_delta",
    "tight_gaussian_round",
    "tight_gaussian_epsilon",
    "tight_laplace_round",
]


def tight_gaussian_mu(*, sigma: float, setting: FLSetting) -> float:
    """``mu = 2 gamma / (sigma sqrt(m))``: the adversary view's sensitivity over
    noise std (``1 / setting.noise_multiplier(sigma)``).

    Raises:
        InvalidArgumentError: sigma <= 0.
    """
    setting = _check_setting(setting)
    return 1.0 / setting.noise_multiplier(sigma)


def tight_gaussian_delta(
    epsilon: float | np.ndarray, *, sigma: float, setting: FLSetting
) -> float | np.ndarray:
    """Per-round ``delta(eps) = p * delta_G(eps_t; mu)``,
    ``eps_t = log(1 + (e^eps - 1)/p)``.

    Args:
        epsilon: per-round eps >= 0 (scalar or array).
        sigma: per-coordinate noise std of each client's decoded update, > 0.
        setting: the FL setting.

    Returns:
        delta in [0, p] (float for scalar input).

    Raises:
        InvalidArgumentError: eps < 0, sigma <= 0.
    """
    setting = _check_setting(setting)
    eps, scalar = _v.epsilons("epsilon", epsilon)
    mu = tight_gaussian_mu(sigma=sigma, setting=setting)
    p = setting.sampling_probability
    d = np.exp(math.log(p) + gaussian_log_delta(base_epsilon(eps, p), mu))
    return float(d) if scalar else d


def tight_gaussian_round(eps_tilde: float, *, sigma: float, setting: FLSetting) -> RoundGuarantee:
    """``(eps, delta)`` of one round from the base ``eps_t`` (as in the paper's
    Theorem, for comparison): ``eps = log(1 + p (e^eps_t - 1))``,
    ``delta = p delta_G(eps_t; mu)``.

    Args:
        eps_tilde: the base mechanism's ``eps_t`` > 0.
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        setting: the FL setting.

    Returns:
        The round's :class:`RoundGuarantee` (``eps_tilde`` set).

    Raises:
        InvalidArgumentError: eps_t <= 0, sigma <= 0.
    """
    setting = _check_setting(setting)
    et = _v.positive("eps_tilde", eps_tilde)
    mu = tight_gaussian_mu(sigma=sigma, setting=setting)
    p = setting.sampling_probability
    d = math.exp(math.log(p) + float(gaussian_log_delta(et, mu)))
    return RoundGuarantee(float(amplified_epsilon(et, p)), d, et)


def tight_gaussian_epsilon(delta: float, *, sigma: float, setting: FLSetting) -> float:
    """Smallest per-round eps with tight delta <= ``delta`` (``0`` if
    ``delta >= p delta_G(0)``; ``inf`` if none below the cap).

    Args:
        delta: the round's delta in (0, 1).
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        setting: the FL setting.

    Returns:
        The round's eps >= 0, or ``math.inf``.

    Raises:
        InvalidArgumentError: delta outside (0, 1), sigma <= 0.
    """
    setting = _check_setting(setting)
    _v.positive("sigma", sigma)
    return epsilon_for_delta(
        lambda e: tight_gaussian_delta(e, sigma=sigma, setting=setting), delta
    )


def tight_laplace_round(*, scale: float, setting: FLSetting, dimension: int) -> RoundGuarantee:
    """Pure DP of one CEPAM-Laplace round under whole-update l2 clipping.

    Any two clipped updates in R^m differ by at most ``2 gamma sqrt(m)`` in
    l1, so each decoded update (Laplace scale ``b`` per coordinate) is
    ``eps_t = 2 gamma sqrt(m) / b``-DP whatever was sampled; the argument of
    this module's docstring with ``delta = 0`` amplifies it to
    ``eps = log(1 + p (e^eps_t - 1))``. Holds in every threat model.

    Args:
        scale: Laplace scale ``b`` > 0.
        setting: the FL setting (uses clip, tau, ``|D|``).
        dimension: number ``m`` of coordinates of the update (>= 1).

    Returns:
        The round's :class:`RoundGuarantee` with ``delta = 0``.

    Raises:
        InvalidArgumentError: scale <= 0, dimension < 1.

    >>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
    >>> round(tight_laplace_round(scale=10.0, setting=s, dimension=1).epsilon, 4)
    0.002
    """
    setting = _check_setting(setting)
    b = _v.positive("scale", scale)
    m = _v.integer("dimension", dimension)
    et = 2.0 * setting.clip * math.sqrt(m) / b
    return RoundGuarantee(float(amplified_epsilon(et, setting.sampling_probability)), 0.0, et)
