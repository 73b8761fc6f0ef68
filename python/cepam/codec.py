"""Encode and decode model updates with LRSUQ.

``decode(encode(x)) == x + z`` where ``z`` has exactly the mechanism's noise
law (i.i.d. Gaussian or Laplace per coordinate), independent of ``x``; the
payload is a short authenticated byte string.  See SPEC sections 1 and 3 and
the paper (Ling et al., "CEPAM: Communication-Efficient and Privacy-Adaptable
Mechanism for Federated Learning").

Privacy caveat: the noise protects ``x`` only from parties who do not hold the
secret.  Whoever holds it (the trusted aggregator) can remove most of the
noise.  Keep secrets secret and never reuse a (round, client, message)
context under one secret.
"""

from __future__ import annotations

import hmac
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._checks import check_clip
from .errors import (
    AuthenticationError,
    ContextReuseError,
    FormatError,
    InvalidArgumentError,
    InvalidTypeError,
)
from .keys import (
    TAG_BYTES,
    Context,
    check_integer,
    check_secret,
    mac_key,
    payload_tag,
    stream_key,
)
from .mechanisms import Mechanism, check_mechanism, mechanism_from_code
from .payload import (
    CODER_CODES,
    CODERS,
    LATTICE_CODES,
    LATTICE_DIMS,
    LATTICES,
    Header,
    check_prefix,
    pack_header,
    parse_header,
)
from .structure import Structure, coded_dtype, flatten, unflatten

__all__ = ["encode", "decode", "inspect", "Codec", "PayloadInfo", "LATTICE_NAMES"]

LATTICE_NAMES = tuple(LATTICE_CODES)
DEFAULT_MAX_COORDINATES = 1 << 28
_MAX_DIM = {"Z": 8}


# lattice="auto": the per-coordinate signal-to-noise ratio below which Z
# (n = 1) is cheapest and above which E8 is, for every source measured (see
# _auto_candidates); in between the source's shape decides, so both are tried.
AUTO_LOW, AUTO_HIGH = 0.45, 2.2
_AUTO = None  # the choice "auto" after validation


def _check_lattice(lattice: object, dim: object, mechanism: Mechanism
                   ) -> tuple[int, int] | None:
    """(lattice code, dim), or None for "auto"."""
    if lattice is None:
        lattice = "auto" if dim is None else "Z"
    if lattice == "auto":
        if dim is not None:
            raise InvalidArgumentError(
                "lattice='auto' chooses the dimension itself: leave dim=None, or name a "
                "lattice ('Z' for Z^dim)"
            )
        return _AUTO
    if not isinstance(lattice, str):
        raise InvalidTypeError(f"lattice must be a str, one of {LATTICE_NAMES}, got {lattice!r}")
    if lattice not in LATTICE_CODES:
        raise InvalidArgumentError(
            f"lattice must be 'auto' or one of {LATTICE_NAMES}, got {lattice!r}")
    if lattice in LATTICE_DIMS:
        fixed = LATTICE_DIMS[lattice]
        if dim is not None:
            dim = check_integer("dim", dim)
            if dim != fixed:
                raise InvalidArgumentError(
                    f"lattice {lattice!r} has dimension {fixed}: dim must be None or {fixed}, "
                    f"got dim={dim}"
                )
        if mechanism.code != 1:
            raise InvalidArgumentError(
                f"lattice {lattice!r} supports the Gaussian mechanism only; "
                f"{type(mechanism).__name__} needs lattice 'Z'"
            )
        return LATTICE_CODES[lattice], fixed
    dim = 1 if dim is None else check_integer("dim", dim)
    if not 1 <= dim <= _MAX_DIM[lattice]:
        raise InvalidArgumentError(
            f"dim must be between 1 and {_MAX_DIM[lattice]} for lattice {lattice!r}, got {dim}"
        )
    if mechanism.code == 2 and dim > 4:
        raise InvalidArgumentError(
            "Laplace on Z^n accepts a trial with probability 1/n!, so dim must be at most 4"
        )
    if mechanism.code == 3 and dim != 1:
        raise InvalidArgumentError("SDQ is scalar: dim must be 1")
    return LATTICE_CODES[lattice], dim


