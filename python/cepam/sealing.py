"""Sealing: a payload's data-dependent part, encrypted then authenticated.

A payload (format version 10) is ``header || ciphertext || tag``:

* ``header``: the public header (:mod:`cepam.payload`), in clear;
* ``ciphertext = plaintext XOR ChaCha20(seal key)``, the RFC 8439 keystream
  under the message's seal key (:func:`cepam.keys.seal_key`, derived from the
  secret, the context and the header's payload nonce), ChaCha20 nonce ``(0, 0, "SEAL")``, block counter from 0,
  computed by the native core (in parallel, by parts of 1 MiB); ``plaintext``
  is the sealed section (lattice, n, body size, body, zero padding);
* ``tag``: the MAC key's tag of ``header || ciphertext``, per-segment
  HMAC-SHA256 tags combined by an outer HMAC-SHA256 and truncated to 16
  bytes (:func:`cepam.keys.payload_tag`; docs/format.md gives the security
  argument).

Sealing builds the payload in one bytes object: the header copied in, the
sealed section copied and encrypted in one pass, the tag computed over a
view of the rest and written last.  Opening checks the magic, version and
minimum length, then the tag (in constant time) over a view of everything
before it, and only then parses the header, decrypts and parses the sealed
section: a payload altered anywhere, or sealed under another secret, is an
:class:`~cepam.errors.AuthenticationError` before any of its contents is
read.  Opening decrypts the body into new bytes and copies nothing else of
a large payload (a sealed section of up to 64 KiB is decrypted whole, in one
call, and its body copied out of it; a payload in a writable buffer is first
copied once, so that it cannot change between its check and its use).
"""

from __future__ import annotations

import hmac

from ._native import core as _core
from .errors import AuthenticationError, InvalidTypeError
from .keys import (TAG_BYTES, SecretKeys, check_tag_threads, checked_payload_tag, core_tags,
                   payload_tag)
from .payload import (
    _parse_header,
    DIGEST_BYTES,
    SEALED_HEADER_BYTES,
    Header,
    Sealed,
    check_padding,
    check_prefix,
    from_fields,
    key_tail,
    pack_header,
    parse_sealed,
    parse_sealed_head,
)
from .structure import BARE

__all__ = ["seal", "verified", "open_payload"]


def seal(header: Header, plaintext: bytes | bytearray, *, secret: bytes | SecretKeys,
         body: bytes | _core.CodedBody = b"", padding: int = 0, threads: int = 1,
         head: bytes | None = None) -> bytes:
    """The payload whose sealed section is ``plaintext || body || padding``
    zero bytes, under ``header`` (``head``: ``pack_header(header)`` where the
    caller has it already); ``secret`` is a checked 32-byte secret (or its
    :class:`~cepam.keys.SecretKeys`).
    The body (bytes, or the encoder's ``_core.CodedBody``, whose parts are
    written here and released: it can be sealed once) is copied once, into
    the payload, and encrypted on up to ``threads`` native threads, and the
    tag computed by the core (a short payload) or on up to ``threads``
    Python threads: the bytes do not depend on ``threads``."""
    keys = SecretKeys.of(secret)
    mac = keys.mac()
    head = pack_header(header) if head is None else head
    short = core_tags(len(head) + len(plaintext) + len(body) + padding)
    # (by position: head, sealed_head, body, padding, key, threads, tag_bytes,
    # tag_of, mac_key; a short payload's tag is the core's, tag_of None)
    return _core.seal_payload(
        head, bytes(plaintext), body, padding, keys.seal(header.context, header.nonce), threads,
        TAG_BYTES, None if short else lambda data: payload_tag(mac, data, threads=threads), mac)


def verified(payload: object, secret: bytes | SecretKeys, *, threads: int = 1) -> memoryview:
    """A read-only view of the payload once its tag verifies under
    ``secret`` (or its keys; over a copy if the payload is in a writable
    buffer).

    Raises:
        InvalidTypeError: payload is not bytes-like.
        FormatError: not a cepam payload of this version (magic, version or
            length; nothing else is read).
        AuthenticationError: the tag does not verify.
    """
    threads = check_tag_threads(threads)
    view = _payload_view(payload)
    _check_tag(view, SecretKeys.of(secret).mac(), threads=threads)
    return view


def _payload_view(payload: object) -> memoryview:
    """A read-only byte view of ``payload`` (of a copy if it is in a writable
    buffer), its magic, version and length checked (:func:`verified`)."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
    view = memoryview(payload)
    if not view.readonly or not view.c_contiguous:
        view = memoryview(view.tobytes())
    view = view.cast("B")
    check_prefix(view)
    return view


def _check_tag(view: memoryview, mac: bytes, *, threads: int) -> None:
    """Raises AuthenticationError unless ``view`` ends with its tag under ``mac``."""
    # (payload_tag's checks hold here: mac and view are the caller's own)
    tag = checked_payload_tag(mac, view[:-TAG_BYTES], threads=threads)
    if not hmac.compare_digest(tag, view[-TAG_BYTES:]):
        raise AuthenticationError(
            "payload tag does not verify: wrong secret, or the payload was altered"
        )


#: A sealed section up to this many bytes is decrypted whole, in one call,
#: and parsed from its plaintext; a longer one head first, then the body
#: alone (so that a large body is decrypted once, into its own bytes).
_WHOLE_BYTES = 1 << 16


def open_payload(payload: object, secret: bytes | SecretKeys, *,
                 threads: int = 1) -> tuple[Header, Sealed]:
    """Verifies, then parses and decrypts a payload: its public header and
    its sealed section (the body decrypted on up to ``threads`` threads);
    ``secret``: a checked secret, or its :class:`~cepam.keys.SecretKeys`.

    Raises:
        InvalidTypeError, FormatError, AuthenticationError: as
            :func:`verified`; FormatError also for a malformed header or
            sealed section (possible only from a holder of the secret).
    """
    keys = SecretKeys.of(secret)
    view = _payload_view(payload)
    # The payload's three keys in one call, from its header's context and
    # nonce read before the tag is checked (they only key the derivation;
    # the MAC key does not depend on them).
    _, key, mac = keys.payload_at(key_tail(view))
    _check_tag(view, mac, threads=threads)
    header, offset = _parse_header(view)  # (its prefix checked by _payload_view)
    keys.bind(header.context, header.nonce)  # (parsed from the tail's bytes)
    end = len(view) - TAG_BYTES
    bare = header.structure.container == BARE
    if end - offset <= _WHOLE_BYTES:
        plain = _core.unseal(view, offset, end, 0, key)  # (data, start, stop, first, key)
        return header, parse_sealed(plain, header.mechanism, bare=bare)
    head = bytearray(view[offset : min(end, offset + SEALED_HEADER_BYTES + DIGEST_BYTES)])
    _core.seal_xor(head, key=key)
    sealed = parse_sealed_head(head, header.mechanism, size=end - offset, bare=bare)
    stop = end - sealed.padding
    if sealed.padding:
        check_padding(_core.unseal(view, start=stop, stop=end, first=stop - offset, key=key,
                                   threads=threads))
    body = _core.unseal(view, start=offset + sealed.size, stop=stop, first=sealed.size, key=key,
                        threads=threads)
    return header, from_fields(Sealed, (sealed.lattice, sealed.n, body, sealed.padding,
                                        sealed.digest))
