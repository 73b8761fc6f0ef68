"""Sealing: a payload's data-dependent part, encrypted then authenticated.

A payload (format version 4) is ``header || ciphertext || tag``:

* ``header``: the public header (:mod:`cepam.payload`), in clear;
* ``ciphertext = plaintext XOR ChaCha20(seal key)``, the RFC 8439 keystream
  under the message's seal key (:func:`cepam.keys.seal_key`, derived from the
  secret and the context), nonce ``(0, 0, "SEAL")``, block counter from 0,
  computed by the native core; ``plaintext`` is the sealed section (lattice,
  n, body size, body, zero padding);
* ``tag = HMAC-SHA256(MAC key, header || ciphertext)`` truncated to 16 bytes.

Opening checks the magic, version and minimum length, then the tag (in
constant time) over everything before it, and only then parses the header,
decrypts and parses the sealed section: a payload altered anywhere, or
sealed under another secret, is an :class:`~cepam.errors.AuthenticationError`
before any of its contents is read.
"""

from __future__ import annotations

import hmac

from ._native import core as _core
from .errors import AuthenticationError, InvalidTypeError
from .keys import TAG_BYTES, mac_key, payload_tag, seal_key
from .payload import Header, Sealed, check_prefix, pack_header, parse_header, parse_sealed
from .structure import BARE

__all__ = ["seal", "verified", "open_payload"]


def seal(header: Header, plaintext: bytearray, *, secret: bytes,
         head: bytes | None = None) -> bytes:
    """The payload carrying ``plaintext`` (a sealed section, encrypted in
    place) under ``header``; ``secret`` is a checked 32-byte secret;
    ``head``: ``pack_header(header)`` where the caller has it already."""
    _core.seal_xor(plaintext, key=seal_key(secret, header.context))
    if head is None:
        head = pack_header(header)
    # The tag over header and section without joining them first, then one
    # join: the payload is built with one copy of the section.
    tag = payload_tag(mac_key(secret), head, plaintext)
    return b"".join((head, plaintext, tag))


def verified(payload: object, secret: bytes) -> bytes:
    """The payload as bytes once its tag verifies under ``secret``.

    Raises:
        InvalidTypeError: payload is not bytes-like.
        FormatError: not a cepam payload of this version (magic, version or
            length; nothing else is read).
        AuthenticationError: the tag does not verify.
    """
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
    payload = bytes(payload)
    check_prefix(payload)
    data, tag = memoryview(payload)[:-TAG_BYTES], payload[-TAG_BYTES:]  # (no copy)
    if not hmac.compare_digest(payload_tag(mac_key(secret), data), tag):
        raise AuthenticationError(
            "payload tag does not verify: wrong secret, or the payload was altered"
        )
    return payload


def open_payload(payload: object, secret: bytes) -> tuple[Header, Sealed]:
    """Verifies, then parses and decrypts a payload: its public header and
    its sealed section.

    Raises:
        InvalidTypeError, FormatError, AuthenticationError: as
            :func:`verified`; FormatError also for a malformed header or
            sealed section (possible only from a holder of the secret).
    """
    payload = verified(payload, secret)
    header, offset = parse_header(payload)
    plaintext = bytearray(memoryview(payload)[offset:-TAG_BYTES])  # (one copy)
    _core.seal_xor(plaintext, key=seal_key(secret, header.context))
    return header, parse_sealed(plaintext, header.mechanism,
                                bare=header.structure.container == BARE)
