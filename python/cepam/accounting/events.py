"""Privacy events: what an accountant composes (in the spirit of
``dp_accounting.DpEvent`` and Opacus' accountant history).

An event is anything with a ``privacy_profile(eps) -> delta`` method giving a
valid upper bound on the hockey-stick divergence ``H_{e^eps}`` for ``eps >= 0``
and every ordered pair of neighbours under a symmetric neighbouring relation
(replace-one here), and a ``describe() -> dict`` for reports.

* :class:`CepamGaussianRound` -- one CEPAM-Gaussian round, with the paper's
  bound (:mod:`.paper`) or the tight one (:mod:`.tight`): the per-round
  functions of each bound are in one table, :data:`BOUND_FUNCTIONS`.
* :class:`CepamLaplaceRound` -- one CEPAM-Laplace round: pure eps-DP
  (:mod:`.tight` or :mod:`.paper`), composed through the randomized-response
  profile that dominates every pure eps-DP mechanism (Kairouz, Oh and
  Viswanath, "The Composition Theorem for Differential Privacy", 2015).
* :class:`GaussianEvent` -- a plain Gaussian mechanism, noise multiplier
  ``z`` = noise std / l2 sensitivity (``dp_accounting.GaussianDpEvent``).
* :class:`ProfileEvent` -- any mechanism given by a privacy profile.

>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
>>> ev = CepamGaussianRound(sigma=0.3, setting=s)
>>> f"{float(ev.privacy_profile(1.0)):.3e}"   # delta of one round at eps = 1
'2.968e-07'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validation as _v
from .analytic_gaussian import gaussian_delta
from .guarantee import RoundGuarantee
from .paper import (
    paper_gaussian_delta, paper_gaussian_epsilon, paper_gaussian_round, paper_laplace_round,
)
from .setting import FLSetting
from .tight import (
    tight_gaussian_delta, tight_gaussian_epsilon, tight_gaussian_round, tight_laplace_round,
)

__all__ = [
    "Bound",
    "BOUNDS",
    "BoundFunctions",
    "BOUND_FUNCTIONS",
    "bound_functions",
    "PrivacyEvent",
    "CepamGaussianRound",
    "CepamLaplaceRound",
    "GaussianEvent",
    "ProfileEvent",
    "LEVELS",
    "relation_and_level",
    "check_one_relation",
]

Bound = Literal["tight", "paper"]


@dataclass(frozen=True)
class BoundFunctions:
    """The per-round functions of one record-level bound (all take
    ``sigma=`` or ``scale=`` and ``setting=``, as :mod:`.tight` and
    :mod:`.paper` define them).

    Attributes:
        gaussian_delta: ``(epsilon, *, sigma, setting) -> delta``, the
            CEPAM-Gaussian round's privacy profile.
        gaussian_epsilon: ``(delta, *, sigma, setting) -> eps``, its
            per-round eps at ``delta``.
        gaussian_round: ``(eps_tilde, *, sigma, setting) ->``
            :class:`~cepam.accounting.RoundGuarantee`, the paper-style pair.
        laplace_round: ``(*, scale, setting, dimension) ->``
            :class:`~cepam.accounting.RoundGuarantee`, CEPAM-Laplace's pure eps.
    """

    gaussian_delta: Callable[..., float | np.ndarray]
    gaussian_epsilon: Callable[..., float]
    gaussian_round: Callable[..., RoundGuarantee]
    laplace_round: Callable[..., RoundGuarantee]


#: The record-level bounds by name: the one place a bound's name selects its
#: functions (events, calibration, ``cepam privacy`` and the Flower budget
#: read it, through :mod:`.analyses`).
BOUND_FUNCTIONS: dict[str, BoundFunctions] = {
    "tight": BoundFunctions(tight_gaussian_delta, tight_gaussian_epsilon,
                            tight_gaussian_round, tight_laplace_round),
    "paper": BoundFunctions(paper_gaussian_delta, paper_gaussian_epsilon,
                            paper_gaussian_round, paper_laplace_round),
}
BOUNDS: tuple[str, ...] = tuple(BOUND_FUNCTIONS)


def bound_functions(bound: object) -> BoundFunctions:
    """The per-round functions of the record-level bound ``bound``.

    Args:
        bound: ``"tight"`` or ``"paper"`` (a key of :data:`BOUND_FUNCTIONS`).

    Returns:
        Its :class:`BoundFunctions`.

    Raises:
        InvalidArgumentError: another value.
    """
    functions = BOUND_FUNCTIONS.get(bound) if isinstance(bound, str) else None
    if functions is None:
        raise InvalidArgumentError(f"bound must be one of {BOUNDS}, got {bound!r}")
    return functions


@runtime_checkable
class PrivacyEvent(Protocol):
    """Protocol of composable events."""

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        """delta upper bound at each eps >= 0 (vectorised)."""

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description."""


