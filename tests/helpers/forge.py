"""The hostile-payload forger: an independent, test-side model of the payload
format (docs/format.md), to build payloads a malicious client could send.

A client holds its own secret, so it can send a *correctly tagged* hostile
payload.  This model parses a payload into its fields (``RawPayload``: the
public header; the sealed section's lattice, n, padding and body, unsealed
with an independent ChaCha20, the ``cryptography`` package's), lets a test
edit any of them, and writes it back sealed and tagged under the client's MAC
key, so that the edit reaches the parsers behind a valid tag.  The bodies:
``GolombBody`` (the coder's parameters, then segments of at most 2^17
coordinates, each its H and M section lengths and the two sections) and
``AnsBody`` (a source model, ``AnsModel``; then segments of at most 2^17
coordinates, each its byte length, a model byte for A2, D4 and E8, and a
4-state rANS stream), with ``RansEncoder``, a mirror of the native rANS
encoder, to forge streams symbol by symbol (escape abuse, bad states, long
streams of constant words).

Written from docs/format.md and the C++ headers it names, independently of
cepam.payload and cepam.sealing; tests/payload/test_hostile.py checks that it
round-trips real payloads.  Sealing needs ``cryptography`` (imported when a
payload is sealed or unsealed): the test modules that forge skip without it.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import sys
from dataclasses import dataclass, field

from cepam import _core
from cepam.keys import FORMAT_TAG, TAG_BYTES, Context, hkdf, mac_key, payload_tag, stream_key

__all__ = [
    "ANS", "ANS_BLOCK", "BINS", "CODERS", "CONTEXT", "DBL_MAX", "ESCAPE", "GEOMETRIC_TABLE",
    "GOLOMB", "GOLOMB_PARAMS", "GOLOMB_PREFIX", "GOLOMB_SEGMENT", "HEADER_PREFIX", "KNOT_BITS",
    "KNOT_SCALE", "MAC", "MAX_ABS_M", "MAX_GROWTH", "MIN_PAYLOAD", "MODEL_HEADER", "OTHER_SECRET",
    "PROB_BITS", "PROB_SCALE", "RANS_LOW", "SEALED_HEADER", "SECRET", "SEGMENT_COORDINATES",
    "FORGED_NONCE", "NONCE", "STREAMS", "U64", "UNIFORM", "UNIFORM_MODEL", "VERSION", "ZERO_WORD_CASES", "AnsBody",
    "AnsModel", "GolombBody", "GolombSegment", "RansEncoder", "RawEntry", "RawPayload",
    "acceptance", "best_knot_order", "bits_to_bytes", "bits_to_bytes_len", "bytes_to_bits",
    "chacha20", "chacha20_seal", "edited_entries", "escape_stream", "expg", "expg_unsigned",
    "forged", "forged_ans", "geometric_cum", "on_ans", "on_golomb", "on_model", "pack_stream",
    "put_escaped_m", "put_h", "retag", "segment", "symbols_of", "unary", "unpack_stream",
    "untagged", "zero_run_payloads", "zero_word_payload", "zigzag",
]

SECRET = bytes(range(7, 39))
OTHER_SECRET = bytes(range(200, 232))
MAC = mac_key(SECRET)

VERSION = 10
GOLOMB, ANS = 1, 2
CODERS = ("golomb", "ans")
HEADER_PREFIX = struct.Struct("<4sBBBBHdd")  # magic, version, mechanism, coder, container .. clip
CONTEXT = struct.Struct("<QQQ16sQ")  # round, client, message, nonce, m
# Payload nonces (format version 8): NONCE for the real payloads the tests
# encode and edit (tests/helpers/hostile.py's bases), FORGED_NONCE for the
# payloads forged from scratch here (an escape the tests forge must stay one).
NONCE = bytes(range(16))
FORGED_NONCE = bytes(16)
SEALED_HEADER = struct.Struct("<BBI")  # lattice, n, padding length (the sealed section's start)
GOLOMB_PARAMS = struct.Struct("<I")  # golomb (the body's start)
# A segment's header: its exp-Golomb order, h_bits, m_bits (before its sections).
GOLOMB_SEGMENT = struct.Struct("<BQQ")
# The parameter and the first segment's header: a body's first 21 bytes.
GOLOMB_PREFIX = struct.Struct("<IBQQ")
MIN_PAYLOAD = HEADER_PREFIX.size + CONTEXT.size + 4 + SEALED_HEADER.size + TAG_BYTES
U64 = (1 << 64) - 1
DBL_MAX = sys.float_info.max

# The ANS body (csrc/coding/rans.hpp, coding/source_model.hpp, coding/conditional_coder.hpp).
PROB_BITS = 24
PROB_SCALE = 1 << PROB_BITS
ESCAPE = PROB_SCALE - 1  # start of the escape symbol (frequency 1), for H and for M
RANS_LOW = 1 << 31
STREAMS = 4
BINS = 64  # the most bins a source model may have
MODEL_HEADER = 11  # A, K, g, code order
MAX_GROWTH = 64
KNOT_BITS = 12
KNOT_SCALE = 1 << KNOT_BITS
ANS_BLOCK = 4096
SEGMENT_COORDINATES = 1 << 17  # coordinates per body segment (at most; both coders)
GEOMETRIC_TABLE = 64
MAX_ABS_M = 1 << 53


def retag(data: bytes, secret: bytes = SECRET) -> bytes:
    """data || a valid tag: what a client holding `secret` can send."""
    key = MAC if secret == SECRET else mac_key(secret)
    return bytes(data) + payload_tag(key, bytes(data))


def untagged(payload: bytes) -> bytes:
    return payload[:-TAG_BYTES]


def chacha20(key: bytes, nonce: bytes, data: bytes) -> bytes:
    """data XOR RFC 8439 ChaCha20 under a 32-byte key and a 16-byte nonce (32-bit
    counter, 96-bit nonce), from the ``cryptography`` package: an implementation
    independent of cepam's.  Raises ImportError without ``cryptography``."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    return Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(data))


