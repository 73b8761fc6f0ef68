"""Client-level (user-level) differential privacy: the guarantee for any training loop.

The record-level analysis of :mod:`.tight` and :mod:`.paper` needs the paper's
training procedure (local steps on samples drawn with replacement, nothing
carried across rounds).  This module gives the guarantee that holds for
*every* local training loop (minibatch epochs, Adam, momentum, several
epochs, fine-tuning scripts) once each client's whole update is clipped to l2
norm ``clip`` and sent through CEPAM-Gaussian with noise ``sigma`` per
coordinate:

* **Neighbouring relation** (``relation=``): ``"replace-one"`` (the
  default; all the data of one client replaced, its clipped update moves by
  at most ``2 clip``) or ``"add-remove"`` (one client added or removed, the
  convention of published DP-FedAvg numbers: sensitivity ``clip``).
* **Client sampling** (``sample_rate=``, :mod:`.cohort`): each round a
  Poisson cohort of expected size ``clients`` from a population of
  ``clients / sample_rate``; 1.0 (the default) is every client every round.
* **Threat models:** those of :mod:`.setting` (a trusted server that keeps
  the individual decoded updates to itself): ``"aggregate"``, ``"client"``
  (the default: an honest-but-curious client that also knows its own
  noise) and ``"server"`` (one client's decoded update, seen without that
  client's secret).

The noise comes with each client, so the analysis differs from central
DP-FedAvg's (``docs/privacy.md``, "Client sampling"):

* *replace-one*: the server averages the ``k`` decoded updates.  The noise
  level tells ``k``, so whether the client took part is public; that is
  independent of its data, so the round is a mixture, with weight ``q``, of
  Gaussian mechanisms of noise multiplier ``sigma sqrt(m) / (2 clip)`` over
  the law of ``m``, the hidden clients' count (exact for a
  high-dimensional update; no amplification of eps, only of delta).  With
  ``q = 1`` it is one Gaussian mechanism and ``R`` rounds compose exactly
  to ``mu = sqrt(R) / z`` (Gaussian DP; Balle and Wang's curve).
* *add-remove*: a client's presence would show in the noise level, so the
  server tops the sum's noise up to ``T`` clients' worth and divides by the
  fixed ``clients`` (:func:`~.cohort.cohort_cap`): the released sum is the
  Poisson-subsampled Gaussian mechanism of noise multiplier ``sigma sqrt(T
  - c) / clip`` (``c = 1`` against a curious client, 0 for the aggregate),
  whose two directions are composed separately with privacy loss
  distributions (:mod:`.subsampled_gaussian`), as dp_accounting does, plus
  ``beta (1 + e^eps)`` of delta a round for a cohort above ``T``
  (:func:`~.cohort.cohort_tail`); a round whose cohort is empty releases the
  top-up noise alone.  Against ``"server"`` it has no bound
  (one client's decoded update shows that it took part).

With adaptive clipping, each client also reports whether its update was
clipped, with noise ``count_sigma``; the pair is one Gaussian mechanism
whose ``1 / z^2`` is the sum of the two parts' (Andrew et al. 2021).

A record (one training example) is part of one client's data, so the
record-level eps of any loop is never larger than this client-level eps.

>>> round(client_epsilon(sigma=1.0, clip=1.0, rounds=10, clients=10, delta=1e-5), 3)
10.67
>>> sigma = calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=10,
...                                clients=10, clip=1.0)
>>> client_epsilon(sigma=sigma, clip=1.0, rounds=10, clients=10, delta=1e-5) <= 1.0
True
>>> round(client_epsilon(sigma=0.1, clip=1.0, rounds=50, clients=100, delta=1e-5,
...                      sample_rate=0.1, relation="add-remove"), 3)
3.151
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import NoiseWarning
from . import _validation as _v
from .analytic_gaussian import gaussian_delta, gaussian_epsilon, gaussian_log_delta, gaussian_mu
from .cohort import (
    COHORT_TAIL, Relation, Sampling, check_cohort_tail, check_sampling, cohort_cap, cohort_tail,
    hidden_cohort_law,
)
from .setting import SIGMA_RANGE, ThreatModel, hidden_clients
from .subsampled_gaussian import _add, _remove

__all__ = ["ClientLevelRound", "client_noise_multiplier", "client_epsilon",
           "calibrate_client_sigma", "average_noise", "noise_drowns_update"]

#: A ClientLevelRound's clip / sigma above this has no privacy to account
#: (its mu^2 would overflow the float arithmetic), and below its inverse an
#: eps of 0 (mu^2 would underflow).
_MAX_CLIP_OVER_SIGMA = 1e150


def client_noise_multiplier(*, sigma: float, clip: float, clients: int,
                            threat_model: ThreatModel = "client") -> float:
    """Noise multiplier ``z = sigma sqrt(m) / (2 clip)`` of one round against
    the replacement of one client's whole data, every client in every round.

    Args:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        clip: l2 clip of each client's whole update (> 0), in the update's units.
        clients: K, the clients whose decoded updates are averaged per round.
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``.

    Returns:
        ``z`` (> 0), the noise's std over the sensitivity of the round's release.

    Raises:
        InvalidArgumentError: a value out of range, an unknown threat model,
            or ``"client"`` with one client.
        InvalidTypeError: a value of the wrong type.
    """
    sigma = _v.positive("sigma", sigma)
    clip = _v.positive("clip", clip)
    return sigma * math.sqrt(hidden_clients(clients, threat_model)) / (2.0 * clip)


@dataclass(frozen=True)
class ClientLevelRound:
    """One round of CEPAM-Gaussian for the client-level relation: what a
    :class:`~cepam.accounting.Ledger` or :class:`~cepam.accounting.PLDAccountant`
    records when the local training loop is not the paper's (see the module).

    Attributes:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        clip: l2 clip of each client's whole update (> 0).
        clients: clients a round: K with ``sample_rate=1``, else the expected
            cohort ``q N`` (> 0).
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``.
        sample_rate: ``q`` in (0, 1], the chance a client is in a round.
        relation: ``"replace-one"`` (default) or ``"add-remove"``.
        sampling: ``"poisson"`` (default) or ``"fixed"`` (a uniform cohort of
            ``clients``; replace-one only).
        count_sigma: per-client noise std on the clipped-or-not bit that
            adaptive clipping releases in the round (> 0), or None.
        cohort_tail: add/remove: the chance per round allowed of a cohort
            above the cap T (:func:`~.cohort.cohort_cap`), paid in delta as
            ``tail (1 + e^eps)`` a round (default
            :data:`~.cohort.COHORT_TAIL`, 1e-12; a smaller one for large
            eps, many rounds or a small delta: its larger T leaves the
            noise on the released sum as it is, each client's sigma
            smaller).

    Raises:
        InvalidArgumentError, InvalidTypeError: bad values or types, or a
            combination without a bound (:func:`~.cohort.check_sampling`).
    """

    sigma: float
    clip: float
    clients: float
    threat_model: ThreatModel = "client"
    sample_rate: float = 1.0
    relation: Relation = "replace-one"
    sampling: Sampling = "poisson"
    count_sigma: float | None = None
    cohort_tail: float = COHORT_TAIL

    def __post_init__(self) -> None:
        object.__setattr__(self, "cohort_tail", check_cohort_tail(self.cohort_tail))
        if self.cohort_tail != COHORT_TAIL and self.relation != "add-remove":
            raise _v.InvalidArgumentError("cohort_tail bounds the cohort under relation "
                                          "'add-remove' only")
        object.__setattr__(self, "sigma", _v.positive("sigma", self.sigma))
        object.__setattr__(self, "clip", _v.positive("clip", self.clip))
        ratio = self.clip / self.sigma
        if not 1.0 / _MAX_CLIP_OVER_SIGMA <= ratio <= _MAX_CLIP_OVER_SIGMA:
            raise _v.InvalidArgumentError(
                f"sigma = {self.sigma:g} and clip = {self.clip:g}: sigma / clip must be within "
                f"[1/{_MAX_CLIP_OVER_SIGMA:g}, {_MAX_CLIP_OVER_SIGMA:g}] (below, no privacy to "
                "account; above, eps is 0 to float64's precision)")
        n, q = check_sampling(clients=self.clients, sample_rate=self.sample_rate,
                              relation=self.relation, sampling=self.sampling,
                              threat_model=self.threat_model)
        object.__setattr__(self, "clients", int(n) if n == int(n) else n)
        object.__setattr__(self, "sample_rate", q)
        if self.count_sigma is not None:
            count_sigma = _v.positive("count_sigma", self.count_sigma)
            if not 1.0 / _MAX_CLIP_OVER_SIGMA <= count_sigma <= _MAX_CLIP_OVER_SIGMA:
                raise _v.InvalidArgumentError(  # (its mu^2, 1 / count_sigma^2, as sigma's)
                    f"count_sigma = {count_sigma:g} must be within [1/{_MAX_CLIP_OVER_SIGMA:g}, "
                    f"{_MAX_CLIP_OVER_SIGMA:g}] (the bit moves by 1: below, no privacy to "
                    "account; above, its eps is 0 to float64's precision)")
            object.__setattr__(self, "count_sigma", count_sigma)
        if q == 1.0 and self.relation == "replace-one":
            hidden_clients(int(n), self.threat_model)  # "client" needs two clients

    # ------------------------------------------------------------------ the analysis
    @property
    def _sensitivity(self) -> float:
        """How far one client moves the sum, in units of the clip."""
        return 2.0 if self.relation == "replace-one" else 1.0

    @property
    def _count_part(self) -> float:
        """The count's ``mu^2`` with one hidden client (its bit moves by at most 1)."""
        return 0.0 if self.count_sigma is None else 1.0 / self.count_sigma ** 2

    def _mu_one(self) -> float:
        """``mu`` of the round's Gaussian part with one hidden client's noise:
        sensitivity over sigma, the count's part added in quadrature."""
        return math.sqrt((self._sensitivity * self.clip / self.sigma) ** 2 + self._count_part)

    @property
    def cap(self) -> int | None:
        """``T`` (add/remove), the clients' worth of noise on the released sum."""
        if self.relation != "add-remove":
            return None
        return cohort_cap(clients=self.clients, sample_rate=self.sample_rate,
                          tail=self.cohort_tail)

    @property
    def tail(self) -> float:
        """``beta``: per-round chance of a cohort above ``T`` (add/remove), else 0."""
        cap = self.cap
        return 0.0 if cap is None else cohort_tail(clients=self.clients,
                                                   sample_rate=self.sample_rate, cap=cap)

    @property
    def is_gaussian(self) -> bool:
        """Is the round exactly one Gaussian mechanism (every client every
        round, nothing to pay for the cohort)?"""
        return self.sample_rate == 1.0 and self.tail == 0.0

    @property
    def mu(self) -> float:
        """``mu`` of the round's Gaussian part: with every client, the round's
        own; with sampling, that of the mechanism before sampling (add/remove)
        or given the fewest hidden clients of the mixture (replace-one)."""
        if self.relation == "add-remove":
            hidden = self.cap - (1 if self.threat_model == "client" else 0)
            return self._mu_one() / math.sqrt(hidden)
        m, _ = self._law()
        return self._mu_one() / math.sqrt(int(m[0]))

    @property
    def noise_multiplier(self) -> float:
        """``z = 1 / mu``; without sampling or count, ``sigma sqrt(m) / (2 clip)``
        (replace-one) or ``sigma sqrt(T - c) / clip`` (add-remove)."""
        return 1.0 / self.mu

    def _law(self) -> tuple[np.ndarray, np.ndarray]:
        return hidden_cohort_law(clients=self.clients, sample_rate=self.sample_rate,
                                 sampling=self.sampling, threat_model=self.threat_model)

    def _with_tail(self, profile: Callable[[np.ndarray], np.ndarray]
                   ) -> Callable[[np.ndarray], np.ndarray]:
        """``profile + beta (1 + e^eps)``, at most 1: a cohort above T."""
        beta = self.tail
        if beta == 0.0:
            return profile

        def bounded(eps: np.ndarray) -> np.ndarray:
            eps = np.asarray(eps, dtype=float)
            with np.errstate(over="ignore"):
                extra = beta * (1.0 + np.exp(eps))
            return np.minimum(profile(eps) + extra, 1.0)

        return bounded

    def directed_profiles(self) -> tuple[Callable[[np.ndarray], np.ndarray], ...] | None:
        """The remove and add directions' profiles (every real eps) for add/remove
        with sampling, each composed on its own by the accountant; None when the
        round is symmetric."""
        if self.relation != "add-remove" or self.is_gaussian:
            return None
        mu, q = self.mu, self.sample_rate
        return (self._with_tail(lambda e: _remove(e, mu, q)),
                self._with_tail(lambda e: _add(e, mu, q)))

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        """delta(eps) of the round at eps >= 0, valid for both directions."""
        eps = np.asarray(epsilon, dtype=float)
        if self.is_gaussian:
            return np.asarray(gaussian_delta(eps, mu=self.mu))
        if self.relation == "add-remove":
            remove, add = self.directed_profiles()
            return np.maximum(remove(eps), add(eps))
        m, p = self._law()
        mu = self._mu_one() / np.sqrt(m.astype(float))
        flat = eps.reshape(-1)
        total = np.zeros(flat.shape)
        for mu_j, p_j in zip(mu, p):
            total += p_j * np.exp(gaussian_log_delta(flat, mu_j))
        return np.minimum(self.sample_rate * total, 1.0).reshape(eps.shape)

    def describe(self) -> dict[str, Any]:
        return {"event": "client_level_round", "sigma": self.sigma, "clip": self.clip,
                "clients": self.clients, "threat_model": self.threat_model,
                "sample_rate": self.sample_rate, "relation": self.relation,
                "sampling": self.sampling, "count_sigma": self.count_sigma,
                **({} if self.cohort_tail == COHORT_TAIL else {"cohort_tail": self.cohort_tail})}


