"""Secrets, per-message keys and payload tags.

The privacy of LRSUQ holds only against parties who do not know the shared
randomness (docs/design.md, sections 5 and 6), so the randomness comes from a 32-byte secret
shared by one client and the server:

* ``stream key = HKDF-SHA256(secret, salt=FORMAT_TAG, info=FORMAT_TAG ||
  "/stream" || round || client || message || nonce)`` (RFC 5869; the three
  context numbers as little-endian uint64, then the payload's 16-byte nonce)
  keys the ChaCha20 stream of one message;
* ``seal key = HKDF-SHA256(secret, salt=FORMAT_TAG, info=FORMAT_TAG ||
  "/seal" || round || client || message || nonce)`` keys the ChaCha20
  keystream that encrypts the payload's sealed section (format version 4 on);
* ``MAC key = HKDF-SHA256(secret, salt=FORMAT_TAG, info=FORMAT_TAG || "/mac")``
  keys the payload tag over the public header and the sealed section's
  ciphertext (format version 5: per-segment HMAC-SHA256 tags combined by an
  outer HMAC-SHA256, truncated to 16 bytes; :func:`payload_tag`);
* ``fingerprint = HKDF-SHA256(secret, salt=FORMAT_TAG, info=FORMAT_TAG ||
  "/context-guard")``, 16 bytes, names a secret in the persistent context
  guard (:mod:`cepam.guard`) without revealing it.

The nonce (format version 8 on) is drawn afresh for every payload from the
operating system's secure random source (:func:`new_nonce`) and written in
the payload's public header, which the tag covers: two payloads share their
dithers, latent scales and sealing keystream only if they share the secret,
the context *and* the nonce, which happens by accident with probability
about ``q^2 / 2^129`` over ``q`` payloads.  Both keys come from
:func:`message_key` alone.  An encoder that passes its own nonce
(``encode(..., nonce=...)``: golden files, reproducible experiments) takes
back the duty of never reusing one with the same secret and context.
Encoding two messages under one context stays a privacy event for the
accountant even with fresh nonces (two releases of one client in one
round); :class:`cepam.Codec` and :mod:`cepam.guard` refuse it.
"""

from __future__ import annotations

import hmac
import operator
import secrets as _secrets
import struct
from dataclasses import dataclass

import numpy as np

from ._native import core as _core
from ._thread_pool import map_on_threads
from .errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "FORMAT_TAG",
    "SECRET_BYTES",
    "TAG_BYTES",
    "Context",
    "NONCE_BYTES",
    "new_secret",
    "new_nonce",
    "check_nonce",
    "hkdf",
    "hkdf_extract",
    "hkdf_expand",
    "SecretKeys",
    "TAIL_BYTES",
    "message_key",
    "stream_key",
    "seal_key",
    "mac_key",
    "MAC_SEGMENT_BYTES",
    "payload_tag",
    "core_tags",
    "guard_fingerprint",
]

FORMAT_TAG = b"cepam/lrsuq/v1"
SECRET_BYTES = 32
NONCE_BYTES = 16  # the per-payload nonce in the public header (format version 8)
# The payload tag's length, segments (format version 5) and labels: the
# core's (payload/tag.hpp), which tags a payload of one segment itself.
TAG_BYTES: int = _core.TAG_BYTES
MAC_SEGMENT_BYTES: int = _core.MAC_SEGMENT_BYTES
_SEGMENT_LABEL: bytes = _core.SEGMENT_LABEL
_TAG_LABEL: bytes = _core.TAG_LABEL
_U64 = 1 << 64
_SEGMENT_HEAD = struct.Struct("<QQ")
# Data up to this many bytes is tagged by the native core in one call
# (payload/tag.hpp; segments that long by random/sha256.hpp), longer data by
# hashlib (OpenSSL), which hashes long data faster where the CPU lacks SHA
# extensions; the tag is the same.
_NATIVE_MAC_BYTES = 1 << 14


def core_tags(length: int) -> bool:
    """Whether a payload of ``length`` bytes before its tag is tagged by the
    core in one call (payload/tag.hpp), by :func:`payload_tag` and, as it
    seals it, by :func:`cepam.sealing.seal`; the one rule of both."""
    return length <= _NATIVE_MAC_BYTES


def new_secret() -> bytes:
    """32 bytes from the operating system's secure random source.

    Returns:
        32 random bytes: a secret for one client and the server.
    """
    return _secrets.token_bytes(SECRET_BYTES)


