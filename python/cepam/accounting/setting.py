"""The federated-learning setting a privacy bound is stated for.

CEPAM (see the paper, Ling et al., Section V and Theorem "CEPAM-Gaussian") runs
rounds in which each of ``K`` clients takes ``tau`` local single-sample SGD
steps on indices drawn uniformly *with replacement* from its ``|D|`` samples,
clips its whole update to l2 norm ``gamma`` and sends it through LRSUQ, whose
decoded output is the clipped update plus exactly ``N(0, sigma^2)`` noise per
coordinate; the server averages the ``K`` decoded updates.

Neighbouring datasets differ by *replacing* one sample of one client's dataset
(the substitute-one relation of Balle, Barthe and Gaboardi 2018 that the paper
uses); ``|D|`` stays fixed.

Threat models (who the adversary is and what it sees), all with a trusted
server that keeps the individual decoded updates to itself:

``"aggregate"``
    sees only the released average ``(1/K) sum_k Xhat_k`` (third parties, the
    published final model). Its noise is ``sigma / sqrt(K)`` per coordinate;
    this is the view the paper's Theorem is stated for.
``"client"`` (the default)
    an honest-but-curious participating client, the paper's adversary. It sees
    the average *and* knows its own decoded update (it ran the encoder with the
    shared seed, so it knows its own noise), leaving noise of standard
    deviation ``sigma * sqrt(K - 1) / K`` on the rest. Needs ``K >= 2``.
``"server"``
    anyone who sees one client's decoded update *without holding that
    client's secret* (a relay, storage, an auditor): noise ``sigma`` on that
    client's update alone. Not the paper's model; the local-DP view, for
    comparison. It does not cover the decoding server: whoever holds the
    secret knows the dither and the latent scale and can strip the noise.

One replaced sample moves the victim client's clipped update by at most
``2 gamma`` in l2 (both updates have norm <= gamma), so in every view the
Gaussian part has *noise multiplier* (noise std / l2 sensitivity)
``z = sigma * sqrt(m) / (2 gamma)`` with ``m = K``, ``K - 1`` or ``1``.

>>> s = FLSetting(clip=1.0, clients=30, local_steps=15, dataset_size=1666)
>>> round(s.sampling_probability, 6)
0.008966
>>> round(s.noise_multiplier(0.1), 6)   # client view: 0.1 * sqrt(29) / 2
0.269258
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validation as _v

__all__ = ["FLSetting", "ThreatModel", "THREAT_MODELS", "sampling_probability", "check_setting",
           "hidden_clients"]

ThreatModel = Literal["aggregate", "client", "server"]
THREAT_MODELS: tuple[str, ...] = ("aggregate", "client", "server")


def sampling_probability(*, dataset_size: int, local_steps: int) -> float:
    """Probability ``p = 1 - (1 - 1/|D|)^tau`` that a given sample is drawn at
    least once in ``tau`` uniform draws with replacement from ``|D|`` samples.

    Any number of draws is allowed: with replacement, ``tau`` (local steps
    times the batch size) may exceed ``|D|``.

    Raises :class:`~cepam.errors.InvalidArgumentError` unless both are at least 1.

    >>> round(sampling_probability(dataset_size=1666, local_steps=15), 8)
    0.00896587
    """
    n = _v.integer("dataset_size", dataset_size)
    tau = _v.integer("local_steps", local_steps)
    if n == 1:
        return 1.0
    return float(-np.expm1(tau * np.log1p(-1.0 / n)))


def hidden_clients(clients: object, threat_model: object) -> int:
    """Number ``m`` of clients whose noise an adversary of ``threat_model``
    does not know, when ``clients`` (K) updates are averaged: K, K - 1 or 1
    for ``"aggregate"``, ``"client"`` and ``"server"``.

    Raises:
        InvalidArgumentError: K < 1, an unknown threat model, or
            ``"client"`` with ``K = 1``.
        InvalidTypeError: K is not an integer.
    """
    k = _v.integer("clients", clients)
    if threat_model not in THREAT_MODELS:
        raise InvalidArgumentError(
            f"threat_model must be one of {THREAT_MODELS}, got {threat_model!r}"
        )
    if threat_model == "client" and k < 2:
        raise InvalidArgumentError(
            "threat_model='client' needs clients >= 2 (with one client there is "
            "no other client to protect against); use 'aggregate' or 'server'"
        )
    return {"aggregate": k, "client": k - 1, "server": 1}[threat_model]


@dataclass(frozen=True)
class FLSetting:
    """CEPAM's per-round setting (units as in the paper).

    Attributes:
        clip: l2 clip ``gamma`` of each client's whole update (> 0).
        clients: number ``K`` of clients averaged per round (>= 1).
        local_steps: samples ``tau`` drawn uniformly with replacement per
            round (local steps times the batch size; the paper: single-sample
            steps), ``tau >= 1``; it may exceed ``dataset_size``.
        dataset_size: samples ``|D|`` per client (>= 1).
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``;
            see the module docstring.

    Raises:
        InvalidArgumentError: a value out of range, an unknown
            threat model, or ``"client"`` with ``K = 1``.
        InvalidTypeError: a value of the wrong type.
    """

    clip: float
    clients: int
    local_steps: int
    dataset_size: int
    threat_model: ThreatModel = "client"

    def __post_init__(self) -> None:
        object.__setattr__(self, "clip", _v.positive("clip", self.clip))
        object.__setattr__(self, "clients", _v.integer("clients", self.clients))
        object.__setattr__(self, "local_steps", _v.integer("local_steps", self.local_steps))
        object.__setattr__(self, "dataset_size", _v.integer("dataset_size", self.dataset_size))
        hidden_clients(self.clients, self.threat_model)

    @property
    def sampling_probability(self) -> float:
        """``p = 1 - (1 - 1/|D|)^tau``: chance a given sample is used in a round."""
        return sampling_probability(dataset_size=self.dataset_size, local_steps=self.local_steps)

    @property
    def hidden_clients(self) -> int:
        """Number ``m`` of clients whose noise the adversary does not know."""
        return hidden_clients(self.clients, self.threat_model)

    def noise_multiplier(self, sigma: float) -> float:
        """Noise multiplier ``z = sigma sqrt(m) / (2 gamma)`` of the adversary's
        view (noise std over the l2 sensitivity of one replaced sample under
        whole-update clipping); ``sigma`` is the per-coordinate noise std of
        each client's decoded update (> 0)."""
        sigma = _v.positive("sigma", sigma)
        return sigma * math.sqrt(self.hidden_clients) / (2.0 * self.clip)


def check_setting(setting: object) -> FLSetting:
    """Return ``setting`` if it is an :class:`FLSetting`, else raise
    :class:`~cepam.errors.InvalidTypeError`."""
    if not isinstance(setting, FLSetting):
        raise InvalidTypeError(f"setting must be an FLSetting, got {type(setting).__name__}")
    return setting
