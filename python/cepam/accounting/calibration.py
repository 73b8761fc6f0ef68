"""Calibration: eps for a given sigma, and sigma for a target (eps, delta).

Both run the PLD accountant (:mod:`.accountant`) on ``rounds`` identical
CEPAM-Gaussian rounds (:class:`~.events.CepamGaussianRound`) with the chosen
per-round bound. The total eps decreases as sigma grows (every per-round
profile does), so :func:`calibrate_sigma` brackets it and runs Brent's method on
``log sigma``, returning
a sigma that *meets* the target (at most ``rtol`` above the exact one).

>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
>>> round(epsilon_after_rounds(sigma=0.5, delta=1e-5, rounds=80, setting=s), 2)
0.31
>>> sigma = calibrate_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=80, setting=s)
>>> round(sigma, 3)
0.323
>>> epsilon_after_rounds(sigma=sigma, delta=1e-5, rounds=80, setting=s) <= 1.0
True
"""

from __future__ import annotations

import math

from scipy import optimize

from ..errors import InvalidArgumentError
from ..mechanisms import Gaussian
from . import _validation as _v
from .accountant import DEFAULT_DISCRETIZATION, PLDAccountant
from .analyses import RecordLevel, _record_analysis
from .events import Bound
from .setting import SIGMA_RANGE, FLSetting

__all__ = [
    "epsilon_after_rounds",
    "delta_after_rounds",
    "calibrate_sigma",
    "SIGMA_RANGE",
]

def _accountant(sigma: float, rounds: int, analysis: RecordLevel,
                discretization: float | None, *, coarsen: bool = False) -> PLDAccountant:
    acct = PLDAccountant(discretization=discretization, coarsen=coarsen)
    event = analysis.round_event(Gaussian(sigma=sigma), clients=analysis.setting.clients)
    return acct.compose(event, rounds)


def epsilon_after_rounds(*, sigma: float, delta: float, rounds: int, setting: FLSetting,
                         bound: Bound = "tight", discretization: float | None = None) -> float:
    """Total eps after ``rounds`` CEPAM-Gaussian rounds at total ``delta``.

    Args:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        delta: total delta in (0, 1).
        rounds: number of rounds R >= 1.
        setting: the FL setting (threat model included).
        bound: per-round bound, ``"tight"`` or ``"paper"``.
        discretization: PLD grid step, honoured exactly (default None:
            the accountant chooses; see :class:`~.accountant.PLDAccountant`).

    Returns:
        eps >= 0, or ``math.inf`` if no finite eps is certified (delta below
        the mass of unbounded loss, e.g. below the chance that a sample is
        used at all when sigma is negligible).

    Raises:
        InvalidArgumentError: an argument out of range.
        InvalidTypeError: an argument of the wrong type.
    """
    _v.probability_open("delta", delta)
    rounds = _v.integer("rounds", rounds)
    analysis = _record_analysis(bound, setting)
    return _accountant(sigma, rounds, analysis, discretization).get_epsilon(delta)


def delta_after_rounds(*, sigma: float, epsilon: float, rounds: int, setting: FLSetting,
                       bound: Bound = "tight", discretization: float | None = None) -> float:
    """Total delta after ``rounds`` rounds at total ``epsilon`` (>= 0).

    Args:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        epsilon: total eps >= 0.
        rounds: number of rounds R >= 1.
        setting: the FL setting (threat model included).
        bound: per-round bound, ``"tight"`` or ``"paper"``.
        discretization: PLD grid step, honoured exactly (default None: the
            accountant chooses; see :class:`~.accountant.PLDAccountant`).

    Returns:
        The total delta in [0, 1] (an upper bound).

    Raises:
        InvalidArgumentError: an argument out of range.
        InvalidTypeError: an argument of the wrong type.
    """
    eps = _v.nonnegative("epsilon", epsilon)
    rounds = _v.integer("rounds", rounds)
    analysis = _record_analysis(bound, setting)
    return _accountant(sigma, rounds, analysis, discretization).get_delta(eps)


