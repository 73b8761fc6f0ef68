"""The payload format (version 10).

A payload is ``public header || sealed section || tag``; all integers
little-endian.  The public header holds what the receiver needs before it
can derive keys and the public configuration; everything that depends on
the update (the lattice ``lattice="auto"`` chose, and the whole body with
its source model) is in the sealed section, encrypted with ChaCha20 under
the message's seal key (:func:`cepam.keys.seal_key`).  The tag covers both
(encrypt-then-MAC) and is checked before anything is decrypted or parsed
(:mod:`cepam.sealing`).

Public header:

=========  =====================================================================
field      contents
=========  =====================================================================
magic      4 bytes ``b"CEPM"``
version    uint8, 9
mechanism  uint8: 1 Gaussian, 2 Laplace, 3 SDQ (uniform)
coder      uint8: body coder (1: Golomb H + exp-Golomb M, 2: rANS, conditional)
container  uint8: 0 single array, 1 list, 2 tuple, 3 dict, 4 none (a bare
           payload: no entries, the decoder takes them from a template)
reserved   uint16, 0
scale      float64: sigma, b, or the SDQ step
clip       float64: l2 clip norm of the whole update (+inf: none)
context    3 x uint64: round, client, message
nonce      16 bytes: drawn afresh for each payload (version 8), mixed into
           the stream and seal keys (:func:`cepam.keys.message_key`)
m          uint64: number of coordinates
entries    uint32 count (0 for container 4), then per entry: uint16 name length, UTF-8 name,
           uint8 kind (0 numpy, 1 torch), uint8 dtype (1 float32, 2 float64,
           3 float16, 4 bfloat16), uint8 ndim, ndim x uint64 dims
=========  =====================================================================

Sealed section (after decryption):

=========  =====================================================================
lattice    uint8: 1 Z^n, 2 A2 (n = 2), 3 D4 (n = 4), 4 E8 (n = 8); A2, D4 and
           E8 with the Gaussian mechanism only
n          uint8: sub-vector dimension
padding    uint32: bytes of zero padding at the end of the section
digest     8 bytes, bare payloads (container 4) only: the first 8 bytes of the
           SHA-256 of the update's structure (:func:`cepam.template.digest`),
           which the decoder's template must match
body       in the coder's own layout (docs/format.md), up to the padding
zeros      the padding (length hiding)
=========  =====================================================================

The parsers treat their input as hostile: every read is bounds-checked and
every field range-checked before anything is allocated; the native body
decoder checks the body the same way.  Errors are
:class:`~cepam.errors.FormatError`.
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

from ._native import core as _core
from .errors import FormatError, InvalidArgumentError
from .keys import NONCE_BYTES, TAG_BYTES, TAIL_BYTES, Context, check_nonce
from .lattices import LATTICES, check_combination
from .mechanisms import MECHANISM_CODES
from .structure import BARE, DTYPES, MAX_NAME_BYTES, MAX_NDIM, Entry, Structure
from .template import bare

__all__ = ["MAGIC", "VERSION", "Header", "Sealed", "pack_header", "parse_header", "pack_sealed",
           "parse_sealed", "sealed_head", "parse_sealed_head", "SealedHead", "check_padding",
           "SEALED_HEADER_BYTES", "DIGEST_BYTES", "MAX_PADDING", "is_bare", "key_tail"]

MAGIC = b"CEPM"
VERSION = 10
#: Body coder code -> name, from the core's coder table (csrc/payload/body.cpp).
CODERS: dict[int, str] = {row["code"]: row["name"] for row in _core.CODERS}
CODER_CODES = {v: k for k, v in CODERS.items()}
_DTYPE_CODES = {v: k for k, v in DTYPES.items()}
_PREFIX = struct.Struct("<4sBBBBHdd")
_SEALED = struct.Struct("<BBI")
SEALED_HEADER_BYTES = _SEALED.size
DIGEST_BYTES = 8  # the structure digest of a bare payload, sealed
_CONTEXT = struct.Struct(f"<QQQ{NONCE_BYTES}sQ")  # round, client, message, nonce, m
assert _CONTEXT.size == TAIL_BYTES + 8  # (the keys' tail, then m)
_U32, _U16, _ENTRY = struct.Struct("<I"), struct.Struct("<H"), struct.Struct("<BBB")
_SHAPES = [struct.Struct(f"<{ndim}Q") for ndim in range(MAX_NDIM + 1)]  # by rank
_FIXED = struct.Struct(_PREFIX.format + _CONTEXT.format[1:] + _U32.format[1:])  # up to the entries
MAX_COORDINATES = 1 << 56
MAX_EXTENT = 1 << 56  # product of an entry's non-zero dimensions
MAX_PADDING = (1 << 32) - 1
MIN_PAYLOAD = _PREFIX.size + _CONTEXT.size + 4 + _SEALED.size + TAG_BYTES


#: ``from_fields(cls, values)``: the named tuple ``cls`` (Header, Sealed,
#: SealedHead) of ``values``, every field in order, built without the
#: class's ``__new__`` (a Python function: its call took two thirds of the
#: time, and a decode builds three of them).
from_fields = tuple.__new__


class Header(NamedTuple):
    """The public header: readable without the secret.  ``nonce``: the
    payload's 16 bytes (version 8), passed by keyword.  (Named tuples, this
    and the sealed section's: one is built on every encode and decode, at
    less than half a frozen dataclass's cost.)"""

    mechanism: int
    scale: float
    coder: int
    clip: float
    context: Context
    structure: Structure
    nonce: bytes

    @property
    def m(self) -> int:
        return self.structure.size


