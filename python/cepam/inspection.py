"""What a payload says about itself: :func:`inspect` reads its public
header and, with the secret, its sealed part (:class:`PayloadInfo`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ._native import core as _core
from .errors import InvalidTypeError
from .keys import TAG_BYTES, check_secret
from .lattices import LATTICES
from .mechanisms import Mechanism, mechanism_from_code
from .payload import CODERS, Sealed, pack_header, parse_header
from .sealing import open_payload
from .structure import BARE, Structure

__all__ = ["PayloadInfo", "inspect"]


@dataclass(frozen=True)
class PayloadInfo:
    """What a payload says about itself.

    Without the secret only the public header is readable: ``lattice``,
    ``dim``, ``body_bits`` and ``padding_bits`` are None and ``sealed`` is
    True (the body, its source model and the lattice choice are encrypted).
    With the secret (``inspect(payload, secret=...)``) the tag is verified and
    the sealed section opened.  Sizes are in bits; ``body_bits`` splits the
    body into the coder's parts (Golomb: its parameter, the segments'
    headers (each its order and section lengths), H, M, padding; ANS:
    source model, the segments' lengths and model bytes, rANS streams);
    ``sealed_bits`` counts the whole encrypted section (its header, body and
    padding); ``bits_per_coordinate`` counts the whole payload.

    Attributes:
        version: the payload format's version.
        mechanism: the mechanism and its scale (:class:`cepam.Gaussian`, ...).
        coder: the body's coder, ``"ans"`` or ``"golomb"``.
        clip: the l2 clip the update was encoded under, or None.
        round: the context's round (:class:`cepam.Context`).
        client: the context's client.
        message: the context's message id.
        coordinates: the number of coordinates coded.
        structure: the entries' names, dtypes and shapes (only the number
            of coordinates for a bare payload).
        header_bits: the public header's size.
        sealed_bits: the sealed section's size.
        tag_bits: the tag's size.
        total_bits: the whole payload's size.
        sealed: whether the sealed section was left unread (no secret).
        lattice: the lattice's name (with the secret).
        dim: the lattice's dimension (with the secret).
        body_bits: the body's parts by name (with the secret).
        padding_bits: the padding (with the secret).
    """

    version: int
    mechanism: Mechanism
    coder: str
    clip: float | None
    round: int
    client: int
    message: int
    coordinates: int
    structure: Structure
    header_bits: int
    sealed_bits: int
    tag_bits: int
    total_bits: int
    sealed: bool
    lattice: str | None = None
    dim: int | None = None
    body_bits: dict[str, int] | None = None
    padding_bits: int | None = None
    nonce: bytes = b""  # the payload's nonce (public; format version 8)

    @property
    def has_structure(self) -> bool:
        """False for a payload encoded with ``structure=False`` (decode needs ``like=``)."""
        return self.structure.container != BARE

    @property
    def bits_per_coordinate(self) -> float:
        return self.total_bits / self.coordinates if self.coordinates else math.inf

    def as_dict(self) -> dict[str, Any]:
        bits: dict[str, Any] = {"header": self.header_bits, "sealed": self.sealed_bits}
        if self.body_bits is not None:
            bits.update({f"body.{part}": b for part, b in self.body_bits.items()})
            bits["padding"] = self.padding_bits
        bits.update({"tag": self.tag_bits, "total": self.total_bits})
        out: dict[str, Any] = {
            "version": self.version,
            "mechanism": self.mechanism.name,
            "scale": self.mechanism.scale,
            "coder": self.coder,
            "clip": self.clip,
            "round": self.round,
            "client": self.client,
            "message": self.message,
            "nonce": self.nonce.hex(),
            "coordinates": self.coordinates,
            "has_structure": self.has_structure,
            "entries": [] if not self.has_structure else [
                {"name": e.name, "dtype": e.dtype, "shape": list(e.shape),
                 "kind": "torch" if e.kind else "numpy"}
                for e in self.structure.entries
            ],
        }
        if self.sealed:
            out["sealed"] = ("lattice, dim and body are encrypted; "
                             "inspect with the secret to read them")
        else:
            out.update({"lattice": self.lattice, "dim": self.dim})
        out["bits"] = bits
        out["bits_per_coordinate"] = self.bits_per_coordinate
        return out


def inspect(payload: bytes, *, secret: bytes | None = None) -> PayloadInfo:
    """Reads a payload's public header; with ``secret``, also its sealed part.

    Without the secret the tag cannot be checked and nothing sealed is read.
    With it the tag is verified first, then the sealed section is decrypted
    and its body's parts are range-checked as :func:`decode` checks them.

    Args:
        payload: the payload's bytes (bytes, bytearray or memoryview).
        secret: the 32-byte secret the payload was sealed with, or None to
            read the public header alone.

    Returns:
        A :class:`PayloadInfo`.

    Raises:
        InvalidTypeError: payload is not bytes.
        AuthenticationError: (with a secret) the tag does not verify.
        FormatError: malformed payload.
    """
    if secret is None:
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
        payload = bytes(payload)
        header, offset = parse_header(payload)
        opened: Sealed | None = None
    else:
        header, opened = open_payload(payload, check_secret(secret))
        payload = bytes(payload)  # type: ignore[arg-type]
        offset = len(pack_header(header))
    details: dict[str, Any] = {}
    if opened is not None:
        parts = _core.body_parts(opened.body, coder=header.coder, lattice=opened.lattice,
                                 m=header.m, n=opened.n)
        details = dict(lattice=LATTICES[opened.lattice], dim=opened.n, body_bits=dict(parts),
                       padding_bits=8 * opened.padding)
    return PayloadInfo(
        version=payload[4],
        mechanism=mechanism_from_code(header.mechanism, header.scale),
        coder=CODERS[header.coder],
        clip=None if math.isinf(header.clip) else header.clip,
        round=header.context.round,
        client=header.context.client,
        message=header.context.message,
        nonce=header.nonce,
        coordinates=header.m,
        structure=header.structure,
        header_bits=8 * offset,
        sealed_bits=8 * (len(payload) - offset - TAG_BYTES),
        tag_bits=8 * TAG_BYTES,
        total_bits=8 * len(payload),
        sealed=opened is None,
        **details,
    )
