"""The client side: :func:`cepam_mod`, a Flower mod that encodes the train reply.

After the train function returns, the mod takes the update (every float
array of every ArrayRecord of the reply minus the same array as received:
weights, and float buffers such as BatchNorm's running statistics, which
:func:`cepam.encode` treats by its own default), clips it as a whole and
encodes it with cepam under the context (server round, node id, the
message's random number) and the padding the server configured, and
replaces the reply's ArrayRecords with one payload Array (:mod:`.protocol`).
The payload is bare (no names or shapes: the server knows them from its
global model).  Integer and bool arrays (BatchNorm's ``num_batches_tracked``)
are counters, not updates: they are never coded or sent, and the server
keeps its own.

The node's key material comes from its node config (:mod:`.keys`):
``cepam-secret-file`` (pre-shared), ``cepam-key-file`` (a persistent X25519
key), ``cepam-auth-key-file`` (the SuperNode's Flower authentication private
key, which signs its X25519 key for the server), and ``cepam-state``: a file
recording every context the node encoded (:class:`cepam.ContextGuard`), so
that a train message replayed after a restart is refused rather than encoded
twice.  Without it the used contexts
are remembered in the node's Context state only.

The mod refuses (an error reply, nothing sent) when the server sent no cepam
configuration (the update would leave the node unprotected), when Flower's
central-DP clipping is configured on the same run (``fixedclipping_mod`` /
``adaptiveclipping_mod`` and their server wrappers add their own noise and
clipping: cepam already does both), when a message's context was already
used by this node (a resent message), and when its key material is missing.
Evaluate and query messages pass through untouched, except under
``buffers="local"`` (below).

An error reply tells the server only a type name and a fixed text (for
example ``"cepam_mod: FloorRefusal: the server asks for less privacy than
this node's floor ..."``), never an exception's message, which may name a
file, a value of the update or key material: every exception that would
leave the mod, cepam's or not (the node's own train or evaluate function's
included, whose message Flower would otherwise send in clear), becomes such
a reply, and its message goes to the node's log (``_error_reply``).

The server chooses what happens to the running statistics of the model's
normalisation layers (float arrays whose last name component is
``running_mean`` or ``running_var``, as BatchNorm's) with
``CepamStrategy(buffers=...)``, which travels in the round configuration and
is passed to :func:`cepam.encode`: ``"separate"`` (the default) and
``"joint"`` code them in the update; ``"local"`` (FedBN) leaves them out of
the payload, and the node keeps its own: the mod stores the running
statistics of each train reply in the node's Context state and puts them,
in place of the server's, into every later train and evaluate message of the
run before the node's own functions see it (the first train message of a run
trains from the server's).  The server never receives them; its own copy
stays the one it started with.

A node may set a floor on the privacy it gives, whatever the server asks
(:data:`FLOOR_KEYS`, in its node config): ``cepam-min-sigma`` (the smallest
Gaussian sigma it encodes with), ``cepam-min-noise-multiplier`` (the
smallest Gaussian sigma / clip: the floor that fits adaptive clipping, whose
sigma falls with the clip at the same privacy), ``cepam-min-laplace-b``
(the smallest Laplace scale b), ``cepam-max-clip`` (the largest clip) and
``cepam-min-count-sigma`` (the smallest noise on its clipped-or-not bit).
Each noise floor is for its own mechanism, and a node that sets a floor
releases only what it set one for: with ``cepam-min-sigma`` alone, a
server that switches to Laplace, or asks for the clipped-or-not bit, is
refused too (no floor would bind it).  ``cepam-min-pad``
(:data:`MIN_PAD_KEY`: ``"bucket"``, ``"levels"`` or ``"max"``) is a floor
on the padding that hides its payload's length, whatever the round
configuration says: the configuration is not authenticated, so on a link
without TLS a relay could set ``pad`` to None and read each payload's
length; a node with this floor refuses a padding that hides less
(:func:`cepam.padding.hides_at_least`: None, "bucket", "levels", "max" or
a size in bytes).  A
round configuration below a floor is refused before training: an error in
the node's log, an error reply to the server, no payload.  A floor value
that is not a positive finite number is refused the same way at the first
train message, naming the key.  Flower's
``LocalDpMod`` cannot be detected (it adds noise to the reply's arrays
before this mod sees them): do not combine it with cepam_mod, whose noise
already is the mechanism's.

When the server asks for it (``count-sigma`` in the configuration: adaptive
clipping, or the clipped-fraction metric), the mod adds to the reply's
metrics the node's clipped-or-not bit noised by the node itself
(:data:`.protocol.UNCLIPPED_METRIC`, :func:`cepam.clipping.noisy_bit`).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
from flwr.app import (
    Array, ArrayRecord, ConfigRecord, Context, Error, Message, MessageType, MetricRecord,
    RecordDict,
)

import cepam
from cepam.clipping import noisy_bit
from cepam.guard import ContextGuard
from cepam.keys import Context as KeyContext
from cepam.errors import CepamError, ContextReuseError, InvalidArgumentError
from cepam.padding import PAD_MODES, hides_at_least
from cepam.structure import is_buffer

from .identity import AUTH_KEY_FILE_KEY, load_auth_private_key, sign_key_binding
from .keys import (
    KEY_FILE_KEY, NODE_CONFIG_KEY, SECRET_FILE_KEY, STATE_KEY, KeyPair, agreed_secret,
    node_key_pair, secret_from_node_config,
)
from .protocol import (
    CLIENT_KEY, CLIENT_KEY_SIGNATURE, CONFIG_RECORD, FLOWER_CLIPPING_KEY, KEYS_AGREED,
    PAYLOAD_ARRAY, PAYLOAD_RECORD, PAYLOAD_STYPE, UNCLIPPED_METRIC, RoundConfig, flat_name,
    flower_clipping_text, is_float,
)

__all__ = ["cepam_mod", "ERROR_CODE", "LOCAL_BUFFERS", "MIN_SIGMA_KEY",
           "MIN_NOISE_MULTIPLIER_KEY", "MIN_LAPLACE_B_KEY", "MAX_CLIP_KEY",
           "MIN_COUNT_SIGMA_KEY", "FLOOR_KEYS", "MIN_PAD_KEY", "NODE_KEYS", "node_floor",
           "node_pad_floor", "unknown_node_keys"]

log = logging.getLogger("cepam.flower")

#: The code of the error replies this mod sends instead of an update.
ERROR_CODE = 0xCE9A
_STATE = "cepam"  # the node's Context state record: key pair and used contexts
#: The node's Context state record holding its own running statistics
#: (``buffers="local"``), by :func:`.protocol.flat_name`.
LOCAL_BUFFERS = "cepam-local-buffers"
_USED_LIMIT = 4096  # contexts remembered per run

#: Node-config keys of the node's own floor on the privacy it gives.
MIN_SIGMA_KEY = "cepam-min-sigma"
MIN_NOISE_MULTIPLIER_KEY = "cepam-min-noise-multiplier"
MIN_LAPLACE_B_KEY = "cepam-min-laplace-b"
MAX_CLIP_KEY = "cepam-max-clip"
MIN_COUNT_SIGMA_KEY = "cepam-min-count-sigma"
FLOOR_KEYS = (MIN_SIGMA_KEY, MIN_NOISE_MULTIPLIER_KEY, MIN_LAPLACE_B_KEY, MAX_CLIP_KEY,
              MIN_COUNT_SIGMA_KEY)
#: Node-config key of the node's floor on the padding (a padding mode).
MIN_PAD_KEY = "cepam-min-pad"
#: Every node config key cepam_mod reads; a node config with another key
#: that starts with "cepam" (a misspelt floor, say) is refused.
NODE_KEYS = (*FLOOR_KEYS, MIN_PAD_KEY, NODE_CONFIG_KEY, SECRET_FILE_KEY, KEY_FILE_KEY,
             AUTH_KEY_FILE_KEY, STATE_KEY)
# The noise floors of each mechanism (by its configuration name): the key,
# what it bounds, and whether that is the scale over the clip (else the
# scale itself).  The noise multiplier sigma / clip is what a Gaussian
# round's privacy depends on: adaptive clipping moves sigma with the clip
# and keeps it.
_NOISE_FLOORS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    cepam.Gaussian.name: ((MIN_SIGMA_KEY, "sigma", False),
                          (MIN_NOISE_MULTIPLIER_KEY, "sigma / clip", True)),
    cepam.Laplace.name: ((MIN_LAPLACE_B_KEY, "b", False),)}
_RATIO_RTOL = 1e-12  # (the rounding a ratio floor forgives: see _check_floor)
_NOISE_FLOOR_KEYS = frozenset(key for floors in _NOISE_FLOORS.values() for key, _, _ in floors)


class _Refusal(Exception):
    """A reason to send an error reply instead of the update.  Its message
    stays in the node's log; the server is told only the class's fixed
    ``public`` text (``_error_reply``)."""

    public = "the node refused to send this update"


class _NoConfiguration(_Refusal):
    public = ("the server sent no cepam configuration (is it a CepamStrategy?); the update "
              "is not sent unprotected")


class _FlowerClipping(_Refusal):
    public = ("Flower's central-DP clipping is configured on this run; cepam clips and adds "
              "noise itself: use one or the other")


class _Resent(_Refusal):
    public = ("this context was already used by this node (a resent message is not encoded "
              "twice)")


class _ReplyMismatch(_Refusal):
    public = ("the train reply does not fit the message (its ArrayRecords, array names, "
              "shapes, dtypes or MetricRecords)")


class _KeysMismatch(_Refusal):
    public = ("the server asks for key agreement, but this node holds a pre-shared secret: "
              "not encoded")


class _FloorRefusal(_Refusal):
    """The server asked for less privacy than the node's floor (or the floor
    is misconfigured): logged as an error on the node."""

    public = ("the server asks for less privacy than this node's floor "
              f"({', '.join((*FLOOR_KEYS, MIN_PAD_KEY))}): not encoded")


class _UnknownKey(_FloorRefusal):
    public = ("this node's config has a cepam key that this cepam does not read (a misspelt "
              "floor?): nothing is encoded until it is fixed")


class _BadFloor(_FloorRefusal):
    public = ("this node's floor in its node config is not a positive finite number (or, for "
              f"{MIN_PAD_KEY}, a padding mode): nothing is encoded until it is fixed")


# What the server is told when an exception of another kind leaves the mod,
# by where it happened (the exception's message stays in the node's log).
_STAGES = {
    "configuration": "the server's cepam configuration could not be used",
    "keys": (f"this node's key material ({SECRET_FILE_KEY}, {NODE_CONFIG_KEY}, {KEY_FILE_KEY} "
             "or the server's key) is missing, unsafe or malformed"),
    "state": f"this node's {STATE_KEY} file could not be used",
    "training": "the node's own function failed",
    "encoding": "the update could not be encoded",
}


def unknown_node_keys(node_config: Any) -> list[str]:
    """The keys of ``node_config`` that look like cepam's (they start with
    "cepam", whatever the case and surrounding spaces) but are none of
    :data:`NODE_KEYS`, in order: a floor whose key is misspelt would
    otherwise bind nothing, silently."""
    return [key for key in node_config if isinstance(key, str) and key not in NODE_KEYS
            and key.strip().lower().startswith("cepam")]


def node_floor(node_config: Any) -> dict[str, float]:
    """The floor keys (:data:`FLOOR_KEYS`) set in ``node_config``, as floats.

    Raises:
        InvalidArgumentError: a value that is not a positive finite number
            (bools and strings included), naming the key.
    """
    floor = {}
    for key in FLOOR_KEYS:
        if key not in node_config:
            continue
        value = node_config[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not (math.isfinite(value) and value > 0):
            raise InvalidArgumentError(
                f"node config {key} must be a positive finite number (for example "
                f"--node-config \"{key}=0.5\", unquoted), got {value!r}")
        floor[key] = float(value)
    return floor


def node_pad_floor(node_config: Any) -> str | None:
    """The node's floor on the padding (:data:`MIN_PAD_KEY` in
    ``node_config``): ``"bucket"``, ``"levels"``, ``"max"``, or None where
    it is not set.

    Raises:
        InvalidArgumentError: a value that is not one of those modes,
            naming the key.
    """
    if MIN_PAD_KEY not in node_config:
        return None
    value = node_config[MIN_PAD_KEY]
    if not isinstance(value, str) or value not in PAD_MODES:
        raise InvalidArgumentError(
            f"node config {MIN_PAD_KEY} must be one of {', '.join(map(repr, PAD_MODES))} (for "
            f"example --node-config \"{MIN_PAD_KEY}='levels'\"), got {value!r}")
    return value


def _check_floor(config: RoundConfig, ctx: Context) -> None:
    """Refuses (:class:`_FloorRefusal`) a round configuration below the
    node's floor, or any configuration while the floor is misconfigured or
    the node config has a cepam key it does not read; logs an error (once a
    process) for a floor that bounds the noise alone or the clip alone."""
    unknown = unknown_node_keys(ctx.node_config)
    if unknown:
        raise _UnknownKey(f"node config key(s) {', '.join(map(repr, unknown))} are not among "
                          f"those cepam_mod reads ({', '.join(NODE_KEYS)}): a misspelt floor "
                          "would bind nothing; nothing is encoded until it is fixed")
    try:
        floor = node_floor(ctx.node_config)
        pad_floor = node_pad_floor(ctx.node_config)
    except InvalidArgumentError as exc:
        raise _BadFloor(f"{exc}; nothing is encoded until it is fixed") from None
    if pad_floor is not None and not hides_at_least(config.pad, pad_floor):
        raise _FloorRefusal(f"the server asks for pad = {config.pad!r}, which hides less of "
                            f"the payload's length than this node's floor {MIN_PAD_KEY} = "
                            f"{pad_floor!r}: not encoded")
    if not floor:
        return
    _warn_lone_floor(floor)
    mechanism = config.mechanism
    floors = _NOISE_FLOORS[mechanism.name]
    scale, clip = float(mechanism.scale), float(config.clip)
    if not clip > 0.0:  # (read unchecked from the configuration: fail closed)
        raise _FloorRefusal(f"the server asks for {mechanism.name} scale = {scale:g} at clip = "
                            f"{clip:g}, which no floor can be held to: not encoded")
    for key, what, over_clip in floors:
        if key not in floor:
            continue
        # (a ratio within _RATIO_RTOL of its floor meets it: a server's sigma
        # is its multiplier times the round's clip, rounded, and the ratio of
        # the two may come back an ulp below the multiplier)
        if not (scale >= floor[key] * clip * (1.0 - _RATIO_RTOL) if over_clip
                else scale >= floor[key]):
            raise _FloorRefusal(
                f"the server asks for {mechanism.name} {what} = "
                + (f"{scale / clip:g} ({scale:g} / {clip:g})" if over_clip else f"{scale:g}")
                + f", below this node's floor {key} = {floor[key]:g}: not encoded")
    keys = [key for key, _, _ in floors]
    if not any(key in floor for key in keys) and any(k in floor for k in _NOISE_FLOOR_KEYS):
        raise _FloorRefusal(f"the server asks for the {mechanism.name} mechanism, for which "
                            f"this node sets no floor ({' or '.join(keys)}) while it sets one "
                            "for another mechanism: not encoded")
    if MAX_CLIP_KEY in floor and not config.clip <= floor[MAX_CLIP_KEY]:
        raise _FloorRefusal(f"the server asks for clip = {config.clip:g}, above this node's "
                            f"{MAX_CLIP_KEY} = {floor[MAX_CLIP_KEY]:g}: not encoded")
    if config.count_sigma is not None:  # the clipped-or-not bit leaves the node too
        if MIN_COUNT_SIGMA_KEY not in floor:
            raise _FloorRefusal(f"the server asks for the clipped-or-not bit (count-sigma = "
                                f"{config.count_sigma:g}), for which this node sets no floor "
                                f"({MIN_COUNT_SIGMA_KEY}) while it sets others: not encoded")
        if config.count_sigma < floor[MIN_COUNT_SIGMA_KEY]:
            raise _FloorRefusal(f"the server asks for count-sigma = {config.count_sigma:g}, "
                                f"below this node's floor {MIN_COUNT_SIGMA_KEY} = "
                                f"{floor[MIN_COUNT_SIGMA_KEY]:g}: not encoded")


_LONE_FLOORS_LOGGED: set[str] = set()


def _warn_lone_floor(floor: dict[str, float]) -> None:
    """Logs an error, once a process, for a floor that binds the privacy of
    no round: a noise scale without a largest clip (the privacy is the
    scale over the clip, and the server may raise the clip), or a largest
    clip without a noise floor."""
    if MAX_CLIP_KEY in floor:
        lone = [] if set(floor) & _NOISE_FLOOR_KEYS else [MAX_CLIP_KEY]
        why = "bounds the clip, not the noise: a server may ask for any small noise"
        fix = f"a noise floor with it (for Gaussian noise {MIN_NOISE_MULTIPLIER_KEY})"
    else:  # (a Gaussian sigma floored over the clip as well binds the Gaussian rounds)
        lone = [key for key in (MIN_SIGMA_KEY, MIN_LAPLACE_B_KEY) if key in floor
                and not (key == MIN_SIGMA_KEY and MIN_NOISE_MULTIPLIER_KEY in floor)]
        why = ("bounds the noise, not the privacy, which is the noise over the clip: a "
               "server may raise the clip")
        fix = f"{MAX_CLIP_KEY} with it"
    for key in lone:
        if key not in _LONE_FLOORS_LOGGED:
            _LONE_FLOORS_LOGGED.add(key)
            log.error("cepam_mod: this node's %s alone binds no privacy: it %s; set %s", key, why,
                      fix if key != MIN_SIGMA_KEY else
                      f"{fix} (or {MIN_NOISE_MULTIPLIER_KEY}, the floor on sigma / clip)")


def _update(received: dict[str, ArrayRecord], returned: dict[str, ArrayRecord]
            ) -> dict[str, np.ndarray]:
    """Every float array of ``returned`` minus the same of ``received``, in the
    order of ``received`` (names: :func:`.protocol.flat_name`); integer and
    bool arrays (counters) are left out."""
    if list(returned) != list(received):
        raise _ReplyMismatch(f"the train reply's ArrayRecords {list(returned)} are not those "
                       f"received {list(received)}")
    update = {}
    for key, record in received.items():
        if list(returned[key].keys()) != list(record.keys()):
            raise _ReplyMismatch(f"the arrays of ArrayRecord {key!r} are not those received (names "
                           "or order differ)")
        for name in record.keys():
            before = record[name].numpy()
            if not is_float(before):
                continue  # a counter: never coded; the server keeps its own
            after = returned[key][name].numpy()
            if before.shape != after.shape or before.dtype != after.dtype:
                raise _ReplyMismatch(f"array {name!r} changed shape or dtype in training")
            flat = flat_name(key, name)
            if flat in update:
                raise _ReplyMismatch(f"two arrays are both named {flat!r} (record/array)")
            update[flat] = after - before
    if not update:
        raise _ReplyMismatch("the model has no float arrays")
    return update


def _state(ctx: Context) -> ConfigRecord:
    if _STATE not in ctx.state:
        ctx.state[_STATE] = ConfigRecord({"run-id": -1, "private": b"", "used": []})
    return ctx.state[_STATE]


_warned_command_line = False


def _secret(msg: Message, ctx: Context, config: RoundConfig, state: ConfigRecord
            ) -> tuple[bytes, dict[str, bytes] | None]:
    """(secret, what the reply's ConfigRecord carries: the client's public
    key, and its signature with ``cepam-auth-key-file``; or None)."""
    global _warned_command_line
    if config.keys != KEYS_AGREED:
        if SECRET_FILE_KEY not in ctx.node_config and NODE_CONFIG_KEY in ctx.node_config \
                and not _warned_command_line:
            _warned_command_line = True
            log.warning("cepam_mod: the pre-shared secret comes from the node config "
                        "(%r), which is readable in the process list; put it in a file of "
                        "mode 0600 and give %r instead", NODE_CONFIG_KEY, SECRET_FILE_KEY)
        return secret_from_node_config(ctx.node_config), None
    if SECRET_FILE_KEY in ctx.node_config or NODE_CONFIG_KEY in ctx.node_config:
        # A relay could otherwise switch a node that holds a pre-shared
        # secret to key agreement with a key of its own, and decode it.
        raise _KeysMismatch(f"the server asks for key agreement ({KEYS_AGREED}), but this node "
                            "holds a pre-shared secret: not encoded")
    run_id = int(msg.metadata.run_id)
    if KEY_FILE_KEY in ctx.node_config:  # one key pair for good, in a 0600 file
        pair = node_key_pair(str(ctx.node_config[KEY_FILE_KEY]))
        if state["run-id"] != run_id:
            state["run-id"], state["used"] = run_id, []
    elif state["run-id"] != run_id or len(state["private"]) != 32:  # one key pair per run
        pair = KeyPair()
        state["run-id"], state["private"], state["used"] = run_id, pair.private, []
    else:
        pair = KeyPair(state["private"])
    secret = agreed_secret(pair, config.server_key, run_id=run_id,
                           server_public=config.server_key, client_public=pair.public)
    sent = {CLIENT_KEY: pair.public}
    if AUTH_KEY_FILE_KEY in ctx.node_config:  # bound to the node's Flower identity
        auth = load_auth_private_key(str(ctx.node_config[AUTH_KEY_FILE_KEY]))
        sent[CLIENT_KEY_SIGNATURE] = sign_key_binding(
            auth, run_id=run_id, server_public=config.server_key, client_public=pair.public)
    return secret, sent


def _claim_context(state: ConfigRecord, config: RoundConfig, ctx: Context, secret: bytes,
                   node: int) -> None:
    """Refuses a context this node used already (in memory, and in its
    ``cepam-state`` file if any, which :func:`cepam.encode` then records)."""
    used = list(state["used"])
    path = ctx.node_config.get(STATE_KEY)
    if config.message in used or (path is not None and ContextGuard(str(path)).is_used(
            secret, KeyContext(config.round, node % (1 << 64), config.message))):
        raise _Resent(f"context (round {config.round}, message {config.message}) was already "
                       "used by this node: a resent message is not encoded twice")
    state["used"] = (used + [config.message])[-_USED_LIMIT:]


def _check_no_flower_dp(msg: Message) -> None:
    for record in msg.content.config_records.values():
        if FLOWER_CLIPPING_KEY in record:
            raise _FlowerClipping(flower_clipping_text("this run configures"))


def _report_unclipped(reply: Message, update: dict[str, np.ndarray], config: RoundConfig
                      ) -> None:
    """With ``count-sigma`` configured, puts the noised clipped-or-not bit in
    the reply's MetricRecord: ``b + N(0, count_sigma^2)``, b = 1 if the
    update's l2 norm as ``encode`` clips it (:func:`cepam.update_norm`, the
    round's ``buffers``) is at most the round's clip, the noise from this
    node's own randomness (OS entropy)."""
    if config.count_sigma is None:
        return
    norm = cepam.update_norm(update, buffers=config.buffers)
    noised = noisy_bit(norm, clip=config.clip, count_sigma=config.count_sigma,
                       rng=np.random.default_rng())
    metrics = list(reply.content.metric_records)
    if len(metrics) > 1:
        raise _ReplyMismatch(f"the train reply has {len(metrics)} MetricRecords; the clipped-or-not "
                       "bit goes into its one MetricRecord")
    if not metrics:
        metrics = ["metrics" if "metrics" not in reply.content else "cepam-metrics"]
        reply.content[metrics[0]] = MetricRecord()
    reply.content[metrics[0]][UNCLIPPED_METRIC] = noised


