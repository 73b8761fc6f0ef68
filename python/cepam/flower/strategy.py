"""The server side: :class:`CepamStrategy`, a wrapper around any Flower strategy.

It wraps a strategy the way Flower's own DP wrappers
(``DifferentialPrivacyServerSideFixedClipping`` and its family) do, and runs
Flower's own loop (:meth:`flwr.serverapp.strategy.Strategy.start`): the same
log lines (the per-round aggregated metrics, the initial and per-round
evaluation, the final summary), the same :class:`Result`, plus cepam's
metrics (``cepam-epsilon``, ``cepam-updates``, ``cepam-dropped``).  Each
round the wrapper

1. checks, before any train message leaves, that the round the inner
   strategy sampled fits the privacy budget against everything the ledger
   holds (earlier runs included); if not, the round sends nothing, and
   every later round of the run is empty too (``stopped_by_budget``);
2. adds to every train message of the inner strategy (its metadata, ttl
   included, kept) its own copy of the RecordDict with the cepam
   configuration (:mod:`.protocol`: mechanism, scale, clip, padding, round,
   a fresh random message number, keys);
3. screens every reply before parsing anything: one reply per node sampled
   this round (a copy is dropped), one payload Array of the cepam stype, at
   most ``max_reply_bytes``, a bare payload, few records and metric values;
4. opens what passes: reads the payload's public header
   (:func:`cepam.inspect`) and checks that its mechanism, scale, clip,
   round, client (the sender's node id), message number and size are those
   configured for that node (a client that sends less noise is refused),
   then authenticates and decodes it against the arrays sent (``like=``)
   into the node's noisy model, global + clipped update + noise; integer
   and bool arrays (counters such as ``num_batches_tracked``) are the
   server's own, unchanged;
5. drops, with a logged reason, every reply that fails any of this: it
   never reaches aggregation and never raises;
6. accounts the round with K = the number of updates actually averaged
   (:mod:`.budget`), and releases it only if the privacy budget allows;
7. hands the noisy models to the inner strategy, each with weight 1 (the
   accountant's average is the plain mean of K updates, so a client cannot
   weigh in more by claiming more examples), in node-id order (so the
   global model does not depend on the order the replies arrived in).

Released metrics hold no per-client payload size: the mean size goes into
``cepam-payload-bytes`` only with fixed-size padding (``pad="max"``, the
default, or a number of bytes), where the size is public anyway.
"""

from __future__ import annotations

import logging
import math
import os
import secrets as _secrets
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

import cepam
from cepam._checks import check_clip
from cepam.accounting import FLSetting, Ledger
from cepam.accounting.setting import RECORD_LEVEL_LOOP
from cepam.errors import InvalidArgumentError, InvalidTypeError, PrivacyBudgetError
from cepam.padding import check_pad
from cepam.structure import BARE

from .budget import CLIENT_LEVEL, RECORD_LEVEL, Budget
from .keys import KeyPair, KeyPins, SecretSource, agreed_secret, preshared_lookup
from .protocol import (
    ACCOUNTED, CLIENT_KEY, CONFIG_RECORD, KEYS_AGREED, KEYS_PRESHARED, PAYLOAD_ARRAY,
    PAYLOAD_RECORD, PAYLOAD_STYPE, RoundConfig, flat_name,
)

__all__ = ["CepamStrategy", "METRIC_UPDATES", "METRIC_DROPPED", "METRIC_PAYLOAD_BYTES"]

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
_CONTAINER_OFFSET = 7  # the payload's container byte (docs/format.md)
_MAX_METRIC_VALUES = 4096  # values in a reply's MetricRecord (lists count their items)
_REPLY_SLACK = 1 << 16  # bytes above the float32 model in the default reply limit


class _Dropped(Exception):
    """Why a reply is left out of the round."""


def _is_flower_dp(strategy: object) -> bool:
    """Is ``strategy`` (a subclass of) one of Flower's DP wrappers?"""
    return any(c.__name__ in _FLOWER_DP for c in type(strategy).__mro__)


def _is_float(array: np.ndarray) -> bool:
    return bool(np.issubdtype(array.dtype, np.floating))


