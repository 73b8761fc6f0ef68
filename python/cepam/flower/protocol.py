"""What travels between :func:`cepam_mod` and :class:`CepamStrategy`.

The server adds one :class:`flwr.app.ConfigRecord` named :data:`CONFIG_RECORD`
to each train message (its own RecordDict per node), holding
:class:`RoundConfig`: the mechanism, scale and clip every payload must use,
the codec's lattice (and ``lattice="auto"``'s preference) and coder, the
round, a random per-message number (so that no context repeats: Flower
restarts rounds at 1 in every run and may
resend a message), the padding, and how keys are obtained.

The client replies with its train reply's ArrayRecords (one or several)
replaced by one ArrayRecord named :data:`PAYLOAD_RECORD` holding one
:class:`flwr.app.Array` named :data:`PAYLOAD_ARRAY` (dtype ``uint8``, stype
:data:`PAYLOAD_STYPE`, a bare payload as its bytes: the update of every
float array of every ArrayRecord, in the order of the train message), its
own metrics unchanged (nothing about the payload's size: the server knows
it, and only what padding makes public is released) plus, when the
configuration asks for it (``count-sigma``), the client's noised
clipped-or-not bit as :data:`UNCLIPPED_METRIC`, and, with key
agreement, its public key (:data:`CLIENT_KEY`) in a ConfigRecord named
:data:`CONFIG_RECORD`, with, from a node that binds it to its Flower
identity, the signature on it (:data:`CLIENT_KEY_SIGNATURE`,
:func:`.keys.sign_key_binding`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import cepam
from cepam.errors import FormatError, InvalidArgumentError
from cepam.auto import PREFERENCES
from cepam.padding import PAD_MODES
from cepam.payload import VERSION
from cepam.structure import BUFFER_CHOICES

__all__ = [
    "CONFIG_RECORD", "PAYLOAD_RECORD", "PAYLOAD_ARRAY", "PAYLOAD_STYPE", "KEYS_AGREED",
    "KEYS_PRESHARED", "ACCOUNTED", "UNCLIPPED_METRIC", "RoundConfig", "mechanism_of", "flat_name",
    "pad_to_text", "pad_from_text", "is_float", "FLOWER_CLIPPING_KEY", "flower_clipping_text",
]

CONFIG_RECORD = "cepam"
#: The config key Flower's central-DP wrappers send their clip in: refused by
#: the server in the inner strategy's train messages and by the mod in the
#: messages it gets (cepam clips and adds noise itself).
FLOWER_CLIPPING_KEY = "clipping_norm"


def flower_clipping_text(what: str) -> str:
    """The refusal of :data:`FLOWER_CLIPPING_KEY` in ``what`` (who sends it)."""
    return (f"{what} Flower's DP clipping configuration (config key {FLOWER_CLIPPING_KEY!r}, "
            "which its DP wrappers send; a key of your own by that name must be renamed); "
            "cepam clips and adds noise itself: use one or the other")
PAYLOAD_RECORD = "cepam-payload"
PAYLOAD_ARRAY = "cepam"
PAYLOAD_STYPE = f"cepam/v{VERSION}"
KEYS_AGREED, KEYS_PRESHARED = "x25519", "pre-shared"
CLIENT_KEY = "client-key"
#: The reply's signature binding the client's X25519 key to its identity.
CLIENT_KEY_SIGNATURE = "client-key-signature"
#: The reply metric holding the client's noised clipped-or-not bit.
UNCLIPPED_METRIC = "cepam-unclipped"

#: The mechanisms a cepam configuration carries: those :mod:`.budget` accounts for.
ACCOUNTED = (cepam.Gaussian, cepam.Laplace)
_MECHANISMS = {cls.name: cls for cls in ACCOUNTED}


def flat_name(record: str, array: str) -> str:
    """The name an array of an ArrayRecord has in the coded update."""
    return f"{record}/{array}"


def pad_to_text(pad: str | int | None) -> str:
    """``pad`` as the configuration carries it: "", "bucket", "max", "levels" or digits."""
    return "" if pad is None else str(pad)


def pad_from_text(text: str) -> str | int | None:
    """The inverse of :func:`pad_to_text` (raises FormatError)."""
    if text == "":
        return None
    if text in PAD_MODES:
        return text
    if text.isdigit():
        return int(text)
    raise FormatError(f"unknown padding {text!r} in the cepam configuration")


def mechanism_of(name: str, scale: float) -> cepam.Gaussian | cepam.Laplace:
    """The mechanism a configuration names (raises FormatError if unknown)."""
    if name not in _MECHANISMS:
        raise FormatError(f"unknown mechanism {name!r} in the cepam configuration")
    return _MECHANISMS[name](scale)


@dataclass(frozen=True)
class RoundConfig:
    """One node's cepam configuration for one train message.

    Attributes:
        mechanism: ``cepam.Gaussian`` or ``cepam.Laplace``.
        clip: l2 bound of the whole update.
        lattice, dim, coder: codec settings (``dim`` None: the lattice's own).
        round: the server round (the payload context's round).
        message: a random number in [0, 2^63) fresh for every message (the
            context's message).
        keys: :data:`KEYS_AGREED` or :data:`KEYS_PRESHARED`.
        pad: the padding every payload must use (``cepam.encode``'s ``pad``).
        server_key: the server's X25519 public key (32 bytes) for
            :data:`KEYS_AGREED`, else empty.
        count_sigma: None, or the std of the Gaussian noise the client adds
            to its clipped-or-not bit (``1`` if its update's l2 norm is at
            most ``clip`` before clipping, else ``0``) and reports in the
            reply's metrics as :data:`UNCLIPPED_METRIC` (the server asks for
            it to publish the round's clipped fraction and, with adaptive
            clipping, to move the clip).
        buffers: what the client does with the running statistics of its
            normalisation layers (``cepam.encode``'s ``buffers``:
            ``"separate"``, ``"joint"`` or ``"local"``); a configuration
            without the key means ``"separate"``, the codec's default.
        prefer: ``lattice="auto"``'s preference (``cepam.encode``'s
            ``prefer``: ``"balanced"``, ``"bits"`` or ``"speed"``); a
            configuration without the key means ``"balanced"``, the
            codec's default.
    """

    mechanism: cepam.Gaussian | cepam.Laplace
    clip: float
    lattice: str
    dim: int | None
    coder: str
    round: int
    message: int
    keys: str
    server_key: bytes = b""
    pad: str | int | None = None
    count_sigma: float | None = None
    buffers: str = "separate"
    prefer: str = "balanced"

    def to_record(self) -> dict[str, Any]:
        """The values of the ConfigRecord (str, int, float, bytes only)."""
        return {
            "mechanism": self.mechanism.name, "scale": float(self.mechanism.scale),
            "clip": float(self.clip), "lattice": self.lattice,
            "dim": 0 if self.dim is None else int(self.dim), "coder": self.coder,
            "round": int(self.round), "message": int(self.message), "keys": self.keys,
            "server-key": bytes(self.server_key), "pad": pad_to_text(self.pad),
            "count-sigma": 0.0 if self.count_sigma is None else float(self.count_sigma),
            "buffers": self.buffers, "prefer": self.prefer,
        }

    @classmethod
    def from_record(cls, record: Any) -> "RoundConfig":
        """Reads the ConfigRecord a server sent.

        Raises:
            FormatError: a missing or ill-typed field.
        """
        try:
            values = {k: record[k] for k in ("mechanism", "scale", "clip", "lattice", "dim",
                                              "coder", "round", "message", "keys",
                                              "server-key", "pad")}
            config = cls(mechanism=mechanism_of(str(values["mechanism"]), values["scale"]),
                         clip=float(values["clip"]), lattice=str(values["lattice"]),
                         dim=int(values["dim"]) or None, coder=str(values["coder"]),
                         round=int(values["round"]), message=int(values["message"]),
                         keys=str(values["keys"]), server_key=bytes(values["server-key"]),
                         pad=pad_from_text(str(values["pad"])),
                         count_sigma=float(record.get("count-sigma", 0.0)) or None,
                         buffers=str(record.get("buffers", "separate")),
                         prefer=str(record.get("prefer", "balanced")))
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"malformed cepam configuration: {exc}") from None
        if config.keys not in (KEYS_AGREED, KEYS_PRESHARED):
            raise FormatError(f"unknown key mode {config.keys!r}")
        if config.keys == KEYS_AGREED and len(config.server_key) != 32:
            raise FormatError("key agreement without a 32-byte server key")
        if config.count_sigma is not None and not (math.isfinite(config.count_sigma)
                                                   and config.count_sigma > 0.0):
            raise FormatError(f"count-sigma must be a positive finite number or 0, got "
                              f"{config.count_sigma!r}")
        if config.buffers not in BUFFER_CHOICES:
            raise FormatError(f"buffers must be one of {BUFFER_CHOICES}, got "
                              f"{config.buffers!r}")
        if config.prefer not in PREFERENCES:
            raise FormatError(f"prefer must be one of {PREFERENCES}, got {config.prefer!r}")
        if config.prefer != "balanced" and config.lattice != "auto":
            raise FormatError(f"prefer={config.prefer!r} needs lattice 'auto', not "
                              f"{config.lattice!r}")
        if config.round < 0 or config.message < 0:
            raise InvalidArgumentError("round and message must be non-negative")
        return config


def is_float(array: np.ndarray) -> bool:
    """Is ``array`` of a floating dtype (an array the clients code)?"""
    return bool(np.issubdtype(array.dtype, np.floating))
