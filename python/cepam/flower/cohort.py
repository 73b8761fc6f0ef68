"""Client sampling, relations and adaptive clipping on the server (a mixin of
:class:`.strategy.CepamStrategy`).

With ``sample_rate=q < 1`` the wrapper samples the cohort itself: the inner
strategy addresses every connected node (``fraction_train=1.0``), the
population N is the declared one (``population=``, required under
add/remove) or else the nodes it addressed, and each node addressed keeps its
train message with probability q
(Poisson sampling, a numpy Generator of the server's, its seed logged), or,
with ``sampling="fixed"``, ``clients`` of them are drawn uniformly without
replacement; the cohort's size is logged each round.  Under
``relation="replace-one"`` (the default) the released update is the plain
mean of the k decoded updates; under ``"add-remove"`` the server adds
"top-up" noise ``N(0, (T - k) sigma^2)`` per coordinate to their sum (``T =
cepam.accounting.cohort_cap(clients=n, sample_rate=q)``, ``n = q N``) and
divides by the fixed ``n`` (DP-FedAvg's fixed-denominator estimator), so the
noise is always T clients' worth and k is not released: each accepted
reply's decoded update ``d_i`` is handed to the inner strategy as ``(k/n) d_i
+ t/n`` (one top-up vector t), whose plain mean is ``(sum d_i + t) / n``.
With ``clip_count_sigma`` each sampled client also reports its
clipped-or-not bit (1 if its update's norm is within the round's clip)
noised by itself, ``b_i + N(0, clip_count_sigma^2)``; the server sums the
bits (adding ``N(0, (T - k) clip_count_sigma^2)`` under add-remove), divides
by n (add-remove) or k (replace-one), and publishes one minus that noised
unclipped fraction as ``cepam-clipped-fraction``; with ``clip_quantile``
the clip follows that quantile of the update norms
(:class:`cepam.clipping.AdaptiveClip`, Andrew et al. 2021), the noise
follows the clip (``sigma_t = (sigma / clip) C_t``), and each round's clip
and sigma travel in its configuration.  Any of these makes the accounting
client-level (:class:`.budget.ClientBudget`: one
:class:`cepam.accounting.ClientLevelRound` per round the server ran, k = 0
included), reported as ``cepam-client-epsilon`` with a log line naming the
relation, the level and the threat model.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid

from cepam.clipping import noised_unclipped_fraction
from cepam.errors import InvalidArgumentError

from .aggregation import (
    METRIC_CLIP, METRIC_CLIPPED_FRACTION, METRIC_DROPPED, METRIC_PAYLOAD_BYTES, METRIC_UPDATES,
)
from .budget import CLIENT_LEVEL, ClientBudget
from .protocol import is_float
from .replies import Opened

__all__ = ["Cohort", "Plan"]

log = logging.getLogger("flwr.cepam")


class Plan:
    """A round of the client-level mode: the nodes addressed (N), the cohort
    drawn, the expected cohort n = q N, the rate q and the round's event."""

    def __init__(self, population: int, cohort: list[int], clients: float, sample_rate: float,
                 event: Any) -> None:
        self.population, self.cohort, self.clients = population, cohort, clients
        self.sample_rate, self.event = sample_rate, event


