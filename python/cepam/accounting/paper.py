"""The paper's per-round bound for CEPAM-Gaussian and CEPAM-Laplace.

The paper (Ling et al., "Communication-Efficient and Privacy-Adaptable Mechanism
for Federated Learning"), Theorem "CEPAM-Gaussian" (Thm. ``Gaussian_Priv``, proof in
Appendix ``pf_Gaussian_Priv``): for every ``eps_t > 0`` one round is
``(eps, delta)``-DP with ``eps = log(1 + p (e^eps_t - 1))``,
``p = 1 - (1 - 1/|D|)^tau`` and (eq. ``PrivAmpGSRFL``)

    delta = sum_{j=1..tau} Binom(j; tau, 1/|D|) (e^eps_t - 1)/(e^{eps_t/j} - 1)
            * [Phi(a - b_j) - e^{eps_t/j} Phi(-a - b_j)],
    a = tau gamma / (sqrt(K) sigma),  b_j = sqrt(K) eps_t sigma / (2 j tau gamma).

It is Lemma ``subsampledGauss`` (eq. ``PrivAmplGSR``: Balle, Barthe and
Gaboardi 2018, Thm. 10, amplification by sampling with replacement under the
substitute-one relation, plus group privacy, Vadhan 2017) applied with l2
sensitivity ``Delta = 2 tau gamma / K`` and noise ``sigma / sqrt(K)`` on the
average. The bracket is the Gaussian profile of :mod:`.analytic_gaussian` at
``eps_t / j`` with ``mu = Delta / noise = 2 tau gamma / (sigma sqrt K)``.

The bound is valid but loose: whole-update clipping already bounds a sample's
influence by ``2 gamma / K`` however often it is drawn, so multiplying by
``tau`` *and* applying group privacy for ``j`` draws counts the repetition
twice (see :mod:`.tight`). The Lemma's "if and only if" is only an "if".

Here the noise on the adversary's view follows the setting's threat model
(:mod:`.setting`): ``mu = tau / z`` with ``z = sigma sqrt(m) / (2 gamma)``;
``threat_model="aggregate"`` (``m = K``) is the paper's formula verbatim.

Laplace (Thm. ``Laplace_privy``): each decoded update is ``eps``-DP with the
same ``eps(eps_t)`` and ``delta = 0`` provided ``eps_t >= 2 tau gamma / b``
(the paper's l1 sensitivity ``2 tau gamma``). That presumes the clip bounds
the *l1* norm; CEPAM clips the l2 norm, and an l2 ball of radius gamma in R^m
has l1 diameter ``2 gamma sqrt(m)``, so :func:`paper_laplace_round` requires
``dimension`` (``m`` for a statement that holds for cepam's l2 clip; ``1`` for
the paper's own l1 reading).

The paper's setting (``|D| = 1666, tau = 15, K = 30, gamma = 1,
sigma = 0.001``) with ``eps_t = 5.9``:

>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666,
...               threat_model="aggregate")
>>> g = paper_gaussian_round(5.9, sigma=0.001, setting=s)
>>> round(g.epsilon, 2), round(g.delta, 4)
(1.45, 0.0097)

(the paper prints delta = 2.48e-2; its own formula gives 0.0097, for every
sigma <= 0.1: see ``docs/privacy.md``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..errors import InvalidArgumentError
from . import _validation as _v
from ._numeric import amplified_epsilon, base_epsilon, log_expm1
from .analytic_gaussian import gaussian_log_delta
from .guarantee import RoundGuarantee
from .profile import epsilon_for_delta
from .setting import FLSetting, check_setting as _check_setting

__all__ = [
    "paper_gaussian_mu",
    "paper_gaussian_delta",
    "paper_gaussian_round",
    "paper_gaussian_epsilon",
    "paper_laplace_round",
]


def paper_gaussian_mu(*, sigma: float, setting: FLSetting) -> float:
    """``mu = Delta / noise = 2 tau gamma / (sigma sqrt(m))`` of the paper's
    bound (``m`` hidden clients of the threat model; ``m = K`` in the paper).

    Raises:
        InvalidArgumentError: sigma <= 0.
    """
    setting = _check_setting(setting)
    return setting.samples_per_round / setting.noise_multiplier(sigma)


def _log_delta_from_eps_tilde(eps_tilde: np.ndarray, mu: float, tau: int, n: int) -> np.ndarray:
    """log of the paper's delta (uncapped) at base epsilon(s) ``eps_tilde``."""
    et = np.asarray(eps_tilde, dtype=float)
    out = np.full(et.shape, -np.inf)
    log_num = log_expm1(et)
    for j in range(1, tau + 1):
        log_pmf = float(stats.binom.logpmf(j, tau, 1.0 / n))
        if log_pmf == -math.inf:
            continue
        with np.errstate(invalid="ignore"):
            log_group = np.where(et > 0, log_num - log_expm1(et / j), math.log(j))
        out = np.logaddexp(out, log_pmf + log_group + gaussian_log_delta(et / j, mu))
    return out