def chacha20_seal(data: bytes, *, round: int, client: int, message: int, nonce: bytes,
                  secret: bytes = SECRET) -> bytes:
    """data XOR the seal keystream of a context and payload nonce (encrypts
    and decrypts): RFC 8439 ChaCha20, counter 0, nonce (0, 0, "SEAL"), key
    from HKDF over the context and the payload nonce."""
    key = hkdf(secret, salt=FORMAT_TAG, length=32,
               info=FORMAT_TAG + b"/seal" + struct.pack("<QQQ", round, client, message) + nonce)
    iv = bytes(4) + bytes(8) + b"SEAL"  # 32-bit counter 0, then the 96-bit ChaCha20 nonce
    return chacha20(key, iv, data)


@dataclass
class RawEntry:
    name: bytes
    kind: int
    dtype: int
    dims: tuple
    ndim: int | None = None  # None: len(dims)


@dataclass
class RawPayload:
    magic: bytes
    version: int
    mechanism: int
    lattice: int
    n: int
    coder: int
    container: int
    reserved: int
    scale: float
    clip: float
    round: int
    client: int
    message: int
    m: int
    entries: list = field(default_factory=list)
    count: int | None = None  # None: len(entries)
    body: bytes = b""  # the sealed section's body, in the coder's layout
    padding_length: int | None = None  # the sealed header's padding length; None: len(padding)
    padding: bytes = b""  # after the body, in the sealed section
    nonce: bytes = FORGED_NONCE  # the header's payload nonce (16 bytes)

    @classmethod
    def parse(cls, payload: bytes) -> "RawPayload":
        """Parses and unseals a well-formed payload sealed under SECRET
        (written independently of cepam.payload and cepam.sealing)."""
        pos = 0

        def take(fmt):
            nonlocal pos
            s = struct.Struct(fmt) if isinstance(fmt, str) else fmt
            out = s.unpack_from(payload, pos)
            pos += s.size
            return out

        magic, version, mech, coder, cont, res, scale, clip = take(HEADER_PREFIX)
        rnd, client, message, nonce, m = take(CONTEXT)
        (count,) = take("<I")
        entries = []
        for _ in range(count):
            (name_len,) = take("<H")
            name = payload[pos : pos + name_len]
            pos += name_len
            kind, dtype, ndim = take("<BBB")
            dims = take(f"<{ndim}Q")
            entries.append(RawEntry(name, kind, dtype, tuple(dims)))
        plain = chacha20_seal(payload[pos:-TAG_BYTES], round=rnd, client=client, message=message,
                              nonce=nonce)
        lat, n, pad = SEALED_HEADER.unpack_from(plain, 0)
        body = plain[SEALED_HEADER.size : len(plain) - pad]
        return cls(magic, version, mech, lat, n, coder, cont, res, scale, clip, rnd, client,
                   message, m, entries, None, body, None, plain[len(plain) - pad :], nonce)

    def header(self) -> bytes:
        out = [
            HEADER_PREFIX.pack(self.magic, self.version, self.mechanism, self.coder,
                               self.container, self.reserved, self.scale, self.clip),
            CONTEXT.pack(self.round, self.client, self.message, self.nonce, self.m),
            struct.pack("<I", len(self.entries) if self.count is None else self.count),
        ]
        for e in self.entries:
            ndim = len(e.dims) if e.ndim is None else e.ndim
            out.append(struct.pack("<H", len(e.name)) + e.name)
            out.append(struct.pack("<BBB", e.kind, e.dtype, ndim))
            out.append(struct.pack(f"<{len(e.dims)}Q", *e.dims))
        return b"".join(out)

    def sealed_plaintext(self) -> bytes:
        pad = len(self.padding) if self.padding_length is None else self.padding_length
        return SEALED_HEADER.pack(self.lattice, self.n, pad) + self.body + self.padding

    def data(self) -> bytes:
        """Header || sealed section (encrypted), without the tag."""
        return self.header() + chacha20_seal(self.sealed_plaintext(), round=self.round,
                                             client=self.client, message=self.message,
                                             nonce=self.nonce)

    def header_len(self) -> int:
        return len(self.header())

    def tagged(self) -> bytes:
        return retag(self.data())

    def edit(self, **changes) -> "RawPayload":
        return dataclasses.replace(self, **changes)


