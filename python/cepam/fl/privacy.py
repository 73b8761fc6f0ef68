"""The "eps so far" column: privacy spent after each round, from :mod:`cepam.accounting`.

* Gaussian methods (``cepam-gaussian``, ``fl-gaussian``, ``fl-gaussian-sdq``):
  :func:`cepam.accounting.epsilon_after_rounds` -- the accountant's tight
  per-round bound (whole-update clipping to gamma, amplification by the
  chance that a sample is drawn at all in the round's tau * B draws with
  replacement from the client's |D| samples), composed over the rounds run so
  far with privacy loss distributions, at the run's ``delta``, against an
  honest-but-curious client (the accountant's default threat model, the
  paper's adversary).  For a non-IID split |D| is the smallest client's.
* Laplace methods (``cepam-laplace``, ``fl-laplace``, ``fl-laplace-sdq``):
  pure DP, ``rounds * eps_round`` with ``eps_round`` from
  :func:`cepam.accounting.tight_laplace_round` (l1 sensitivity
  ``2 gamma sqrt(m)`` of an l2-clipped update of ``m`` coordinates,
  amplified likewise).  ``delta`` is 0.
* ``fl`` and ``fl-sdq`` add no noise: eps is infinite.

The noise of ``fl-gaussian-sdq`` and ``fl-laplace-sdq`` is added before the
quantizer, so SDQ is post-processing and the same guarantees hold.  The
column is NaN when the installed cepam has no :mod:`cepam.accounting`.
The accountant is not cheap (up to about half a second per value), so values
are cached per process: a grid pays once per (setting, noise, rounds).

:func:`epsilon_at` recomputes the column for a finished run's configuration
at another delta (the sweep of the paper's section VI-C reports eps at two
deltas; accuracy depends on sigma only, so one set of runs serves both).
"""

from __future__ import annotations

import importlib
import math
from typing import TYPE_CHECKING, Callable

from ..errors import InvalidArgumentError
from .config import MODEL_PARAMETERS

if TYPE_CHECKING:
    from .config import FLConfig

__all__ = ["epsilon_function", "config_epsilon_function", "epsilon_at", "client_dataset_size",
           "client_level_epsilon", "GAUSSIAN_METHODS", "LAPLACE_METHODS", "ACCOUNTING_VIEW"]

GAUSSIAN_METHODS = ("cepam-gaussian", "fl-gaussian", "fl-gaussian-sdq")
LAPLACE_METHODS = ("cepam-laplace", "fl-laplace", "fl-laplace-sdq")
_NOT_PRIVATE = ("fl", "fl-sdq")

#: What the eps column certifies, for figure and table captions: the
#: accountant's tight per-round bound against its default threat model (an
#: honest-but-curious client, ``FLSetting(threat_model="client")``).
ACCOUNTING_VIEW = "tight bound, curious-client view"

# eps depends on the setting, the noise and the round count only (not on the
# seed or which Gaussian method): computed once per process.
_CACHE: dict[tuple, float] = {}


def _nan(rounds: int) -> float:
    return math.nan


def epsilon_function(*, method: str, sigma: float, b: float = math.nan, delta: float,
                     clip: float, clients: int, samples_per_round: int, dataset_size: int,
                     coordinates: int = 1) -> Callable[[int], float]:
    """A function ``rounds -> eps`` for this setting (NaN where unknown).

    Args:
        method: the method's name.
        sigma, b: Gaussian std and Laplace scale per coordinate.
        delta: the total delta of the Gaussian methods.
        clip, clients: gamma and K.
        samples_per_round: tau * B, the draws with replacement per round.
        dataset_size: |D| of the (smallest) client.
        coordinates: m, the number of coordinates of an update (Laplace).
    """
    if method in _NOT_PRIVATE:
        return lambda rounds: math.inf
    try:
        acc = importlib.import_module("cepam.accounting")
    except ImportError:
        return _nan
    setting = acc.FLSetting(clip=clip, clients=clients, samples_per_round=samples_per_round,
                            dataset_size=dataset_size)
    if method in GAUSSIAN_METHODS:
        key = ("gaussian", sigma, delta, clip, clients, samples_per_round, dataset_size)

        def compute(rounds: int) -> float:
            return float(acc.epsilon_after_rounds(sigma=sigma, delta=delta, rounds=rounds,
                                                  setting=setting))
    elif method in LAPLACE_METHODS:
        key = ("laplace", b, clip, clients, samples_per_round, dataset_size, coordinates)
        per_round = acc.tight_laplace_round(scale=b, setting=setting,
                                            dimension=coordinates).epsilon

        def compute(rounds: int) -> float:
            return rounds * float(per_round)
    else:
        return _nan

    def eps(rounds: int) -> float:
        if rounds <= 0:
            return 0.0
        if (key, rounds) not in _CACHE:
            _CACHE[(key, rounds)] = compute(rounds)
        return _CACHE[(key, rounds)]

    return eps