class Sealed(NamedTuple):
    """The sealed section, decrypted: the lattice, its dimension and the body."""

    lattice: int
    n: int
    body: bytes
    padding: int  # bytes of zero padding after the body
    digest: bytes = b""  # a bare payload's structure digest (DIGEST_BYTES); else empty


def is_bare(payload: bytes | memoryview) -> bool:
    """Whether a payload's header declares no structure (container 4: a
    bare payload), read from its fixed prefix without parsing the rest;
    False for bytes too short to hold the prefix."""
    return len(payload) >= _PREFIX.size and _PREFIX.unpack_from(payload)[4] == BARE


def pack_header(h: Header) -> bytes:
    """The header's bytes: the fixed part, then the structure's entries
    (packed once per structure: :meth:`~cepam.structure.Structure.derived`)."""
    nonce, context, structure = h.nonce, h.context, h.structure
    if type(nonce) is not bytes or len(nonce) != NONCE_BYTES:
        nonce = check_nonce(nonce)
    return _FIXED.pack(MAGIC, VERSION, h.mechanism, h.coder, structure.container, 0, h.scale,
                       h.clip, context.round, context.client, context.message, nonce,
                       structure.size, 0 if structure.container == BARE else
                       len(structure.entries)) + structure.derived("header", _pack_entries)


def _pack_entries(structure: Structure) -> bytes:
    """The header's entries of ``structure`` (none for a bare one)."""
    if structure.container == BARE:
        return b""
    parts = []
    for e in structure.entries:
        name = e.name.encode("utf-8")
        parts.append(_U16.pack(len(name)) + name)
        parts.append(_ENTRY.pack(e.kind, _DTYPE_CODES[e.dtype], len(e.shape)))
        parts.append(_SHAPES[len(e.shape)].pack(*e.shape))
    return b"".join(parts)


def key_tail(payload: bytes | memoryview) -> bytes:
    """The round, client, message and nonce of a payload's header as they
    are packed there and in its keys' infos (:meth:`cepam.keys.SecretKeys.
    payload_at`): bytes read at a fixed place, before anything is checked
    (a payload of :data:`MIN_PAYLOAD` bytes or more)."""
    return bytes(payload[_PREFIX.size : _PREFIX.size + TAIL_BYTES])


def check_prefix(payload: bytes | memoryview) -> None:
    """Magic, version and minimum length: checked before the tag (the
    version before the length, so that a short payload of another version,
    whose minimum differs, is named by its version)."""
    if len(payload) <= 4:
        raise FormatError(f"payload too short ({len(payload)} bytes) to be a cepam payload")
    if payload[:4] != MAGIC:
        raise FormatError("not a cepam payload (bad magic)")
    if payload[4] != VERSION:
        raise FormatError(f"unsupported payload format version {payload[4]} (this is {VERSION})")
    if len(payload) < MIN_PAYLOAD:
        raise FormatError(f"payload too short ({len(payload)} bytes) to be a cepam payload")


def _truncated(at: int, size: int, end: int) -> None:
    if at + size > end:
        raise FormatError("payload truncated in the header")


def parse_header(payload: bytes | memoryview) -> tuple[Header, int]:
    """Parses and validates the public header; returns it and the sealed
    section's offset.

    The tag is not checked here (see :mod:`cepam.sealing`).
    """
    check_prefix(payload)
    return _parse_header(payload)


