"""The noisy models handed to the inner strategy and its aggregate finished
(a mixin of :class:`.strategy.CepamStrategy`): each accepted reply as its
node's noisy model with weight 1, in node-id order, the dropped ones as
failures; the record-level round released; the aggregate given back in the
dtypes the round sent, with the server's own counters (and, under
``buffers="local"``, running statistics) and every running variance clamped
to at least ``running_var_floor``.

**Running statistics** (``buffers=``, as :func:`cepam.encode`'s): with
``"separate"`` (the default) or ``"joint"`` the clients code the running
statistics of their normalisation layers in the update and the server
aggregates them as any float array; with ``"local"`` (FedBN) they are left
out of every payload: the server aggregates the weights only and keeps its
own statistics (those of the model it started with), each client keeps its
own (:func:`.mod.cepam_mod` puts them into its train and evaluate
messages).  The server's model then evaluates on its initial statistics.

Released metrics hold no per-client payload size: the mean size goes into
``cepam-payload-bytes`` only with fixed-size padding (``pad="max"`` or a
number of bytes), where the size is public anyway; not with ``"levels"``
(the default), whose lengths differ from client to client.
"""

from __future__ import annotations

import logging

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

from cepam.accounting.setting import RECORD_LEVEL_LOOP
from cepam.structure import is_buffer
from cepam.update import RUNNING_VAR_FLOOR, is_running_variance

from .budget import CLIENT_LEVEL, RECORD_LEVEL, Budget
from .protocol import UNCLIPPED_METRIC, flat_name, is_float
from .replies import Opened

__all__ = ["METRIC_CLIP", "METRIC_CLIPPED_FRACTION", "METRIC_DROPPED", "METRIC_PAYLOAD_BYTES",
           "METRIC_UPDATES", "RUNNING_VAR_FLOOR", "Aggregation"]

log = logging.getLogger("flwr.cepam")

METRIC_UPDATES = "cepam-updates"
METRIC_DROPPED = "cepam-dropped"
METRIC_PAYLOAD_BYTES = "cepam-payload-bytes"
METRIC_CLIPPED_FRACTION = "cepam-clipped-fraction"
METRIC_CLIP = "cepam-clip"
#: The name of the empty MetricRecord a reply without one is given for the
#: inner strategy (Flower's strategies need one a reply, for its weight):
#: Flower's own name for a train reply's metrics.
NO_METRICS = "metrics"