def new_nonce() -> bytes:
    """Returns a fresh 16-byte payload nonce from the operating system's
    secure random source."""
    return _secrets.token_bytes(NONCE_BYTES)


def check_nonce(nonce: object) -> bytes:
    """``nonce`` as bytes, checked: bytes-like of ``NONCE_BYTES`` bytes.

    Raises:
        InvalidTypeError: not bytes-like.
        InvalidArgumentError: not 16 bytes long.
    """
    return _fixed_bytes("nonce", nonce, NONCE_BYTES, "or None: a fresh one")


def check_secret(secret: object) -> bytes:
    """``secret`` as bytes, checked: bytes-like of ``SECRET_BYTES`` (32) bytes.

    Raises:
        InvalidTypeError: not bytes-like.
        InvalidArgumentError: not 32 bytes long.
    """
    if type(secret) is bytes and len(secret) == SECRET_BYTES:  # (the common case, first)
        return secret
    return _fixed_bytes("secret", secret, SECRET_BYTES, "use cepam.new_secret()")


def _check_bytes(name: str, value: object) -> bytes | bytearray | memoryview:
    """``value``, which must be bytes-like (bytes, bytearray or memoryview;
    InvalidTypeError otherwise: not an int, which ``bytes()`` would take for
    a count of zero bytes)."""
    if type(value) is not bytes and not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"{name} must be bytes, got {type(value).__name__}")
    return value


def _fixed_bytes(name: str, value: object, size: int, hint: str) -> bytes:
    """``value`` as bytes, checked: bytes-like of ``size`` bytes (the
    message's ``hint`` in parentheses)."""
    value = bytes(_check_bytes(name, value))
    if len(value) != size:
        raise InvalidArgumentError(f"{name} must be {size} bytes ({hint}), got {len(value)}")
    return value


def check_integer(name: str, value: object) -> int:
    """value as a Python int; bools, arrays and non-integers raise InvalidTypeError."""
    if type(value) is int:  # (the common case, first)
        return value
    if isinstance(value, (bool, np.bool_)) or "bool" in str(getattr(value, "dtype", "")):
        raise InvalidTypeError(f"{name} must be an integer, got bool")
    if getattr(value, "ndim", 0) != 0:  # (torch takes a one-element tensor as an index)
        raise InvalidTypeError(f"{name} must be an integer, got a {type(value).__name__} of "
                               f"shape {tuple(value.shape)}")  # type: ignore[attr-defined]
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidTypeError(f"{name} must be an integer, got {type(value).__name__}") from None


def check_u64(name: str, value: object) -> int:
    """``value``, an integer in [0, 2^64) (a context's field).

    Raises:
        InvalidTypeError: not an integer (a bool included).
        InvalidArgumentError: outside [0, 2^64).
    """
    if type(value) is int and 0 <= value < _U64:
        return value  # (the common case)
    value = check_integer(name, value)
    if not 0 <= value < _U64:
        raise InvalidArgumentError(f"{name} must be in [0, 2^64), got {value}")
    return int(value)


@dataclass(frozen=True, init=False)
class Context:
    """What makes a message unique under one secret: round, client, message id.

    Args:
        round: the training round, an integer in [0, 2^64).
        client: the client's id, an integer in [0, 2^64).
        message: the message's id within the round (default 0), in [0, 2^64).

    Raises:
        InvalidTypeError: a value that is not an integer (a bool included).
        InvalidArgumentError: a value outside [0, 2^64).
    """

    round: int
    client: int
    message: int = 0

    def __init__(self, round: int, client: int, message: int = 0) -> None:
        # (The dataclass's own __init__ sets each field by object.__setattr__,
        # as a frozen class must: 1.3 us a context, which every encode and
        # decode builds.  The instance's __dict__ takes them at a third of
        # that; the class stays a frozen dataclass: eq, hash, repr, replace.)
        if not (type(round) is int and type(client) is int and type(message) is int and
                0 <= round < _U64 and 0 <= client < _U64 and 0 <= message < _U64):
            round, client, message = (check_u64("round", round), check_u64("client", client),
                                      check_u64("message", message))
        fields = self.__dict__
        fields["round"], fields["client"], fields["message"] = round, client, message

    def __post_init__(self) -> None:
        # (not called by __init__ above: by the __init__ that @dataclass
        # writes for a subclass, which sets the fields unchecked)
        for name in ("round", "client", "message"):
            object.__setattr__(self, name, check_u64(name, getattr(self, name)))

    def pack(self) -> bytes:
        return struct.pack("<QQQ", self.round, self.client, self.message)


