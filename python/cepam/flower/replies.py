"""A reply's way in (a mixin of :class:`.strategy.CepamStrategy`): what
each node was sent, the cheap screening before anything is parsed, the
payload's header against the node's configuration, decoding it into the
node's noisy update, and the replies dropped (each with a logged reason, as
an error reply the inner strategy counts as a failure)."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterable

import numpy as np
from flwr.app import Error, Message

import cepam
from cepam.errors import FormatError, InvalidArgumentError
from cepam.expected import Expected
from cepam.padding import is_padded_as
from cepam.payload import is_bare, parse_header
from cepam.structure import is_buffer

from .mod import MIN_PAD_KEY
from .protocol import (
    CLIENT_KEY, CLIENT_KEY_SIGNATURE, CONFIG_RECORD, PAYLOAD_ARRAY, PAYLOAD_RECORD,
    PAYLOAD_STYPE, UNCLIPPED_METRIC, RoundConfig, flat_name, is_float,
)

__all__ = ["DROPPED_CODE", "Dropped", "Opened", "Replies", "Sent", "as_failure"]

log = logging.getLogger("flwr.cepam")

_U64 = 1 << 64
_MAX_METRIC_VALUES = 4096  # values in a reply's MetricRecord (lists count their items)
_REPLY_SLACK = 1 << 16  # bytes above the float32 model in the default reply limit
#: The error code of a dropped reply as the inner strategy sees it.
DROPPED_CODE = 0xCE9B


class Dropped(Exception):
    """Why a reply is left out of the round."""


def as_failure(reply: Message, reason: str) -> Message:
    """A dropped reply as the inner strategy sees it: an error reply (the
    reply's metadata kept), which Flower's strategies count as a failure."""
    if reply.has_error():
        return reply
    return Message(metadata=copy.copy(reply.metadata),
                   error=Error(DROPPED_CODE, f"dropped by cepam: {reason}"))


class Sent:
    """What one node was sent in a round: its configuration and its model."""

    def __init__(self, config: RoundConfig, records: dict[str, dict[str, np.ndarray]]) -> None:
        self.config, self.records = config, records
        self.template = {flat_name(k, n): a for k, r in records.items() for n, a in r.items()
                         if is_float(a)}
        if len(self.template) != sum(is_float(a) for r in records.values() for a in r.values()):
            raise InvalidArgumentError("two float arrays have the same record/array name; "
                                       "rename an ArrayRecord or an array")
        local = config.buffers == "local"  # the running statistics are not coded
        self.coordinates = sum(int(a.size) for n, a in self.template.items()
                               if not (local and is_buffer(n)))
        self.float32_bytes = 4 * self.coordinates


class Opened:
    """An accepted reply: its decoded update, what was sent, the name of its
    MetricRecord (None: it sent none), the payload's size and the noised
    clipped-or-not bit (None if not asked for)."""

    def __init__(self, reply: Message, sent: Sent, update: dict[str, np.ndarray],
                 metrics: str | None, size: int, bit: float | None) -> None:
        self.reply, self.sent, self.update = reply, sent, update
        self.metrics, self.size, self.bit = metrics, size, bit


class Replies:
    """Screens, checks and opens the round's replies (see the module)."""

    def _reply_limit(self, sent: Sent) -> int:
        if self.max_reply_bytes is not None:
            return self.max_reply_bytes
        limit = sent.float32_bytes + _REPLY_SLACK
        return max(limit, self.pad) if isinstance(self.pad, int) else limit

    @staticmethod
    def _enforce(payload: bytes, sent: RoundConfig, node: int, coordinates: int) -> None:
        """The payload's public header against what was configured for the
        node, as :func:`cepam.decode` enforces its expectations
        (:class:`cepam.expected.Expected`), and its length against the
        round's padding (:func:`cepam.padding.is_padded_as`).  Raises
        Dropped."""
        expected = Expected.checked(mechanism=sent.mechanism, clip=sent.clip,
                                    client=node % _U64, round=sent.round,
                                    message=sent.message, coordinates=coordinates)
        try:
            header, _ = parse_header(payload)
        except FormatError as exc:
            raise Dropped(f"payload header: {exc}") from None
        wrong = expected.differences(header)
        if wrong:
            raise Dropped("payload header differs from the configuration in " + ", ".join(
                f"{field} ({actual!r}, expected {wanted!r})" for field, wanted, actual in wrong))
        if not is_padded_as(payload, sent.pad, lattice=sent.lattice, dim=sent.dim,
                            prefer=sent.prefer):
            raise Dropped(
                f"payload of {len(payload)} bytes, not a length that pad={sent.pad!r} gives: "
                "its length was not hidden as configured (the round configuration altered "
                "on its way, or a client that pads otherwise; a node's "
                f"{MIN_PAD_KEY!r} refuses such a round)")

    def _screen(self, reply: Message) -> tuple[Sent, bytes, str]:
        """Cheap checks before anything is parsed: the sender was sent this
        round's message, the reply's records and sizes are those of a cepam
        reply.  Returns (what was sent, the payload, the metrics record's
        name).  Raises Dropped."""
        if reply.has_error():
            raise Dropped(f"error reply: {reply.error.reason}")
        node = int(reply.metadata.src_node_id)
        sent = self._sent.get(node)
        if sent is None:
            raise Dropped("no train message was sent to this node this round")
        content = reply.content
        if len(content) > 3:
            raise Dropped(f"{len(content)} records in the reply (a cepam reply has at most 3)")
        if list(content.array_records) != [PAYLOAD_RECORD]:
            raise Dropped("the reply is not one cepam payload record (is cepam_mod installed "
                          "on the client?)")
        record = content[PAYLOAD_RECORD]
        if len(record) != 1 or PAYLOAD_ARRAY not in record:
            raise Dropped("the payload record does not hold one cepam payload")
        array = record[PAYLOAD_ARRAY]
        if array.stype != PAYLOAD_STYPE:
            raise Dropped(f"payload stype {array.stype!r}, expected {PAYLOAD_STYPE!r}")
        limit = self._reply_limit(sent)
        if len(array.data) > limit:
            raise Dropped(f"payload of {len(array.data)} bytes, above the limit of {limit} "
                          "(max_reply_bytes)")
        payload = bytes(array.data)
        if not is_bare(payload):
            raise Dropped("not a bare cepam payload")
        configs = list(content.config_records)
        if configs not in ([], [CONFIG_RECORD]) or (configs and not set(
                content[CONFIG_RECORD]) <= {CLIENT_KEY, CLIENT_KEY_SIGNATURE}):
            raise Dropped("unexpected configuration records in the reply")
        metrics = list(content.metric_records)
        if len(metrics) > 1:
            raise Dropped(f"expected at most one MetricRecord, got {len(metrics)}")
        if metrics and sum(len(v) if isinstance(v, list) else 1
                           for v in content[metrics[0]].values()) > _MAX_METRIC_VALUES:
            raise Dropped(f"more than {_MAX_METRIC_VALUES} metric values")
        return sent, payload, metrics[0] if metrics else None

    def _bit_of(self, reply: Message, metrics: str | None) -> float | None:
        """The reply's noised clipped-or-not bit, if the round asked for it.
        Raises Dropped."""
        if self.clip_count_sigma is None:
            return None
        bit = None if metrics is None else reply.content[metrics].get(UNCLIPPED_METRIC)
        if isinstance(bit, bool) or not isinstance(bit, (int, float)) or \
                not math.isfinite(bit):
            raise Dropped(f"no noised clipped-or-not bit ({UNCLIPPED_METRIC!r}, a finite "
                          "number) in the reply's metrics")
        return float(bit)

    def _open(self, reply: Message) -> Opened:
        """The reply's payload decoded (its node's noisy update) and its
        clipped-or-not bit.  Raises Dropped."""
        sent, payload, metrics = self._screen(reply)
        bit = self._bit_of(reply, metrics)
        node = int(reply.metadata.src_node_id)
        self._enforce(payload, sent.config, node, sent.coordinates)
        secret, pin = self._secret_of(node, reply.content, int(reply.metadata.run_id))
        update = cepam.decode(payload, secret=secret, like=sent.template, output="numpy",
                              max_coordinates=sent.coordinates, buffers=sent.config.buffers)
        if pin is not None:
            self._pin(node, *pin)
        return Opened(reply, sent, update, metrics, len(payload), bit)

    def _accept(self, server_round: int, replies: Iterable[Message]
                ) -> tuple[list[Opened], list[Message]]:
        """The replies that pass every check, in node-id order, and those
        dropped (each with a logged reason), as error replies."""
        accepted, dropped, seen = [], [], set()
        for reply in replies:
            node = int(reply.metadata.src_node_id)
            try:
                if node in seen:
                    raise Dropped("a second reply from this node this round")
                seen.add(node)
                accepted.append(self._open(reply))
            except Exception as exc:  # any reply: hostile input never stops the server
                reason = str(exc) if isinstance(exc, (Dropped, cepam.CepamError)) else \
                    f"{type(exc).__name__}: {exc}"
                dropped.append(as_failure(reply, reason))
                log.warning("cepam: round %d: dropped the reply of node %s: %s", server_round,
                            node, reason)
        # Replies arrive in whatever order the nodes finish and the inner strategy sums
        # them in list order: fix the order so the global model does not depend on timing.
        accepted.sort(key=lambda o: int(o.reply.metadata.src_node_id))
        self.last_payload_bytes = [o.size for o in accepted]
        return accepted, dropped