class Aggregation:
    """The inner strategy's aggregate of the noisy models (see the module)."""

    @staticmethod
    def _noisy_model(opened: Opened, scale: float = 1.0,
                     shift: dict[str, np.ndarray] | None = None) -> RecordDict:
        """The node's noisy model, global + ``scale`` * decoded update +
        ``shift`` (the coded float arrays; integer and bool arrays, and the
        running statistics under ``buffers="local"``, are the server's),
        with the reply's metrics less the clipped-or-not bit."""
        content = RecordDict()
        for key, arrays in opened.sent.records.items():
            records = {}
            for name, value in arrays.items():
                flat = flat_name(key, name)
                if flat in opened.update:  # a coded float array (not a local statistic)
                    moved = opened.update[flat] if scale == 1.0 else \
                        scale * np.asarray(opened.update[flat], dtype=np.float64)
                    if shift is not None:
                        moved = moved + shift[flat]
                    value = np.asarray(value + moved, dtype=value.dtype)
                records[name] = Array(value)
            content[key] = ArrayRecord(records)
        if opened.metrics is None:  # (a client that reveals no metrics: the inner
            content[NO_METRICS] = MetricRecord()  # strategy needs a record, for the weight)
            return content
        metrics = opened.reply.content[opened.metrics]
        if UNCLIPPED_METRIC in metrics:
            del metrics[UNCLIPPED_METRIC]
        content[opened.metrics] = metrics
        return content

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

    def _inner_aggregate(self, server_round: int, accepted: list[Message],
                         dropped: list[Message], sent: dict[str, np.ndarray] | None = None, *,
                         quiet: bool = False
                         ) -> tuple[ArrayRecord | None, MetricRecord | None, bool]:
        """The inner strategy's aggregate of the noisy models, each with
        weight 1 (the dropped replies handed over as failures), finished by
        :meth:`_finish` against ``sent`` (the round's arrays by name; by
        default those sent to the first accepted node); the bool says
        whether it failed (logged unless ``quiet``: the caller says what
        follows)."""
        self._equal_weights([r.content for r in accepted])
        try:
            arrays, metrics = self.strategy.aggregate_train(server_round, accepted + dropped)
        except Exception as exc:
            if not quiet:
                log.warning("cepam: round %d: the inner strategy failed to aggregate (%s: %s); "
                            "nothing is released", server_round, type(exc).__name__, exc)
            return None, None, True
        if arrays is not None:
            if sent is None:
                records = self._sent[int(accepted[0].metadata.src_node_id)].records
                sent = {n: a for r in records.values() for n, a in r.items()}
            self._finish(server_round, arrays, sent)
        return arrays, metrics, False

    def _aggregate_record_level(self, server_round: int, opened: list[Opened],
                                failures: list[Message]
                                ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The record-level mode: the plain mean of the k accepted updates,
        released if the budget allows, with eps in the metrics."""
        dropped = len(failures)
        accepted = []
        for o in opened:
            o.reply.content = self._noisy_model(o)
            accepted.append(o.reply)
        sizes = self.last_payload_bytes
        k = len(accepted)
        if k == 0 and dropped == 0:  # no round (budget spent, or nothing sampled)
            return None, None
        minimum = 1 if self.budget is None else self.budget.minimum_clients()
        if k < minimum:
            log.warning("cepam: round %d: %d update(s) accepted, fewer than %d: nothing is "
                        "released this round", server_round, k, minimum)
            return None, None
        if self.budget is not None and self.max_epsilon is not None:
            assert isinstance(self.budget, Budget)
            eps = self.budget.epsilon(self.budget.rounds + [k])
            if eps > self.max_epsilon:
                log.warning("cepam: round %d: with %d updates it would bring eps (%s) to %.4g > "
                            "max_epsilon %.4g: not released; the run's remaining rounds are "
                            "empty", server_round, k, self.budget.analysis.describe(), eps,
                            self.max_epsilon)
                self.stopped_by_budget = True
                return None, None
        arrays, metrics, failed = self._inner_aggregate(server_round, accepted, failures)
        if failed:
            return None, None
        if arrays is None:
            return None, metrics
        metrics = MetricRecord() if metrics is None else metrics
        metrics[METRIC_UPDATES] = k
        metrics[METRIC_DROPPED] = dropped
        if self.pad == "max" or isinstance(self.pad, int):  # one public size
            metrics[METRIC_PAYLOAD_BYTES] = float(np.mean(sizes))
        if self.budget is not None:
            assert isinstance(self.budget, Budget)
            eps = self._release(k, server_round)
            if eps is None:
                return None, None
            metrics[RECORD_LEVEL] = eps
            client_level = self.budget.client_level_epsilon()
            if client_level is not None:
                metrics[CLIENT_LEVEL] = client_level
            threat = self._threat_label(self.setting.threat_model)  # (one ledger read)
            log.info("cepam: round %d: %d updates averaged (%d dropped); client level "
                     "(replace-one client, threat model %s, any local training loop): %s; "
                     "record level (replace-one record, threat model %s, %s bound): eps %.4g "
                     "at delta %g, if the clients train as the paper does (%s)",
                     server_round, k, dropped, threat,
                     "not computed" if client_level is None else
                     f"eps {client_level:.4g} at delta {self.delta:g}",
                     threat, self.bound,
                     metrics[RECORD_LEVEL], self.delta,
                     RECORD_LEVEL_LOOP)
        return arrays, metrics

    def _finish(self, server_round: int, arrays: ArrayRecord, sent: dict[str, np.ndarray]
                ) -> None:
        """The aggregate, in place, as the round sent it (``sent``: the
        round's arrays by name), the one place that handles what an inner
        strategy changes: every float array cast back to the dtype sent
        (flwr 1.42's FedAdam returns float64); the server's own integer
        and bool arrays (counters: an average would turn them into floats
        and, for a counter the clients moved, tell how far) and, under
        ``buffers="local"``, its own running statistics put back; every
        running variance clamped to at least ``running_var_floor``.  Only
        post-processing of what was released."""
        local = self.buffers == "local"
        cast, clamped = set(), 0
        for name in list(arrays.keys()):
            value = arrays[name].numpy()
            before = sent.get(name)
            new = value
            if before is not None:
                if not is_float(before) or (local and is_buffer(name)):
                    new = before  # the server's own
                elif value.dtype != before.dtype:
                    cast.add(f"{value.dtype} -> {before.dtype}")
                    new = value.astype(before.dtype)
            if is_running_variance(name) and is_float(new):
                low = new < self.running_var_floor
                if np.any(low):
                    clamped += int(np.count_nonzero(low))
                    new = np.where(low, new.dtype.type(self.running_var_floor), new)
            if new is not value:  # (a 0-d array is contiguous: ascontiguousarray makes it 1-d)
                arrays[name] = Array(new if new.flags.c_contiguous else np.ascontiguousarray(new))
        if cast and not self._cast_logged:
            self._cast_logged = True
            log.info("cepam: round %d: %s aggregated in other dtypes than the round sent "
                     "(%s): cast back to the dtypes sent, this round and every later one",
                     server_round, type(self.strategy).__name__, ", ".join(sorted(cast)))
        if clamped:
            log.info("cepam: round %d: %d running-variance value(s) below %g (noise) clamped "
                     "to it (post-processing, no privacy cost)", server_round, clamped,
                     self.running_var_floor)