def _use_local_buffers(msg: Message, ctx: Context) -> None:
    """``buffers="local"`` (FedBN): the running statistics of the message's
    ArrayRecords replaced by those the node kept from its last train reply
    (where names, shapes and dtypes match), in a RecordDict of the message's
    own; nothing changes before the node's first train reply."""
    if LOCAL_BUFFERS not in ctx.state.array_records:
        return
    kept = ctx.state[LOCAL_BUFFERS]
    content = RecordDict(dict(msg.content.items()))  # the received one may be shared
    for key, record in msg.content.array_records.items():
        arrays = {}
        for name, array in record.items():
            own = kept.get(flat_name(key, name))
            fits = own is not None and own.shape == array.shape and own.dtype == array.dtype
            arrays[name] = own if fits else array
        content[key] = ArrayRecord(arrays)
    msg.content = content


def _keep_local_buffers(returned: dict[str, ArrayRecord], ctx: Context) -> None:
    """Stores the train reply's float running statistics in the node's
    Context state (``buffers="local"``)."""
    kept = {flat_name(key, name): array for key, record in returned.items()
            for name, array in record.items()
            if is_buffer(flat_name(key, name)) and is_float(array.numpy())}
    if kept:
        ctx.state[LOCAL_BUFFERS] = ArrayRecord(kept)