def client_epsilon(*, sigma: float, clip: float, rounds: int, clients: float, delta: float,
                   threat_model: ThreatModel = "client", sample_rate: float = 1.0,
                   relation: Relation = "replace-one", sampling: Sampling = "poisson",
                   count_sigma: float | None = None,
                   cohort_tail: float = COHORT_TAIL) -> float:
    """Client-level eps after ``rounds`` rounds at ``delta``.

    Exact (Balle and Wang's curve) when every client takes part in every
    round; with sampling, the privacy-loss-distribution bound of
    :class:`ClientLevelRound` (pessimistic discretisation, so never below the
    truth; for add/remove within 0.003 % of dp_accounting's PLD for the
    Poisson-subsampled Gaussian where the cohort's tail is negligible: each
    round also pays ``cohort_tail (1 + e^eps)`` in delta, which at large
    eps, many rounds or a small delta dominates, or leaves no finite eps;
    pass a smaller ``cohort_tail`` there).

    Args:
        sigma, clip, clients, threat_model: as :class:`ClientLevelRound`.
        sample_rate, relation, sampling, count_sigma, cohort_tail: likewise.
        rounds: R >= 1, rounds run (with sampling, every round counts, whether
            the client was sampled or not).
        delta: total delta in (0, 1).

    Returns:
        The smallest eps >= 0 (``math.inf`` if none) such that the R rounds
        together are ``(eps, delta)``-DP for one client's whole data.

    Raises:
        InvalidArgumentError, InvalidTypeError: as :class:`ClientLevelRound`,
            or ``rounds``/``delta`` out of range.
    """
    event = ClientLevelRound(sigma=sigma, clip=clip, clients=clients, threat_model=threat_model,
                             sample_rate=sample_rate, relation=relation, sampling=sampling,
                             count_sigma=count_sigma, cohort_tail=cohort_tail)
    rounds = _v.integer("rounds", rounds)
    delta = _v.probability_open("delta", delta)
    return _epsilon(event, rounds, delta)