class Cohort:
    """The cohort drawn and the client-level round released (see the module)."""

    def _sample(self, server_round: int, messages: list[Message], grid: Grid
                ) -> tuple[list[Message], Plan]:
        """The cohort (client-level mode): the N nodes addressed are sampled
        from; Poisson sampling at rate q, or a fixed cohort drawn uniformly,
        with the server's generator; the round's event, whose expected
        cohort n is q times the declared population where there is one (as
        under add-remove), else q N.  Raises InvalidArgumentError (no
        round) for more nodes addressed than the declared population N
        plus one: the accounting's neighbours are N clients and N + 1 (its
        cap T covers a cohort drawn from N + 1), which must both run."""
        assert isinstance(self.budget, ClientBudget)
        messages = sorted(messages, key=lambda m: int(m.metadata.dst_node_id))
        population = len(messages)
        if self.population is not None and population > self.population + 1:
            raise InvalidArgumentError(
                f"{population} nodes addressed, more than the population of {self.population} "
                "declared (population=) and the one client a neighbour adds: the bound on the "
                "cohort's size would not hold")
        if self._samples:
            connected = len(list(grid.get_node_ids()))
            if population < connected:
                log.warning("cepam: round %d: the inner strategy addressed %d of the %d "
                            "connected nodes; the population sampled from is the %d it "
                            "addressed (give it fraction_train=1.0 and min_train_nodes at "
                            "most the nodes connected)", server_round, population, connected,
                            population)
        if self.sampling == "fixed":
            assert self.cohort_size is not None
            size = min(self.cohort_size, population)
            chosen = np.sort(self._cohort_rng.choice(population, size=size, replace=False))
            clients, rate = size, size / population
        else:
            chosen = np.flatnonzero(self._cohort_rng.random(population) < self.sample_rate)
            rate, declared = self.sample_rate, self.population or population
            clients = declared if rate == 1.0 else rate * declared
        cohort = [messages[int(i)] for i in chosen]
        nodes = [int(m.metadata.dst_node_id) for m in cohort]
        # Under add/remove the cohort's size is not released (see the
        # metrics): it goes to the debug log only, as the cohort does.
        cohort_log = log.debug if self.relation == "add-remove" else log.info
        cohort_log("cepam: round %d: a cohort of %d of %d nodes (%s)", server_round, len(cohort),
                   population, self._sampling_text())
        log.debug("cepam: round %d: cohort %s", server_round, nodes)
        event = self.budget.event(clients=clients, sample_rate=rate)
        return cohort, Plan(population, nodes, clients, rate, event)

    def _topup(self, std: float, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Top-up noise N(0, std^2) per coordinate, shaped like ``like``."""
        return {name: self._noise_rng.normal(0.0, std, size=np.shape(a))
                for name, a in like.items()}

    def _aggregate_client_level(self, server_round: int, opened: list[Opened],
                                failures: list[Message]
                                ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The client-level mode (see the module): account the round (k = 0
        included), then release the mean (replace-one) or the sum with top-up
        noise over the fixed n (add-remove), the noised clipped fraction, and
        move the adaptive clip."""
        plan = self._plan
        if plan is None:  # no round: budget spent, or no node addressed
            return None, None
        assert isinstance(self.budget, ClientBudget)
        k, n, add_remove = len(opened), plan.clients, self.relation == "add-remove"
        dropped = len(failures)
        eps = self._release(plan.event, server_round)
        if eps is None:
            return None, None
        metrics = MetricRecord({CLIENT_LEVEL: eps})
        if add_remove:  # (the cohort's size is not released: its counts to the debug log)
            log.debug("cepam: round %d: %d updates accepted (%d dropped) of a cohort of %d",
                      server_round, k, dropped, len(plan.cohort))
            log.info("cepam: round %d: client-level eps %.4g at delta %g (%s; %s)", server_round,
                     eps, self.delta, self._budget_label(), self._sampling_text())
        else:
            log.info("cepam: round %d: %d updates accepted (%d dropped) of a cohort of %d; "
                     "client-level eps %.4g at delta %g (%s; %s)", server_round, k, dropped,
                     len(plan.cohort), eps, self.delta, self._budget_label(),
                     self._sampling_text())
        if k == 0 and not add_remove:
            log.warning("cepam: round %d: no update accepted: nothing is released (the round "
                        "is accounted)", server_round)
            return None, metrics
        # The noise on the sum is topped up to `cap` clients' worth: T under
        # add-remove; under replace-one the cohort drawn (replies dropped are
        # made up for, so the round is the one accounted); divided by n (add-
        # remove: reply d_i -> (k/n) d_i + t/n) or k (replace-one: d_i + t/k).
        if add_remove:
            cap, denominator = int(plan.event.cap), n  # (T of the round accounted)
            if k > cap:
                log.warning("cepam: round %d: %d updates, more than the cap T = %d the noise "
                            "is topped up to: no top-up noise (a rare event the accounting "
                            "covers)", server_round, k, cap)
        else:
            cap, denominator = len(plan.cohort), float(k)
            if k < cap:
                log.info("cepam: round %d: %d of the cohort's %d replies missing: their noise "
                         "is made up for by the server", server_round, cap - k, cap)
        clip, mechanism = self._round_settings()
        if self.clip_count_sigma is not None:
            bbar = self._noised_unclipped(opened, cap=cap, denominator=denominator)
            metrics[METRIC_CLIPPED_FRACTION] = 1.0 - bbar
            metrics[METRIC_CLIP] = clip
            if self._adaptive is not None:
                new = self._adaptive.update(bbar)
                log.info("cepam: round %d: noised clipped fraction %.4g: the clip goes from "
                         "%.6g to %.6g", server_round, 1.0 - bbar, clip, new)
        std = self._topup_std(mechanism.sigma, k=k, cap=cap)
        if k == 0:  # add-remove: the top-up noise alone, so an empty cohort does not show
            log.debug("cepam: round %d: no update accepted: the model moves by the top-up "
                      "noise alone (T = %d clients' worth over n = %g)", server_round, cap, n)
            return self._noise_only(server_round, std / denominator, failures), metrics
        top = None if std == 0.0 else {name: t / denominator for name, t in self._topup(
            std, opened[0].update).items()}
        scale = k / denominator
        accepted = []
        for o in opened:
            o.reply.content = self._noisy_model(o, scale=scale, shift=top)
            accepted.append(o.reply)
        arrays, inner, failed = self._inner_aggregate(server_round, accepted, failures)
        if failed or arrays is None:
            return None, metrics
        if inner is not None and not add_remove:  # (add-remove: below)
            for key, value in inner.items():
                metrics[key] = value
        # Under add-remove the cohort's size is not released, nor the inner
        # strategy's metrics (the clients' own, which no eps covers: their
        # presence and values would tell the cohort, an empty one included).
        if not add_remove:
            metrics[METRIC_UPDATES] = k
            metrics[METRIC_DROPPED] = dropped
        if self.pad == "max" or isinstance(self.pad, int):  # one public size
            metrics[METRIC_PAYLOAD_BYTES] = float(np.mean(self.last_payload_bytes))
        return arrays, metrics

    def _budget_label(self) -> str:
        """The client-level eps's terms, with the view the ledger states it
        against where that is weaker than the run's."""
        label = self._threat_label(self.threat_model)
        return self.budget.label() + ("" if label == self.threat_model else
                                      f"; with the ledger, threat model {label}")

    def _noise_only(self, server_round: int, std: float, failures: list[Message]
                    ) -> ArrayRecord:
        """An empty add/remove round: the round's model with N(0, std^2) added
        to every float array, handed to the inner strategy as one noisy model
        of weight 1 (with the round's failures), as a round with replies
        hands it the k noisy models: a strategy with state (FedAvgM's
        momentum, FedAdam's moments) moves as in any round, so the empty
        cohort does not show in the models it releases later either.  The
        aggregate is finished by :meth:`_finish` (integer and bool arrays,
        and the running statistics under ``buffers="local"``, the
        server's).  Where the inner strategy fails on it (one whose metrics
        aggregation reads the clients' own keys), the noisy model itself is
        released, so that the round still releases a model, as every round
        does."""
        assert self._arrays is not None
        model = {name: array.numpy() for name, array in self._arrays.items()}
        noisy = ArrayRecord()
        for name, value in model.items():
            if is_float(value):
                value = np.asarray(value + self._noise_rng.normal(0.0, std, size=value.shape),
                                   dtype=value.dtype)
            noisy[name] = Array(value)
        key = getattr(self.strategy, "weighted_by_key", None)
        reply = Message(RecordDict({"arrays": noisy,
                                    "metrics": MetricRecord({} if key is None else {key: 1})}),
                        dst_node_id=0, message_type=MessageType.TRAIN)
        arrays, _, failed = self._inner_aggregate(server_round, [reply], failures, sent=model,
                                                  quiet=True)
        if failed or arrays is None:  # (a strategy that reads the clients' own metrics, say)
            log.debug("cepam: round %d: the inner strategy took no empty round: its noisy "
                      "model is released as it is", server_round)
            arrays = noisy  # (what an average of this one model gives)
            self._finish(server_round, arrays, model)
        return arrays

    @staticmethod
    def _topup_std(sigma: float, *, k: int, cap: int) -> float:
        """The std of the top-up noise: ``sigma sqrt(max(cap - k, 0))``."""
        from cepam.accounting import topup_noise_std

        return float(topup_noise_std(sigma=sigma, cohort=k, cap=cap))

    def _noised_unclipped(self, opened: list[Opened], *, cap: int, denominator: float
                          ) -> float:
        """bbar: the sum of the clients' noised bits, topped up with N(0,
        (cap - k) count_sigma^2), over the denominator: add-remove's form
        (cap T, denominator n), which under replace-one (cap the cohort
        drawn, denominator k) is the plain sum / k unless replies are
        missing, whose noise it makes up for."""
        return noised_unclipped_fraction(
            [o.bit for o in opened], relation="add-remove", clients=denominator, cap=cap,
            count_sigma=self.clip_count_sigma, rng=self._noise_rng)