def _encode_reply(msg: Message, ctx: Context, reply: Message, config: RoundConfig,
                  secret: bytes, key_record: dict[str, bytes] | None) -> Message:
    received = {k: msg.content[k] for k in msg.content.array_records}
    returned = {k: reply.content[k] for k in reply.content.array_records}
    update = _update(received, returned)
    _report_unclipped(reply, update, config)
    state = ctx.node_config.get(STATE_KEY)
    payload = cepam.encode(update, config.mechanism, secret=secret, round=config.round,
                           client=int(msg.metadata.dst_node_id) % (1 << 64),
                           message=config.message, lattice=config.lattice, dim=config.dim,
                           prefer=config.prefer,
                           clip=config.clip, coder=config.coder, structure=False,
                           pad=config.pad, state=None if state is None else str(state),
                           buffers=config.buffers)
    if config.buffers == "local":
        _keep_local_buffers(returned, ctx)
    for key in returned:
        del reply.content[key]
    reply.content[PAYLOAD_RECORD] = ArrayRecord({PAYLOAD_ARRAY: Array(
        dtype="uint8", shape=(len(payload),), stype=PAYLOAD_STYPE, data=payload)})
    if key_record is not None:
        reply.content[CONFIG_RECORD] = ConfigRecord(key_record)
    return reply


