"""The privacy spent by a run on Flower, round by round.

Record-level (the paper's promise, :mod:`cepam.accounting`): one training
sample of one client replaced, against the setting's threat model (by
default an honest-but-curious client); each round is one CEPAM round with
``K`` = the number of updates *actually averaged* in it (a dropped or
refused payload lowers K, and so the noise on the average), composed over
the rounds with privacy loss distributions (Gaussian) or added up (Laplace,
pure DP).  Client sampling by Flower is not claimed as amplification.

With a :class:`cepam.accounting.Ledger`, every released round is recorded
there (before its result is used) and eps counts everything the ledger
holds: earlier runs and servers on the same data too (Gaussian and Laplace
rounds then compose by privacy loss distributions).

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
                 delta: float, bound: str, coordinates: int, ledger: Any = None,
                 run_id: str = "") -> None:
        self.mechanism, self.setting, self.delta = mechanism, setting, delta
        self.bound, self.coordinates = bound, coordinates
        self.ledger, self.run_id = ledger, run_id
        self.rounds: list[int] = []  # K of each released round
        self._client_level: Any = None

    def event(self, k: int) -> Any:
        """The privacy event of one round that averaged k updates."""
        from cepam.accounting import CepamGaussianRound, CepamLaplaceRound

        setting = dataclasses.replace(self.setting, clients=k)
        if isinstance(self.mechanism, cepam.Gaussian):
            return CepamGaussianRound(sigma=self.mechanism.sigma, setting=setting,
                                      bound=self.bound)
        return CepamLaplaceRound(scale=self.mechanism.b, setting=setting,
                                 dimension=self.coordinates, bound=self.bound)

    def minimum_clients(self) -> int:
        """The smallest K a round needs to be accounted (2 against a curious client)."""
        return 2 if self.setting.threat_model == "client" else 1

    def _events(self, ks: list[int]) -> Any:
        from cepam.accounting import PLDAccountant

        acct = PLDAccountant()
        for k in ks:
            acct.compose(self.event(k))
        return acct

    def epsilon(self, ks: list[int] | None = None) -> float:
        """Record-level eps after rounds with these K (default: the released
        rounds; a list that extends them: the released rounds and more), and,
        with a ledger, everything it holds besides."""
        ks = self.rounds if ks is None else ks
        if any(k < self.minimum_clients() for k in ks):
            return math.inf
        if self.ledger is not None:  # it holds the released rounds already
            return float(self.ledger.epsilon_with([self.event(k) for k in ks[len(self.rounds):]],
                                                  delta=self.delta))
        if not ks:
            return 0.0
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

    def release(self, k: int, *, round: int, max_epsilon: float | None = None) -> float:
        """Records a released round that averaged k updates (in the ledger
        first, if any: durably, before the round's result is used); returns
        eps so far.

        Raises:
            PrivacyBudgetError: (with a ledger) the round would take what the
                ledger holds above ``max_epsilon``; nothing is recorded.
        """
        if self.ledger is not None:
            self.ledger.record(self.event(int(k)), run_id=self.run_id, round=int(round),
                               max_epsilon=max_epsilon)
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