def bits_to_bytes(bits: str) -> bytes:
    """MSB-first bit string -> bytes, zero-padded to a byte."""
    bits = bits + "0" * (-len(bits) % 8)
    return bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))


def bytes_to_bits(data: bytes) -> str:
    return "".join(format(b, "08b") for b in data)


# --- The Golomb body: its parameters, then segments of lengths and sections. ---


@dataclass
class GolombSegment:
    expg_k: int
    h_bits: int
    m_bits: int
    sections: bytes  # H section then M section, each zero-padded to a byte

    def pack(self) -> bytes:
        return GOLOMB_SEGMENT.pack(self.expg_k, self.h_bits, self.m_bits) + self.sections


@dataclass
class GolombBody:
    """A Golomb body (format version 7): the parameter, the first segment's
    order, lengths and sections as fields (a body of up to 2^17 coordinates
    has only that one: then the bytes of versions 5 and 6), and the later
    segments.  (An empty update's body, the parameter alone, is not
    modelled: pack() always writes the first segment.)"""

    golomb: int
    expg_k: int
    h_bits: int
    m_bits: int
    sections: bytes  # the first segment's H section then M section
    later: list[GolombSegment] = field(default_factory=list)

    @classmethod
    def parse(cls, body: bytes) -> "GolombBody":
        (golomb,) = GOLOMB_PARAMS.unpack_from(body, 0)
        segments = []
        pos = GOLOMB_PARAMS.size
        while pos < len(body):
            k, h_bits, m_bits = GOLOMB_SEGMENT.unpack_from(body, pos)
            pos += GOLOMB_SEGMENT.size
            end = pos + bits_to_bytes_len(h_bits) + bits_to_bytes_len(m_bits)
            segments.append(GolombSegment(k, h_bits, m_bits, body[pos:end]))
            pos = end
        first = segments[0] if segments else GolombSegment(0, 0, 0, b"")
        return cls(golomb, first.expg_k, first.h_bits, first.m_bits, first.sections,
                   segments[1:])

    def pack(self) -> bytes:
        return GOLOMB_PARAMS.pack(self.golomb) + b"".join(
            s.pack() for s in [GolombSegment(self.expg_k, self.h_bits, self.m_bits,
                                             self.sections), *self.later])

    @property
    def h_bytes(self) -> int:
        return bits_to_bytes_len(self.h_bits)

    def edit(self, **changes) -> "GolombBody":
        return dataclasses.replace(self, **changes)