#: HKDF-SHA256's longest output (RFC 5869: 255 blocks of 32 bytes).
_HKDF_MAX_BYTES = 255 * 32
#: The length of every key derived from a secret (mac_key, stream_key, seal_key).
_KEY_BYTES = 32


def _check_hkdf_length(length: object) -> int:
    """``length``, an HKDF output length: an int in [1, 8160].

    Raises:
        InvalidTypeError: not an integer.
        InvalidArgumentError: outside [1, 8160].
    """
    length = check_integer("length", length)
    if not 0 < length <= _HKDF_MAX_BYTES:
        raise InvalidArgumentError(f"HKDF output length must be in [1, {_HKDF_MAX_BYTES}] "
                                   f"bytes, got {length}")
    return length


def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    """HKDF-Extract (RFC 5869 section 2.2) with SHA-256.

    Raises:
        InvalidTypeError: ``salt`` or ``ikm`` is not bytes-like.
    """
    salt, ikm = _check_bytes("salt", salt), _check_bytes("ikm", ikm)
    return _core.hmac_sha256(salt if salt else bytes(32), ikm)


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    """HKDF-Expand (RFC 5869 section 2.3) with SHA-256; length <= 8160 bytes.

    Raises:
        InvalidTypeError: ``prk`` or ``info`` is not bytes-like, or
            ``length`` not an integer.
        InvalidArgumentError: ``length`` outside [1, 8160].
    """
    prk, info = bytes(_check_bytes("prk", prk)), bytes(_check_bytes("info", info))
    length = _check_hkdf_length(length)
    out, block = b"", b""
    for counter in range(1, -(-length // 32) + 1):
        block = _core.hmac_sha256(prk, block + info + bytes([counter]))
        out += block
    return out[:length]


def hkdf(ikm: bytes, *, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869): Expand(Extract(salt, ikm), info, length),
    computed by the native core in one call (the same bytes as
    :func:`hkdf_expand` of :func:`hkdf_extract`; a few microseconds fewer
    than Python's ``hmac``, on every encode and decode).

    Args:
        ikm: the input keying material (bytes-like, any length).
        salt, info: bytes-like.
        length: the output's length in bytes, in [1, 8160].

    Raises:
        InvalidTypeError: ``ikm``, ``salt`` or ``info`` is not bytes-like
            (an int among them included), or ``length`` not an integer.
        InvalidArgumentError: length outside [1, 8160].
    """
    if type(length) is not int or not 0 < length <= _HKDF_MAX_BYTES:
        length = _check_hkdf_length(length)
    if type(ikm) is not bytes or type(salt) is not bytes or type(info) is not bytes:
        ikm, salt, info = (bytes(_check_bytes(name, value)) for name, value in
                           (("ikm", ikm), ("salt", salt), ("info", info)))
    return _core.hkdf_sha256(ikm, salt=salt, info=info, length=length)


#: The infos of the MAC key and of a payload's keys (before the context and nonce).
_MAC_INFO = FORMAT_TAG + b"/mac"
_STREAM_INFO, _SEAL_INFO = FORMAT_TAG + b"/stream", FORMAT_TAG + b"/seal"
#: Bytes of a payload's key tail: round, client, message (u64 each), nonce.
TAIL_BYTES = 24 + NONCE_BYTES


class SecretKeys:
    """The keys of one checked 32-byte secret, for one encode or decode.

    Every key of a payload (:func:`mac_key`, :func:`stream_key`,
    :func:`seal_key`) is HKDF-SHA256 of the secret with salt ``FORMAT_TAG``
    and 32 bytes long: one HKDF-Extract and one HMAC (HKDF-Expand's single
    block) a key.  A payload's three keys take one native call
    (:meth:`payload`), kept for the rest of the encode or decode.

    Raises:
        InvalidTypeError, InvalidArgumentError: ``secret`` is not 32 bytes
            (:func:`check_secret`).
    """

    __slots__ = ("_secret", "_last")

    def __init__(self, secret: bytes) -> None:
        self._secret = check_secret(secret)
        # The last payload's context and nonce (the objects), key tail and keys.
        self._last: tuple[object, object, bytes, tuple[bytes, bytes, bytes]] | None = None

    @classmethod
    def of(cls, secret: "bytes | SecretKeys") -> "SecretKeys":
        """``secret``'s keys (a checked secret), or ``secret`` if it is keys already."""
        return secret if isinstance(secret, SecretKeys) else cls(secret)

    def _keys(self, infos: tuple[bytes, ...]) -> tuple[bytes, ...]:
        return _core.hkdf_keys(self._secret, FORMAT_TAG, infos)  # (ikm, salt, infos)

    def mac(self) -> bytes:
        """The 32-byte HMAC key of all payloads under the secret."""
        last = self._last
        return last[3][2] if last is not None else self._keys((_MAC_INFO,))[0]

    def message(self, label: bytes, context: Context, nonce: bytes) -> bytes:
        """The 32-byte key ``label`` (``b"/stream"``, ``b"/seal"``) of one
        payload: HKDF-SHA256 with ``info = FORMAT_TAG || label || round ||
        client || message || nonce`` (fixed widths: one parse).  Every
        per-payload key is derived so, each depending on the nonce.

        Raises:
            InvalidTypeError, InvalidArgumentError: a nonce that is not 16
                bytes, a label that is not bytes, a context that is not a
                :class:`Context`.
        """
        label = bytes(_check_bytes("label", label))
        return self._keys((FORMAT_TAG + label + check_context(context).pack()
                           + check_nonce(nonce),))[0]

    def payload_at(self, tail: bytes) -> tuple[bytes, bytes, bytes]:
        """:meth:`stream`, :meth:`seal` and :meth:`mac` of the payload whose
        context and nonce pack to ``tail`` (``TAIL_BYTES``: as a header
        holds them), derived in one native call, or kept from the last call
        with the same tail."""
        last = self._last
        if last is not None and last[2] == tail:
            return last[3]
        keys: tuple[bytes, bytes, bytes] = self._keys(  # type: ignore[assignment]
            (_STREAM_INFO + tail, _SEAL_INFO + tail, _MAC_INFO))
        self._last = (None, None, tail, keys)
        return keys

    def bind(self, context: Context, nonce: bytes) -> None:
        """Records ``context`` and ``nonce`` as the objects that pack to the
        last :meth:`payload_at` tail (a header parsed from the bytes that
        tail was read from), so that :meth:`payload` with them takes the
        keys kept without packing them."""
        last = self._last
        if last is not None:
            self._last = (context, nonce, last[2], last[3])

    def payload(self, context: Context, nonce: bytes) -> tuple[bytes, bytes, bytes]:
        """:meth:`payload_at` of ``context`` and ``nonce`` (the same objects
        as the last call's: no packing).

        Raises:
            InvalidTypeError, InvalidArgumentError: a nonce that is not 16 bytes.
        """
        last = self._last
        if last is not None and last[0] is context and last[1] is nonce:
            return last[3]
        if type(nonce) is not bytes or len(nonce) != NONCE_BYTES:
            nonce = check_nonce(nonce)
        tail = check_context(context).pack() + nonce
        keys = self.payload_at(tail)
        self._last = (context, nonce, tail, keys)
        return keys

    def stream(self, context: Context, nonce: bytes) -> bytes:
        """The ChaCha20 key of one message's random streams (dithers and
        latent scales), under its payload's ``nonce``."""
        return self.payload(context, nonce)[0]

    def seal(self, context: Context, nonce: bytes) -> bytes:
        """The ChaCha20 key that encrypts one message's sealed section,
        under its payload's ``nonce``."""
        return self.payload(context, nonce)[1]


def check_context(context: object) -> Context:
    """``context``, which must be a :class:`Context` (InvalidTypeError otherwise)."""
    if type(context) is not Context and not isinstance(context, Context):
        raise InvalidTypeError(f"context must be a cepam.Context, got {type(context).__name__}")
    return context


def message_key(secret: bytes, label: bytes, context: Context, nonce: bytes) -> bytes:
    """The 32-byte key ``label`` of one payload (:meth:`SecretKeys.message`)."""
    return SecretKeys(secret).message(label, context, nonce)


def stream_key(secret: bytes, context: Context, nonce: bytes) -> bytes:
    """The 32-byte ChaCha20 key of one message's random streams (dithers and
    latent scales), under its payload's ``nonce``."""
    return SecretKeys(secret).stream(context, nonce)


def seal_key(secret: bytes, context: Context, nonce: bytes) -> bytes:
    """The 32-byte ChaCha20 key that encrypts one message's sealed section,
    under its payload's ``nonce``."""
    return SecretKeys(secret).seal(context, nonce)


def mac_key(secret: bytes) -> bytes:
    """The 32-byte HMAC key of all payloads under one secret."""
    return SecretKeys(secret).mac()


def payload_tag(key: bytes, data: bytes | bytearray | memoryview, *, threads: int = 1) -> bytes:
    """The 16-byte tag of ``data`` (a payload's header and ciphertext) under
    the MAC key ``key``: ``data`` cut into ``k = max(1, ceil(L / 2^20))``
    segments of ``MAC_SEGMENT_BYTES`` (the last one may be shorter; one empty
    segment if ``L = 0``), each tagged on its own,

        t_i = HMAC-SHA256(key, "cepam/seg" || u64 i || u64 len_i || segment_i),

    and the segment tags combined,

        tag = HMAC-SHA256(key, "cepam/tag" || u64 L || u64 k || t_0 || ... || t_(k-1))

    truncated to 16 bytes (u64: little-endian; i from 0).  The segments are
    tagged on up to ``threads`` Python threads (hashlib releases the GIL over
    large buffers; ``cepam._thread_pool``) when there are several; the tag
    does not depend on it.
    docs/format.md gives the security argument.

    Raises:
        InvalidTypeError: ``key`` is not bytes-like, ``data`` no buffer,
            or ``threads`` not an integer.
        InvalidArgumentError: ``key`` is not 32 bytes (a MAC key,
            :func:`mac_key`), ``data`` not contiguous, ``threads`` below 1.
    """
    if type(key) is not bytes or len(key) != _KEY_BYTES:
        key = _fixed_bytes("key", key, _KEY_BYTES, "a MAC key: mac_key(secret)")
    threads = check_tag_threads(threads)
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidTypeError(f"data must be bytes, got {type(data).__name__}") from None
    try:
        view = view.cast("B")
    except (TypeError, ValueError) as exc:  # (a view that is not C-contiguous)
        raise InvalidArgumentError(f"data must be contiguous bytes: {exc}") from None
    return checked_payload_tag(key, view, threads=threads)


def check_tag_threads(threads: object) -> int:
    """``threads`` for :func:`payload_tag`: an integer, at least 1.

    Raises:
        InvalidTypeError: not an integer.
        InvalidArgumentError: below 1.
    """
    if type(threads) is not int or threads < 1:
        threads = check_integer("threads", threads)
        if threads < 1:
            raise InvalidArgumentError(f"threads must be at least 1, got {threads}")
    return threads


def checked_payload_tag(key: bytes, view: memoryview, *, threads: int) -> bytes:
    """:func:`payload_tag` of arguments already checked: a 32-byte ``key``,
    a C-contiguous byte view and ``threads >= 1`` (a decoder's own, on every
    payload it opens)."""
    total = len(view)
    if core_tags(total):  # (one short segment: the core's, in one call)
        return _core.payload_tag(key, view)
    count = -(-total // MAC_SEGMENT_BYTES)

    def segment(i: int) -> bytes:
        part = view[i * MAC_SEGMENT_BYTES : (i + 1) * MAC_SEGMENT_BYTES]
        label = _SEGMENT_LABEL + _SEGMENT_HEAD.pack(i, len(part))
        if len(part) <= _NATIVE_MAC_BYTES:  # (short: one native call)
            return _core.hmac_sha256(key, label + part)
        mac = hmac.new(key, label, "sha256")  # (OpenSSL: its SHA extensions where it has them)
        mac.update(part)
        return mac.digest()

    tags = [segment(0)] if count == 1 else map_on_threads(segment, range(count), threads)
    outer = _TAG_LABEL + _SEGMENT_HEAD.pack(total, count) + b"".join(tags)
    return _core.hmac_sha256(key, outer)[:TAG_BYTES]


def guard_fingerprint(secret: bytes) -> bytes:
    """16 bytes that name ``secret`` in a context guard's records; one-way
    (HKDF), so the record reveals nothing about the secret or its keys.

    Raises:
        InvalidTypeError, InvalidArgumentError: ``secret`` is not 32 bytes
            (:func:`check_secret`).
    """
    return hkdf(check_secret(secret), salt=FORMAT_TAG, info=FORMAT_TAG + b"/context-guard",
                length=16)
