"""The server side: :class:`CepamStrategy`, a wrapper around any Flower strategy.

Each round the wrapper

1. lets the inner strategy sample nodes and build its train messages, then
   gives every node its own RecordDict with the cepam configuration
   (:mod:`.protocol`: mechanism, scale, clip, round, a fresh random message
   number, keys);
2. opens every reply: reads the payload's public header
   (:func:`cepam.inspect`) and checks that its mechanism, scale, clip,
   round, client (the sender's node id) and message number are those
   configured for that node (a client that sends less noise is refused),
   then authenticates and decodes it against the global model
   (``like=``: the payload carries no names or shapes) into the node's
   noisy model, global + clipped update + noise;
3. drops, with a logged reason, every reply that fails any of this (an
   error reply, a missing or foreign payload, a wrong key, a forged or
   malformed payload): it never reaches aggregation and never raises;
4. accounts the round with K = the number of updates actually averaged
   (:mod:`.budget`), and releases it only if the privacy budget allows;
5. hands the noisy models to the inner strategy, each with weight 1 (the
   accountant's average is the plain mean of K updates, so a client cannot
   weigh in more by claiming more examples), in node-id order (so the
   global model does not depend on the order the replies arrived in).

:meth:`start` is Flower's loop with one difference: a round that would
exceed ``max_epsilon`` is not started (or, when drops lowered its K below
the forecast, not released) and the run ends there, returning normally.
"""

from __future__ import annotations

import logging
import math
import os
import secrets as _secrets
import time
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

import cepam
from cepam._checks import check_clip
from cepam.accounting import FLSetting, Ledger
from cepam.errors import InvalidArgumentError, InvalidTypeError, PrivacyBudgetError

from .budget import CLIENT_LEVEL, RECORD_LEVEL, Budget
from .keys import KeyPair, SecretSource, agreed_secret, preshared_lookup
from .protocol import (
    CLIENT_KEY, CONFIG_RECORD, KEYS_AGREED, KEYS_PRESHARED, PAYLOAD_ARRAY, PAYLOAD_STYPE,
    RoundConfig,
)

__all__ = ["CepamStrategy", "METRIC_UPDATES", "METRIC_DROPPED"]

log = logging.getLogger("flwr.cepam")

METRIC_UPDATES = "cepam-updates"
METRIC_DROPPED = "cepam-dropped"
METRIC_PAYLOAD_BYTES = "cepam-payload-bytes"
_FLOWER_DP = (
    "DifferentialPrivacyServerSideFixedClipping",
    "DifferentialPrivacyClientSideFixedClipping",
    "DifferentialPrivacyServerSideAdaptiveClipping",
    "DifferentialPrivacyClientSideAdaptiveClipping",
)
_U64 = 1 << 64


class _Dropped(Exception):
    """Why a reply is left out of the round."""


def _is_flower_dp(strategy: object) -> bool:
    """Is ``strategy`` (a subclass of) one of Flower's DP wrappers?"""
    return any(c.__name__ in _FLOWER_DP for c in type(strategy).__mro__)