class _Sent:
    """What one node was sent in a round: its configuration and its model."""

    def __init__(self, config: RoundConfig, records: dict[str, dict[str, np.ndarray]]) -> None:
        self.config, self.records = config, records
        self.template = {flat_name(k, n): a for k, r in records.items() for n, a in r.items()
                         if _is_float(a)}
        if len(self.template) != sum(_is_float(a) for r in records.values() for a in r.values()):
            raise InvalidArgumentError("two float arrays have the same record/array name; "
                                       "rename an ArrayRecord or an array")
        self.coordinates = sum(int(a.size) for a in self.template.values())
        self.float32_bytes = 4 * self.coordinates


class CepamStrategy(Strategy):
    """Wraps a Flower strategy so that clients send cepam payloads.

    Args:
        strategy: the strategy that samples nodes and aggregates (FedAvg and
            its family); not one of Flower's DP wrappers.
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``,
            the noise on each decoded update, in the units of the weights.
        clip: l2 bound of each client's whole update (every float array of
            the model, float buffers included).
        setting: the :class:`cepam.accounting.FLSetting` the privacy is
            accounted in (its clip must be ``clip``; its ``clients`` is
            replaced by each round's K).  None: no eps is computed.
        delta: the total delta of the reported eps (Gaussian).
        max_epsilon: no round is started (no train message sent) that would
            take eps above it (needs ``setting``).
        secrets: None for X25519 key agreement (no setup), or a mapping or
            callable from node id to the node's 32-byte pre-shared secret,
            or the path of a secrets file (:func:`.keys.secrets_from_file`,
            mode 0600).
        lattice, dim, coder: codec settings sent to the clients (see
            :func:`cepam.encode`).
        pad: the clients' padding (``cepam.encode``'s ``pad``): ``"max"``
            (the default: every payload of the run has one length, fixed by
            public settings, so its length reveals nothing about the update;
            unpadded, the length predicts an update's norm to 6-8 %, and
            Flower's SuperLink, which relays every payload, sees it; the
            cost is 0.3-2.3 bits per coordinate, docs/privacy.md section
            9), ``"bucket"``, a number of bytes, or None (no padding).
        bound: ``"tight"`` (default) or ``"paper"``: the per-round bound.
        ledger: a :class:`cepam.accounting.Ledger`, or the path of one
            (opened, or created, at the strategy's ``delta``): each released
            round is recorded there before its result is used, and eps and
            ``max_epsilon`` count everything it holds (earlier runs and
            restarts included).  Needs ``setting``.
        ledger_name: the dataset or federation a ledger path accounts for
            (default: the file's stem).
        max_reply_bytes: replies whose payload is longer are dropped unread;
            default: the float32 size of the model's float arrays plus 64
            KiB (a cepam payload is a fraction of it), or ``pad`` if larger.
        pinned_keys: with key agreement, a file in which the nodes' public
            keys are pinned on first use, across runs (:class:`.keys.KeyPins`;
            nodes keep their key with ``cepam-key-file``); a reply under
            another key is dropped.  None: pinned for the run only.
        authenticated_transport: with key agreement, True states that the
            SuperLink and SuperNodes talk over TLS with node authentication
            (or that keys are pinned): otherwise :meth:`start` logs a loud
            warning, since an active man in the middle could run the
            agreement with both sides and read every update.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings, or a Flower DP
            wrapper as ``strategy``.
    """

    def __init__(self, strategy: Strategy, *, mechanism: cepam.Gaussian | cepam.Laplace,
                 clip: float, setting: FLSetting | None = None, delta: float = 1e-5,
                 max_epsilon: float | None = None, secrets: SecretSource | None = None,
                 lattice: str = "auto", dim: int | None = None, coder: str = "ans",
                 pad: str | int | None = "max", bound: str = "tight", ledger: Any = None,
                 ledger_name: str | None = None, max_reply_bytes: int | None = None,
                 pinned_keys: str | os.PathLike[str] | None = None,
                 authenticated_transport: bool = False) -> None:
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
        if not isinstance(mechanism, ACCOUNTED):
            names = " or ".join(f"cepam.{cls.__name__}" for cls in ACCOUNTED)
            raise InvalidTypeError(f"mechanism must be {names}, got {type(mechanism).__name__}")
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
        self.pad = check_pad(pad)
        if self.pad == "max" and math.isinf(self.clip):  # (clip is required anyway)
            raise InvalidArgumentError("pad='max' needs a clip")
        if max_reply_bytes is not None and (isinstance(max_reply_bytes, bool) or not isinstance(
                max_reply_bytes, int) or max_reply_bytes <= 0):
            raise InvalidArgumentError(f"max_reply_bytes must be a positive int, got "
                                       f"{max_reply_bytes!r}")
        if pinned_keys is not None and secrets is not None:
            raise InvalidArgumentError("pinned_keys pins X25519 keys: it needs secrets=None")
        if not isinstance(authenticated_transport, bool):
            raise InvalidTypeError("authenticated_transport must be a bool")
        self._ledger_source, self._ledger_name = ledger, ledger_name
        self.ledger: Ledger | None = None
        self.strategy, self.mechanism, self.setting = strategy, mechanism, setting
        self.delta, self.max_epsilon, self.bound = float(delta), max_epsilon, bound
        self.lattice, self.dim, self.coder = lattice, dim, coder
        self.max_reply_bytes = max_reply_bytes
        self.authenticated_transport = authenticated_transport
        self._lookup = None if secrets is None else preshared_lookup(secrets)
        self._pins = None if pinned_keys is None else KeyPins(pinned_keys)
        self.budget: Budget | None = None
        self.stopped_by_budget = False
        #: Payload sizes (bytes) of the last round's accepted replies, in
        #: node-id order: the server's own view, not released in metrics.
        self.last_payload_bytes: list[int] = []
        self._started = False
        self._server_pair: KeyPair | None = None
        self._pinned: dict[int, bytes] = {}
        self._sent: dict[int, _Sent] = {}
        self._round = 0

    # ------------------------------------------------------------------ helpers

    def _begin_run(self, grid: Grid) -> None:
        self._started = True
        self._server_pair = KeyPair() if self._lookup is None else None
        self._pinned = {}
        self.stopped_by_budget = False
        if self._lookup is None and not self.authenticated_transport and self._pins is None:
            log.warning(
                "cepam: X25519 KEY AGREEMENT OVER AN UNAUTHENTICATED LINK: the public keys "
                "are not authenticated, so an active man in the middle between the SuperLink "
                "and a SuperNode could agree a secret with each side and read every update. "
                "Run Flower with TLS and node authentication and pass "
                "authenticated_transport=True, or pin the nodes' keys (pinned_keys=, nodes "
                "with cepam-key-file), or use pre-shared secrets.")
        if self._ledger_source is not None and self.ledger is None:
            self.ledger = (self._ledger_source if isinstance(self._ledger_source, Ledger) else
                           Ledger(self._ledger_source, name=self._ledger_name, delta=self.delta))
        run_id = f"flower-run-{getattr(getattr(grid, 'run', None), 'run_id', 0)}-" \
                 f"{_secrets.token_hex(8)}"
        self.budget = None if self.setting is None else Budget(
            self.mechanism, self.setting, delta=self.delta, bound=self.bound,
            ledger=self.ledger, run_id=run_id)

    def _reply_limit(self, sent: _Sent) -> int:
        if self.max_reply_bytes is not None:
            return self.max_reply_bytes
        limit = sent.float32_bytes + _REPLY_SLACK
        return max(limit, self.pad) if isinstance(self.pad, int) else limit

    def _pinned_key(self, node: int) -> bytes | None:
        if node in self._pinned:
            return self._pinned[node]
        return None if self._pins is None else self._pins.get(node)

    def _pin(self, node: int, public: bytes) -> None:
        if node in self._pinned:
            return
        self._pinned[node] = public
        if self._pins is not None and self._pins.get(node) is None:
            self._pins.pin(node, public)

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
        pinned = self._pinned_key(node)
        if pinned is not None and pinned != public:
            raise _Dropped("the node's public key changed (it differs from the key pinned "
                           "for it)")
        assert self._server_pair is not None
        try:
            secret = agreed_secret(self._server_pair, public, run_id=run_id,
                                   server_public=self._server_pair.public, client_public=public)
        except InvalidArgumentError as exc:
            raise _Dropped(str(exc)) from None
        return secret, public

    def _enforce(self, info: cepam.PayloadInfo, sent: RoundConfig, node: int,
                 coordinates: int) -> None:
        """The payload's public header against what was configured for the node."""
        expected = {
            "mechanism": (type(sent.mechanism).__name__, sent.mechanism.scale),
            "clip": sent.clip, "round": sent.round, "client": node % _U64,
            "message": sent.message, "coordinates": coordinates,
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

    def _screen(self, reply: Message) -> tuple[_Sent, bytes, str]:
        """Cheap checks before anything is parsed: the sender was sent this
        round's message, the reply's records and sizes are those of a cepam
        reply.  Returns (what was sent, the payload, the metrics record's
        name).  Raises _Dropped."""
        if reply.has_error():
            raise _Dropped(f"error reply: {reply.error.reason}")
        node = int(reply.metadata.src_node_id)
        sent = self._sent.get(node)
        if sent is None:
            raise _Dropped("no train message was sent to this node this round")
        content = reply.content
        if len(content) > 3:
            raise _Dropped(f"{len(content)} records in the reply (a cepam reply has at most 3)")
        if list(content.array_records) != [PAYLOAD_RECORD]:
            raise _Dropped("the reply is not one cepam payload record (is cepam_mod installed "
                           "on the client?)")
        record = content[PAYLOAD_RECORD]
        if len(record) != 1 or PAYLOAD_ARRAY not in record:
            raise _Dropped("the payload record does not hold one cepam payload")
        array = record[PAYLOAD_ARRAY]
        if array.stype != PAYLOAD_STYPE:
            raise _Dropped(f"payload stype {array.stype!r}, expected {PAYLOAD_STYPE!r}")
        limit = self._reply_limit(sent)
        if len(array.data) > limit:
            raise _Dropped(f"payload of {len(array.data)} bytes, above the limit of {limit} "
                           "(max_reply_bytes)")
        payload = bytes(array.data)
        if len(payload) <= _CONTAINER_OFFSET or payload[_CONTAINER_OFFSET] != BARE:
            raise _Dropped("not a bare cepam payload")
        configs = list(content.config_records)
        if configs not in ([], [CONFIG_RECORD]) or (
                configs and len(content[CONFIG_RECORD]) > 1):
            raise _Dropped("unexpected configuration records in the reply")
        metrics = list(content.metric_records)
        if len(metrics) != 1:
            raise _Dropped(f"expected one MetricRecord, got {len(metrics)}")
        if sum(len(v) if isinstance(v, list) else 1
                           for v in content[metrics[0]].values()) > _MAX_METRIC_VALUES:
            raise _Dropped(f"more than {_MAX_METRIC_VALUES} metric values")
        return sent, payload, metrics[0]

    def _open(self, reply: Message) -> tuple[RecordDict, int]:
        """The reply with its payload decoded into the node's noisy model, and
        the payload's size in bytes.  Raises _Dropped."""
        sent, payload, metrics = self._screen(reply)
        node = int(reply.metadata.src_node_id)
        info = cepam.inspect(payload)
        self._enforce(info, sent.config, node, sent.coordinates)
        secret, public = self._secret_of(node, reply.content, int(reply.metadata.run_id))
        update = cepam.decode(payload, secret=secret, like=sent.template, output="numpy",
                              max_coordinates=sent.coordinates)
        if public is not None:
            self._pin(node, public)
        content = RecordDict()
        for key, arrays in sent.records.items():
            content[key] = ArrayRecord({
                name: Array(np.asarray(value + update[flat_name(key, name)], dtype=value.dtype)
                            if _is_float(value) else value)
                for name, value in arrays.items()})
        content[metrics] = reply.content[metrics]
        return content, len(payload)

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

    def _check_budget(self, server_round: int, k: int) -> bool:
        """Does a round of k updates (the nodes sampled, at most the last
        round's K) fit max_epsilon, against everything the ledger holds?"""
        if self.budget is None or self.max_epsilon is None or k == 0:
            return True
        if self.budget.rounds:
            k = min(k, self.budget.rounds[-1])
        k = max(k, self.budget.minimum_clients())
        eps = self.budget.epsilon(self.budget.rounds + [k])
        if eps > self.max_epsilon:
            log.warning("cepam: round %d: a round of %d updates would bring eps to %.4g > "
                        "max_epsilon %.4g (%s): no train message is sent, and the run's "
                        "remaining rounds are empty", server_round, k, eps, self.max_epsilon,
                        "everything the ledger holds" if self.ledger is not None else
                        f"{len(self.budget.rounds)} rounds so far")
            return False
        return True

    def _records_of(self, content: RecordDict, cache: dict[int, dict[str, np.ndarray]]
                    ) -> dict[str, dict[str, np.ndarray]]:
        records = {}
        for key, record in content.array_records.items():
            if id(record) not in cache:
                cache[id(record)] = {name: array.numpy() for name, array in record.items()}
            records[key] = cache[id(record)]
        return records

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The inner strategy's train messages, each with its own cepam
        configuration; none if the round does not fit the privacy budget."""
        if not self._started:  # called outside start()
            self._begin_run(grid)
        self._round = int(server_round)
        self._sent = {}
        if self.stopped_by_budget:
            log.warning("cepam: round %d: the privacy budget is spent: no train message is "
                        "sent", server_round)
            return []
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        cache: dict[int, dict[str, np.ndarray]] = {}
        sent: dict[int, _Sent] = {}
        for msg in messages:
            for record in msg.content.config_records.values():
                if "clipping_norm" in record:
                    raise InvalidArgumentError(
                        "the inner strategy sends Flower's DP clipping configuration; cepam "
                        "clips and adds noise itself: use one or the other")
            node = int(msg.metadata.dst_node_id)
            if node in sent:
                raise InvalidArgumentError(f"the inner strategy sent node {node} two train "
                                           "messages in one round")
            records = self._records_of(msg.content, cache)
            config_ = RoundConfig(
                mechanism=self.mechanism, clip=self.clip, lattice=self.lattice, dim=self.dim,
                coder=self.coder, round=self._round, message=_secrets.randbits(63),
                keys=KEYS_PRESHARED if self._lookup is not None else KEYS_AGREED,
                server_key=b"" if self._server_pair is None else self._server_pair.public,
                pad=self.pad)
            sent[node] = _Sent(config_, records)
            if sent[node].coordinates == 0:
                raise InvalidArgumentError("the model has no float arrays to train")
        if self.budget is not None and sent:
            self.budget.coordinates = max(s.coordinates for s in sent.values())
        if not self._check_budget(server_round, len(messages)):  # before anything is sent
            self.stopped_by_budget = True
            return []
        for msg in messages:
            content = RecordDict(dict(msg.content.items()))  # its own, shallow
            content[CONFIG_RECORD] = ConfigRecord(sent[int(msg.metadata.dst_node_id)]
                                                  .config.to_record())
            msg.content = content  # the message itself: its metadata (ttl, ...) kept
        self._sent = sent
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Screens and decodes the payloads, drops what fails (and any second
        reply of a node), accounts, then lets the inner strategy aggregate the
        noisy models."""
        accepted, sizes, dropped, seen = [], [], 0, set()
        for reply in replies:
            node = int(reply.metadata.src_node_id)
            try:
                if node in seen:
                    raise _Dropped("a second reply from this node this round")
                seen.add(node)
                content, size = self._open(reply)
            except Exception as exc:  # any reply: hostile input never stops the server
                dropped += 1
                reason = str(exc) if isinstance(exc, (_Dropped, cepam.CepamError)) else \
                    f"{type(exc).__name__}: {exc}"
                log.warning("cepam: round %d: dropped the reply of node %s: %s", server_round,
                            node, reason)
                continue
            reply.content = content
            accepted.append(reply)
            sizes.append(size)
        # Replies arrive in whatever order the nodes finish and the inner strategy sums
        # them in list order: fix the order so the global model does not depend on timing.
        order = sorted(range(len(accepted)), key=lambda i: accepted[i].metadata.src_node_id)
        accepted, sizes = [accepted[i] for i in order], [sizes[i] for i in order]
        self.last_payload_bytes = sizes
        k = len(accepted)
        if k == 0 and dropped == 0:  # no round (budget spent, or nothing sampled)
            return None, None
        minimum = 1 if self.budget is None else self.budget.minimum_clients()
        if k < minimum:
            log.warning("cepam: round %d: %d update(s) accepted, fewer than %d: nothing is "
                        "released this round", server_round, k, minimum)
            return None, None
        if self.budget is not None and self.max_epsilon is not None:
            eps = self.budget.epsilon(self.budget.rounds + [k])
            if eps > self.max_epsilon:
                log.warning("cepam: round %d: with %d updates it would bring eps to %.4g > "
                            "max_epsilon %.4g: not released; the run's remaining rounds are "
                            "empty", server_round, k, eps, self.max_epsilon)
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
        self._keep_counters(arrays, accepted)
        metrics = MetricRecord() if metrics is None else metrics
        metrics[METRIC_UPDATES] = k
        metrics[METRIC_DROPPED] = dropped
        if self.pad == "max" or isinstance(self.pad, int):  # one public size
            metrics[METRIC_PAYLOAD_BYTES] = float(np.mean(sizes))
        if self.budget is not None:
            try:  # recorded (in the ledger, if any) before the result is used
                metrics[RECORD_LEVEL] = self.budget.release(k, round=server_round,
                                                            max_epsilon=self.max_epsilon)
            except PrivacyBudgetError as exc:  # another server spent the budget meanwhile
                log.warning("cepam: round %d: not released: %s; the run's remaining rounds "
                            "are empty", server_round, exc)
                self.stopped_by_budget = True
                return None, None
            client_level = self.budget.client_level_epsilon()
            if client_level is not None:
                metrics[CLIENT_LEVEL] = client_level
            log.info("cepam: round %d: %d updates averaged (%d dropped); client level "
                     "(replace-one client, threat model %s, any local training loop): %s; "
                     "record level (replace-one record, threat model %s, %s bound): eps %.4g "
                     "at delta %g, if the clients train as the paper does (%s)",
                     server_round, k, dropped, self.setting.threat_model,
                     "not computed" if client_level is None else
                     f"eps {client_level:.4g} at delta {self.delta:g}",
                     self.setting.threat_model, self.bound, metrics[RECORD_LEVEL], self.delta,
                     RECORD_LEVEL_LOOP)
        return arrays, metrics

    def _keep_counters(self, arrays: ArrayRecord, accepted: list[Message]) -> None:
        """Puts the server's own integer and bool arrays (counters) back into
        the aggregate: an average would turn them into floats (FedAvg does)
        and, for a counter the clients moved, tell how far."""
        sent = self._sent[int(accepted[0].metadata.src_node_id)]
        counters = {n: a for r in sent.records.values() for n, a in r.items() if not _is_float(a)}
        for name in list(arrays.keys()):
            if name in counters:
                arrays[name] = Array(counters[name])

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """The inner strategy's evaluate messages, unchanged (none once the
        privacy budget is spent: the model no longer changes)."""
        if self.stopped_by_budget:
            return []
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        """The inner strategy's evaluation aggregate, unchanged."""
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        """Logs the inner strategy's summary and cepam's settings."""
        self.strategy.summary()
        log.info("\t└── cepam: %r, clip %g, lattice %s, coder %s, pad %s, keys %s, delta %g, "
                 "max_epsilon %s", self.mechanism, self.clip, self.lattice, self.coder,
                 self.pad, "pre-shared" if self._lookup is not None else "X25519 agreement",
                 self.delta, self.max_epsilon)

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
              ) -> Result:
        """Flower's own strategy loop (:meth:`Strategy.start`: same arguments,
        logs and Result), for a fresh run of cepam (new server key pair, run
        id and budget).  Once the privacy budget is spent the remaining
        rounds send nothing (``stopped_by_budget``) and the loop ends
        normally."""
        self._begin_run(grid)
        try:
            return Strategy.start(self, grid, initial_arrays, num_rounds=num_rounds,
                                  timeout=timeout, train_config=train_config,
                                  evaluate_config=evaluate_config, evaluate_fn=evaluate_fn)
        finally:
            self._started = False