def cepam_mod(msg: Message, ctx: Context, call_next: Any) -> Message:
    """Flower client mod: encodes the train reply's update with cepam.

    Use ``ClientApp(mods=[cepam_mod])`` (other mods may come before it in the
    list).  Configuration comes from the server (:class:`CepamStrategy`);
    the node needs only its key material: nothing with key agreement (the
    default; ``cepam-key-file`` to keep its key across runs;
    ``cepam-auth-key-file``, the SuperNode's Flower authentication private
    key, to sign it, :mod:`.keys`), or
    ``cepam-secret-file`` in its node config for pre-shared secrets; and,
    for replay protection across restarts, ``cepam-state`` (a file).
    Optionally its own floor (:data:`FLOOR_KEYS`, :data:`MIN_PAD_KEY`: see
    the module): a server asking for less is refused before training.  Under ``buffers="local"`` in the server's
    configuration the node keeps its own running statistics (see the
    module).

    Args:
        msg: the message from the server (Flower passes it).
        ctx: the node's Flower context: its node config (key material, floor)
            and its state.
        call_next: the next mod, or the ClientApp's own function.

    Returns:
        The reply with one payload Array in place of its ArrayRecords, or an error
        reply (code :data:`ERROR_CODE`) saying, in a type name and a fixed
        text, why nothing was sent (the details are in the node's log).  It
        raises nothing: an exception of the functions it calls (the node's
        own included) is such an error reply.
    """
    stage = "training"
    try:
        # By category: Flower routes "train.<action>" (and "train.default")
        # to a train function, whose reply holds the trained model too.
        category = msg.metadata.message_type.partition(".")[0]
        if category != MessageType.TRAIN:
            if category == MessageType.EVALUATE:
                _use_local_buffers(msg, ctx)
            return call_next(msg, ctx)
        stage = "configuration"
        _check_no_flower_dp(msg)
        if CONFIG_RECORD not in msg.content.config_records:
            raise _NoConfiguration("the server sent no cepam configuration (is it a "
                                   "CepamStrategy?); the update is not sent unprotected")
        config = RoundConfig.from_record(msg.content[CONFIG_RECORD])
        _check_floor(config, ctx)
        stage = "keys"
        state = _state(ctx)
        secret, public = _secret(msg, ctx, config, state)
        stage = "state"
        _claim_context(state, config, ctx, secret, int(msg.metadata.dst_node_id))
        stage = "training"
        if config.buffers == "local":
            _use_local_buffers(msg, ctx)
        reply = call_next(msg, ctx)
        if reply.has_error():
            return reply
        stage = "encoding"
        return _encode_reply(msg, ctx, reply, config, secret, public)
    except Exception as exc:  # noqa: BLE001 - every exception leaves through the filter
        return _error_reply(msg, exc, stage)


