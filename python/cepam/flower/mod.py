"""The client side: :func:`cepam_mod`, a Flower mod that encodes the train reply.

After the train function returns, the mod takes the update (every float
array of the reply's ArrayRecord minus the same array as received), clips it
as a whole and encodes it with cepam under the context (server round, node
id, the message's random number), and replaces the reply's arrays with one
payload Array (:mod:`.protocol`).  The payload is bare (no names or shapes:
the server knows them from its global model).  Non-float arrays must come
back unchanged (the server restores them from its model).

The mod refuses (an error reply, nothing sent) when the server sent no cepam
configuration (the update would leave the node unprotected), when Flower's
central-DP clipping is configured on the same run (``fixedclipping_mod`` /
``adaptiveclipping_mod`` and their server wrappers add their own noise and
clipping: cepam already does both), when a message's context was already
used by this node (a resent message), and when its key material is missing.
Evaluate and query messages pass through untouched.  Flower's
``LocalDpMod`` cannot be detected (it adds noise to the reply's arrays
before this mod sees them): do not combine it with cepam_mod, whose noise
already is the mechanism's.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MessageType
from flwr.app import MetricRecord

import cepam
from cepam.errors import CepamError

from .keys import KeyPair, agreed_secret, secret_from_node_config
from .protocol import (
    CLIENT_KEY, CONFIG_RECORD, KEYS_AGREED, METRIC_BITS, METRIC_BYTES, PAYLOAD_ARRAY,
    PAYLOAD_STYPE, RoundConfig,
)

__all__ = ["cepam_mod", "ERROR_CODE"]

log = logging.getLogger("cepam.flower")

#: The code of the error replies this mod sends instead of an update.
ERROR_CODE = 0xCE9A
_STATE = "cepam"  # the node's Context state record: key pair and used contexts
_FLOWER_CLIPPING_KEY = "clipping_norm"  # what Flower's central-DP wrappers send
_USED_LIMIT = 4096  # contexts remembered per run


class _Refusal(Exception):
    """A reason to send an error reply instead of the update."""


def _update(received: ArrayRecord, returned: ArrayRecord) -> dict[str, np.ndarray]:
    """The float arrays of ``returned`` minus those of ``received``, in the
    order of ``received``."""
    if list(returned.keys()) != list(received.keys()):
        raise _Refusal("the train reply's arrays are not the arrays received (names or order "
                       "differ)")
    update = {}
    for name in received.keys():
        before, after = received[name].numpy(), returned[name].numpy()
        if before.shape != after.shape or before.dtype != after.dtype:
            raise _Refusal(f"array {name!r} changed shape or dtype in training")
        if np.issubdtype(before.dtype, np.floating):
            update[name] = after - before
        elif not np.array_equal(before, after):
            raise _Refusal(f"non-float array {name!r} changed in training; cepam sends float "
                           "updates only")
    if not update:
        raise _Refusal("the model has no float arrays")
    return update


def _state(ctx: Context) -> ConfigRecord:
    if _STATE not in ctx.state:
        ctx.state[_STATE] = ConfigRecord({"run-id": -1, "private": b"", "used": []})
    return ctx.state[_STATE]


def _secret(msg: Message, ctx: Context, config: RoundConfig, state: ConfigRecord
            ) -> tuple[bytes, bytes | None]:
    """(secret, the client's public key to send or None)."""
    if config.keys != KEYS_AGREED:
        return secret_from_node_config(ctx.node_config), None
    run_id = int(msg.metadata.run_id)
    if state["run-id"] != run_id or len(state["private"]) != 32:  # one key pair per run
        pair = KeyPair()
        state["run-id"], state["private"], state["used"] = run_id, pair.private, []
    else:
        pair = KeyPair(state["private"])
    secret = agreed_secret(pair, config.server_key, run_id=run_id,
                           server_public=config.server_key, client_public=pair.public)
    return secret, pair.public


def _claim_context(state: ConfigRecord, config: RoundConfig) -> None:
    used = list(state["used"])
    if config.message in used:
        raise _Refusal(f"context (round {config.round}, message {config.message}) was already "
                       "used by this node: a resent message is not encoded twice")
    state["used"] = (used + [config.message])[-_USED_LIMIT:]


def _check_no_flower_dp(msg: Message) -> None:
    for record in msg.content.config_records.values():
        if _FLOWER_CLIPPING_KEY in record:
            raise _Refusal("Flower's central-DP clipping is configured on this run; cepam "
                           "clips and adds noise itself: use one or the other")


def _encode_reply(msg: Message, ctx: Context, reply: Message, config: RoundConfig,
                  secret: bytes, public: bytes | None) -> Message:
    received = [k for k in msg.content.array_records]
    returned = list(reply.content.array_records)
    if len(returned) != 1 or len(received) != 1 or returned[0] != received[0]:
        raise _Refusal("cepam_mod expects one ArrayRecord in the train message and the same "
                       f"one in the reply (got {received} and {returned})")
    key = returned[0]
    update = _update(msg.content[key], reply.content[key])
    m = sum(int(u.size) for u in update.values())
    payload = cepam.encode(update, config.mechanism, secret=secret, round=config.round,
                           client=int(msg.metadata.dst_node_id) % (1 << 64),
                           message=config.message, lattice=config.lattice, dim=config.dim,
                           clip=config.clip, coder=config.coder, structure=False)
    reply.content[key] = ArrayRecord({PAYLOAD_ARRAY: Array(
        dtype="uint8", shape=(len(payload),), stype=PAYLOAD_STYPE, data=payload)})
    metrics = list(reply.content.metric_records)
    if not metrics:
        reply.content["metrics"] = MetricRecord()
        metrics = ["metrics"]
    record = reply.content[metrics[0]]
    record[METRIC_BYTES] = len(payload)
    record[METRIC_BITS] = 8.0 * len(payload) / m
    if public is not None:
        reply.content[CONFIG_RECORD] = ConfigRecord({CLIENT_KEY: public})
    return reply


def cepam_mod(msg: Message, ctx: Context, call_next: Any) -> Message:
    """Flower client mod: encodes the train reply's update with cepam.

    Use ``ClientApp(mods=[cepam_mod])`` (other mods may come before it in the
    list).  Configuration comes from the server (:class:`CepamStrategy`);
    the node needs only its key material: nothing with key agreement (the
    default), or ``cepam-secret`` in its node config for pre-shared secrets.

    Returns:
        The reply with one payload Array in place of its arrays, or an error
        reply (code :data:`ERROR_CODE`) saying why nothing was sent.
    """
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, ctx)
    try:
        _check_no_flower_dp(msg)
        if CONFIG_RECORD not in msg.content.config_records:
            raise _Refusal("the server sent no cepam configuration (is it a CepamStrategy?); "
                           "the update is not sent unprotected")
        config = RoundConfig.from_record(msg.content[CONFIG_RECORD])
        state = _state(ctx)
        secret, public = _secret(msg, ctx, config, state)
        _claim_context(state, config)
    except (_Refusal, CepamError) as exc:
        log.warning("cepam_mod: %s", exc)
        return Message(Error(ERROR_CODE, f"cepam_mod: {exc}"), reply_to=msg)
    reply = call_next(msg, ctx)
    if reply.has_error():
        return reply
    try:
        return _encode_reply(msg, ctx, reply, config, secret, public)
    except _Refusal as exc:
        log.warning("cepam_mod: %s", exc)
        return Message(Error(ERROR_CODE, f"cepam_mod: {exc}"), reply_to=msg)
    except CepamError as exc:
        # The message may describe the private update (where a value is not
        # finite, which sub-vector is too large): it stays in the client's
        # log; the server, in clear, learns only that encoding failed.
        log.warning("cepam_mod: %s", exc)
        return Message(Error(ERROR_CODE, f"cepam_mod: the update could not be encoded "
                             f"({type(exc).__name__}; the client's log says why)"),
                       reply_to=msg)