def _check_coder(coder: object) -> int:
    if not isinstance(coder, str):
        raise InvalidTypeError(f"coder must be a str, one of {tuple(CODER_CODES)}, got {coder!r}")
    if coder not in CODER_CODES:
        raise InvalidArgumentError(f"coder must be one of {tuple(CODER_CODES)}, got {coder!r}")
    return CODER_CODES[coder]


def _locate_non_finite(flat: np.ndarray, structure: Structure) -> str:
    index = int(np.flatnonzero(~np.isfinite(flat))[0])
    for entry in structure.entries:
        if index < entry.size:
            where = np.unravel_index(index, entry.shape) if entry.shape else ()
            name = f"entry {entry.name!r}" if entry.name else "the update"
            return f"{name} contains a non-finite value (NaN or Inf) at index {tuple(map(int, where))}"
        index -= entry.size
    return "the update contains a non-finite value (NaN or Inf)"  # pragma: no cover


def _auto_candidates(mechanism: Mechanism, rms: float) -> list[tuple[int, int]]:
    """The lattices ``lattice="auto"`` tries, from the per-coordinate
    signal-to-noise ratio ``rms / sigma`` of the clipped update.

    Measured on Gaussian and uniform sources (bits of whole payloads, ANS
    coder): Z with n = 1 is cheapest below a ratio of about 0.5 (the trial
    index costs E8 0.40 bits per coordinate whatever x is), E8 above 2.2 (by
    0.035 to 0.16 bits per coordinate) and, with the ANS coder's point model,
    from about 0.55 (by 0.1 at a ratio of 0.9); A2, D4, Z^2 and Z^3 are
    never cheapest.  Between 0.45 and 2.2 the source's shape decides, so
    both are encoded and the shorter payload kept.  Laplace and SDQ use Z
    with n = 1.
    """
    z1, e8 = (LATTICE_CODES["Z"], 1), (LATTICE_CODES["E8"], 8)
    if mechanism.code != 1:
        return [z1]
    ratio = rms / mechanism.scale
    if ratio < AUTO_LOW:
        return [z1]
    if ratio > AUTO_HIGH:
        return [e8]
    return [z1, e8]


def _encode(x: Any, mechanism: Mechanism, secret: bytes, context: Context,
            lattice: tuple[int, int] | None, clip: float, coder: int) -> bytes:
    flat, structure = flatten(x)
    try:
        sumsq = _core.sum_of_squares(flat)  # also rejects NaN and Inf
    except InvalidArgumentError:
        raise InvalidArgumentError(_locate_non_finite(flat, structure)) from None
    norm = math.sqrt(sumsq)
    factor = clip / norm if norm > clip else 1.0
    if lattice is _AUTO:
        rms = min(norm, clip) / math.sqrt(flat.size) if flat.size else 0.0
        candidates = _auto_candidates(mechanism, rms)
    else:
        candidates = [lattice]
    key = stream_key(secret, context)
    bodies = [(_core.encode(flat, key=key, mechanism=mechanism.code, scale=mechanism.scale,
                            lattice=code, n=dim, factor=factor, coder=coder), code, dim)
              for code, dim in candidates]
    # One payload is sent; the discarded candidate is never seen by anyone.
    body, code, dim = min(bodies, key=lambda b: len(b[0]))
    header = Header(mechanism.code, mechanism.scale, code, dim, coder, clip, context, structure)
    data = pack_header(header) + body
    return data + payload_tag(mac_key(secret), data)


