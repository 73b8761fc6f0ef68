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

Client-level, side by side (Gaussian only): one client's whole
contribution replaced, which moves the average of K clipped updates by at
most ``2 clip / K`` against the released average (noise ``sigma / sqrt(K)``
per coordinate): a Gaussian mechanism of noise multiplier
``sigma sqrt(m) / (2 clip)`` (m = K, K - 1 or 1 for the threat models
"aggregate", "client", "server"), no sampling amplification, composed over
the rounds.  It comes from :func:`cepam.accounting.client_epsilon` (exact,
numpy and scipy only), with K the smallest of the run's rounds (eps grows
as K shrinks, so this bounds every round); with a ledger, over everything
it holds, as the record-level eps (each recorded round's client-level
counterpart); without scipy a warning says it is missing (never
silently).  A different and weaker-looking promise: it covers everything a
client contributes, not one of its samples.

:class:`ClientBudget` is the accounting of a run with client sampling
(``sample_rate < 1`` or a fixed cohort), ``relation="add-remove"``, or the
clipped-or-not count (adaptive clipping, the clipped-fraction metric):
client-level only, one :class:`cepam.accounting.ClientLevelRound` per round
the server ran (its cohort drawn, whatever the number of replies), with the
expected cohort ``n = q N`` and the sampling rate ``q`` of that round,
composed with :class:`cepam.accounting.PLDAccountant` (or recorded in, and
composed by, the ledger).  The record-level analysis claims no sampling
amplification and does not count the clipped-or-not bits, so no
record-level eps is given there.

Both ask an analysis of :mod:`cepam.accounting` (``"tight"`` or
``"paper"`` for :class:`Budget`, ``"client"`` for :class:`ClientBudget`,
from :func:`cepam.accounting.create_analysis`) for each round's event, for
eps, and for what eps is.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

import cepam
from cepam.accounting import FLSetting

__all__ = ["Budget", "ClientBudget", "RECORD_LEVEL", "CLIENT_LEVEL"]

log = logging.getLogger("flwr.cepam")

RECORD_LEVEL = "cepam-epsilon"
CLIENT_LEVEL = "cepam-client-epsilon"


class Budget:
    """The rounds released so far and the epsilon they cost.

    Args:
        mechanism: the run's ``cepam.Gaussian`` or ``cepam.Laplace``.
        setting: the FL setting (its ``clients`` is replaced by each round's K).
        delta: the total delta (Gaussian).
        bound: ``"tight"`` or ``"paper"`` (the per-round bound: the
            record-level analysis of :func:`cepam.accounting.create_analysis`).
        coordinates: number of coordinates of an update (Laplace's l1 bound).
    """

    def __init__(self, mechanism: cepam.Gaussian | cepam.Laplace, setting: FLSetting, *,
                 delta: float, bound: str, coordinates: int = 0, ledger: Any = None,
                 run_id: str = "") -> None:
        self.mechanism, self.setting, self.delta = mechanism, setting, delta
        self.bound, self.coordinates = bound, coordinates
        self.ledger, self.run_id = ledger, run_id
        self.rounds: list[int] = []  # K of each released round
        self._warned = False
        self._analysis: Any = None

    @property
    def analysis(self) -> Any:
        """The record-level :class:`cepam.accounting.Analysis` of ``bound``
        (built on first use: the accounting needs scipy)."""
        if self._analysis is None:
            from cepam.accounting import create_analysis

            self._analysis = create_analysis(self.bound, setting=self.setting)
        return self._analysis

    def event(self, k: int) -> Any:
        """The privacy event of one round that averaged k updates."""
        return self.analysis.round_event(self.mechanism, clients=k, dimension=self.coordinates)

    def minimum_clients(self) -> int:
        """The smallest K a round needs to be accounted (2 against a curious client)."""
        return 2 if self.setting.threat_model == "client" else 1

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
        return self.analysis.epsilon([(self.event(k), 1) for k in ks], delta=self.delta)

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
        return self.epsilon()

    # ------------------------------------------------------------------ client level

    def client_level_epsilon(self) -> float | None:
        """Client-level eps at ``delta`` (see the module), or None for Laplace
        and, with a warning, where no client-level accountant is installed."""
        from cepam.accounting import ClientLevel

        if not self.rounds or not ClientLevel.covers(self.mechanism):
            return None
        try:
            if self.ledger is not None:
                return self._ledger_client_level_epsilon()
            return float(_client_epsilon()(
                sigma=self.mechanism.sigma, clip=self.setting.clip, rounds=len(self.rounds),
                clients=min(self.rounds), delta=self.delta,
                threat_model=self.setting.threat_model))
        except ImportError:  # cepam.accounting needs scipy
            if not self._warned:
                self._warned = True
                log.warning("cepam: no client-level eps: cepam.accounting needs scipy "
                            "(pip install \"cepam[flower]\"); only the record-level eps is "
                            "reported")
            return None

    def _ledger_client_level_epsilon(self) -> float | None:
        """Client-level eps of everything the ledger holds, as the
        record-level eps counts it: each record-level Gaussian round's
        client-level counterpart (its sigma, clip and K, against this run's
        threat model, which the eps is stated for: a Gaussian mechanism),
        composed exactly; None, logged once, where the
        ledger holds an event without one (a Laplace round, a bare
        GaussianEvent).

        Raises:
            ImportError: without scipy.
        """
        from cepam.accounting import CepamGaussianRound, ClientLevelRound, gaussian_epsilon

        mu2 = 0.0
        for event, rounds in self.ledger.totals():
            if not isinstance(event, CepamGaussianRound):
                if not self._warned:
                    self._warned = True
                    log.warning("cepam: no client-level eps: the ledger holds %s events, which "
                                "have no client-level counterpart", event.describe()["event"])
                return None
            s = event.setting
            if s.clients < self.minimum_clients():
                return math.inf
            mu2 += rounds * ClientLevelRound(sigma=event.sigma, clip=s.clip, clients=s.clients,
                                             threat_model=self.setting.threat_model).mu ** 2
        return float(gaussian_epsilon(self.delta, mu=math.sqrt(mu2)))