def _epsilon(event: ClientLevelRound, rounds: int, delta: float) -> float:
    if event.is_gaussian:
        return gaussian_epsilon(delta, mu=math.sqrt(rounds) * event.mu)
    from .accountant import PLDAccountant

    return PLDAccountant().compose(event, rounds).get_epsilon(delta)


def calibrate_client_sigma(*, target_epsilon: float, target_delta: float, rounds: int,
                           clients: float, clip: float, threat_model: ThreatModel = "client",
                           sample_rate: float = 1.0, relation: Relation = "replace-one",
                           sampling: Sampling = "poisson", count_sigma: float | None = None,
                           coordinates: int | None = None,
                           cohort_tail: float = COHORT_TAIL) -> float:
    """The smallest sigma whose client-level guarantee after ``rounds`` rounds
    is ``(target_epsilon, target_delta)``: pass it as ``cepam.Gaussian(sigma=...)``.

    The result never gives more than ``target_epsilon``: it errs high by about
    one part in 10^9 without sampling, and by at most 0.1% with it. Under
    add/remove at large eps, many rounds or a small delta the cohort's
    tail (``cohort_tail (1 + e^eps)`` of delta a round) can leave no finite
    eps below some sigma, so that the sigma found reads back well under the
    target: pass a smaller ``cohort_tail`` there.

    Args:
        target_epsilon: total eps > 0.
        target_delta: total delta in (0, 1).
        rounds: R >= 1.
        clients, clip, threat_model: as :class:`ClientLevelRound`.
        sample_rate, relation, sampling, count_sigma, cohort_tail: likewise.
        coordinates: the model's size, or None: with it, a
            :class:`~cepam.NoiseWarning` says when the noise on the released
            average exceeds ``clip / sqrt(coordinates)`` per coordinate
            (without it, when it exceeds ``clip``) (:func:`noise_drowns_update`).

    Returns:
        sigma > 0, the per-coordinate noise std, in the update's units.

    Raises:
        InvalidArgumentError, InvalidTypeError: values out of range or of the
            wrong type; no sigma reaches the target (the count's noise alone
            costs more), or only a sigma below
            :data:`~.setting.SIGMA_RANGE`'s ``1e-9`` times the clip would be
            needed (a target_epsilon so large, e.g. 1e200, that no privacy
            is left to calibrate).
    """
    eps = _v.positive("target_epsilon", target_epsilon)
    delta = _v.probability_open("target_delta", target_delta)
    rounds = _v.integer("rounds", rounds)
    sigma = _calibrate(eps, delta, rounds, clients=clients, clip=clip,
                       threat_model=threat_model, sample_rate=sample_rate, relation=relation,
                       sampling=sampling, count_sigma=count_sigma, cohort_tail=cohort_tail)
    drowns = noise_drowns_update(sigma=sigma, clip=clip, clients=clients,
                                 coordinates=coordinates, sample_rate=sample_rate,
                                 relation=relation, cohort_tail=cohort_tail)
    if drowns is not None:
        warnings.warn(NoiseWarning(f"calibrate_client_sigma: sigma = {sigma:.4g}; {drowns}"),
                      stacklevel=2)
    return sigma


