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

>>> s = FLSetting(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666)
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

from .._checks import check_choice
from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validation as _v

__all__ = ["FLSetting", "ThreatModel", "THREAT_MODELS", "sampling_probability", "check_setting",
           "hidden_clients", "LOCAL_STEPS_RENAMED", "RECORD_LEVEL_LOOP", "SIGMA_RANGE"]

ThreatModel = Literal["aggregate", "client", "server"]
#: The threat models, weakest adversary first: the released aggregate; it and
#: the adversary's own update; one client's decoded update.
THREAT_MODELS: tuple[str, ...] = ("aggregate", "client", "server")

#: Range of sigma, in units of the clip, that the calibrations search
#: (record-level :func:`~.calibration.calibrate_sigma`, client-level
#: :func:`~.client_level.calibrate_client_sigma`): a target that only a
#: sigma below ``1e-9`` clips meets (an eps of order 1e18 and more) has no
#: privacy left to calibrate, and is refused.
SIGMA_RANGE = (1e-9, 1e9)

#: Why ``local_steps`` is refused everywhere it used to be accepted: the one
#: name meant two things that differ by the batch size, and passing optimizer
#: steps where samples are meant under-reports eps (35-fold for 15 steps at
#: batch size 32).
LOCAL_STEPS_RENAMED = (
    "local_steps (--local-steps) no longer exists: it meant two different things. "
    "Samples drawn with replacement per round (optimizer steps x batch size in the paper's "
    "loop) are now samples_per_round: FLSetting(samples_per_round=...), "
    "sampling_probability(samples_per_round=...), `cepam privacy --samples-per-round`. "
    "Optimizer (SGD) steps per round are now sgd_steps: FLConfig(sgd_steps=...), "
    "`cepam fl run --sgd-steps`. Passing optimizer steps where samples are meant "
    "under-reports eps (15 steps at batch size 32 are 480 samples)")

#: The loop a record-level eps holds for, said wherever one is printed (a
#: client-level eps holds for any loop once the whole update is clipped).
RECORD_LEVEL_LOOP = (
    "it holds only for the paper's loop: each round a client trains from the received "
    "global model on samples drawn uniformly with replacement from its own data "
    "(single-sample SGD steps in the paper), nothing carried across rounds")


def sampling_probability(*, dataset_size: int, samples_per_round: int | None = None,
                         **renamed: object) -> float:
    """Probability ``p = 1 - (1 - 1/|D|)^tau`` that a given sample is drawn at
    least once in ``tau`` uniform draws with replacement from ``|D|`` samples.

    Any number of draws is allowed: with replacement, ``tau`` (optimizer
    steps times the batch size) may exceed ``|D|``.

    Args:
        dataset_size: ``|D|``, the client's samples (>= 1).
        samples_per_round: ``tau``, the samples drawn with replacement in a
            round (>= 1); not the number of optimizer steps.

    Returns:
        ``p`` in (0, 1].

    Raises:
        InvalidArgumentError: a value below 1.
        InvalidTypeError: a value that is not an integer, a missing
            ``samples_per_round``, or the old keyword ``local_steps`` (see
            :data:`LOCAL_STEPS_RENAMED`).

    >>> round(sampling_probability(dataset_size=1666, samples_per_round=15), 8)
    0.00896587
    """
    _refuse_renamed("sampling_probability", renamed)
    if samples_per_round is None:
        raise InvalidTypeError("sampling_probability needs samples_per_round=")
    n = _v.integer("dataset_size", dataset_size)
    tau = _v.integer("samples_per_round", samples_per_round)
    if n == 1:
        return 1.0
    return float(-np.expm1(tau * np.log1p(-1.0 / n)))


def _refuse_renamed(where: str, keywords: dict[str, object]) -> None:
    """Raise :class:`~cepam.errors.InvalidTypeError` for any keyword in
    ``keywords`` (those ``where`` does not take), explaining ``local_steps``."""
    if "local_steps" in keywords:
        raise InvalidTypeError(f"{where}: {LOCAL_STEPS_RENAMED}")
    if keywords:
        raise InvalidTypeError(f"{where} got unexpected keyword argument(s) "
                               f"{', '.join(sorted(keywords))}")


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
    check_choice("threat_model", threat_model, THREAT_MODELS)
    if threat_model == "client" and k < 2:
        raise InvalidArgumentError(
            "threat_model='client' needs clients >= 2 (with one client there is "
            "no other client to protect against); use 'aggregate' or 'server'"
        )
    return {"aggregate": k, "client": k - 1, "server": 1}[threat_model]


@dataclass(frozen=True, init=False)
class FLSetting:
    """CEPAM's per-round setting (units as in the paper).

    Attributes:
        clip: l2 clip ``gamma`` of each client's whole update (> 0).
        clients: number ``K`` of clients averaged per round (>= 1).
        samples_per_round: samples ``tau`` each client draws uniformly with
            replacement per round, ``tau >= 1``: optimizer steps times the
            batch size (the paper: single-sample steps, so its steps); it
            may exceed ``dataset_size``.  Not the number of optimizer steps
            (:attr:`cepam.fl.FLConfig.sgd_steps` is that).
        dataset_size: samples ``|D|`` per client (>= 1).
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``;
            see the module docstring.

    Raises:
        InvalidArgumentError: a value out of range, an unknown
            threat model, or ``"client"`` with ``K = 1``.
        InvalidTypeError: a value of the wrong type, a missing value, or
            the old keyword ``local_steps`` (see :data:`LOCAL_STEPS_RENAMED`).
    """

    clip: float
    clients: int
    samples_per_round: int
    dataset_size: int
    threat_model: ThreatModel = "client"

    # Written out (not generated) so that the old keyword local_steps, whose
    # two meanings differ by the batch size, is refused with an explanation.
    def __init__(self, clip: float, clients: int, samples_per_round: int | None = None,
                 dataset_size: int | None = None, threat_model: ThreatModel = "client",
                 **renamed: object) -> None:
        _refuse_renamed("FLSetting", renamed)
        for name, value in (("samples_per_round", samples_per_round),
                            ("dataset_size", dataset_size)):
            if value is None:
                raise InvalidTypeError(f"FLSetting needs {name}=")
        object.__setattr__(self, "clip", _v.positive("clip", clip))
        object.__setattr__(self, "clients", _v.integer("clients", clients))
        object.__setattr__(self, "samples_per_round",
                           _v.integer("samples_per_round", samples_per_round))
        object.__setattr__(self, "dataset_size", _v.integer("dataset_size", dataset_size))
        object.__setattr__(self, "threat_model", threat_model)
        hidden_clients(self.clients, self.threat_model)

    @property
    def sampling_probability(self) -> float:
        """``p = 1 - (1 - 1/|D|)^tau``: chance a given sample is used in a round."""
        return sampling_probability(dataset_size=self.dataset_size,
                                    samples_per_round=self.samples_per_round)

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