def _client_epsilon() -> Any:
    """cepam.accounting.client_epsilon (which raises ImportError without scipy)."""
    from cepam.accounting import client_epsilon

    return client_epsilon


class ClientBudget:
    """The client-level privacy spent by a run with client sampling, either
    relation, or the clipped-or-not count (see the module).

    Args:
        sigma: the run's first per-coordinate noise std (> 0); with adaptive
            clipping each round's sigma is ``sigma / clip`` times its clip,
            so the round's guarantee, which depends on that ratio only, is
            the one of ``sigma`` and ``clip``.
        clip: the run's first clip (> 0).
        delta: the total delta in (0, 1).
        threat_model: ``"aggregate"``, ``"client"`` or ``"server"``.
        relation: ``"replace-one"`` or ``"add-remove"``.
        sampling: ``"poisson"`` or ``"fixed"``.
        count_sigma: the per-client noise std on the clipped-or-not bit, or
            None (no count released).
        cohort_tail: add/remove: the chance per round allowed of a cohort
            above the cap T (:class:`cepam.accounting.ClientLevelRound`).
        ledger: a :class:`cepam.accounting.Ledger` or None.
        run_id: the run's id in the ledger.
    """

    def __init__(self, *, sigma: float, clip: float, delta: float, threat_model: str,
                 relation: str, sampling: str, count_sigma: float | None = None,
                 cohort_tail: float | None = None, ledger: Any = None,
                 run_id: str = "") -> None:
        self.sigma, self.clip, self.delta = sigma, clip, delta
        self.cohort_tail = cohort_tail  # (None: the accountant's default)
        self.threat_model, self.relation, self.sampling = threat_model, relation, sampling
        self.count_sigma, self.ledger, self.run_id = count_sigma, ledger, run_id
        self.events: list[Any] = []  # one per accounted round
        self._analysis: Any = None

    @property
    def analysis(self) -> Any:
        """The :class:`cepam.accounting.ClientLevel` analysis of the run
        (built on first use: the accounting needs scipy)."""
        if self._analysis is None:
            from cepam.accounting import create_analysis

            tail = {} if self.cohort_tail is None else {"cohort_tail": self.cohort_tail}
            self._analysis = create_analysis(
                "client", clip=self.clip, threat_model=self.threat_model,
                relation=self.relation, sampling=self.sampling, count_sigma=self.count_sigma,
                **tail)
        return self._analysis

    def event(self, *, clients: float, sample_rate: float) -> Any:
        """The privacy event of one round: expected cohort ``clients`` (n =
        q N), sampling rate ``sample_rate`` (q).

        Raises:
            InvalidArgumentError: values the accountant refuses.
        """
        return self.analysis.round_event(cepam.Gaussian(sigma=self.sigma), clients=clients,
                                         sample_rate=sample_rate)

    def epsilon(self, extra: Iterable[Any] = ()) -> float:
        """Client-level eps at ``delta`` of the accounted rounds and the
        events ``extra`` (rounds not run yet), and, with a ledger,
        everything it holds besides."""
        extra = list(extra)
        if self.ledger is not None:  # it holds the accounted rounds already
            return float(self.ledger.epsilon_with(extra, delta=self.delta))
        counts: dict[Any, int] = {}
        for event in self.events + extra:  # identical rounds compose as one self-composition
            counts[event] = counts.get(event, 0) + 1
        return self.analysis.epsilon(list(counts.items()), delta=self.delta)

    def release(self, event: Any, *, round: int, max_epsilon: float | None = None) -> float:
        """Accounts a round (in the ledger first, if any: durably, before the
        round's result is used); returns eps so far.

        Raises:
            PrivacyBudgetError: (with a ledger) the round would take what the
                ledger holds above ``max_epsilon``; nothing is recorded.
        """
        if self.ledger is not None:
            self.ledger.record(event, run_id=self.run_id, round=int(round),
                               max_epsilon=max_epsilon)
        self.events.append(event)
        return self.epsilon()

    def label(self) -> str:
        """What the eps is: its level, relation and threat model, and the
        count's noise (for log lines; the analysis' one line)."""
        return self.analysis.describe()