def encode(
    x: Any,
    mechanism: Mechanism,
    *,
    secret: bytes,
    round: int,
    client: int,
    message: int = 0,
    dim: int | None = None,
    lattice: str | None = None,
    clip: float | None = None,
    coder: str = "ans",
) -> bytes:
    """Encodes a model update into a private, compressed payload.

    Args:
        x: the update: a numpy array or torch tensor (float32, float64,
            float16, or torch bfloat16), or a dict (e.g. a state_dict
            difference) or list/tuple of them, coded as one vector.
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``:
            the law of the error the server will see, per coordinate
            (``cepam.SDQ(step=...)``: the uniform-error baseline).
        secret: the 32 bytes shared with the server (``cepam.new_secret()``).
        round, client, message: the context, integers in [0, 2^64); each
            context must be used for one message only under a secret.
        dim: sub-vector dimension n: 1 to 8 for "Z" (at most 4 for Laplace),
            default 1; the lattice's own dimension for "A2" (2), "D4" (4) and
            "E8" (8), which is the default (None).
        lattice: "auto" (the default when dim is None) picks the cheapest
            lattice for the update's signal-to-noise ratio: Z with n = 1 at
            low ratio, E8 at high ratio (the rule: ``_auto_candidates``).
            Otherwise (the default when dim is given: "Z") "Z" (the integer lattice Z^n), or the Voronoi
            lattices "A2" (hexagonal), "D4" or "E8", whose cells are rounder,
            so that fewer bits code the same noise at high signal-to-noise
            ratio (E8 the fewest), at the cost of more trials per sub-vector
            (1.10, 1.62 and 3.94 on average).  A2, D4 and E8 take the
            Gaussian mechanism only.
        clip: l2 norm bound for the whole update (all entries together), or
            None for no clipping.  Privacy accounting needs a clip.
        coder: the body coder: "ans" (rANS with models conditioned on the
            decoder's side information; the shortest payloads) or "golomb"
            (Golomb-coded H and exp-Golomb-coded M, the paper's choice).

    Returns:
        The payload bytes.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments, NaN or Inf in x.
        EncodingError: x is too large relative to the noise scale.
    """
    mechanism = check_mechanism(mechanism)
    choice = _check_lattice(lattice, dim, mechanism)
    return _encode(x, mechanism, check_secret(secret), Context(round, client, message),
                   choice, check_clip(clip), _check_coder(coder))


def _verified_header(payload: object, secret: bytes) -> tuple[bytes, Header, int]:
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
    payload = bytes(payload)
    check_prefix(payload)
    data, tag = payload[:-TAG_BYTES], payload[-TAG_BYTES:]
    if not hmac.compare_digest(payload_tag(mac_key(secret), data), tag):
        raise AuthenticationError(
            "payload tag does not verify: wrong secret, or the payload was altered"
        )
    header, offset = parse_header(payload)
    return payload, header, offset


def decode(payload: bytes, *, secret: bytes, output: str = "auto",
           max_coordinates: int = DEFAULT_MAX_COORDINATES) -> Any:
    """Decodes a payload into the noisy update ``x + z``.

    Args:
        payload: bytes from :func:`encode`.
        secret: the secret the payload was encoded with.
        output: "auto" (the same types as encoded: numpy arrays or torch CPU
            tensors), "numpy" or "torch".
        max_coordinates: the largest update accepted (default 2^28).  The
            decoder allocates the output before it has read the body, so a
            server should pass the size of its model: a payload that claims
            more coordinates is refused before anything is allocated.  So
            is one that claims more than its body can carry (the bomb
            rule: at most 1024 coordinates a body bit, so a 1 KB payload
            costs at most about 64 MiB; see docs/format.md).

    Returns:
        The same structure as the encoded update (array/tensor, list,
        tuple or dict), with the same shapes and dtypes.

    Raises:
        AuthenticationError: wrong secret or altered payload.
        FormatError: malformed payload, more than max_coordinates, or
            more coordinates than the body can carry.
    """
    secret = check_secret(secret)
    if output not in ("auto", "numpy", "torch"):
        raise InvalidArgumentError("output must be 'auto', 'numpy' or 'torch'")
    limit = check_integer("max_coordinates", max_coordinates)
    if limit < 0:
        raise InvalidArgumentError(f"max_coordinates must be non-negative, got {limit}")
    payload, header, offset = _verified_header(payload, secret)
    if header.m > limit:
        raise FormatError(f"payload declares {header.m} coordinates, more than "
                          f"max_coordinates={limit}")
    flat = _core.decode(payload[offset:-TAG_BYTES], m=header.m,
                        key=stream_key(secret, header.context), mechanism=header.mechanism,
                        scale=header.scale, lattice=header.lattice, n=header.n,
                        coder=header.coder, dtype=coded_dtype(header.structure))
    return unflatten(flat, header.structure, output=output)


