"""Client-level (user-level) differential privacy: the guarantee for any training loop.

The record-level analysis of :mod:`.tight` and :mod:`.paper` needs the paper's
training procedure (local steps on samples drawn with replacement, nothing
carried across rounds).  This module gives the guarantee that holds for
*every* local training loop (minibatch epochs, Adam, momentum, several
epochs, fine-tuning scripts) once each client's whole update is clipped to l2
norm ``clip`` and sent through CEPAM-Gaussian with noise ``sigma`` per
coordinate:

* **Neighbouring relation:** two federations that differ in *all* the data of
  one client (replace-one-client).  Whatever the loop does with that data,
  the client's clipped update moves by at most ``2 clip`` in l2.
* **Threat models:** those of :mod:`.setting` (a trusted server that keeps
  the individual decoded updates to itself): ``"aggregate"`` (only the
  released average is seen), ``"client"`` (an honest-but-curious client that
  also knows its own noise; the default) and ``"server"`` (one client's
  decoded update, seen without that client's secret).  With ``m = K, K - 1,
  1`` clients' noise unknown to the adversary, one round is the Gaussian
  mechanism with noise multiplier ``z = sigma sqrt(m) / (2 clip)``.
* **Composition:** ``R`` rounds of Gaussian mechanisms compose exactly to one
  Gaussian mechanism with ``mu = sqrt(R) / z`` (Dong, Roth and Su's
  Gaussian DP), whose ``(eps, delta)`` curve is Balle and Wang's analytic
  one (:mod:`.analytic_gaussian`): no discretisation, no slack.
* **No amplification by client sampling** is claimed: which clients a round
  uses is decided by the server, and a server that samples a fixed number
  of clients does not give Poisson sampling's guarantee.

A record (one training example) is part of one client's data, so the
record-level eps of any loop is never larger than this client-level eps.

>>> round(client_epsilon(sigma=1.0, clip=1.0, rounds=10, clients=10, delta=1e-5), 3)
10.67
>>> sigma = calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=10,
...                                clients=10, clip=1.0)
>>> client_epsilon(sigma=sigma, clip=1.0, rounds=10, clients=10, delta=1e-5) <= 1.0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _validation as _v
from .analytic_gaussian import gaussian_epsilon, gaussian_mu
from .events import GaussianEvent
from .setting import ThreatModel, hidden_clients

__all__ = ["ClientLevelRound", "client_noise_multiplier", "client_epsilon",
           "calibrate_client_sigma"]


def client_noise_multiplier(*, sigma: float, clip: float, clients: int,
                            threat_model: ThreatModel = "client") -> float:
    """Noise multiplier ``z = sigma sqrt(m) / (2 clip)`` of one round against
    the replacement of one client's whole data.

    Args:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        clip: l2 clip of each client's whole update (> 0), in the update's units.
        clients: K, the clients whose decoded updates are averaged per round.
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``.

    Raises:
        InvalidArgumentError: a value out of range, an unknown threat model,
            or ``"client"`` with one client.
        InvalidTypeError: a value of the wrong type.
    """
    sigma = _v.positive("sigma", sigma)
    clip = _v.positive("clip", clip)
    return sigma * math.sqrt(hidden_clients(clients, threat_model)) / (2.0 * clip)


def client_epsilon(*, sigma: float, clip: float, rounds: int, clients: int, delta: float,
                   threat_model: ThreatModel = "client") -> float:
    """Client-level eps after ``rounds`` rounds at ``delta`` (exact).

    Args:
        sigma, clip, clients, threat_model: as :func:`client_noise_multiplier`.
        rounds: R >= 1, rounds in which the client's update was released.
        delta: total delta in (0, 1).

    Returns:
        The smallest eps >= 0 such that the R rounds together are
        ``(eps, delta)``-DP for one client's whole data.

    Raises:
        InvalidArgumentError, InvalidTypeError: as :func:`client_noise_multiplier`,
            or ``rounds``/``delta`` out of range.
    """
    z = client_noise_multiplier(sigma=sigma, clip=clip, clients=clients,
                                threat_model=threat_model)
    rounds = _v.integer("rounds", rounds)
    return gaussian_epsilon(delta, mu=math.sqrt(rounds) / z)


def calibrate_client_sigma(*, target_epsilon: float, target_delta: float, rounds: int,
                           clients: int, clip: float,
                           threat_model: ThreatModel = "client") -> float:
    """The smallest sigma whose client-level guarantee after ``rounds`` rounds
    is ``(target_epsilon, target_delta)``: pass it as ``cepam.Gaussian(sigma=...)``.

    The result never gives more than ``target_epsilon`` (it errs high by
    about one part in 10^9).

    Args:
        target_epsilon: total eps > 0.
        target_delta: total delta in (0, 1).
        rounds: R >= 1.
        clients, clip, threat_model: as :func:`client_noise_multiplier`.

    Returns:
        sigma > 0, the per-coordinate noise std, in the update's units.

    Raises:
        InvalidArgumentError, InvalidTypeError: values out of range or of the
            wrong type.
    """
    eps = _v.positive("target_epsilon", target_epsilon)
    delta = _v.probability_open("target_delta", target_delta)
    rounds = _v.integer("rounds", rounds)
    clip = _v.positive("clip", clip)
    m = hidden_clients(clients, threat_model)
    mu = gaussian_mu(eps, delta)
    sigma = math.sqrt(rounds) / mu * 2.0 * clip / math.sqrt(m)
    while client_epsilon(sigma=sigma, clip=clip, rounds=rounds, clients=clients, delta=delta,
                         threat_model=threat_model) > eps:
        sigma *= 1.0 + 1e-9
    return sigma


@dataclass(frozen=True)
class ClientLevelRound:
    """One round of CEPAM-Gaussian for the client-level relation: what a
    :class:`~cepam.accounting.Ledger` or :class:`~cepam.accounting.PLDAccountant`
    records when the local training loop is not the paper's.

    Attributes:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        clip: l2 clip of each client's whole update (> 0).
        clients: K, clients averaged in the round.
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``.

    Raises:
        InvalidArgumentError, InvalidTypeError: bad values or types.
    """

    sigma: float
    clip: float
    clients: int
    threat_model: ThreatModel = "client"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _v.positive("sigma", self.sigma))
        object.__setattr__(self, "clip", _v.positive("clip", self.clip))
        object.__setattr__(self, "clients", _v.integer("clients", self.clients))
        hidden_clients(self.clients, self.threat_model)

    @property
    def noise_multiplier(self) -> float:
        """``z = sigma sqrt(m) / (2 clip)``."""
        return client_noise_multiplier(sigma=self.sigma, clip=self.clip, clients=self.clients,
                                       threat_model=self.threat_model)

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        return GaussianEvent(self.noise_multiplier).privacy_profile(epsilon)

    def describe(self) -> dict[str, Any]:
        return {"event": "client_level_round", "sigma": self.sigma, "clip": self.clip,
                "clients": self.clients, "threat_model": self.threat_model}