def _calibrate(eps: float, delta: float, rounds: int, **round_: Any) -> float:
    """calibrate_client_sigma's search (arguments checked)."""

    def event(sigma: float) -> ClientLevelRound:
        return ClientLevelRound(sigma=sigma, **round_)

    probe = event(round_["clip"])  # (sigma = clip: mu of order 1 whatever the clip)

    def refuse_below_range(sigma: float) -> None:
        """InvalidArgumentError if ``sigma`` is below the search's range."""
        if sigma / probe.clip < SIGMA_RANGE[0]:
            raise _v.InvalidArgumentError(
                f"target_epsilon {eps:g} at delta {delta:g} in {rounds} round(s) needs no "
                f"noise to speak of (sigma below {SIGMA_RANGE[0]:g} times the clip): no "
                "privacy is left to calibrate; ask for a smaller target_epsilon")

    if probe.is_gaussian:  # mu = mu_one(sigma) / sqrt(hidden), solved for sigma
        hidden = (probe._mu_one() / probe.mu) ** 2
        try:
            sens_sq = hidden * gaussian_mu(eps, delta) ** 2 / rounds - probe._count_part
        except OverflowError:  # mu^2 beyond float64 (eps near 1e308): sigma 0
            sens_sq = math.inf
        if sens_sq <= 0:
            raise _v.InvalidArgumentError(
                f"no sigma reaches eps {eps:g} at delta {delta:g} in {rounds} round(s): the "
                "adaptive clip's count noise alone costs more (raise count_sigma)")
        sigma = probe._sensitivity * probe.clip / math.sqrt(sens_sq)
        refuse_below_range(sigma)
        while _epsilon(event(sigma), rounds, delta) > eps:
            sigma *= 1.0 + 1e-9
        return sigma
    lo = hi = probe.sigma
    while _epsilon(event(hi), rounds, delta) > eps:
        lo, hi = hi, hi * 4.0
        if hi > 1e12 * probe.clip:
            if probe.count_sigma is not None:
                why = "the adaptive clip's count noise already costs more (raise count_sigma)"
            elif probe.relation == "add-remove":
                why = (f"under add/remove a round's cohort exceeds the cap T = {probe.cap} with "
                       "a chance that no noise covers and that alone costs more (raise delta)")
            else:
                why = "raise eps or delta"
            raise _v.InvalidArgumentError(
                f"no sigma reaches eps {eps:g} at delta {delta:g} in {rounds} round(s): {why}")
    if lo == hi:
        while _epsilon(event(lo), rounds, delta) <= eps:
            hi, lo = lo, lo / 4.0
            refuse_below_range(lo)
    while hi / lo > 1.0 + 1e-3:
        mid = math.sqrt(lo * hi)
        if _epsilon(event(mid), rounds, delta) > eps:
            lo = mid
        else:
            hi = mid
    return hi