def _parse_header(payload: bytes | memoryview) -> tuple[Header, int]:
    """:func:`parse_header` of a payload whose magic, version and length
    the caller has checked (:func:`check_prefix`: the sealing's opening
    checks them before the tag)."""
    end = len(payload) - TAG_BYTES
    _truncated(0, _FIXED.size, end)
    (_, _, mech, coder, container, reserved, scale, clip,
     rnd, client, message, nonce, m, count) = _FIXED.unpack_from(payload)
    pos = _FIXED.size
    if mech not in MECHANISM_CODES:
        raise FormatError(f"unknown mechanism code {mech}")
    if coder not in CODERS:
        raise FormatError(f"unknown body coder {coder}")
    if container not in (0, 1, 2, 3, BARE) or reserved != 0:
        raise FormatError("bad container code or reserved field")
    if not (math.isfinite(scale) and scale > 0.0):
        raise FormatError("noise scale must be positive and finite")
    if not (clip > 0.0) or math.isnan(clip):
        raise FormatError("clip norm must be positive (or +inf)")
    if m > MAX_COORDINATES:
        raise FormatError("declared number of coordinates too large")
    if container == BARE:  # no entries: m alone (the decoder's template shapes it)
        if count != 0:
            raise FormatError("a payload without structure has entries")
        header = from_fields(Header, (mech, scale, coder, clip, Context(rnd, client, message),
                                      bare(m), nonce))
        return header, pos
    # Each entry takes at least 5 bytes: bound the count before looping.
    if count < 1 or count > (end - pos) // 5 or (container == 0 and count != 1):
        raise FormatError("bad number of entries")
    structure, pos = _entries(payload, pos, end, container, m, count)
    if end - pos < _SEALED.size:
        raise FormatError("payload truncated before its sealed section")
    header = from_fields(Header, (mech, scale, coder, clip, Context(rnd, client, message),
                                  structure, nonce))
    return header, pos


#: The structures parse_header has built, by container, m and entry count:
#: the bytes of their entries and the structure (a server decodes the same
#: model's structure payload after payload).  At most _PARSED_KEYS of them,
#: of _PARSED_BYTES of entries in all (a structure's objects take about ten
#: times its bytes); a larger structure is not kept.
_PARSED: dict[tuple[int, int, int], tuple[bytes, Structure]] = {}
_PARSED_KEYS = 64
_PARSED_BYTES = 1 << 20


def _entries(payload: bytes | memoryview, pos: int, end: int, container: int, m: int,
             count: int) -> tuple[Structure, int]:
    """The structure of the ``count`` entries at ``pos`` and the offset after
    them.  The parse reads those bytes alone, in order, and depends on
    nothing else but ``container``, ``m``, ``count`` and whether they end by
    ``end``: where they are the entries of a structure parsed before under
    the same three, that structure is the parse (no entry is read again; a
    model of 300 entries: 680 us a header before, 4.5 us after).

    Raises:
        FormatError: as :func:`parse_header`.
    """
    key = (container, m, count)
    known = _PARSED.get(key)
    if known is not None:
        raw, structure = known
        if pos + len(raw) <= end and bytes(payload[pos : pos + len(raw)]) == raw:
            return structure, pos + len(raw)
    structure, after = _parse_entries(payload, pos, end, container, m, count)
    if after - pos <= _PARSED_BYTES:
        if len(_PARSED) >= _PARSED_KEYS or \
                after - pos + sum(len(raw) for raw, _ in _PARSED.values()) > _PARSED_BYTES:
            _PARSED.clear()
        _PARSED[key] = (bytes(payload[pos:after]), structure)
    return structure, after