def paper_gaussian_delta(
    epsilon: float | np.ndarray, *, sigma: float, setting: FLSetting
) -> float | np.ndarray:
    """The paper's per-round delta at per-round ``epsilon`` (the privacy profile
    of Theorem "CEPAM-Gaussian", with ``eps_t`` solved from ``epsilon``).

    Args:
        epsilon: per-round eps >= 0 (scalar or array).
        sigma: per-coordinate noise std of each client's decoded update, > 0.
        setting: the FL setting (clip, clients, tau, ``|D|``, threat model).

    Returns:
        delta, capped at 1 (float for scalar input).

    Raises:
        InvalidArgumentError: eps < 0, sigma <= 0.
    """
    setting = _check_setting(setting)
    eps, scalar = _v.epsilons("epsilon", epsilon)
    mu = paper_gaussian_mu(sigma=sigma, setting=setting)
    p = setting.sampling_probability
    log_d = _log_delta_from_eps_tilde(base_epsilon(eps, p), mu, setting.samples_per_round,
                                      setting.dataset_size)
    d = np.exp(np.minimum(log_d, 0.0))
    return float(d) if scalar else d


def paper_gaussian_round(eps_tilde: float, *, sigma: float, setting: FLSetting) -> RoundGuarantee:
    """The paper's ``(eps, delta)`` for one round, from the base ``eps_t``.

    Args:
        eps_tilde: the paper's ``eps_t`` > 0 (finite).
        sigma: per-coordinate noise std of each client's decoded update, > 0.
        setting: the FL setting.

    Returns:
        ``RoundGuarantee(epsilon, delta, eps_tilde)``; delta capped at 1.

    Raises:
        InvalidArgumentError: eps_t <= 0, sigma <= 0.
    """
    setting = _check_setting(setting)
    et = _v.positive("eps_tilde", eps_tilde)
    mu = paper_gaussian_mu(sigma=sigma, setting=setting)
    p = setting.sampling_probability
    log_d = float(_log_delta_from_eps_tilde(np.asarray(et), mu, setting.samples_per_round,
                                            setting.dataset_size))
    return RoundGuarantee(float(amplified_epsilon(et, p)), math.exp(min(log_d, 0.0)), et)


def paper_gaussian_epsilon(delta: float, *, sigma: float, setting: FLSetting) -> float:
    """Smallest per-round eps whose paper delta is <= ``delta`` (``inf`` if
    none below :data:`~cepam.accounting.profile.EPSILON_CAP`).

    Args:
        delta: the round's delta in (0, 1).
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        setting: the FL setting.

    Returns:
        The round's eps >= 0 by the paper's bound, or ``math.inf``.

    Raises:
        InvalidArgumentError: delta outside (0, 1), sigma <= 0.
    """
    setting = _check_setting(setting)
    _v.positive("sigma", sigma)
    return epsilon_for_delta(
        lambda e: paper_gaussian_delta(e, sigma=sigma, setting=setting), delta
    )


def paper_laplace_round(
    *, scale: float, setting: FLSetting, dimension: int, eps_tilde: float | None = None
) -> RoundGuarantee:
    """The paper's CEPAM-Laplace statement: pure ``eps``-DP per round.

    Args:
        scale: Laplace scale ``b`` > 0 per coordinate of a decoded update.
        setting: the FL setting (uses clip, tau, ``|D|``).
        dimension: required, no default. The number of coordinates ``m`` of
            the update for cepam, which clips the *l2* norm (an l2 ball of
            radius gamma has l1 diameter ``2 gamma sqrt(m)``). ``1``
            reproduces the paper's statement, which assumes an *l1* clip
            and under-reports for cepam's l2 clip whenever ``m > 1``.
        eps_tilde: base epsilon; defaults to the smallest admissible,
            ``2 tau gamma sqrt(dimension) / b``.

    Returns:
        ``RoundGuarantee(epsilon, 0.0, eps_tilde)``.

    Raises:
        InvalidArgumentError: scale <= 0, dimension < 1, or an ``eps_tilde``
            below the condition ``eps_t >= 2 tau gamma sqrt(dimension) / b``.

    >>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
    >>> g = paper_laplace_round(scale=10.0, setting=s, dimension=1)   # the paper's l1 reading
    >>> round(g.eps_tilde, 3), round(g.epsilon, 4), g.delta
    (3.0, 0.158, 0.0)
    >>> g = paper_laplace_round(scale=10.0, setting=s, dimension=10_000)  # cepam's l2 clip
    >>> round(g.eps_tilde, 1), round(g.epsilon, 2)
    (300.0, 295.29)
    """
    setting = _check_setting(setting)
    b = _v.positive("scale", scale)
    d = _v.integer("dimension", dimension)
    threshold = 2.0 * setting.samples_per_round * setting.clip * math.sqrt(d) / b
    if eps_tilde is None:
        et = threshold
    else:
        et = _v.positive("eps_tilde", eps_tilde)
        if et < threshold * (1 - 1e-12):
            raise InvalidArgumentError(
                f"the paper's Laplace condition eps_tilde >= 2 tau gamma sqrt(dimension) / b "
                f"= {threshold:.6g} fails for eps_tilde={et:.6g}"
            )
    return RoundGuarantee(float(amplified_epsilon(et, setting.sampling_probability)), 0.0, et)