def average_noise(*, sigma: float, clients: float, sample_rate: float = 1.0,
                  relation: Relation = "replace-one",
                  cohort_tail: float = COHORT_TAIL) -> float:
    """Std per coordinate of the noise on the released average update, in the
    update's units: ``sigma / sqrt(n)`` (the mean of ``n`` decoded updates),
    or ``sigma sqrt(T) / n`` under add/remove (``T`` clients' worth over the
    fixed ``n``; :func:`~.cohort.cohort_cap`).

    Args:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        clients: clients a round (the expected cohort with sampling).
        sample_rate, relation, cohort_tail: as :class:`ClientLevelRound`.

    Returns:
        The std per coordinate (> 0), in the update's units.

    Raises:
        InvalidArgumentError, InvalidTypeError: values out of range or of the
            wrong type.
    """
    sigma = _v.positive("sigma", sigma)
    n, q = check_sampling(clients=clients, sample_rate=sample_rate, relation=relation,
                          sampling="poisson", threat_model="aggregate")
    if relation == "add-remove":
        return sigma * math.sqrt(cohort_cap(clients=n, sample_rate=q, tail=cohort_tail)) / n
    return sigma / math.sqrt(n)


def noise_drowns_update(*, sigma: float, clip: float, clients: float,
                        coordinates: int | None = None, sample_rate: float = 1.0,
                        relation: Relation = "replace-one",
                        cohort_tail: float = COHORT_TAIL) -> str | None:
    """Why the noise drowns the update, or None: the noise on the released
    average (:func:`average_noise`) against the scale of an update's
    coordinates, ``clip / sqrt(coordinates)`` (an update of norm ``clip``
    spread evenly), or against ``clip`` itself when the model size is not
    given (then the noise on one coordinate exceeds a whole update's norm,
    whatever the model).

    Args:
        sigma, clip, clients, sample_rate, relation, cohort_tail: as
            :class:`ClientLevelRound`.
        coordinates: the model's size (coordinates of an update), or None.

    Returns:
        A sentence saying by how much the noise exceeds the update's scale
        (for a :class:`~cepam.NoiseWarning`), or None when it does not.

    Raises:
        InvalidArgumentError, InvalidTypeError: values out of range or of the
            wrong type.
    """
    clip = _v.positive("clip", clip)
    noise = average_noise(sigma=sigma, clients=clients, sample_rate=sample_rate,
                          relation=relation, cohort_tail=cohort_tail)
    if coordinates is None:
        scale, what = clip, f"the clip ({clip:.4g}: a whole update's norm)"
    else:
        d = _v.integer("coordinates", coordinates)
        scale = clip / math.sqrt(d)
        what = (f"an update's coordinates ({scale:.4g} = clip {clip:.4g} / sqrt({d} "
                "coordinates))")
    if noise <= scale:
        return None
    times = noise / scale if scale > 0 else math.inf  # (a subnormal clip: scale 0)
    return (f"the noise on the released average, {noise:.4g} per coordinate (sigma "
            f"{sigma:.4g}, {clients:g} clients a round), is {times:.3g} times {what}: the "
            "model will hardly move; more clients a round (or sampling from a larger "
            "population), fewer rounds or a larger eps lower it")