def bits_to_bytes_len(bits: int) -> int:
    """Bytes of a section of ``bits`` bits (zero-padded to a byte)."""
    return (bits + 7) // 8


def expg(value: int, k: int = 0) -> str:
    """Order-k exp-Golomb code of zigzag(value) (the M section's code)."""
    z = (value << 1) if value >= 0 else ((-value << 1) - 1)
    return expg_unsigned(z, k)


def expg_unsigned(v: int, k: int = 0) -> str:
    """Order-k exp-Golomb code of v >= 0 (also the source model's knot code)."""
    u = v + (1 << k)
    return "0" * (u.bit_length() - k - 1) + format(u, "b")


def unary(h: int) -> str:
    """Golomb code of h - 1 with parameter 1."""
    return "0" * (h - 1) + "1"


def _single_entry(shape=None, entries=None, m=None):
    if entries is None:
        entries = [RawEntry(b"", 0, 1, tuple(shape))]
    if m is None:
        m = sum(math.prod(e.dims) for e in entries)
    return entries, m


def forged(*, n=1, mechanism=1, golomb=0, expg_k=0, h_code="", m_code="", shape=None,
           entries=None, container=0, m=None, scale=0.25, clip=math.inf) -> RawPayload:
    """A Golomb payload forged from H and M bit strings (m coordinates, N = ceil(m / n)):
    one segment, or one a pair of strings where h_code and m_code are lists (each
    segment of order expg_k)."""
    entries, m = _single_entry(shape, entries, m)
    if isinstance(h_code, str):
        h_code, m_code = [h_code], [m_code]
    segments = [GolombSegment(expg_k, len(h), len(mm), bits_to_bytes(h) + bits_to_bytes(mm))
                for h, mm in zip(h_code, m_code, strict=True)]
    first = segments[0]
    body = GolombBody(golomb, expg_k, first.h_bits, first.m_bits, first.sections, segments[1:])
    return RawPayload(b"CEPM", VERSION, mechanism, 1, n, GOLOMB, container, 0, scale, clip,
                      5, 6, 7, m, entries, None, body.pack())


# --- The ANS body: source model, then the rANS stream. -----------------------


def best_knot_order(increments) -> int:
    """The code order the encoder picks (shortest, smallest on ties)."""
    return min(range(KNOT_BITS + 1),
               key=lambda k: (sum(len(expg_unsigned(v, k)) for v in increments), k))


@dataclass
class AnsModel:
    """Source model: f64 range A, u8 bins K, u8 growth g, u8 code order, K - 1
    exp-Golomb knot increments, padding."""

    a: float
    bins: int
    growth: int
    order: int
    codes: str  # MSB-first bits of the increment codes
    padding: str | None = None  # None: zero bits up to a byte

    @classmethod
    def of(cls, increments, *, a: float = 1.0, growth: int = 0,
           order: int | None = None) -> "AnsModel":
        """The model of K - 1 = len(increments) increments."""
        increments = list(increments)
        if order is None:
            order = best_knot_order(increments)
        return cls(a, len(increments) + 1, growth, order,
                   "".join(expg_unsigned(v, order) for v in increments))

    @classmethod
    def parse(cls, body: bytes) -> tuple["AnsModel", int]:
        """(model, its length in bytes) of a well-formed body."""
        a, bins, growth, order = struct.unpack_from("<dBBB", body, 0)
        bits = bytes_to_bits(body[MODEL_HEADER:])
        pos = 0
        for _ in range(bins - 1):
            zeros = bits.index("1", pos) - pos
            pos += 2 * zeros + 1 + order
        used = (pos + 7) // 8
        return cls(a, bins, growth, order, bits[:pos], bits[pos : 8 * used]), MODEL_HEADER + used

    def increments(self) -> list[int]:
        out, pos = [], 0
        for _ in range(self.bins - 1):
            zeros = self.codes.index("1", pos) - pos
            end = pos + 2 * zeros + 1 + self.order
            out.append(int(self.codes[pos + zeros : end], 2) - (1 << self.order))
            pos = end
        return out

    def pack(self) -> bytes:
        pad = "0" * (-len(self.codes) % 8) if self.padding is None else self.padding
        return struct.pack("<dBBB", self.a, self.bins, self.growth, self.order) + \
            bits_to_bytes(self.codes + pad)

    def edit(self, **changes) -> "AnsModel":
        return dataclasses.replace(self, **changes)

    def recoded(self, **changes) -> "AnsModel":
        """The same knots (and A, K, g unless changed), coded at the best order."""
        kwargs = dict(a=self.a, growth=self.growth) | changes
        return AnsModel.of(self.increments(), **kwargs)