def _parse_entries(payload: bytes | memoryview, pos: int, end: int, container: int, m: int,
                   count: int) -> tuple[Structure, int]:
    entries, names, total = [], set(), 0
    for _ in range(count):
        _truncated(pos, 2, end)
        (name_len,) = _U16.unpack_from(payload, pos)
        if name_len > MAX_NAME_BYTES:
            raise FormatError("entry name too long")
        pos += 2
        _truncated(pos, name_len, end)
        try:
            name = bytes(payload[pos : pos + name_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("entry name is not valid UTF-8") from None
        pos += name_len
        _truncated(pos, _ENTRY.size, end)
        kind, dtype, ndim = _ENTRY.unpack_from(payload, pos)
        pos += _ENTRY.size
        if kind not in (0, 1) or dtype not in DTYPES or ndim > MAX_NDIM:
            raise FormatError("bad entry kind, dtype or rank")
        dims = _SHAPES[ndim]
        _truncated(pos, dims.size, end)
        shape = dims.unpack_from(payload, pos)
        pos += dims.size
        size, extent = 1, 1
        for d in shape:
            size *= d
            extent *= max(d, 1)
        if extent > MAX_EXTENT:  # numpy cannot shape even an empty array so
            raise FormatError("entry shape too large")
        total += size
        if total > m:
            raise FormatError("entry shapes exceed the declared number of coordinates")
        if container == 3:
            if name in names:
                raise FormatError("duplicate entry name")
            names.add(name)
        elif name:
            raise FormatError("unnamed container with a named entry")
        entries.append(Entry(name, kind, DTYPES[dtype], shape))
    if total != m:
        raise FormatError("entry shapes do not add up to the declared number of coordinates")
    return Structure(container, tuple(entries)), pos


def sealed_head(lattice: int, n: int, padding: int, *, digest: bytes = b"") -> bytes:
    """The sealed section's start, in clear: lattice, n, padding length and
    the structure digest (a bare payload's ``DIGEST_BYTES``; empty otherwise);
    the body and ``padding`` zero bytes follow it (``padding <= MAX_PADDING``)."""
    if len(digest) not in (0, DIGEST_BYTES):
        raise ValueError(f"a structure digest has {DIGEST_BYTES} bytes")
    return _SEALED.pack(lattice, n, padding) + digest


def pack_sealed(lattice: int, n: int, body: bytes, padding: int, *,
                digest: bytes = b"") -> bytearray:
    """The whole sealed section's plaintext: :func:`sealed_head`, body, zeros."""
    head = sealed_head(lattice, n, padding, digest=digest)
    out = bytearray(len(head) + len(body) + padding)
    out[: len(head)] = head
    out[len(head) : len(head) + len(body)] = body
    return out


class SealedHead(NamedTuple):
    """A decrypted sealed section's start, validated against its size."""

    lattice: int
    n: int
    padding: int  # bytes of zero padding after the body
    digest: bytes  # a bare payload's structure digest (DIGEST_BYTES); else empty
    size: int  # bytes of the head (where the body starts)


def parse_sealed_head(head: bytes | bytearray, mechanism: int, *, size: int,
                      bare: bool = False) -> SealedHead:
    """Parses and validates the start of a decrypted sealed section of
    ``size`` bytes in all; ``head`` holds at least its first
    ``SEALED_HEADER_BYTES`` (+ ``DIGEST_BYTES`` when ``bare``: the header's
    container is 4) bytes, or all of it if it is shorter (then an error).

    Raises:
        FormatError: too short, unknown lattice, a combination the core does
            not take, or more padding than the section holds.
    """
    start = _SEALED.size + (DIGEST_BYTES if bare else 0)
    if size < start or len(head) < start:
        raise FormatError("sealed section too short")
    lattice, n, padding = _SEALED.unpack_from(head, 0)
    if lattice not in LATTICES:
        raise FormatError(f"unknown lattice code {lattice}")
    try:
        check_combination(mechanism=mechanism, lattice=lattice, n=n)
    except InvalidArgumentError as e:
        raise FormatError(f"sealed header: {e}") from None
    if padding > size - start:
        raise FormatError("declared padding exceeds the sealed section")
    return from_fields(SealedHead, (lattice, n, padding,
                                    bytes(head[_SEALED.size:start]) if bare else b"", start))


def check_padding(zeros: bytes) -> None:
    """Raises FormatError unless the decrypted padding is all zero bytes."""
    if zeros.count(0) != len(zeros):
        raise FormatError("padding after the body must be zero bytes")


def parse_sealed(plain: bytes | bytearray, mechanism: int, *, bare: bool = False) -> Sealed:
    """Parses and validates a decrypted sealed section (see the module doc);
    ``bare``: the header's container is 4 (the section holds a digest)."""
    head = parse_sealed_head(plain, mechanism, size=len(plain), bare=bare)
    end = len(plain) - head.padding
    if head.padding:
        check_padding(bytes(plain[end:]))
    return from_fields(Sealed, (head.lattice, head.n, bytes(plain[head.size:end]), head.padding,
                                head.digest))