class CepamStrategy(Strategy):
    """Wraps a Flower strategy so that clients send cepam payloads.

    Args:
        strategy: the strategy that samples nodes and aggregates (FedAvg and
            its family); not one of Flower's DP wrappers.
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``,
            the noise on each decoded update, in the units of the weights.
        clip: l2 bound of each client's whole update.
        setting: the :class:`cepam.accounting.FLSetting` the privacy is
            accounted in (its clip must be ``clip``; its ``clients`` is
            replaced by each round's K).  None: no eps is computed.
        delta: the total delta of the reported eps (Gaussian).
        max_epsilon: stop before a round that would take eps above it
            (needs ``setting``).
        secrets: None for X25519 key agreement (no setup), or a mapping or
            callable from node id to the node's 32-byte pre-shared secret.
        lattice, dim, coder: codec settings sent to the clients (see
            :func:`cepam.encode`).
        bound: ``"tight"`` (default) or ``"paper"``: the per-round bound.
        ledger: a :class:`cepam.accounting.Ledger`, or the path of one
            (opened, or created, at the strategy's ``delta``): each released
            round is recorded there before its result is used, and eps and
            ``max_epsilon`` count everything it holds (earlier runs and
            restarts included).  Needs ``setting``.
        ledger_name: the dataset or federation a ledger path accounts for
            (default: the file's stem).

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings, or a Flower DP
            wrapper as ``strategy``.
    """

    def __init__(self, strategy: Strategy, *, mechanism: cepam.Gaussian | cepam.Laplace,
                 clip: float, setting: FLSetting | None = None, delta: float = 1e-5,
                 max_epsilon: float | None = None, secrets: SecretSource | None = None,
                 lattice: str = "auto", dim: int | None = None, coder: str = "ans",
                 bound: str = "tight", ledger: Any = None,
                 ledger_name: str | None = None) -> None:
        if not isinstance(strategy, Strategy):
            raise InvalidTypeError(f"strategy must be a Flower Strategy, got "
                                   f"{type(strategy).__name__}")
        if isinstance(strategy, CepamStrategy):
            raise InvalidArgumentError("the strategy is already a CepamStrategy")
        if _is_flower_dp(strategy):
            raise InvalidArgumentError(
                f"{type(strategy).__name__} adds Flower's own clipping and noise; cepam clips "
                "and adds noise itself (and its clients send no float32 update to clip): use "
                "one or the other")
        if not isinstance(mechanism, (cepam.Gaussian, cepam.Laplace)):
            raise InvalidTypeError("mechanism must be cepam.Gaussian or cepam.Laplace, got "
                                   f"{type(mechanism).__name__}")
        self.clip = check_clip(clip)
        if math.isinf(self.clip):
            raise InvalidArgumentError("clip is required: the privacy guarantee needs it")
        # Validates lattice, dim and coder against the mechanism.
        cepam.Codec(mechanism, secret=bytes(32), dim=dim, lattice=lattice, clip=self.clip,
                    coder=coder)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
            raise InvalidArgumentError(f"delta must be in (0, 1), got {delta!r}")
        if setting is not None:
            if not isinstance(setting, FLSetting):
                raise InvalidTypeError(f"setting must be a cepam.accounting.FLSetting, got "
                                       f"{type(setting).__name__}")
            if setting.clip != self.clip:
                raise InvalidArgumentError(f"setting.clip ({setting.clip}) must equal clip "
                                           f"({self.clip})")
        if max_epsilon is not None:
            if setting is None:
                raise InvalidArgumentError("max_epsilon needs a setting to account eps in")
            if not (isinstance(max_epsilon, (int, float)) and max_epsilon > 0
                    and math.isfinite(max_epsilon)):
                raise InvalidArgumentError(f"max_epsilon must be positive and finite, got "
                                           f"{max_epsilon!r}")
        if bound not in ("tight", "paper"):
            raise InvalidArgumentError(f"bound must be 'tight' or 'paper', got {bound!r}")
        if ledger is not None and setting is None:
            raise InvalidArgumentError("a ledger needs a setting to account eps in")
        if ledger is not None and not isinstance(ledger, (str, os.PathLike, Ledger)):
            raise InvalidTypeError(f"ledger must be a cepam.accounting.Ledger or a path, got "
                                   f"{type(ledger).__name__}")
        self._ledger_source, self._ledger_name = ledger, ledger_name
        self.ledger: Ledger | None = None
        self.strategy, self.mechanism, self.setting = strategy, mechanism, setting
        self.delta, self.max_epsilon, self.bound = float(delta), max_epsilon, bound
        self.lattice, self.dim, self.coder = lattice, dim, coder
        self._lookup = None if secrets is None else preshared_lookup(secrets)
        self.budget: Budget | None = None
        self.stopped_by_budget = False
        self._started = False
        self._server_pair: KeyPair | None = None
        self._pinned: dict[int, bytes] = {}
        self._sent: dict[int, RoundConfig] = {}
        self._round = 0
        self._array_key = ""
        self._global: dict[str, np.ndarray] = {}
        self._coordinates = 0

    # ------------------------------------------------------------------ helpers

    def _begin_run(self, grid: Grid, initial_arrays: ArrayRecord) -> None:
        self._started = True
        self._server_pair = KeyPair() if self._lookup is None else None
        self._pinned = {}
        self.stopped_by_budget = False
        m = sum(int(np.prod(a.shape)) for a in initial_arrays.values()
                if np.issubdtype(np.dtype(a.dtype), np.floating))
        if self._ledger_source is not None and self.ledger is None:
            self.ledger = (self._ledger_source if isinstance(self._ledger_source, Ledger) else
                           Ledger(self._ledger_source, name=self._ledger_name, delta=self.delta))
        run_id = f"flower-run-{getattr(getattr(grid, 'run', None), 'run_id', 0)}-" \
                 f"{_secrets.token_hex(8)}"
        self.budget = None if self.setting is None else Budget(
            self.mechanism, self.setting, delta=self.delta, bound=self.bound, coordinates=m,
            ledger=self.ledger, run_id=run_id)

    def _set_global(self, arrays: ArrayRecord) -> None:
        self._global = {name: array.numpy() for name, array in arrays.items()}
        floats = [a for a in self._global.values() if np.issubdtype(a.dtype, np.floating)]
        if not floats:
            raise InvalidArgumentError("the model has no float arrays to train")
        self._coordinates = sum(int(a.size) for a in floats)

    def _template(self) -> dict[str, np.ndarray]:
        return {n: a for n, a in self._global.items() if np.issubdtype(a.dtype, np.floating)}

    def _secret_of(self, node: int, content: RecordDict, run_id: int
                   ) -> tuple[bytes, bytes | None]:
        """(secret, the client public key to pin on success); ``run_id``: the
        run id of the message the client answered (its secret is bound to it;
        the server's key pair is fresh for every run in any case)."""
        if self._lookup is not None:
            try:
                return self._lookup(node), None
            except Exception as exc:
                raise _Dropped(f"no pre-shared secret: {exc}") from None
        if CONFIG_RECORD not in content.config_records:
            raise _Dropped("no client public key in the reply")
        public = content[CONFIG_RECORD].get(CLIENT_KEY)
        if not isinstance(public, bytes) or len(public) != 32:
            raise _Dropped("malformed client public key")
        if node in self._pinned and self._pinned[node] != public:
            raise _Dropped("the node's public key changed during the run")
        assert self._server_pair is not None
        try:
            secret = agreed_secret(self._server_pair, public, run_id=run_id,
                                   server_public=self._server_pair.public, client_public=public)
        except InvalidArgumentError as exc:
            raise _Dropped(str(exc)) from None
        return secret, public

    def _enforce(self, info: cepam.PayloadInfo, sent: RoundConfig, node: int) -> None:
        """The payload's public header against what was configured for the node."""
        expected = {
            "mechanism": (type(sent.mechanism).__name__, sent.mechanism.scale),
            "clip": sent.clip, "round": sent.round, "client": node % _U64,
            "message": sent.message, "coordinates": self._coordinates,
        }
        found = {
            "mechanism": (type(info.mechanism).__name__, info.mechanism.scale),
            "clip": info.clip, "round": info.round, "client": info.client,
            "message": info.message, "coordinates": info.coordinates,
        }
        wrong = [k for k in expected if expected[k] != found[k]]
        if wrong:
            raise _Dropped("payload header differs from the configuration in " + ", ".join(
                f"{k} ({found[k]!r}, expected {expected[k]!r})" for k in wrong))

    def _open(self, reply: Message) -> tuple[RecordDict, int]:
        """The reply with its payload decoded into the node's noisy model, and
        the payload's size in bytes.  Raises _Dropped."""
        if reply.has_error():
            raise _Dropped(f"error reply: {reply.error.reason}")
        node = int(reply.metadata.src_node_id)
        sent = self._sent.get(node)
        if sent is None:
            raise _Dropped("no train message was sent to this node this round")
        content = reply.content
        records = list(content.array_records)
        if records != [self._array_key]:
            raise _Dropped(f"expected one ArrayRecord {self._array_key!r}, got {records}")
        record = content[self._array_key]
        if list(record.keys()) != [PAYLOAD_ARRAY]:
            raise _Dropped("the ArrayRecord is not one cepam payload (is cepam_mod installed "
                           "on the client?)")
        array = record[PAYLOAD_ARRAY]
        if array.stype != PAYLOAD_STYPE:
            raise _Dropped(f"payload stype {array.stype!r}, expected {PAYLOAD_STYPE!r}")
        metrics = list(content.metric_records)
        if len(metrics) != 1:
            raise _Dropped(f"expected one MetricRecord, got {len(metrics)}")
        payload = bytes(array.data)
        info = cepam.inspect(payload)
        self._enforce(info, sent, node)
        secret, public = self._secret_of(node, content, int(reply.metadata.run_id))
        update = cepam.decode(payload, secret=secret, like=self._template(), output="numpy",
                              max_coordinates=self._coordinates)
        if public is not None:
            self._pinned.setdefault(node, public)
        noisy = ArrayRecord({
            name: Array(np.asarray(value + update[name], dtype=value.dtype)
                        if name in update else value)
            for name, value in self._global.items()})
        return RecordDict({self._array_key: noisy,
                           metrics[0]: content[metrics[0]]}), len(payload)

    def _equal_weights(self, contents: list[RecordDict]) -> None:
        """Gives every accepted reply weight 1 and the metric keys all share."""
        records = [next(iter(c.metric_records.values())) for c in contents]
        common = set(records[0].keys()).intersection(*(r.keys() for r in records[1:]))
        key = getattr(self.strategy, "weighted_by_key", None)
        for r in records:
            for extra in set(r.keys()) - common:
                del r[extra]
            if key is not None:
                r[key] = 1

    # ------------------------------------------------------------------ Strategy

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The inner strategy's train messages, each with its own cepam configuration."""
        if not self._started:  # called outside start()
            self._begin_run(grid, arrays)
        self._set_global(arrays)
        self._round = int(server_round)
        self._sent = {}
        messages = []
        for msg in self.strategy.configure_train(server_round, arrays, config, grid):
            content = RecordDict(dict(msg.content.items()))
            for record in content.config_records.values():
                if "clipping_norm" in record:
                    raise InvalidArgumentError(
                        "the inner strategy sends Flower's DP clipping configuration; cepam "
                        "clips and adds noise itself: use one or the other")
            array_keys = list(content.array_records)
            if len(array_keys) != 1:
                raise InvalidArgumentError(
                    f"cepam needs exactly one ArrayRecord in train messages, got {array_keys}")
            self._array_key = array_keys[0]
            node = int(msg.metadata.dst_node_id)
            sent = RoundConfig(
                mechanism=self.mechanism, clip=self.clip, lattice=self.lattice, dim=self.dim,
                coder=self.coder, round=self._round, message=_secrets.randbits(63),
                keys=KEYS_PRESHARED if self._lookup is not None else KEYS_AGREED,
                server_key=b"" if self._server_pair is None else self._server_pair.public)
            self._sent[node] = sent
            content[CONFIG_RECORD] = ConfigRecord(sent.to_record())
            messages.append(Message(content=content, dst_node_id=node,
                                    message_type=msg.metadata.message_type,
                                    group_id=msg.metadata.group_id or None))
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Decodes the payloads, drops what fails, accounts, then lets the inner
        strategy aggregate the noisy models."""
        accepted, sizes, dropped = [], [], 0
        for reply in replies:
            try:
                content, size = self._open(reply)
            except Exception as exc:  # any reply: hostile input never stops the server
                dropped += 1
                reason = str(exc) if isinstance(exc, (_Dropped, cepam.CepamError)) else \
                    f"{type(exc).__name__}: {exc}"
                log.warning("cepam: round %d: dropped the reply of node %s: %s", server_round,
                            reply.metadata.src_node_id, reason)
                continue
            reply.content = content
            accepted.append(reply)
            sizes.append(size)
        # Replies arrive in whatever order the nodes finish and the inner strategy sums
        # them in list order: fix the order so the global model does not depend on timing.
        order = sorted(range(len(accepted)), key=lambda i: accepted[i].metadata.src_node_id)
        accepted, sizes = [accepted[i] for i in order], [sizes[i] for i in order]
        k = len(accepted)
        minimum = 1 if self.budget is None else self.budget.minimum_clients()
        if k < minimum:
            log.warning("cepam: round %d: %d update(s) accepted, fewer than %d: nothing is "
                        "released this round", server_round, k, minimum)
            return None, None
        if self.budget is not None and self.max_epsilon is not None:
            eps = self.budget.epsilon(self.budget.rounds + [k])
            if eps > self.max_epsilon:
                log.warning("cepam: round %d: with %d updates it would bring eps to %.4g > "
                            "max_epsilon %.4g: not released; the run stops", server_round, k,
                            eps, self.max_epsilon)
                self.stopped_by_budget = True
                return None, None
        self._equal_weights([r.content for r in accepted])
        try:
            arrays, metrics = self.strategy.aggregate_train(server_round, accepted)
        except Exception as exc:
            log.warning("cepam: round %d: the inner strategy failed to aggregate (%s: %s); "
                        "nothing is released", server_round, type(exc).__name__, exc)
            return None, None
        if arrays is None:
            return None, metrics
        metrics = MetricRecord() if metrics is None else metrics
        metrics[METRIC_UPDATES] = k
        metrics[METRIC_DROPPED] = dropped
        metrics[METRIC_PAYLOAD_BYTES] = float(np.mean(sizes))
        if self.budget is not None:
            try:  # recorded (in the ledger, if any) before the result is used
                metrics[RECORD_LEVEL] = self.budget.release(k, round=server_round,
                                                            max_epsilon=self.max_epsilon)
            except PrivacyBudgetError as exc:  # another server spent the budget meanwhile
                log.warning("cepam: round %d: not released: %s; the run stops", server_round,
                            exc)
                self.stopped_by_budget = True
                return None, None
            client_level = self.budget.client_level_epsilon()
            if client_level is not None:
                metrics[CLIENT_LEVEL] = client_level
            log.info("cepam: round %d: %d updates averaged (%d dropped); record-level eps %.4g "
                     "at delta %g (%s bound, %s view)%s", server_round, k, dropped,
                     metrics[RECORD_LEVEL], self.delta, self.bound, self.setting.threat_model,
                     "" if client_level is None else
                     f"; client-level eps {client_level:.4g} (Flower RDP, no amplification)")
        return arrays, metrics

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """The inner strategy's evaluate messages, unchanged."""
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        """The inner strategy's evaluation aggregate, unchanged."""
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        """Logs the inner strategy's summary and cepam's settings."""
        self.strategy.summary()
        log.info("\t└── cepam: %r, clip %g, lattice %s, coder %s, keys %s, delta %g, "
                 "max_epsilon %s", self.mechanism, self.clip, self.lattice, self.coder,
                 "pre-shared" if self._lookup is not None else "X25519 agreement",
                 self.delta, self.max_epsilon)

    # ------------------------------------------------------------------ the loop

    def _forecast_exceeds(self, sent: int) -> bool:
        """Would the next round, with the K forecast (the nodes sampled, at
        most the last round's K), exceed max_epsilon?"""
        if self.budget is None or self.max_epsilon is None or sent == 0:
            return False
        k = sent if not self.budget.rounds else min(sent, self.budget.rounds[-1])
        k = max(k, self.budget.minimum_clients())
        eps = self.budget.epsilon(self.budget.rounds + [k])
        if eps > self.max_epsilon:
            log.warning("cepam: a round of %d updates would bring eps to %.4g > max_epsilon "
                        "%.4g: the run stops after %d rounds", k, eps, self.max_epsilon,
                        len(self.budget.rounds))
            return True
        return False

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
              ) -> Result:
        """Flower's strategy loop (same arguments and Result), ending early and
        normally when the privacy budget is spent (``stopped_by_budget``)."""
        log.info("Starting CepamStrategy(%s) for %d rounds", type(self.strategy).__name__,
                 num_rounds)
        self.summary()
        self._begin_run(grid, initial_arrays)
        train_config = ConfigRecord() if train_config is None else train_config
        evaluate_config = ConfigRecord() if evaluate_config is None else evaluate_config
        result = Result()
        t_start = time.time()
        if evaluate_fn:
            res = evaluate_fn(0, initial_arrays)
            if res is not None:
                result.evaluate_metrics_serverapp[0] = res
        arrays = initial_arrays
        result.arrays = arrays
        for current_round in range(1, num_rounds + 1):
            log.info("[ROUND %s/%s]", current_round, num_rounds)
            messages = list(self.configure_train(current_round, arrays, train_config, grid))
            if self._forecast_exceeds(len(messages)):
                self.stopped_by_budget = True
                break
            replies = grid.send_and_receive(messages=messages, timeout=timeout)
            agg_arrays, agg_metrics = self.aggregate_train(current_round, replies)
            if self.stopped_by_budget:
                break
            if agg_arrays is not None:
                result.arrays = arrays = agg_arrays
            if agg_metrics is not None:
                result.train_metrics_clientapp[current_round] = agg_metrics
            evaluate_replies = grid.send_and_receive(
                messages=self.configure_evaluate(current_round, arrays, evaluate_config, grid),
                timeout=timeout)
            agg_evaluate = self.aggregate_evaluate(current_round, evaluate_replies)
            if agg_evaluate is not None:
                result.evaluate_metrics_clientapp[current_round] = agg_evaluate
            if evaluate_fn:
                res = evaluate_fn(current_round, arrays)
                if res is not None:
                    result.evaluate_metrics_serverapp[current_round] = res
        log.info("CepamStrategy finished in %.2fs%s", time.time() - t_start,
                 " (privacy budget spent)" if self.stopped_by_budget else "")
        self._started = False
        return result