def config_epsilon_function(config: "FLConfig", *, delta: float, dataset_size: int,
                            coordinates: int = 1) -> Callable[[int], float]:
    """:func:`epsilon_function` for the setting of ``config`` (method, noise,
    clip, K, tau * B) at ``delta``, with the client dataset size |D| and the
    update's number of coordinates given (they are not in the configuration
    of a non-IID run, nor is the model's size)."""
    return epsilon_function(method=config.method, sigma=config.sigma, b=config.b, delta=delta,
                            clip=config.clip, clients=config.clients,
                            samples_per_round=config.samples_per_round,
                            dataset_size=dataset_size, coordinates=coordinates)


def client_dataset_size(config: "FLConfig") -> int:
    """|D| of the accountant for a run of ``config``: the IID share of each
    client (``samples_per_client``, default ``train_size // clients``).

    Raises:
        InvalidArgumentError: a non-IID (Dirichlet) run, whose smallest
            client depends on the split drawn and is not in its configuration.
    """
    if config.alpha is not None:
        raise InvalidArgumentError(
            "eps cannot be recomputed for a non-IID run (alpha set): its smallest client's "
            "dataset size depends on the split drawn and is not recorded")
    if config.samples_per_client is not None:
        return config.samples_per_client
    return config.train_size // config.clients


def client_level_epsilon(config: "FLConfig", *, rounds: int) -> float:
    """Client-level eps after ``rounds`` rounds of a run of ``config`` (at
    ``config.delta`` for the Gaussian methods; pure DP for Laplace): one
    client's whole data replaced, against an honest-but-curious client (the
    view of the eps column), valid for any local training loop since each
    client's whole update is clipped.  No amplification by sampling.

    * Gaussian methods: :func:`cepam.accounting.client_epsilon`.
    * Laplace methods: ``rounds`` times the per-round eps of
      :func:`cepam.accounting.tight_laplace_round` before amplification
      (``2 gamma sqrt(m) / b``, whatever was sampled).
    * ``inf`` for ``fl`` and ``fl-sdq``, 0 for no round, NaN without
      :mod:`cepam.accounting`.

    Raises:
        InvalidArgumentError: ``rounds`` negative.
    """
    if rounds < 0:
        raise InvalidArgumentError(f"rounds must be non-negative, got {rounds}")
    if config.method in _NOT_PRIVATE:
        return math.inf
    if rounds == 0:
        return 0.0
    try:
        acc = importlib.import_module("cepam.accounting")
        if config.method in GAUSSIAN_METHODS:
            return float(acc.client_epsilon(sigma=config.sigma, clip=config.clip, rounds=rounds,
                                            clients=config.clients, delta=config.delta))
        # eps_tilde, the per-round eps before amplification, does not depend on |D|.
        setting = acc.FLSetting(clip=config.clip, clients=config.clients,
                                samples_per_round=config.samples_per_round, dataset_size=1)
        return rounds * float(acc.tight_laplace_round(
            scale=config.b, setting=setting, dimension=MODEL_PARAMETERS[config.model]).eps_tilde)
    except ImportError:  # cepam.accounting needs scipy
        return math.nan


def epsilon_at(config: "FLConfig", *, delta: float, rounds: int) -> float:
    """eps after ``rounds`` rounds of a run of ``config``, at ``delta``
    instead of ``config.delta`` (the run's own eps column otherwise).

    The same accountant as the column (:func:`epsilon_function`): for the
    Gaussian methods the tight bound composed over ``rounds`` at ``delta``;
    the Laplace methods are pure DP (eps does not depend on delta); ``inf``
    for ``fl`` and ``fl-sdq``; NaN without :mod:`cepam.accounting`.

    Raises:
        InvalidArgumentError: ``delta`` not in (0, 1), ``rounds`` negative,
            or a non-IID run (see :func:`client_dataset_size`).
    """
    if not 0.0 < delta < 1.0:
        raise InvalidArgumentError(f"delta must be in (0, 1), got {delta}")
    if rounds < 0:
        raise InvalidArgumentError(f"rounds must be non-negative, got {rounds}")
    coordinates = MODEL_PARAMETERS[config.model] if config.method in LAPLACE_METHODS else 1
    return config_epsilon_function(config, delta=delta, dataset_size=client_dataset_size(config),
                                   coordinates=coordinates)(rounds)