@dataclass(frozen=True)
class CepamGaussianRound:
    """One round of CEPAM-Gaussian.

    Attributes:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        setting: the FL setting, threat model included.
        bound: ``"tight"`` (default, :mod:`.tight`) or ``"paper"``
            (:mod:`.paper`, the paper's Theorem).

    Raises:
        InvalidArgumentError, InvalidTypeError: bad values or types.
    """

    sigma: float
    setting: FLSetting
    bound: Bound = "tight"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _v.positive("sigma", self.sigma))
        if not isinstance(self.setting, FLSetting):
            raise InvalidTypeError("setting must be an FLSetting")
        bound_functions(self.bound)

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        fn = bound_functions(self.bound).gaussian_delta
        return np.asarray(fn(np.asarray(epsilon, dtype=float), sigma=self.sigma,
                             setting=self.setting))

    def describe(self) -> dict[str, Any]:
        s = self.setting
        return {"event": "cepam_gaussian_round", "bound": self.bound, "sigma": self.sigma,
                "clip": s.clip, "clients": s.clients, "samples_per_round": s.samples_per_round,
                "dataset_size": s.dataset_size, "threat_model": s.threat_model}


@dataclass(frozen=True)
class CepamLaplaceRound:
    """One round of CEPAM-Laplace: pure ``eps0``-DP per round.

    Attributes:
        scale: Laplace scale ``b`` per coordinate of a decoded update (> 0).
        setting: the FL setting.
        dimension: number ``m`` of coordinates of the update (>= 1); the l1
            sensitivity of an l2-clipped update grows as ``sqrt(m)``.
        bound: ``"tight"`` (default, :func:`.tight_laplace_round`) or
            ``"paper"`` (:func:`.paper_laplace_round` with ``dimension``).

    Its profile is randomized response's, ``delta(eps) = (e^eps0 - e^eps) /
    (1 + e^eps0)`` for ``eps < eps0`` (0 beyond), which bounds every pure
    ``eps0``-DP mechanism.

    Raises:
        InvalidArgumentError, InvalidTypeError: bad values or types.
    """

    scale: float
    setting: FLSetting
    dimension: int
    bound: Bound = "tight"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _v.positive("scale", self.scale))
        object.__setattr__(self, "dimension", _v.integer("dimension", self.dimension))
        if not isinstance(self.setting, FLSetting):
            raise InvalidTypeError("setting must be an FLSetting")
        bound_functions(self.bound)

    @property
    def epsilon(self) -> float:
        """The round's pure-DP epsilon ``eps0``."""
        fn = bound_functions(self.bound).laplace_round
        return fn(scale=self.scale, setting=self.setting, dimension=self.dimension).epsilon

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        eps0 = self.epsilon
        eps = np.asarray(epsilon, dtype=float)
        # (e^eps0 - e^eps) / (1 + e^eps0) = (1 - e^(eps - eps0)) / (1 + e^-eps0)
        delta = -np.expm1(np.minimum(eps - eps0, 0.0)) / (1.0 + np.exp(-eps0))
        return np.where(eps < eps0, delta, 0.0)

    def describe(self) -> dict[str, Any]:
        s = self.setting
        return {"event": "cepam_laplace_round", "bound": self.bound, "scale": self.scale,
                "dimension": self.dimension, "clip": s.clip, "clients": s.clients,
                "samples_per_round": s.samples_per_round, "dataset_size": s.dataset_size,
                "threat_model": s.threat_model}