def _error_reply(msg: Message, exc: Exception, stage: str) -> Message:
    """The one way an exception leaves :func:`cepam_mod`: the error reply
    the server gets, ``"cepam_mod: <type name>: <fixed text>"``, holds no
    message of the exception (which may name a path, a value of the update
    or key material): its text is fixed by the refusal's kind, or by
    ``stage`` (where it happened, :data:`_STAGES`) for any other exception,
    cepam's or not.  The exception itself goes to the node's log: a refusal
    or cepam error as its message (an error for a floor or a key downgrade,
    else a warning),
    anything else with its traceback."""
    if isinstance(exc, _Refusal):
        name, text = type(exc).__name__.lstrip("_"), exc.public
    elif isinstance(exc, ContextReuseError):  # recorded in the node's state file
        name, text = type(exc).__name__, _Resent.public
    else:
        name, text = type(exc).__name__, f"{_STAGES[stage]} (the node's log says why)"
    if isinstance(exc, (_FloorRefusal, _KeysMismatch)):  # (the server, or a relay, asked)
        log.error("cepam_mod: %s", exc)
    elif isinstance(exc, (_Refusal, CepamError)):
        log.warning("cepam_mod: %s", exc)
    else:
        log.error("cepam_mod: %s while %s", name, stage, exc_info=exc)
    return Message(Error(ERROR_CODE, f"cepam_mod: {name}: {text}"), reply_to=msg)