UNIFORM = [KNOT_SCALE // BINS] * (BINS - 1)
UNIFORM_MODEL = AnsModel.of(UNIFORM)


def pack_stream(states, words) -> bytes:
    return b"".join(struct.pack("<Q", s) for s in states) + \
        b"".join(struct.pack("<I", w) for w in words)


def unpack_stream(stream: bytes) -> tuple[list[int], list[int]]:
    states = list(struct.unpack_from(f"<{STREAMS}Q", stream, 0))
    words = list(struct.unpack_from(f"<{(len(stream) - 8 * STREAMS) // 4}I", stream, 8 * STREAMS))
    return states, words


def segment(stream: bytes, point_model: int | None = None, length: int | None = None) -> bytes:
    """An ANS segment: u32 length of the rest, the model byte (A2, D4, E8), the stream."""
    rest = (b"" if point_model is None else bytes([point_model])) + stream
    return struct.pack("<I", len(rest) if length is None else length) + rest


@dataclass
class AnsBody:
    """An ANS body with one segment (the bases are small), and what follows it."""

    model: AnsModel
    stream: bytes
    # A2, D4, E8 (lattice codes 2-4): the segment's byte after its length, 0 box
    # model, 1 point model (csrc/coding/point_coder.hpp); None for Z^n.
    point_model: int | None = None
    length: int | None = None  # the declared segment length; None: the true one
    after: bytes = b""  # bytes after the first segment

    @classmethod
    def parse(cls, body: bytes, lattice: int = 1) -> "AnsBody":
        model, pos = AnsModel.parse(body)
        (length,) = struct.unpack_from("<I", body, pos)
        pos += 4
        end = pos + length
        if lattice == 1:
            return cls(model, body[pos:end], after=body[end:])
        return cls(model, body[pos + 1:end], body[pos], after=body[end:])

    def prefix(self) -> bytes:
        """The body before the first rANS stream: the source model (the body part
        "model"), the segment's length and model byte (the part "segments")."""
        return self.model.pack() + segment(self.stream, self.point_model,
                                           self.length)[:-len(self.stream) or None]

    def pack(self) -> bytes:
        return self.model.pack() + segment(self.stream, self.point_model, self.length) + self.after

    def edit(self, **changes) -> "AnsBody":
        return dataclasses.replace(self, **changes)

    def with_state(self, lane: int, value: int) -> "AnsBody":
        states, words = unpack_stream(self.stream)
        states[lane] = value
        return self.edit(stream=pack_stream(states, words))


class RansEncoder:
    """A test-side mirror of csrc/coding/rans.cpp: symbols in decode order, coded in reverse."""

    def __init__(self) -> None:
        self.symbols: list[tuple[int, int]] = []

    def put(self, start: int, freq: int) -> None:
        self.symbols.append((start, freq))

    def put_raw(self, value: int, bits: int) -> None:
        shift = PROB_BITS - bits
        self.symbols.append((value << shift, 1 << shift))

    def put_raw_long(self, value: int, bits: int) -> None:
        while bits > 16:
            bits -= 16
            self.put_raw((value >> bits) & 0xFFFF, 16)
        self.put_raw(value & ((1 << bits) - 1), bits)

    def finish(self) -> bytes:
        x = [RANS_LOW] * STREAMS
        words = []
        for i in range(len(self.symbols) - 1, -1, -1):
            start, freq = self.symbols[i]
            s = x[i % STREAMS]
            if s >= ((RANS_LOW >> PROB_BITS) << 32) * freq:
                words.append(s & 0xFFFFFFFF)
                s >>= 32
            x[i % STREAMS] = ((s // freq) << PROB_BITS) + s % freq + start
        return pack_stream(x, reversed(words))


def zigzag(v: int) -> int:
    return 2 * v if v >= 0 else -2 * v - 1


def geometric_cum(p: float) -> list[int]:
    """GeometricCoder's cumulative table (cum[h - 1] .. cum[h] codes H = h; cum[64] escape)."""
    freq, ph, rest = [], p * PROB_SCALE, 0
    for h in range(GEOMETRIC_TABLE):
        f = math.floor(ph + 0.5)
        freq.append(1 if f < 1 else int(f))
        if h > 0:
            rest += freq[h]
        ph *= 1.0 - p
    freq[0] = PROB_SCALE - 1 - rest
    cum = [0]
    for f in freq:
        cum.append(cum[-1] + f)
    assert cum[GEOMETRIC_TABLE] == ESCAPE
    return cum


def put_escaped_m(enc: RansEncoder, j: int, *, length: int | None = None,
                  z: int | None = None) -> None:
    """M escape: the escape symbol, 6 raw bits of length L, L raw bits of zigzag(j)."""
    z = zigzag(j) if z is None else z
    length = z.bit_length() if length is None else length
    enc.put(ESCAPE, 1)
    enc.put_raw(length, 6)
    if length:
        enc.put_raw_long(z, length)


def put_h(enc: RansEncoder, h: int, cum: list[int], *, escape: bool = False) -> None:
    if 1 <= h <= GEOMETRIC_TABLE and not escape:
        enc.put(cum[h - 1], cum[h] - cum[h - 1])
    else:
        enc.put(ESCAPE, 1)
        enc.put_raw(h - 1, 16)


def escape_stream(M, *, n: int = 1, H=None, p: float = 1.0, escape_h=False,
                  m_code=put_escaped_m) -> bytes:
    """A stream with every coordinate escaped, in decode order: per block of 4096
    sub-vectors the H of the block (when p < 1), then its M, coordinates k = n-1 .. 0."""
    N = len(M) // n
    cum = geometric_cum(p) if p < 1.0 else None
    enc = RansEncoder()
    for j0 in range(0, N, ANS_BLOCK):
        j1 = min(N, j0 + ANS_BLOCK)
        if cum is not None:
            for j in range(j0, j1):
                put_h(enc, 1 if H is None else H[j], cum, escape=escape_h)
        for j in range(j0, j1):
            for k in range(n - 1, -1, -1):
                m_code(enc, M[j * n + k])
    return enc.finish()


def forged_ans(*, stream: bytes, n=1, mechanism=1, model: AnsModel = UNIFORM_MODEL, shape=None,
               entries=None, container=0, m=None, scale=0.25, clip=math.inf) -> RawPayload:
    entries, m = _single_entry(shape, entries, m)
    return RawPayload(b"CEPM", VERSION, mechanism, 1, n, ANS, container, 0, scale, clip,
                      5, 6, 7, m, entries, None, model.pack() + segment(stream))


def acceptance(mechanism: int, n: int, *, scale: float = 0.25) -> float:
    """The core's probability that one trial is accepted, the mechanism code on Z^n."""
    return _core.acceptance_probability(_core.Params(mechanism=mechanism, scale=scale, lattice=1,
                                                     n=n))


def symbols_of(raw: RawPayload, *, secret: bytes = SECRET):
    """(H, M) of a forged payload's body, via the native decoder."""
    return _core.decode_symbols(raw.body, m=raw.m,
                                key=stream_key(secret, Context(raw.round, raw.client,
                                                               raw.message), raw.nonce),
                                params=_core.Params(mechanism=raw.mechanism, scale=raw.scale,
                                                    lattice=raw.lattice, n=raw.n),
                                coder=raw.coder)


def on_golomb(f):
    """An edit of a RawPayload through its Golomb body."""
    return lambda r: r.edit(body=f(GolombBody.parse(r.body)).pack())


def on_ans(f):
    """An edit of a RawPayload through its ANS body."""
    return lambda r: r.edit(body=f(AnsBody.parse(r.body, r.lattice)).pack())


def on_model(**changes):
    return on_ans(lambda b: b.edit(model=b.model.edit(**changes)))


def edited_entries(base: RawPayload, **changes) -> list[RawEntry]:
    """The entries of ``base`` with the first one changed (``dataclasses.replace``)."""
    return [dataclasses.replace(base.entries[0], **changes)] + base.entries[1:]


# --- Families of hostile payloads: long zero runs, constant stream words. ------


def _zero_segments(golomb: int, k: int, segments: int, body_bytes: int) -> GolombBody:
    """A Golomb body of ``segments`` all-zero segments sharing ``body_bytes`` bytes of
    sections (each segment's H section half of its bits where H is coded)."""
    share = body_bytes // segments
    parts = []
    for s in range(segments):
        size = share if s + 1 < segments else body_bytes - share * (segments - 1)
        h_bits = 8 * (size // 2) if golomb else 0
        parts.append(GolombSegment(k, h_bits, 8 * size - h_bits, bytes(size)))
    return GolombBody(golomb, k, parts[0].h_bits, parts[0].m_bits, parts[0].sections, parts[1:])


def zero_run_payloads(body_bytes: int) -> list[tuple[str, int, int, bytes]]:
    """(label, declared coordinates, coordinates the body can hold at most, payload):
    all-zero Golomb sections of body_bytes bytes, declaring as many coordinates as
    fit, or more, in each Golomb parameter / exp-Golomb order regime; in as many
    segments as the declared count needs where the body can hold their lengths."""
    bits = 8 * body_bytes
    half = bits // 2
    out = []
    for n, golomb, k in ((1, 0, 0), (2, 1, 0), (2, 1 << 16, 0), (4, 3, 7), (8, 1, 54)):
        h_bits = half if golomb else 0
        capacity = (bits - h_bits) // (k + 1)  # the most coordinates M sections can hold
        for declared in (capacity, capacity + 1, 4 * capacity, 1 << 62):
            segments = -(-(-(-declared // n)) // (SEGMENT_COORDINATES // n))
            if GOLOMB_SEGMENT.size * segments > body_bytes // 2:
                segments = 1
            raw = forged(n=n, golomb=golomb, expg_k=k, shape=(declared,))
            raw = raw.edit(body=_zero_segments(golomb, k, segments, body_bytes).pack())
            out.append((f"n={n} g={golomb} k={k} declared={declared}", declared, capacity,
                        raw.tagged()))
    # Zeros in the H section only (the M section is all ones: zero-free codes).
    raw = forged(n=2, golomb=1, shape=(half,)).edit(body=GolombBody(
        1, 0, half, half, bytes(half // 8) + b"\xff" * (half // 8)).pack())
    out.append(("zero H section", half, half, raw.tagged()))
    return out


ZERO_WORD_CASES = [
    # (label, n, mechanism, declared m, words)
    ("zero-words-n1", 1, 1, 200_000, b"\x00" * (64 * 1024)),
    ("ff-words-n1", 1, 1, 200_000, b"\xff" * (64 * 1024)),
    ("zero-words-n2", 2, 1, 200_000, b"\x00" * (64 * 1024)),
    ("ff-words-n2", 2, 2, 200_000, b"\xff" * (64 * 1024)),
    ("zero-words-sdq", 1, 3, 200_000, b"\x00" * (64 * 1024)),
    ("no-words-n1", 1, 1, 200_000, b""),
    ("ff-words-1e6", 1, 1, 1_000_000, b"\xff" * (16 * 1024)),
]


def zero_word_payload(n, mechanism, m, words, *, states=(RANS_LOW,) * 4,
                      model=UNIFORM_MODEL) -> bytes:
    """A tagged ANS payload declaring m coordinates whose stream is the given
    final states, then the bytes ``words`` (a ZERO_WORD_CASES row)."""
    return forged_ans(n=n, mechanism=mechanism, shape=(m,), model=model,
                      stream=pack_stream(states, []) + words).tagged()