@dataclass(frozen=True)
class GaussianEvent:
    """A Gaussian mechanism with noise multiplier ``z`` (noise std over l2
    sensitivity), as ``dp_accounting.GaussianDpEvent``.

    Args:
        noise_multiplier: ``z`` > 0, the noise's std over the l2 sensitivity.

    Raises:
        InvalidArgumentError: z <= 0.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier",
                           _v.positive("noise_multiplier", self.noise_multiplier))

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        return np.asarray(gaussian_delta(np.asarray(epsilon, dtype=float),
                                         mu=1.0 / self.noise_multiplier))

    def describe(self) -> dict[str, Any]:
        return {"event": "gaussian", "noise_multiplier": self.noise_multiplier}


@dataclass(frozen=True)
class ProfileEvent:
    """A mechanism known only through a privacy profile.

    Attributes:
        profile: vectorised ``eps -> delta`` (see the module docstring).
        name: label used in :meth:`describe`.

    Raises:
        InvalidTypeError: ``profile`` is not callable.
    """

    profile: Callable[[np.ndarray], np.ndarray]
    name: str = field(default="profile")

    def __post_init__(self) -> None:
        if not callable(self.profile):
            raise InvalidTypeError("profile must be callable")

    def privacy_profile(self, epsilon: np.ndarray) -> np.ndarray:
        """``profile(epsilon)``, checked.

        Raises:
            InvalidTypeError: the profile returned something other than real
                numbers (None, say).
            InvalidArgumentError: it returned another shape than
                ``epsilon``'s, a delta outside [0, 1] or NaN, or deltas that
                rise with eps (:func:`~._validation.profile_deltas`).
        """
        eps = np.asarray(epsilon, dtype=float)
        return _v.profile_deltas(self.profile(eps), eps, non_increasing=True)

    def describe(self) -> dict[str, Any]:
        return {"event": "profile", "name": self.name}


#: The level of each event kind (its ``describe()["event"]``): who the
#: neighbouring datasets differ in (cepam.accounting.setting: one sample of
#: one client's data; client_level: one client's whole data).  A
#: GaussianEvent, or a profile of the caller's, is at the level its noise
#: multiplier or profile was computed for, which it does not record.
LEVELS = {"cepam_gaussian_round": "sample level", "cepam_laplace_round": "sample level",
          "client_level_round": "client level", "gaussian": "the caller's level",
          "profile": "the caller's level"}


def relation_and_level(event: PrivacyEvent) -> tuple[str | None, str]:
    """The neighbouring relation and the level (:data:`LEVELS`) of
    ``event``; the relation None for an event at the caller's level that
    names none (a GaussianEvent: the caller's noise multiplier, for the
    caller's relation), "replace-one" for another that names none."""
    described = event.describe()
    level = LEVELS.get(described.get("event"), LEVELS["gaussian"])
    return (described.get("relation", None if level == LEVELS["gaussian"] else "replace-one"),
            level)


def check_one_relation(events: Iterable[PrivacyEvent], *, what: str = "an accountant") -> None:
    """Raises InvalidArgumentError unless ``events`` compose under one
    neighbouring relation and at one level (sample or client; an event at
    the caller's level goes with either, and with any relation where it
    names none): the eps of a composition that
    mixes them is neither relation's nor level's (a client-level round
    composed with sample-level ones read 3.1 where the client-level eps was
    50).  Threat models may mix: a composition holds against the weakest
    view its events name.  ``what``: the composition, for the message."""
    kinds = [relation_and_level(e) for e in events]
    relations = {relation for relation, _ in kinds} - {None}
    if len(relations) > 1:
        raise InvalidArgumentError(
            f"{what} accounts one neighbouring relation, and this would mix "
            f"{' and '.join(sorted(relations))} events: compose each relation apart")
    levels = {level for _, level in kinds} - {LEVELS["gaussian"]}
    if len(levels) > 1:
        raise InvalidArgumentError(
            f"{what} accounts one level, and this would mix sample-level and client-level "
            "events (a sum of their eps is neither's): compose each level apart")