def calibrate_sigma(*, target_epsilon: float, target_delta: float, rounds: int,
                    setting: FLSetting, bound: Bound = "tight", rtol: float = 1e-4,
                    discretization: float | None = None) -> float:
    """Smallest sigma (to relative ``rtol``) whose total guarantee after
    ``rounds`` rounds is ``(target_epsilon, target_delta)``.

    Args:
        target_epsilon: total eps > 0.
        target_delta: total delta in (0, 1).
        rounds: R >= 1.
        setting: the FL setting.
        bound: ``"tight"`` (default) or ``"paper"``.
        rtol: relative precision of sigma, in [1e-12, 0.5]; the result errs high.
        discretization: PLD grid step, honoured exactly (see
            :class:`~.accountant.PLDAccountant`: a step too fine for some
            sigma the search visits raises). Default: the accountant's, or
            ``target_epsilon / 100`` if finer, coarsened where sigma is tiny.
            Below a target of 0.01 that finer grid is not the readers'
            default: read the sigma back with ``discretization=
            target_epsilon / 100`` (the default grid of
            :func:`epsilon_after_rounds`, the ledger and the accountant reads
            about 1 % above the target there: 0.005057 for 0.005).

    Returns:
        sigma > 0 (per-coordinate noise std of each client's decoded update).

    Raises:
        InvalidArgumentError: arguments out of range; a target that every
            sigma meets (delta at or above what subsampling alone gives: the
            chance ``1 - (1 - p)^R`` that a sample is used at all, for the
            tight bound), or one no sigma in :data:`SIGMA_RANGE` meets.
    """
    eps_t = _v.positive("target_epsilon", target_epsilon)
    delta_t = _v.probability_open("target_delta", target_delta)
    rounds = _v.integer("rounds", rounds)
    rtol = _v.positive("rtol", rtol)
    if not 1e-12 <= rtol <= 0.5:
        raise InvalidArgumentError(f"rtol must be in [1e-12, 0.5], got {rtol!r}")
    if not isinstance(setting, FLSetting):
        from ..errors import InvalidTypeError

        raise InvalidTypeError("setting must be an FLSetting")
    analysis = _record_analysis(bound, setting)
    p = setting.sampling_probability
    used = -math.expm1(rounds * math.log1p(-p)) if p < 1 else 1.0
    if analysis.delta_at_most_sampling and delta_t >= used:
        raise InvalidArgumentError(
            f"target_delta={delta_t:g} is at least the probability {used:.4g} that a given "
            f"sample is used at all in {rounds} round(s): subsampling alone meets it, so "
            "every sigma does; ask for a smaller delta"
        )

    auto = discretization is None
    if auto:  # resolve eps well below the target; coarser where sigma is tiny
        discretization = min(DEFAULT_DISCRETIZATION, eps_t / 100.0)
    cache: dict[float, float] = {}

    def eps_of(sigma: float) -> float:
        if sigma not in cache:
            cache[sigma] = _accountant(sigma, rounds, analysis, discretization,
                                       coarsen=auto).get_epsilon(delta_t)
        return cache[sigma]

    s_min, s_max = (r * setting.clip for r in SIGMA_RANGE)
    # Bracket [lo, hi] with eps(lo) > target >= eps(hi), by factors of 8.
    hi = setting.clip
    if eps_of(hi) <= eps_t:
        lo = hi
        while eps_of(lo) <= eps_t:
            hi = lo
            lo /= 8.0
            if lo < s_min:
                raise InvalidArgumentError(
                    f"(eps={eps_t:g}, delta={delta_t:g}) after {rounds} round(s) holds for every "
                    f"sigma >= {s_min:g}: the bound's delta without noise is already below "
                    "target_delta; ask for a smaller delta or epsilon"
                )
    else:
        lo = hi
        while eps_of(hi) > eps_t:
            lo = hi
            hi *= 8.0
            if hi > s_max:
                raise InvalidArgumentError(
                    f"no sigma <= {s_max:g} reaches (eps={eps_t:g}, delta={delta_t:g}) after "
                    f"{rounds} round(s) with the {bound} bound"
                )

    # eps(sigma) is continuous and decreasing: Brent on log-log, then make sure
    # the returned sigma meets the target (it errs high by at most rtol).
    ends = {math.log(lo): lo, math.log(hi): hi}

    def g(log_sigma: float) -> float:
        e = eps_of(ends.get(log_sigma, math.exp(log_sigma)))
        if not math.isfinite(e):
            return 50.0
        return -50.0 if e <= 0 else math.log(e / eps_t)  # (eps 0 meets any target)

    root = optimize.brentq(g, math.log(lo), math.log(hi), xtol=rtol / 4, rtol=1e-15)
    sigma = min(math.exp(root) * (1.0 + rtol / 2), hi)
    while eps_of(sigma) > eps_t:  # pragma: no cover - only if Brent stopped short
        sigma = min(sigma * (1.0 + rtol / 2), hi)
    return sigma