@dataclass(frozen=True)
class PayloadInfo:
    """What a payload says about itself, readable without the secret.

    Sizes are in bits; ``body_bits`` splits the body into the coder's parts
    (Golomb: parameters, H, M, padding; ANS: source model, rANS stream);
    ``bits_per_coordinate`` counts the whole payload.
    """

    version: int
    mechanism: Mechanism
    lattice: str
    dim: int
    coder: str
    clip: float | None
    round: int
    client: int
    message: int
    coordinates: int
    structure: Structure
    header_bits: int
    body_bits: dict[str, int]
    tag_bits: int
    total_bits: int

    @property
    def bits_per_coordinate(self) -> float:
        return self.total_bits / self.coordinates if self.coordinates else math.inf

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "mechanism": self.mechanism.name,
            "scale": self.mechanism.scale,
            "lattice": self.lattice,
            "dim": self.dim,
            "coder": self.coder,
            "clip": self.clip,
            "round": self.round,
            "client": self.client,
            "message": self.message,
            "coordinates": self.coordinates,
            "entries": [
                {"name": e.name, "dtype": e.dtype, "shape": list(e.shape),
                 "kind": "torch" if e.kind else "numpy"}
                for e in self.structure.entries
            ],
            "bits": {
                "header": self.header_bits,
                **{f"body.{part}": bits for part, bits in self.body_bits.items()},
                "tag": self.tag_bits,
                "total": self.total_bits,
            },
            "bits_per_coordinate": self.bits_per_coordinate,
        }


def inspect(payload: bytes) -> PayloadInfo:
    """Reads a payload's header without the secret (the tag is not checked).

    Raises:
        FormatError: malformed payload.
    """
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
    payload = bytes(payload)
    header, offset = parse_header(payload)
    body = payload[offset:-TAG_BYTES]
    parts = _core.body_parts(body, coder=header.coder, lattice=header.lattice)
    return PayloadInfo(
        version=payload[4],
        mechanism=mechanism_from_code(header.mechanism, header.scale),
        lattice=LATTICES[header.lattice],
        dim=header.n,
        coder=CODERS[header.coder],
        clip=None if math.isinf(header.clip) else header.clip,
        round=header.context.round,
        client=header.context.client,
        message=header.context.message,
        coordinates=header.m,
        structure=header.structure,
        header_bits=8 * offset,
        body_bits=dict(parts),
        tag_bits=8 * TAG_BYTES,
        total_bits=8 * len(payload),
    )


class Codec:
    """The codec settings of one client (or of the server for one client).

    A client encodes each round's update with :meth:`encode`; the codec
    refuses to encode twice under the same (round, message), since reused
    randomness makes the noises of the two messages dependent.  The server
    decodes with :meth:`decode` (or :func:`decode` with the secret).

    Args:
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``.
        secret: 32 bytes shared by this client and the server.
        client: the client id, an integer in [0, 2^64).
        dim, lattice, clip, coder: as for :func:`encode`.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings.
    """

    def __init__(self, mechanism: Mechanism, *, secret: bytes, client: int = 0,
                 dim: int | None = None, lattice: str | None = None,
                 clip: float | None = None, coder: str = "ans") -> None:
        self.mechanism = check_mechanism(mechanism)
        self._choice = _check_lattice(lattice, dim, self.mechanism)
        if self._choice is _AUTO:
            self.lattice, self.dim = "auto", None
        else:
            self.lattice, self.dim = LATTICES[self._choice[0]], self._choice[1]
        self.clip = None if clip is None else check_clip(clip)
        self.coder = coder
        self._coder = _check_coder(coder)
        self._secret = check_secret(secret)
        self.client = Context(0, client).client
        self._used: set[tuple[int, int]] = set()

    def __repr__(self) -> str:
        return (f"Codec({self.mechanism!r}, client={self.client}, dim={self.dim}, "
                f"lattice={self.lattice!r}, clip={self.clip})")

    def encode(self, x: Any, *, round: int, message: int = 0) -> bytes:
        """Encodes x under context (round, self.client, message).

        Raises:
            ContextReuseError: this codec already encoded that context.
            (and as :func:`encode`)
        """
        context = Context(round, self.client, message)
        key = (context.round, context.message)
        if key in self._used:
            raise ContextReuseError(
                f"round {context.round}, message {context.message} was already encoded by "
                f"client {self.client}: reusing a context makes the noises dependent"
            )
        payload = _encode(x, self.mechanism, self._secret, context, self._choice,
                          check_clip(self.clip), self._coder)
        self._used.add(key)
        return payload

    def decode(self, payload: bytes, *, output: str = "auto",
               max_coordinates: int = DEFAULT_MAX_COORDINATES) -> Any:
        """Decodes a payload encoded under this codec's secret (see :func:`decode`)."""
        return decode(payload, secret=self._secret, output=output,
                      max_coordinates=max_coordinates)
