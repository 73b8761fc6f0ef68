"""The privacy spent by a run on Flower, round by round.

Record-level (the paper's promise, :mod:`cepam.accounting`): one training
sample of one client replaced, against the setting's threat model (by
default an honest-but-curious client); each round is one CEPAM round with
``K`` = the number of updates *actually averaged* in it (a dropped or
refused payload lowers K, and so the noise on the average), composed over
the rounds with privacy loss distributions (Gaussian) or added up (Laplace,
pure DP).  Client sampling by Flower is not claimed as amplification.

Client-level, for comparison (Flower's ``RdpAccountant``, when the installed
Flower has it, Gaussian only): one client's whole contribution replaced,
which moves the average of K clipped updates by at most ``2 clip / K``,
against the released average (noise ``sigma / sqrt(K)`` per coordinate):
noise multiplier ``sigma sqrt(K) / (2 clip)``, no sampling amplification,
Renyi-DP composition.  A different and weaker-looking promise: it covers
everything a client contributes, not one of its samples.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import cepam
from cepam.accounting import FLSetting

__all__ = ["Budget", "RECORD_LEVEL", "CLIENT_LEVEL"]

RECORD_LEVEL = "cepam-epsilon"
CLIENT_LEVEL = "flower-rdp-client-epsilon"


class Budget:
    """The rounds released so far and the epsilon they cost.

    Args:
        mechanism: the run's ``cepam.Gaussian`` or ``cepam.Laplace``.
        setting: the FL setting (its ``clients`` is replaced by each round's K).
        delta: the total delta (Gaussian).
        bound: ``"tight"`` or ``"paper"`` (the per-round bound).
        coordinates: number of coordinates of an update (Laplace's l1 bound).
    """

    def __init__(self, mechanism: cepam.Gaussian | cepam.Laplace, setting: FLSetting, *,
                 delta: float, bound: str, coordinates: int) -> None:
        self.mechanism, self.setting, self.delta = mechanism, setting, delta
        self.bound, self.coordinates = bound, coordinates
        self.rounds: list[int] = []  # K of each released round
        self._client_level: Any = None

    def minimum_clients(self) -> int:
        """The smallest K a round needs to be accounted (2 against a curious client)."""
        return 2 if self.setting.threat_model == "client" else 1

    def _events(self, ks: list[int]) -> Any:
        from cepam.accounting import CepamGaussianRound, PLDAccountant

        acct = PLDAccountant()
        for k in ks:
            setting = dataclasses.replace(self.setting, clients=k)
            acct.compose(CepamGaussianRound(sigma=self.mechanism.sigma, setting=setting,
                                            bound=self.bound))
        return acct

    def epsilon(self, ks: list[int] | None = None) -> float:
        """Record-level eps after rounds with these K (default: the released rounds)."""
        ks = self.rounds if ks is None else ks
        if not ks:
            return 0.0
        if any(k < self.minimum_clients() for k in ks):
            return math.inf
        if isinstance(self.mechanism, cepam.Gaussian):
            return float(self._events(ks).get_epsilon(self.delta))
        from cepam.accounting import paper_laplace_round, tight_laplace_round

        total = 0.0
        for k in ks:
            setting = dataclasses.replace(self.setting, clients=k)
            if self.bound == "paper":
                total += paper_laplace_round(scale=self.mechanism.b, setting=setting,
                                             dimension=self.coordinates).epsilon
            else:
                total += tight_laplace_round(scale=self.mechanism.b, setting=setting,
                                             dimension=self.coordinates).epsilon
        return total

    def release(self, k: int) -> float:
        """Records a released round that averaged k updates; returns eps so far."""
        self.rounds.append(int(k))
        self._compose_client_level(int(k))
        return self.epsilon()

    # ------------------------------------------------------------------ client level

    def _compose_client_level(self, k: int) -> None:
        if not isinstance(self.mechanism, cepam.Gaussian):
            return
        try:
            from flwr.serverapp import (
                GaussianPrivacyEvent, NeighboringRelation, PrivacyConfig, SamplingMethod,
            )
            from flwr.serverapp import RdpAccountant
        except (ImportError, AttributeError):  # an older Flower, or no dp-accounting
            return
        population = max(self.rounds)
        try:
            config = None if self._client_level is None else self._client_level.config
            if config is None or config.population_size != population:
                self._client_level = RdpAccountant(PrivacyConfig(
                    target_delta=self.delta, population_size=population,
                    neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                    sampling_method=SamplingMethod.NO_AMPLIFICATION))
                replay = self.rounds
            else:
                replay = [k]
            for kk in replay:
                z = self.mechanism.sigma * math.sqrt(kk) / (2.0 * self.setting.clip)
                self._client_level.compose(GaussianPrivacyEvent(
                    noise_multiplier=z, sample_size=kk, population_size=population))
        except (ImportError, ValueError, TypeError):  # dp-accounting missing or refused
            self._client_level = None

    def client_level_epsilon(self) -> float | None:
        """Client-level eps from Flower's RdpAccountant at ``delta``, or None
        where it is not available (Laplace, older Flower, no dp-accounting)."""
        if self._client_level is None or not self.rounds:
            return None
        return float(self._client_level.get_epsilon(self.delta))
