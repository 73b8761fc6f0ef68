"""Hostile payloads: the decoder (the server) must survive anything a client sends.

A client holds its own secret, so it can send a *correctly tagged* hostile
payload: the header and body parsers are tested both without re-tagging (the
tag check must reject the payload) and behind a valid tag, recomputed over the
corrupted content with the client's MAC key.  On every input the decoder must
either decode to an update with the structure its header declares, or raise
``cepam.FormatError`` (``AuthenticationError`` when the tag is wrong): never
another exception, a crash, a hang, or an allocation out of proportion to the
payload's length (the ANS decoder allocates its output, m values, before it
has read the body: ``max_coordinates`` bounds that).

Payload format version 3: the public header names the body coder; the
sealed section (lattice, n, padding length, body, zero padding) is encrypted with
ChaCha20 under the message's seal key, and the tag covers both.  The forger
below seals with an independent ChaCha20 (the ``cryptography`` package), so
a hostile payload reaches the parsers behind a valid tag exactly as one from
a malicious client holding the secret would.  The body ("golomb": a
21-byte prefix with the coder's parameters, then the H and M sections;
"ans": a source model, then segments of at most 2^17 coordinates, each its byte
length, a model byte for A2, D4 and E8, and a 4-state rANS stream).  Every category runs on
payloads of both coders; the ANS body also gets forged source models and
streams built by a test-side rANS encoder (escape abuse, bad states, long
streams of zero or 0xFF words).

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam._core import testing as hooks
from cepam.keys import FORMAT_TAG, TAG_BYTES, Context, hkdf, mac_key, payload_tag, stream_key

from hidden_imports import run_without

# The forger seals with an independent ChaCha20: without it, nothing here runs.
ciphers = pytest.importorskip("cryptography.hazmat.primitives.ciphers",
                              reason="the hostile-payload forger needs cryptography")
Cipher, algorithms = ciphers.Cipher, ciphers.algorithms

SECRET = bytes(range(7, 39))
OTHER_SECRET = bytes(range(200, 232))
MAC = mac_key(SECRET)

VERSION = 4
GOLOMB, ANS = 1, 2
CODERS = ("golomb", "ans")
HEADER_PREFIX = struct.Struct("<4sBBBBHdd")  # magic, version, mechanism, coder, container .. clip
CONTEXT = struct.Struct("<QQQQ")  # round, client, message, m
SEALED_HEADER = struct.Struct("<BBI")  # lattice, n, padding length (the sealed section's start)
GOLOMB_PREFIX = struct.Struct("<IBQQ")  # golomb, exp-Golomb order, h_bits, m_bits (in the body)
MIN_PAYLOAD = HEADER_PREFIX.size + CONTEXT.size + 4 + SEALED_HEADER.size + TAG_BYTES
SCALE_OFFSET = 10  # of the header's float64 noise scale
U64 = (1 << 64) - 1
MB = 1 << 20
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
SEGMENT_COORDINATES = 1 << 17  # coordinates per ANS segment (at most)
GEOMETRIC_TABLE = 64
MAX_ABS_M = 1 << 53


# ---------------------------------------------------------------------------
# An independent (test-side) model of the payload format, to forge payloads.
# ---------------------------------------------------------------------------


def retag(data: bytes, secret: bytes = SECRET) -> bytes:
    """data || a valid tag: what a client holding `secret` can send."""
    key = MAC if secret == SECRET else mac_key(secret)
    return bytes(data) + payload_tag(key, bytes(data))


def untagged(payload: bytes) -> bytes:
    return payload[:-TAG_BYTES]


def chacha20_seal(data: bytes, *, round: int, client: int, message: int,
                  secret: bytes = SECRET) -> bytes:
    """data XOR the seal keystream of a context (encrypts and decrypts):
    RFC 8439 ChaCha20, counter 0, nonce (0, 0, "SEAL"), key from HKDF."""
    key = hkdf(secret, salt=FORMAT_TAG, length=32,
               info=FORMAT_TAG + b"/seal" + struct.pack("<QQQ", round, client, message))
    nonce = bytes(4) + bytes(8) + b"SEAL"  # 32-bit counter 0, then the 96-bit nonce
    return Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(data))


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
        rnd, client, message, m = take(CONTEXT)
        (count,) = take("<I")
        entries = []
        for _ in range(count):
            (name_len,) = take("<H")
            name = payload[pos : pos + name_len]
            pos += name_len
            kind, dtype, ndim = take("<BBB")
            dims = take(f"<{ndim}Q")
            entries.append(RawEntry(name, kind, dtype, tuple(dims)))
        plain = chacha20_seal(payload[pos:-TAG_BYTES], round=rnd, client=client, message=message)
        lat, n, pad = SEALED_HEADER.unpack_from(plain, 0)
        body = plain[SEALED_HEADER.size : len(plain) - pad]
        return cls(magic, version, mech, lat, n, coder, cont, res, scale, clip, rnd, client,
                   message, m, entries, None, body, None, plain[len(plain) - pad :])

    def header(self) -> bytes:
        out = [
            HEADER_PREFIX.pack(self.magic, self.version, self.mechanism, self.coder,
                               self.container, self.reserved, self.scale, self.clip),
            CONTEXT.pack(self.round, self.client, self.message, self.m),
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
                                             client=self.client, message=self.message)

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


# --- The Golomb body: 21-byte prefix, then the H and M sections. -------------


@dataclass
class GolombBody:
    golomb: int
    expg_k: int
    h_bits: int
    m_bits: int
    sections: bytes  # H section then M section, each zero-padded to a byte

    @classmethod
    def parse(cls, body: bytes) -> "GolombBody":
        golomb, k, h_bits, m_bits = GOLOMB_PREFIX.unpack_from(body, 0)
        return cls(golomb, k, h_bits, m_bits, body[GOLOMB_PREFIX.size :])

    def pack(self) -> bytes:
        return GOLOMB_PREFIX.pack(self.golomb, self.expg_k, self.h_bits, self.m_bits) + \
            self.sections

    @property
    def h_bytes(self) -> int:
        return (self.h_bits + 7) // 8

    def edit(self, **changes) -> "GolombBody":
        return dataclasses.replace(self, **changes)


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
    """A Golomb payload forged from H and M bit strings (m coordinates, N = ceil(m / n))."""
    entries, m = _single_entry(shape, entries, m)
    body = GolombBody(golomb, expg_k, len(h_code), len(m_code),
                      bits_to_bytes(h_code) + bits_to_bytes(m_code))
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
    return hooks.decode_symbols(raw.body, m=raw.m,
                                key=stream_key(secret, Context(raw.round, raw.client,
                                                               raw.message)),
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


# ---------------------------------------------------------------------------
# The outcome of decoding one hostile payload.
# ---------------------------------------------------------------------------


def _leaves(result, structure):
    entries = structure.entries
    if structure.container == 0:
        return [result]
    if structure.container == 3:
        assert isinstance(result, dict)
        assert list(result) == [e.name for e in entries]
        return list(result.values())
    assert type(result) is (list if structure.container == 1 else tuple)
    assert len(result) == len(entries)
    return list(result)


def assert_declared_structure(result, payload: bytes) -> None:
    """result has the container, names, shapes and dtypes the header declares."""
    info = cepam.inspect(payload)
    for leaf, e in zip(_leaves(result, info.structure), info.structure.entries):
        if not isinstance(leaf, np.ndarray):  # a torch tensor (output="auto", torch kind)
            assert e.kind == 1 and type(leaf).__module__.startswith("torch")
            want = "float64" if e.dtype == "float64" else "float32"  # decode's dtype="auto"
            assert tuple(leaf.shape) == e.shape and str(leaf.dtype) == f"torch.{want}"
            continue
        assert leaf.shape == e.shape
        want = "float64" if e.dtype == "float64" else "float32"  # float16, bfloat16 widened
        assert leaf.dtype == np.dtype(want)


@contextlib.contextmanager
def peak_allocation():
    """Traces Python/numpy allocations in the block; afterwards ``.peak`` holds the
    peak number of bytes allocated in it (``with peak_allocation() as traced: ...``)."""
    traced = SimpleNamespace(peak=None)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        yield traced
        traced.peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def outcome(payload: bytes, *, secret: bytes = SECRET, output: str = "numpy",
            max_coordinates: int = 1 << 28) -> str:
    """'ok' (decoded, with the declared structure) or 'format' (FormatError).

    Any other exception propagates.  output='numpy' by default so that a header
    whose entries claim to be torch tensors decodes without torch.
    """
    with warnings.catch_warnings():
        # A hostile body may hold values that overflow float16: a warning, not an error.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = cepam.decode(payload, secret=secret, output=output,
                                  max_coordinates=max_coordinates)
        except cepam.FormatError:
            return "format"
    assert_declared_structure(result, payload)
    return "ok"


def collect_failures(payloads) -> list[str]:
    """Decodes each (label, payload); returns a description of each bad outcome."""
    failures = []
    for label, payload in payloads:
        try:
            outcome(payload)
        except Exception as exc:  # noqa: BLE001 - anything else is the bug we look for
            failures.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
    return failures


_CHILD = r"""
import pickle, sys, warnings
import cepam
warnings.simplefilter("ignore", RuntimeWarning)
with open(sys.argv[1], "rb") as f:
    secret, cases = pickle.load(f)
for label, payload in cases:
    print("start", label, flush=True)
    try:
        cepam.decode(payload, secret=secret, output="numpy")
        print("done ok", flush=True)
    except cepam.FormatError:
        print("done format", flush=True)
    except Exception as exc:
        print("done other", type(exc).__name__, str(exc)[:200].replace("\n", " "), flush=True)
"""


def decode_in_child(cases, *, max_crashes: int = 4) -> dict[str, str]:
    """Decodes each (label, payload) in a child process, so that a crash of the native
    decoder fails one test instead of killing the test run.  Returns label -> 'ok',
    'format', 'other ...', or 'crashed (...)' for a case the child died on (a new child
    then goes on with the next case, up to max_crashes times)."""
    cases = list(cases)
    results: dict[str, str] = {}
    for _ in range(max_crashes + 1):
        todo = [c for c in cases if c[0] not in results]
        if not todo:
            break
        with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
            pickle.dump((SECRET, todo), f)
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, f.name], capture_output=True,
                                  text=True)
        finally:
            os.unlink(f.name)
        current = None
        for line in proc.stdout.splitlines():
            if line.startswith("start "):
                current = line[len("start "):]
            elif line.startswith("done ") and current is not None:
                results[current] = line[len("done "):]
                current = None
        if proc.returncode == 0:
            break
        results[current or todo[0][0]] = f"crashed (exit status {proc.returncode})"
    return results


# ---------------------------------------------------------------------------
# Small valid payloads to corrupt (a few dozen coordinates each), for both coders.
# ---------------------------------------------------------------------------


def _make_bases() -> dict[str, bytes]:
    out = {}
    for coder in CODERS:
        rng = np.random.default_rng(20240611)
        x = rng.normal(size=24).astype(np.float32)
        g, lap = cepam.Gaussian(sigma=0.1), cepam.Laplace(b=0.1)

        def enc(value, mech, **kw):
            return cepam.encode(value, mech, secret=SECRET, round=3, client=11, coder=coder,
                                **kw)

        out.update({
            f"{coder}-gauss-n1": enc(x, g, dim=1),
            f"{coder}-gauss-n2": enc(x, g, dim=2),
            f"{coder}-gauss-n3-f64-padded": enc(rng.normal(size=25), g, dim=3),  # padded
            f"{coder}-laplace-n1": enc(x, lap, dim=1),
            f"{coder}-laplace-n2": enc(x, lap, dim=2),
            f"{coder}-laplace-n4-clip": enc(x, lap, dim=4, clip=2.0),
            f"{coder}-dict-n2": enc({"layer.weight": x[:12].reshape(3, 4),
                                     "layer.bias": x[12:16].astype(np.float16),
                                     "é": rng.normal(size=(2, 2, 2))}, g, dim=2),
            f"{coder}-tuple-laplace-n3": enc((x[:5], x[5:].astype(np.float64)), lap, dim=3),
            f"{coder}-sdq-n1": enc(x, cepam.SDQ(step=0.05), dim=1),
            # Enough coordinates for the ANS stream to hold words after its states.
            f"{coder}-gauss-n2-m300": enc(rng.normal(scale=0.3, size=300), g, dim=2),
            # A2, D4, E8: with the ANS coder, the point model at low SNR (A2, E8;
            # the E8 one with an outlier, which takes the escape to the box model),
            # the box model at high SNR (D4).
            f"{coder}-a2-low": enc(0.01 * rng.normal(size=400), g, lattice="A2"),
            f"{coder}-e8-escapes": enc(np.where(np.arange(800) % 800 == 3, 3.0,
                                                0.001 * rng.normal(size=800)), g, lattice="E8"),
            f"{coder}-d4-high": enc(10 * x, g, lattice="D4"),
        })
    return out


BASES = _make_bases()
BASE_NAMES = sorted(BASES)
SMALL_BASE_NAMES = [b for b in BASE_NAMES if not b.endswith("m300")]
ANS_BASE_NAMES = [b for b in BASE_NAMES if b.startswith("ans-")]


def _make_large_ans() -> dict[str, bytes]:
    """ANS payloads over several 4096-sub-vector blocks (for sampled corruptions)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=2 * ANS_BLOCK + 5)
    return {
        "gauss-n1-3-blocks": cepam.encode(x, cepam.Gaussian(sigma=0.2), secret=SECRET,
                                          round=1, client=2, dim=1),
        "laplace-n2-2-blocks": cepam.encode(x.astype(np.float32), cepam.Laplace(b=0.2),
                                            secret=SECRET, round=1, client=3, dim=2),
    }


LARGE_ANS = _make_large_ans()


def test_bases_are_valid_and_decode():
    for name, payload in BASES.items():
        assert outcome(payload) == "ok", name
        assert payload[4] == VERSION
        assert cepam.inspect(payload).coder == name.split("-")[0], name
        assert 48 < len(payload) < (1200 if name.endswith("m300") else 400), name
    for name, payload in LARGE_ANS.items():
        assert outcome(payload) == "ok", name


def test_forged_payload_helpers_match_the_format():
    """The test-side model round-trips real payloads and forges decodable ones."""
    assert MIN_PAYLOAD == cepam.payload.MIN_PAYLOAD
    for name, payload in {**BASES, **LARGE_ANS}.items():
        raw = RawPayload.parse(payload)
        assert raw.tagged() == payload
        info = cepam.inspect(payload, secret=SECRET)
        assert 8 * raw.header_len() == info.header_bits
        if raw.coder == GOLOMB:
            body = GolombBody.parse(raw.body)
            assert body.pack() == raw.body
            assert info.body_bits == {"params": 8 * GOLOMB_PREFIX.size, "H": body.h_bits,
                                      "M": body.m_bits,
                                      "padding": 8 * len(body.sections) - body.h_bits
                                      - body.m_bits}, name
        else:
            body = AnsBody.parse(raw.body, raw.lattice)
            assert body.pack() == raw.body
            assert (body.point_model is None) == (raw.lattice == 1), name
            assert info.body_bits == {"model": 8 * len(body.model.pack()),
                                      "segments": 8 * (len(body.prefix())
                                                       - len(body.model.pack())),
                                      "stream": 8 * len(body.stream)}, name
            assert body.after == b"", name
            incs = body.model.increments()
            assert sum(incs) <= KNOT_SCALE and body.model.order == best_knot_order(incs)
            assert body.model.recoded().pack() == body.model.pack()
            assert body.model.bins % 2 == 0 and body.model.growth <= MAX_GROWTH
            assert (len(body.stream) - 8 * STREAMS) % 4 == 0
    assert len(unpack_stream(AnsBody.parse(RawPayload.parse(BASES["ans-gauss-n2-m300"]).body)
                             .stream)[1]) > 8, "the m300 base should have stream words"
    ok = forged(shape=(3,), m_code=expg(0) + expg(-1) + expg(5)).tagged()
    assert outcome(ok) == "ok"
    ok2 = forged(n=2, golomb=1, shape=(3,), h_code=unary(1) + unary(3),
                 m_code=expg(0) * 4).tagged()
    assert outcome(ok2) == "ok"
    # ANS: escapes only (H not coded for Gaussian on Z^1) and with H coded (Z^2).
    M = [1 << 40, -(1 << 40), 12345678901, -7]
    raw = forged_ans(shape=(4,), stream=escape_stream(M))
    assert outcome(raw.tagged()) == "ok"
    H, M2 = symbols_of(raw)
    assert H.tolist() == [1] * 4 and M2.tolist() == M
    p2 = acceptance(1, 2)
    raw2 = forged_ans(n=2, shape=(4,), stream=escape_stream(M, n=2, H=[3, 70], p=p2))
    assert outcome(raw2.tagged()) == "ok"
    H, M2 = symbols_of(raw2)
    assert H.tolist() == [3, 70] and M2.tolist() == M


def test_forged_streams_with_table_coded_trial_indices_decode():
    """The test-side geometric table matches the decoder's: H = 1 .. 12 coded by the
    table (Laplace on Z^2), M escaped, decode to exactly those symbols."""
    M = [(-1) ** i * ((1 << 42) + 12345 * i) for i in range(24)]
    raw = forged_ans(n=2, mechanism=2, shape=(24,), scale=0.1,
                     stream=escape_stream(M, n=2, H=list(range(1, 13)),
                                          p=acceptance(2, 2, scale=0.1)))
    H, M2 = symbols_of(raw)
    assert H.tolist() == list(range(1, 13)) and M2.tolist() == M


# ---------------------------------------------------------------------------
# Without a valid tag.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["golomb-gauss-n2", "golomb-dict-n2", "ans-gauss-n2",
                                  "ans-dict-n2", "ans-sdq-n1"])
def test_every_single_bit_flip_without_retag_is_rejected(name):
    payload = BASES[name]
    bad = []
    for bit in range(8 * len(payload)):
        flipped = bytearray(payload)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            cepam.decode(bytes(flipped), secret=SECRET)
        except cepam.FormatError:
            continue  # also fine for the header: parsed before or after the tag
        except cepam.AuthenticationError:
            if bit < 8 * 5:  # magic and version are checked before the tag
                bad.append(f"bit {bit}: AuthenticationError, expected FormatError")
            continue
        except Exception as exc:  # noqa: BLE001
            bad.append(f"bit {bit}: {type(exc).__name__}: {exc}")
            continue
        bad.append(f"bit {bit}: decoded")
    assert not bad, bad[:10]


@pytest.mark.parametrize("name", ["golomb-gauss-n1", "golomb-dict-n2", "ans-gauss-n1",
                                  "ans-dict-n2"])
def test_every_truncation_without_retag_is_rejected(name):
    payload = BASES[name]
    for length in range(len(payload)):
        expected = cepam.FormatError if length < MIN_PAYLOAD else (
            cepam.FormatError, cepam.AuthenticationError)
        with pytest.raises(expected):
            cepam.decode(payload[:length], secret=SECRET)


def test_truncation_below_minimum_says_too_short():
    for name in ("golomb-gauss-n1", "ans-gauss-n1"):
        with pytest.raises(cepam.FormatError, match="too short"):
            cepam.decode(BASES[name][: MIN_PAYLOAD - 1], secret=SECRET)
    with pytest.raises(cepam.FormatError, match="too short"):
        cepam.decode(b"", secret=SECRET)


@pytest.mark.parametrize("magic", [b"CEPN", b"cepm", b"\x00\x00\x00\x00", b"PK\x03\x04"])
@pytest.mark.parametrize("retagged", [False, True], ids=["tag-stale", "tag-valid"])
@pytest.mark.parametrize("coder", CODERS)
def test_wrong_magic_is_a_format_error(magic, retagged, coder):
    base = BASES[f"{coder}-gauss-n2"]
    data = magic + untagged(base)[4:]
    payload = retag(data) if retagged else data + base[-TAG_BYTES:]
    with pytest.raises(cepam.FormatError, match="magic"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="magic"):
        cepam.inspect(payload)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 5, 0x82, 255])
@pytest.mark.parametrize("retagged", [False, True], ids=["tag-stale", "tag-valid"])
@pytest.mark.parametrize("coder", CODERS)
def test_wrong_version_is_a_format_error(version, retagged, coder):
    base = BASES[f"{coder}-laplace-n2"]
    raw = RawPayload.parse(base).edit(version=version)
    payload = raw.tagged() if retagged else raw.data() + base[-TAG_BYTES:]
    with pytest.raises(cepam.FormatError, match="version"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="version"):
        cepam.inspect(payload)


def test_a_version_1_payload_is_refused_by_version():
    """A v1 payload (coder fields in the header, then the H and M sections) is not
    parsed as v2: the version byte says so, tagged or not."""
    raw = RawPayload.parse(BASES["golomb-gauss-n2"])
    body = GolombBody.parse(raw.body)
    v1 = raw.edit(version=1, body=body.pack())  # v1: the Golomb fields right after the entries
    for payload in (v1.tagged(), v1.data() + BASES["golomb-gauss-n2"][-TAG_BYTES:]):
        with pytest.raises(cepam.FormatError, match="version 1"):
            cepam.decode(payload, secret=SECRET)


@pytest.mark.parametrize("name", BASE_NAMES)
def test_wrong_secret_is_an_authentication_error(name):
    with pytest.raises(cepam.AuthenticationError, match="tag"):
        cepam.decode(BASES[name], secret=OTHER_SECRET)
    codec = cepam.Codec(cepam.Gaussian(sigma=0.1), secret=OTHER_SECRET, client=11)
    with pytest.raises(cepam.AuthenticationError):
        codec.decode(BASES[name])


@pytest.mark.parametrize("coder", CODERS)
def test_payload_tagged_under_another_secret_is_an_authentication_error(coder):
    forged_elsewhere = retag(untagged(BASES[f"{coder}-gauss-n2"]), secret=OTHER_SECRET)
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(forged_elsewhere, secret=SECRET)
    # Under the other secret the tag verifies, but the sealed section decrypts
    # under the other seal key to noise: a FormatError (or, rarely, a decodable
    # body).
    assert outcome(forged_elsewhere, secret=OTHER_SECRET) in {"ok", "format"}


def test_tag_edits_and_trailing_bytes_without_retag_are_authentication_errors():
    for name in ("golomb-dict-n2", "ans-dict-n2"):
        p = BASES[name]
        for bad in (p[:-1] + bytes([p[-1] ^ 0x80]), p[:-TAG_BYTES] + bytes(TAG_BYTES),
                    p + b"\x00", p + p[-TAG_BYTES:], untagged(p) + b"\x00" + p[-TAG_BYTES:]):
            with pytest.raises(cepam.AuthenticationError):
                cepam.decode(bad, secret=SECRET)


@pytest.mark.parametrize("coder", CODERS)
def test_a_tagged_payload_for_a_2_62_coordinate_update_without_retag_is_rejected(coder):
    base = BASES[f"{coder}-gauss-n1"]
    raw = RawPayload.parse(base)
    raw = raw.edit(m=1 << 62, entries=[RawEntry(b"", 0, 1, (1 << 62,))])
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(raw.data() + base[-TAG_BYTES:], secret=SECRET)


@pytest.mark.parametrize("payload", ["x" * 200, 123, None, [1, 2, 3], 1.5, {"a": b"x"}],
                         ids=["str", "int", "None", "list", "float", "dict"])
def test_non_bytes_payloads_are_invalid_type_errors(payload):
    with pytest.raises(cepam.InvalidTypeError, match="payload must be bytes"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.InvalidTypeError, match="payload must be bytes"):
        cepam.inspect(payload)
    codec = cepam.Codec(cepam.Gaussian(sigma=0.1), secret=SECRET, client=11)
    with pytest.raises(TypeError, match="payload must be bytes"):
        codec.decode(payload)


def test_bytes_like_payloads_are_accepted():
    for name in ("golomb-tuple-laplace-n3", "ans-tuple-laplace-n3"):
        p = BASES[name]
        for like in (bytearray(p), memoryview(p)):
            assert_declared_structure(cepam.decode(like, secret=SECRET), p)
            assert cepam.inspect(like).coordinates == 24


def test_inspect_on_every_single_bit_flip_of_the_header_raises_format_error_only():
    """inspect() reads hostile public headers without the secret: info or
    FormatError; with the secret every flip (tag not recomputed) is refused."""
    for name in ("golomb-dict-n2", "golomb-laplace-n4-clip", "ans-dict-n2",
                 "ans-laplace-n4-clip", "ans-sdq-n1"):
        payload = BASES[name]
        raw = RawPayload.parse(payload)
        for bit in range(8 * raw.header_len()):
            flipped = bytearray(payload)
            flipped[bit // 8] ^= 1 << (bit % 8)
            with pytest.raises((cepam.FormatError, cepam.AuthenticationError)):
                cepam.inspect(bytes(flipped), secret=SECRET)
            try:
                info = cepam.inspect(bytes(flipped))
            except cepam.FormatError:
                continue
            assert info.coordinates == sum(math.prod(e.shape) for e in info.structure.entries)
            assert info.sealed and info.body_bits is None
            assert info.sealed_bits == info.total_bits - info.header_bits - info.tag_bits
            info.as_dict()  # and it can be shown


@pytest.mark.parametrize("name", ["golomb-dict-n2", "ans-dict-n2", "ans-gauss-n2-m300"])
def test_inspect_on_every_truncation_raises_format_error_or_reads_the_parts(name):
    """inspect() without the secret reads the public header only: a truncation
    that leaves less than the header and the sealed section's own header is a
    FormatError, anything longer reads (the sealed part is not parsed).  With
    the secret every truncation is refused (the tag no longer verifies)."""
    payload = BASES[name]
    raw = RawPayload.parse(payload)
    header_end = raw.header_len() + SEALED_HEADER.size
    for length in range(len(payload)):
        truncated = payload[:length]
        with pytest.raises((cepam.FormatError, cepam.AuthenticationError)):
            cepam.inspect(truncated, secret=SECRET)
        if length - TAG_BYTES < header_end:
            with pytest.raises(cepam.FormatError):
                cepam.inspect(truncated)
        else:
            info = cepam.inspect(truncated)
            assert info.total_bits == 8 * length and info.sealed


# ---------------------------------------------------------------------------
# Behind a valid tag: a client attacking the server with its own key.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", BASE_NAMES)
def test_every_single_bit_flip_behind_a_valid_tag_decodes_or_is_a_format_error(name):
    data = untagged(BASES[name])
    cases = []
    for bit in range(8 * len(data)):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        cases.append((f"bit {bit} (byte {bit // 8})", retag(bytes(flipped))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


@pytest.mark.parametrize("name", ["golomb-dict-n2", "ans-dict-n2", "ans-laplace-n4-clip"])
def test_every_single_bit_flip_behind_a_valid_tag_with_output_auto(name):
    """As above with output="auto": a flipped kind byte declares a torch tensor, which
    decodes to one where torch is installed and is a clear InvalidArgumentError
    naming torch where it is not."""
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
    data = untagged(BASES[name])
    bad = []
    for bit in range(8 * len(data)):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        payload = retag(bytes(flipped))
        try:
            outcome(payload, output="auto")
        except cepam.InvalidArgumentError as exc:
            if have_torch or "torch" not in str(exc):
                bad.append(f"bit {bit}: {exc}")
        except Exception as exc:  # noqa: BLE001
            bad.append(f"bit {bit}: {type(exc).__name__}: {exc}")
    assert not bad, bad[:10]


@pytest.mark.parametrize("name", BASE_NAMES)
def test_every_truncation_behind_a_valid_tag_is_a_format_error(name):
    data = untagged(BASES[name])
    for length in range(len(data)):
        payload = retag(data[:length])
        with pytest.raises(cepam.FormatError):
            cepam.decode(payload, secret=SECRET)


BODY_TRUNCATION_MESSAGES = {
    "golomb": "length|section|too short",
    "ans": "source model|entropy-coded body|truncated|bad length|prefix code|segment|"
           "length can carry",
}


@pytest.mark.parametrize("name", ["golomb-gauss-n2", "golomb-dict-n2", "ans-gauss-n2",
                                  "ans-dict-n2", "ans-gauss-n2-m300"])
def test_every_truncation_of_the_body_keeping_the_header_is_a_format_error(name):
    """Drop trailing body bytes but keep the header (and the Golomb section lengths),
    sealed and tagged: the body parser, not the header parser, must notice;
    likewise for the ciphertext truncated (and re-tagged).  Padding declared
    longer than the section is refused by the sealed section's parser."""
    raw = RawPayload.parse(BASES[name])
    match = BODY_TRUNCATION_MESSAGES[name.split("-")[0]]
    for length in range(len(raw.body)):
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(raw.edit(body=raw.body[:length]).tagged(), secret=SECRET)
    data = untagged(BASES[name])
    for length in range(raw.header_len(), len(data)):
        with pytest.raises(cepam.FormatError):
            cepam.decode(retag(data[:length]), secret=SECRET)
    for declared in (len(raw.body) + 1, 1 << 31, (1 << 32) - 1):
        with pytest.raises(cepam.FormatError, match="padding"):
            cepam.decode(raw.edit(padding_length=declared).tagged(), secret=SECRET)


TRAILING_MESSAGES = {"golomb": "body length", "ans": "trailing data|bad length"}


@pytest.mark.parametrize("garbage", [b"\x00", b"\xff", b"\x00" * 8, b"CEPM", bytes(range(64))])
def test_trailing_garbage_behind_a_valid_tag_is_a_format_error(garbage):
    """Garbage after the body (declared part of it) is the body parser's to
    refuse; as padding, anything but zero bytes is refused."""
    for name in ("golomb-gauss-n1", "golomb-dict-n2", "ans-gauss-n1", "ans-dict-n2",
                 "ans-gauss-n2-m300"):
        raw = RawPayload.parse(BASES[name])
        with pytest.raises(cepam.FormatError, match=TRAILING_MESSAGES[name.split("-")[0]]):
            cepam.decode(raw.edit(body=raw.body + garbage).tagged(), secret=SECRET)
        padded = raw.edit(padding=garbage).tagged()
        if any(garbage):
            with pytest.raises(cepam.FormatError, match="padding"):
                cepam.decode(padded, secret=SECRET)
        else:  # zero padding: the payload decodes as the unpadded one does
            got, want = (cepam.decode(p, secret=SECRET) for p in (padded, BASES[name]))
            got, want = (list(r.values()) if isinstance(r, dict) else [r] for r in (got, want))
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)


def _random_mutation(rng: random.Random, pool: list[bytes]) -> bytes:
    data = bytearray(rng.choice(pool))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op == 0 and data:  # replace a byte
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 1:  # insert a byte
            data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        elif op == 2 and data:  # delete a run
            i = rng.randrange(len(data))
            del data[i : i + rng.randint(1, 8)]
        elif op == 3:  # splice with another payload
            other = rng.choice(pool)
            data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]
        elif op == 4 and data:  # an extreme byte value
            data[rng.randrange(len(data))] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
        elif op == 5 and len(data) >= 8:  # an extreme 64-bit little-endian field
            i = rng.randrange(len(data) - 7)
            data[i : i + 8] = struct.pack("<Q", rng.choice([0, 1, U64, 1 << 62, 1 << 63, 1 << 32,
                                                            1 << 31, (1 << 63) - 1]))
    return bytes(data)


@pytest.mark.parametrize("coder", CODERS)
def test_seeded_random_mutations_behind_a_valid_tag_decode_or_are_format_errors(coder):
    rng = random.Random(0xCE9A + len(coder))
    pool = [untagged(p) for name, p in BASES.items() if name.startswith(coder)]
    cases = []
    for i in range(3000):
        cases.append((f"mutation {i}", retag(_random_mutation(rng, pool))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


@pytest.mark.parametrize("coder", CODERS)
def test_seeded_random_mutations_include_both_outcomes(coder):
    """Guards the fuzz test above against testing only one path."""
    rng = random.Random(0xCE9A + len(coder))
    pool = [untagged(p) for name, p in BASES.items() if name.startswith(coder)]
    seen = set()
    for _ in range(400):
        try:
            seen.add(outcome(retag(_random_mutation(rng, pool))))
        except Exception:  # noqa: BLE001 - reported by the fuzz test itself
            pass
    assert seen == {"ok", "format"}


# --- Targeted edits of header fields, behind a valid tag. -------------------

FORMAT = "format"  # must raise FormatError
EITHER = "either"  # may decode (to the declared structure) or raise FormatError


def _entries(base: RawPayload, **changes) -> list[RawEntry]:
    return [dataclasses.replace(base.entries[0], **changes)] + base.entries[1:]


def _set_bit(body: bytes, bit: int, value: int) -> bytes:
    b = bytearray(body)
    if value:
        b[bit // 8] |= 0x80 >> (bit % 8)
    else:
        b[bit // 8] &= ~(0x80 >> (bit % 8)) & 0xFF
    return bytes(b)


def _fid(v: float) -> str:
    """A float for a test id (-nan and nan apart)."""
    return ("-" if math.isnan(v) and math.copysign(1.0, v) < 0 else "") + repr(v)


# (id, base payload without the coder prefix, edit: RawPayload -> RawPayload, expected
# outcome, message regex): header edits, run on the payloads of both coders.
HEADER_TARGETED = [
    # Declared sizes.
    ("m-2^62-single-dim", "gauss-n1",
     lambda r: r.edit(m=1 << 62, entries=_entries(r, dims=(1 << 62,))), FORMAT, None),
    ("m-2^62-two-dims", "gauss-n2",
     lambda r: r.edit(m=1 << 62, entries=_entries(r, dims=(1 << 31, 1 << 31))), FORMAT, None),
    ("m-2^62-shape-unchanged", "gauss-n1", lambda r: r.edit(m=1 << 62), FORMAT,
     "add up|too large"),
    ("m-2^64-1-n1", "gauss-n1",
     lambda r: r.edit(m=U64, entries=_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^64-1-n2", "gauss-n2",
     lambda r: r.edit(m=U64, entries=_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^64-3-n4", "laplace-n4-clip",
     lambda r: r.edit(m=U64 - 2, entries=_entries(r, dims=(U64 - 2,))), FORMAT, None),
    ("m-2^64-1-n8", "gauss-n1",
     lambda r: r.edit(n=8, m=U64, entries=_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^56-plus-1", "gauss-n1",
     lambda r: r.edit(m=(1 << 56) + 1, entries=_entries(r, dims=((1 << 56) + 1,))), FORMAT,
     "too large"),
    # Below the header's own bound, above decode's default max_coordinates (2^28).
    ("m-2^56", "gauss-n1",
     lambda r: r.edit(m=1 << 56, entries=_entries(r, dims=(1 << 56,))), FORMAT,
     "max_coordinates"),
    ("m-2^40", "gauss-n2",
     lambda r: r.edit(m=1 << 40, entries=_entries(r, dims=(1 << 20, 1 << 20))), FORMAT,
     "max_coordinates"),
    ("m-2^28-plus-1", "gauss-n1",
     lambda r: r.edit(m=(1 << 28) + 1, entries=_entries(r, dims=((1 << 28) + 1,))), FORMAT,
     "max_coordinates"),
    ("m-zero", "gauss-n1", lambda r: r.edit(m=0), FORMAT, None),
    ("m-zero-empty-shape", "gauss-n1", lambda r: r.edit(m=0, entries=_entries(r, dims=(0,))),
     FORMAT, None),
    ("m-zero-empty-shape-n2", "gauss-n2-m300",
     lambda r: r.edit(m=0, entries=_entries(r, dims=(0, 3))), FORMAT, None),
    ("m-one-more", "gauss-n1", lambda r: r.edit(m=r.m + 1), FORMAT, "add up"),
    ("m-one-less", "gauss-n1", lambda r: r.edit(m=r.m - 1), FORMAT, "exceed|add up"),
    ("m-one-more-than-body-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m + 1, entries=_entries(r, dims=(r.m + 1,))), FORMAT, None),
    ("m-one-less-than-body-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m - 1, entries=_entries(r, dims=(r.m - 1,))), FORMAT, None),
    ("m-4096-more-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m + ANS_BLOCK, entries=_entries(r, dims=(r.m + ANS_BLOCK,))),
     FORMAT, None),
    ("dims-huge-product", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1 << 32, 1 << 32, 1 << 32))), FORMAT,
     "exceed|too large"),
    ("dims-32-times-2^64-1", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(U64,) * 32)), FORMAT, "exceed|too large"),
    ("dims-product-wraps-2^64", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1 << 32, 1 << 32, r.m))), FORMAT,
     "exceed|too large"),
    ("zero-size-entry-with-2^61-dim", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(0, 1 << 61)) + [RawEntry(b"", 0, 1, (r.m,))],
                      container=1), EITHER, None),
    ("zero-size-entry-with-2^64-1-dim", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(U64, 0)) + [RawEntry(b"", 0, 1, (r.m,))],
                      container=1), EITHER, None),
    ("zero-size-entry-small", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(0, 7)) + [RawEntry(b"", 0, 1, (r.m,))],
                      container=1), EITHER, None),
    # Entry table.
    ("entry-count-2^32-1", "dict-n2", lambda r: r.edit(count=(1 << 32) - 1), FORMAT, "entries"),
    ("entry-count-0", "dict-n2", lambda r: r.edit(count=0), FORMAT, "entries"),
    ("entry-count-one-more", "dict-n2", lambda r: r.edit(count=len(r.entries) + 1), FORMAT, None),
    ("entry-count-one-less", "dict-n2", lambda r: r.edit(count=len(r.entries) - 1), FORMAT, None),
    ("two-entries-in-single-container", "gauss-n1",
     lambda r: r.edit(entries=r.entries * 2, m=2 * r.m), FORMAT, "entries"),
    ("name-length-65535", "dict-n2",
     lambda r: r.edit(entries=_entries(r, name=b"a" * 65535)), FORMAT, "name"),
    ("name-length-1025", "dict-n2",
     lambda r: r.edit(entries=_entries(r, name=b"a" * 1025)), FORMAT, "name"),
    ("name-length-1024", "dict-n2",
     lambda r: r.edit(entries=_entries(r, name=b"a" * 1024)), EITHER, None),
    ("ndim-255", "gauss-n1", lambda r: r.edit(entries=_entries(r, ndim=255)), FORMAT, "rank"),
    ("ndim-255-with-dims", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1,) * 254 + (r.m,))), FORMAT, "rank"),
    ("ndim-33", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1,) * 32 + (r.m,))), FORMAT, "rank"),
    ("ndim-32", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1,) * 31 + (r.m,))), EITHER, None),
    ("ndim-0", "gauss-n1", lambda r: r.edit(entries=_entries(r, dims=())), FORMAT, None),
    ("kind-2", "gauss-n1", lambda r: r.edit(entries=_entries(r, kind=2)), FORMAT, "kind"),
    ("dtype-0", "gauss-n1", lambda r: r.edit(entries=_entries(r, dtype=0)), FORMAT, "dtype"),
    ("dtype-5", "gauss-n1", lambda r: r.edit(entries=_entries(r, dtype=5)), FORMAT, "dtype"),
    ("dtype-255", "gauss-n1", lambda r: r.edit(entries=_entries(r, dtype=255)), FORMAT, "dtype"),
    ("dtype-f16-to-f64", "dict-n2", lambda r: r.edit(entries=[
        dataclasses.replace(e, dtype=2) for e in r.entries]), EITHER, None),
    ("duplicate-dict-names", "dict-n2",
     lambda r: r.edit(entries=[r.entries[0], dataclasses.replace(r.entries[1],
                                                                 name=r.entries[0].name)]
                      + r.entries[2:]), FORMAT, "duplicate"),
    ("named-entry-in-list", "tuple-laplace-n3",
     lambda r: r.edit(entries=_entries(r, name=b"w")), FORMAT, "named"),
    ("named-entry-in-single", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, name=b"w")), FORMAT, "named"),
    ("utf8-invalid-ff", "dict-n2", lambda r: r.edit(entries=_entries(r, name=b"\xff")),
     FORMAT, "UTF-8"),
    ("utf8-truncated", "dict-n2", lambda r: r.edit(entries=_entries(r, name=b"ab\xc3")),
     FORMAT, "UTF-8"),
    ("utf8-overlong-nul", "dict-n2", lambda r: r.edit(entries=_entries(r, name=b"\xc0\x80")),
     FORMAT, "UTF-8"),
    ("utf8-surrogate", "dict-n2", lambda r: r.edit(entries=_entries(r, name=b"\xed\xa0\x80")),
     FORMAT, "UTF-8"),
    ("utf8-above-u10ffff", "dict-n2",
     lambda r: r.edit(entries=_entries(r, name=b"\xf4\x90\x80\x80")), FORMAT, "UTF-8"),
    # Codes and parameters.
    *[(f"mechanism-{c}", "gauss-n1", (lambda c: lambda r: r.edit(mechanism=c))(c), FORMAT,
       "mechanism") for c in (0, 4, 255)],
    ("gauss-n1-to-sdq", "gauss-n1", lambda r: r.edit(mechanism=3), EITHER, None),
    ("laplace-n1-to-sdq", "laplace-n1", lambda r: r.edit(mechanism=3), EITHER, None),
    ("sdq-to-gauss", "sdq-n1", lambda r: r.edit(mechanism=1), EITHER, None),
    ("sdq-to-laplace", "sdq-n1", lambda r: r.edit(mechanism=2), EITHER, None),
    ("gauss-n2-to-sdq", "gauss-n2", lambda r: r.edit(mechanism=3), FORMAT, "dimension"),
    *[(f"sdq-n{n}", "sdq-n1", (lambda n: lambda r: r.edit(n=n))(n), FORMAT, "dimension")
      for n in (0, 2, 3, 8, 9, 255)],
    *[(f"lattice-{c}", "gauss-n2", (lambda c: lambda r: r.edit(lattice=c))(c), FORMAT,
       "lattice") for c in (0, 5, 255)],
    # A2 (code 2) is a valid lattice of dimension 2: the Z^2 body does not
    # decode as an A2 body, or does into garbage of the right shape; D4 and
    # E8 need another n.
    ("lattice-a2-over-z2-body", "gauss-n2", lambda r: r.edit(lattice=2), "any", ""),
    *[(f"lattice-{c}-wrong-n", "gauss-n2", (lambda c: lambda r: r.edit(lattice=c))(c), FORMAT,
       "dimension") for c in (3, 4)],
    *[(f"coder-{c}", "gauss-n2", (lambda c: lambda r: r.edit(coder=c))(c), FORMAT, "coder")
      for c in (0, 3, 255)],
    *[(f"container-{c}", "dict-n2", (lambda c: lambda r: r.edit(container=c))(c), FORMAT,
       "container") for c in (5, 255)],
    # 4 is a bare payload (no structure): one with entries is malformed.
    ("container-4-with-entries", "dict-n2", lambda r: r.edit(container=4), FORMAT,
     "without structure has entries"),
    ("dict-as-single-container", "dict-n2", lambda r: r.edit(container=0), FORMAT, None),
    ("dict-as-list-container", "dict-n2", lambda r: r.edit(container=1), FORMAT, "named"),
    ("list-as-dict-container", "tuple-laplace-n3", lambda r: r.edit(container=3),
     FORMAT, "duplicate"),
    *[(f"reserved-{v:#x}", "gauss-n1", (lambda v: lambda r: r.edit(reserved=v))(v), FORMAT,
       "reserved") for v in (1, 0x100, 0xFFFF)],
    *[(f"scale-{_fid(v)}", "gauss-n2", (lambda v: lambda r: r.edit(scale=v))(v), FORMAT, "scale")
      for v in (math.nan, -math.nan, -1.0, 0.0, -0.0, math.inf, -math.inf)],
    *[(f"sdq-step-{v}", "sdq-n1", (lambda v: lambda r: r.edit(scale=v))(v), FORMAT, "scale")
      for v in (math.nan, -1.0, 0.0, math.inf)],
    *[(f"clip-{_fid(v)}", "laplace-n4-clip", (lambda v: lambda r: r.edit(clip=v))(v), FORMAT,
       "clip") for v in (math.nan, -1.0, 0.0, -0.0, -math.inf)],
    ("clip-inf", "laplace-n4-clip", lambda r: r.edit(clip=math.inf), EITHER, None),
    *[(f"scale-{v:g}-{base}", base, (lambda v: lambda r: r.edit(scale=v))(v), EITHER, None)
      for base in ("gauss-n2", "laplace-n2", "sdq-n1", "gauss-n1")
      for v in (5e-324, 1e-300, 1e-8, 1e8, 1e300, DBL_MAX)],
    *[(f"laplace-n{n}", "laplace-n4-clip", (lambda n: lambda r: r.edit(n=n))(n), FORMAT,
       "dimension") for n in (5, 6, 7, 8)],
    *[(f"gauss-n{n}", "gauss-n2", (lambda n: lambda r: r.edit(n=n))(n), FORMAT, "dimension")
      for n in (0, 9, 255)],
    *[(f"laplace-n{n}-bad", "laplace-n2", (lambda n: lambda r: r.edit(n=n))(n), FORMAT,
       "dimension") for n in (0, 9, 255)],
    *[(f"gauss-n{n}-reinterpreted", "gauss-n2", (lambda n: lambda r: r.edit(n=n))(n), EITHER,
       None) for n in (1, 3, 4, 8)],
    ("gauss-to-laplace", "gauss-n2", lambda r: r.edit(mechanism=2), EITHER, None),
    ("laplace-to-gauss", "laplace-n4-clip", lambda r: r.edit(mechanism=1), EITHER, None),
    # Context: any values are fine (another key: noise, but the declared structure).
    ("context-max", "dict-n2", lambda r: r.edit(round=U64, client=U64, message=U64), EITHER,
     None),
    ("context-other-client", "gauss-n2-m300", lambda r: r.edit(client=r.client + 1), EITHER,
     None),
]


def _padding_bit(b: GolombBody, section: str, *, first: bool) -> GolombBody:
    """Sets the first or last padding bit of the H or M section."""
    start = 0 if section == "H" else 8 * b.h_bytes
    bits = b.h_bits if section == "H" else b.m_bits
    pad = -bits % 8
    assert pad > 0, "pick a base payload whose section has padding"
    bit = start + bits + (0 if first else pad - 1)
    return b.edit(sections=_set_bit(b.sections, bit, 1))


# Edits of the Golomb body (its 21-byte prefix and sections), behind a valid tag.
GOLOMB_TARGETED = [
    # Coder swap: a Golomb body read as an ANS body.
    ("golomb-body-read-as-ans", "golomb-gauss-n2", lambda r: r.edit(coder=ANS), EITHER, None),
    ("golomb-body-read-as-ans-m300", "golomb-gauss-n2-m300", lambda r: r.edit(coder=ANS),
     EITHER, None),
    # The prefix itself.
    *[(f"prefix-truncated-to-{k}", "golomb-gauss-n2", (lambda k: lambda r:
       r.edit(body=r.body[:k]))(k), FORMAT, "too short|length can carry") for k in (0, 1, 4, 5, 13, 20)],
    # Section lengths.
    ("h_bits-2^64-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=U64)), FORMAT, None),
    ("m_bits-2^64-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(m_bits=U64)), FORMAT, None),
    ("both-bits-2^64-1", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(h_bits=U64, m_bits=U64)), FORMAT, None),
    ("h_bits-2^61", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=1 << 61)), FORMAT,
     None),
    ("h_bits-2^63-m_bits-2^63", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(h_bits=1 << 63, m_bits=1 << 63)), FORMAT, None),
    ("h_bits-plus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=b.h_bits + 1)),
     FORMAT, None),
    ("h_bits-minus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=b.h_bits - 1)),
     FORMAT, None),
    ("m_bits-plus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(m_bits=b.m_bits + 1)),
     FORMAT, None),
    ("m_bits-minus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(m_bits=b.m_bits - 1)),
     FORMAT, None),
    ("m_bits-plus-1-n1", "golomb-laplace-n1", on_golomb(lambda b: b.edit(m_bits=b.m_bits + 1)),
     FORMAT, None),
    ("m_bits-minus-1-n1", "golomb-laplace-n1",
     on_golomb(lambda b: b.edit(m_bits=b.m_bits - 1)), FORMAT, None),
    ("h_bits-on-constant-H", "golomb-gauss-n1",
     on_golomb(lambda b: b.edit(h_bits=1, sections=b"\x80" + b.sections)), FORMAT, None),
    ("bits-moved-between-sections", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(h_bits=b.h_bits + 8, m_bits=b.m_bits - 8)), FORMAT, None),
    ("m_bits-zero", "golomb-gauss-n1", on_golomb(lambda b: b.edit(m_bits=0, sections=b"")),
     FORMAT, None),
    # Coder parameters.
    ("golomb-0-where-H-varies", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=0)),
     FORMAT, None),
    ("golomb-0-H-section-dropped", "golomb-laplace-n2",
     on_golomb(lambda b: b.edit(golomb=0, h_bits=0, sections=b.sections[b.h_bytes:])),
     EITHER, None),
    ("golomb-2^16+1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=(1 << 16) + 1)),
     FORMAT, "Golomb"),
    ("golomb-2^32-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=(1 << 32) - 1)),
     FORMAT, "Golomb"),
    ("golomb-2^16", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=1 << 16)), EITHER,
     None),
    *[(f"golomb-{g}-reinterpreted", "golomb-laplace-n2",
       (lambda g: on_golomb(lambda b: b.edit(golomb=g)))(g), EITHER, None)
      for g in (1, 2, 3, 7, 255)],
    ("golomb-1-on-n1", "golomb-gauss-n1",
     on_golomb(lambda b: b.edit(golomb=1, h_bits=24,
                                sections=bits_to_bytes("1" * 24) + b.sections)), EITHER, None),
    ("H-2-on-n1", "golomb-gauss-n1",
     on_golomb(lambda b: b.edit(golomb=1, h_bits=25,
                                sections=bits_to_bytes("01" + "1" * 23) + b.sections)),
     FORMAT, "trial index"),
    ("H-2-on-sdq", "golomb-sdq-n1",
     on_golomb(lambda b: b.edit(golomb=1, h_bits=25,
                                sections=bits_to_bytes("01" + "1" * 23) + b.sections)),
     FORMAT, "trial index"),
    *[(f"expg-order-{k}", "golomb-gauss-n2", (lambda k: on_golomb(lambda b: b.edit(expg_k=k)))(k),
       FORMAT, "exp-Golomb") for k in (55, 56, 63, 64, 128, 255)],
    *[(f"expg-order-{k}-reinterpreted", "golomb-gauss-n2",
       (lambda k: on_golomb(lambda b: b.edit(expg_k=k)))(k), EITHER, None)
      for k in (0, 1, 2, 3, 54)],
    # Padding bits of each section.
    ("H-padding-first-bit", "golomb-laplace-n2",
     on_golomb(lambda b: _padding_bit(b, "H", first=True)), FORMAT, "padding"),
    ("H-padding-last-bit", "golomb-laplace-n2",
     on_golomb(lambda b: _padding_bit(b, "H", first=False)), FORMAT, "padding"),
    ("M-padding-first-bit", "golomb-laplace-n2",
     on_golomb(lambda b: _padding_bit(b, "M", first=True)), FORMAT, "padding"),
    ("M-padding-last-bit", "golomb-dict-n2",
     on_golomb(lambda b: _padding_bit(b, "M", first=False)), FORMAT, "padding"),
    ("body-all-zero", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(sections=bytes(len(b.sections)))), FORMAT, None),
    ("body-all-ones", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(sections=b"\xff" * len(b.sections))), FORMAT, None),
    ("whole-body-all-zero", "golomb-gauss-n2", lambda r: r.edit(body=bytes(len(r.body))),
     FORMAT, None),
    ("whole-body-all-ones", "golomb-gauss-n2", lambda r: r.edit(body=b"\xff" * len(r.body)),
     FORMAT, None),
]


def _codes_summing_to(total: int, k: int = 0) -> str:
    """63 increments (64 bins): total in the first, zeros after."""
    return "".join(expg_unsigned(v, k) for v in [total] + [0] * (BINS - 2))


def _recoded(model: AnsModel, order: int) -> AnsModel:
    """The same knots, coded at another order."""
    return model.recoded(order=order)


def _with_padding(model: AnsModel, pad) -> AnsModel:
    """The same knots at an order whose codes leave padding bits; pad(bits) -> str."""
    for order in [model.order] + list(range(KNOT_BITS + 1)):
        recoded = _recoded(model, order)
        bits = -len(recoded.codes) % 8
        if bits:
            return recoded.edit(padding=pad(bits))
    raise AssertionError("no order leaves padding")


def _replace_first_code(model: AnsModel, code: str) -> AnsModel:
    """Replaces the first increment's code by `code` (any bit string)."""
    first = expg_unsigned(model.increments()[0], model.order)
    assert model.codes.startswith(first)
    return model.edit(codes=code + model.codes[len(first):], padding=None)


def _stream_edit(f):
    """An edit of the ANS stream as (states, words) -> (states, words)."""
    def edit(b: AnsBody) -> AnsBody:
        states, words = unpack_stream(b.stream)
        return b.edit(stream=pack_stream(*f(states, words)))
    return on_ans(edit)


# Edits of the ANS body (source model and rANS stream), behind a valid tag.
ANS_TARGETED = [
    # Coder swap: an ANS body read as a Golomb body.
    ("ans-body-read-as-golomb", "ans-gauss-n2", lambda r: r.edit(coder=GOLOMB), FORMAT, None),
    ("ans-body-read-as-golomb-m300", "ans-gauss-n2-m300", lambda r: r.edit(coder=GOLOMB),
     FORMAT, None),
    # Source model: the range A.
    *[(f"range-{_fid(v)}-{base}", base, (lambda v: on_model(a=v))(v), FORMAT, "range")
      for base in ("ans-gauss-n2", "ans-laplace-n1")
      for v in (0.0, -0.0, -1.0, -5e-324, math.nan, -math.nan, math.inf, -math.inf,
                5e-324, 1e-310, 2.2250738585072014e-308,  # K / 2A overflows
                math.ldexp(1.0, -1019))],
    *[(f"range-{v!r}-accepted-{base}", base, (lambda v: on_model(a=v))(v), EITHER, None)
      for base in ("ans-gauss-n2", "ans-sdq-n1")
      for v in (math.ldexp(1.0, -1018), 1e-300, 1e-9, 1e9, 1e300, DBL_MAX / 2,
                math.nextafter(DBL_MAX / 2, math.inf), DBL_MAX)],
    # The code order of the knot increments.
    *[(f"order-{k}", "ans-gauss-n2", (lambda k: on_model(order=k))(k), FORMAT, "order")
      for k in (13, 14, 64, 128, 255)],
    *[(f"order-{k}-reinterpreted", "ans-gauss-n2", (lambda k: on_model(order=k))(k), EITHER,
       None) for k in (0, 1, 5, 11, 12)],
    # The bin count K (even, 2 .. 64) and the growth g (<= 64) of the bin edges.
    *[(f"bins-{k}", "ans-gauss-n2", (lambda k: on_ans(lambda b: b.edit(
        model=b.model.recoded().edit(bins=k))))(k), FORMAT, "bin count")
      for k in (0, 1, 3, 33, 63, 65, 66, 128, 255)],
    *[(f"bins-{k}-reinterpreted", "ans-gauss-n2", (lambda k: on_model(bins=k))(k), EITHER,
       None) for k in (2, 4, 16, 30, 34, 62, 64)],
    *[(f"bins-{k}-uniform-growth-{g}-{base}", base, (lambda k, g: on_ans(lambda b: b.edit(
        model=AnsModel.of([KNOT_SCALE // k] * (k - 1), a=b.model.a, growth=g))))(k, g),
       EITHER, None)
      for base in ("ans-gauss-n2", "ans-laplace-n1") for k in (2, 4, 16, 32, 64)
      for g in (0, 1, 13, MAX_GROWTH)],
    *[(f"growth-{g}", "ans-gauss-n2", (lambda g: on_model(growth=g))(g), FORMAT, "growth")
      for g in (MAX_GROWTH + 1, 128, 255)],
    *[(f"growth-{g}-reinterpreted", "ans-gauss-n2", (lambda g: on_model(growth=g))(g), EITHER,
       None) for g in (0, 1, 19, MAX_GROWTH)],
    # All the mass in the narrowest bin (one grid cell wide at the largest growth).
    *[(f"peaked-growth-{g}-bins-{k}", "ans-gauss-n2", (lambda k, g: on_ans(lambda b: b.edit(
        model=AnsModel.of([0] * (k // 2 - 1) + [KNOT_SCALE] + [0] * (k // 2 - 1),
                          a=b.model.a, growth=g))))(k, g), EITHER, None)
      for k in (2, 16, 64) for g in (0, MAX_GROWTH)],
    # Knot increments.
    ("knots-sum-4097", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=b.model.edit(bins=BINS, order=0, codes=_codes_summing_to(4097),
                                                padding=None))), FORMAT, "knots"),
    ("knots-sum-8190", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=b.model.edit(bins=BINS, order=0, codes=_codes_summing_to(8190),
                                                padding=None))), FORMAT, "knots"),
    ("knots-63-times-66", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([66] * 63, a=b.model.a))), FORMAT, "knots"),
    ("knots-63-times-65", "ans-gauss-n2",  # 4095: the implied last increment is 0
     on_ans(lambda b: b.edit(model=AnsModel.of([65] * 63, a=b.model.a))), EITHER, None),
    ("knots-sum-4096-in-first", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([4096] + [0] * 62, a=b.model.a))), EITHER,
     None),
    ("knots-sum-4096-in-last", "ans-laplace-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([0] * 62 + [4096], a=b.model.a))), EITHER,
     None),
    ("knots-all-zero", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([0] * 63, a=b.model.a))), EITHER, None),
    ("knots-uniform", "ans-dict-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of(UNIFORM, a=b.model.a))), EITHER, None),
    ("knot-code-14-zeros", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_replace_first_code(_recoded(b.model, 0),
                                                       "0" * 14 + "1" + "0" * 14))),
     FORMAT, "prefix code longer"),
    ("knot-code-13-zeros", "ans-gauss-n2",  # value 2^13 - 1 > 4096
     on_ans(lambda b: b.edit(model=_replace_first_code(_recoded(b.model, 0),
                                                       "0" * 13 + "1" + "0" * 13))),
     FORMAT, "knots"),
    ("knot-code-order-12-13-zeros", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_replace_first_code(_recoded(b.model, 12),
                                                       "0" * 13 + "1" + "0" * 25))),
     FORMAT, "knots"),
    # Padding of the model's last byte.
    ("model-padding-first-bit", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "1" + "0" * (k - 1)))),
     FORMAT, "padding"),
    ("model-padding-last-bit", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "0" * (k - 1) + "1"))),
     FORMAT, "padding"),
    ("model-padding-all-ones", "ans-dict-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "1" * k))),
     FORMAT, "padding"),
    ("model-padding-zero-at-another-order", "ans-dict-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "0" * k))), EITHER, None),
    # Model truncated (body cut inside the model, the tag recomputed).
    *[(f"model-cut-to-{k}", "ans-gauss-n2", (lambda k: lambda r: r.edit(body=r.body[:k]))(k),
       FORMAT, "source model|truncated|length can carry") for k in (0, 1, 8, 9, 10)],
    ("model-only", "ans-gauss-n2",
     on_ans(lambda b: b.edit(stream=b"")), FORMAT, "segment"),
    # An extra byte between model and stream: the stream is misaligned.
    ("byte-between-model-and-stream", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b"\x00" + b.stream)), FORMAT, None),
    # Stream: its length.
    *[(f"stream-length-{k}", "ans-gauss-n2-m300", (lambda k: on_ans(
        lambda b: b.edit(stream=b.stream[:k])))(k), FORMAT,
        "bad length|truncated|segment")
      for k in (0, 1, 8, 24, 31, 33, 34, 35)],
    *[(f"stream-plus-{k}-bytes", "ans-gauss-n2-m300", (lambda k: on_ans(
        lambda b: b.edit(stream=b.stream + bytes(k))))(k), FORMAT, "bad length|trailing")
      for k in (1, 2, 3, 4, 5, 8, 4096)],
    ("stream-last-word-dropped", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b.stream[:-4])), FORMAT, None),
    ("stream-first-word-dropped", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b.stream[:32] + b.stream[36:])), FORMAT, None),
    # Stream: the four states must lie in [2^31, 2^63).
    *[(f"state-{lane}-{v:#x}-{base}", base, (lambda lane, v: on_ans(
        lambda b: b.with_state(lane, v)))(lane, v), FORMAT, "bad state")
      for base in ("ans-gauss-n1", "ans-gauss-n2-m300") for lane in range(STREAMS)
      for v in (0, 1, RANS_LOW - 1, 1 << 63, U64)],
    *[(f"state-{lane}-{v:#x}-in-range", "ans-gauss-n2-m300", (lambda lane, v: on_ans(
        lambda b: b.with_state(lane, v)))(lane, v), EITHER, None)
      for lane in (0, 3) for v in (RANS_LOW, RANS_LOW + 1, (1 << 63) - 1)],
    ("states-all-2^31-no-words", "ans-gauss-n2",
     on_ans(lambda b: b.edit(stream=pack_stream([RANS_LOW] * 4, []))), FORMAT, None),
    ("states-all-2^31-with-words", "ans-gauss-n2-m300",
     _stream_edit(lambda s, w: ([RANS_LOW] * 4, w)), FORMAT, None),
    ("states-swapped", "ans-gauss-n2-m300", _stream_edit(lambda s, w: (s[::-1], w)), EITHER,
     None),
    ("words-reversed", "ans-gauss-n2-m300", _stream_edit(lambda s, w: (s, w[::-1])), EITHER,
     None),
    ("words-all-zero", "ans-gauss-n2-m300", _stream_edit(lambda s, w: (s, [0] * len(w))),
     EITHER, None),
    ("words-all-ones", "ans-gauss-n2-m300",
     _stream_edit(lambda s, w: (s, [0xFFFFFFFF] * len(w))), EITHER, None),
    ("whole-stream-zero", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=bytes(len(b.stream)))), FORMAT, "bad state"),
    ("whole-stream-ones", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b"\xff" * len(b.stream))), FORMAT, "bad state"),
    ("whole-body-zero", "ans-gauss-n2", lambda r: r.edit(body=bytes(len(r.body))), FORMAT,
     "range"),
    ("whole-body-ones", "ans-gauss-n2", lambda r: r.edit(body=b"\xff" * len(r.body)), FORMAT,
     "range"),
]

TARGETED = [(f"{coder}-{case}", f"{coder}-{base}", edit, expected, match)
            for coder in CODERS for case, base, edit, expected, match in HEADER_TARGETED] \
    + GOLOMB_TARGETED + ANS_TARGETED


def _targeted_payload(edit, base):
    return edit(RawPayload.parse(BASES[base])).tagged()


@pytest.mark.parametrize("case_id,base,edit,expected,match", TARGETED,
                         ids=[t[0] for t in TARGETED])
def test_targeted_edit_behind_a_valid_tag(case_id, base, edit, expected, match):
    payload = _targeted_payload(edit, base)
    if expected == FORMAT:
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(payload, secret=SECRET, output="numpy")
    else:
        assert outcome(payload) in ("ok", "format")
    # Without the secret, inspect sees only FormatError or a header.
    try:
        cepam.inspect(payload)
    except cepam.FormatError:
        pass


def test_targeted_case_ids_are_unique():
    ids = [t[0] for t in TARGETED]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("table", ["header", "golomb", "ans"])
def test_targeted_either_cases_reach_both_outcomes(table):
    """Sanity: the EITHER cases above include both outcomes, so neither kind is vacuous."""
    cases = {"header": TARGETED[: 2 * len(HEADER_TARGETED)], "golomb": GOLOMB_TARGETED,
             "ans": ANS_TARGETED}[table]
    seen = set()
    for case_id, base, edit, expected, _ in cases:
        if expected == EITHER:
            try:
                seen.add(outcome(_targeted_payload(edit, base)))
            except Exception:  # noqa: BLE001 - the parametrized test reports it
                pass
    assert seen == {"ok", "format"}


def test_the_model_code_order_is_not_part_of_the_meaning():
    """Any order 0..12 codes the same knots: the payload decodes to the same values."""
    raw = RawPayload.parse(BASES["ans-dict-n2"])
    body = AnsBody.parse(raw.body)
    want = cepam.decode(BASES["ans-dict-n2"], secret=SECRET)
    for k in range(KNOT_BITS + 1):
        model = body.model.recoded(order=k)
        got = cepam.decode(raw.edit(body=body.edit(model=model).pack()).tagged(), secret=SECRET)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


# --- ANS on A2, D4, E8: the model byte and the point model. -----------------

LATTICE_ANS = {"ans-a2-low": 1, "ans-e8-escapes": 1, "ans-d4-high": 0}  # base: model byte


def test_lattice_bases_use_the_expected_model_and_decode():
    for name, model in LATTICE_ANS.items():
        raw = RawPayload.parse(BASES[name])
        assert AnsBody.parse(raw.body, raw.lattice).point_model == model, name
    # The E8 base's outlier (3.0 against sigma 0.1) lies far outside the
    # point model's candidates: escaped to the box model, and decoded.
    y = cepam.decode(BASES["ans-e8-escapes"], secret=SECRET)
    assert np.all(np.abs(y[np.arange(800) % 800 == 3] - 3.0) < 1.0)


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
@pytest.mark.parametrize("byte", [2, 3, 128, 255])
def test_an_unknown_model_byte_is_a_format_error(name, byte):
    payload = _targeted_payload(on_ans(lambda b: b.edit(point_model=byte)), name)
    with pytest.raises(cepam.FormatError, match="unknown lattice point model"):
        cepam.decode(payload, secret=SECRET)


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
def test_the_other_model_byte_decodes_or_is_a_format_error(name):
    payload = _targeted_payload(on_ans(lambda b: b.edit(point_model=1 - b.point_model)), name)
    assert outcome(payload) in ("ok", "format")


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
def test_a_body_ending_at_the_model_byte_is_a_format_error(name):
    """Without the model byte, or without the stream after it."""
    body = AnsBody.parse(RawPayload.parse(BASES[name]).body, 2)
    for cut in (body.model.pack(), body.prefix()):
        payload = _targeted_payload(lambda r: r.edit(body=cut), name)
        with pytest.raises(cepam.FormatError,
                           match="model byte|entropy-coded body|truncated|segment"):
            cepam.decode(payload, secret=SECRET)
        with pytest.raises(cepam.FormatError):
            cepam.inspect(payload, secret=SECRET)


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
def test_lattice_streams_of_zero_words_and_states_decode_or_are_format_errors(name):
    """Streams whose states and words are all zeros, all ones or seeded noise
    under each model byte: the point model's tables take any slot."""
    body = AnsBody.parse(RawPayload.parse(BASES[name]).body, 2)
    rng = random.Random(name)
    cases = []
    for point_model in (0, 1):
        for words in (0, 3, 40):
            for fill in ("zeros", "ones", "noise"):
                def word(bits):
                    if fill == "zeros":
                        return 0
                    return (1 << bits) - 1 if fill == "ones" else rng.getrandbits(bits)
                states = [max(word(64), RANS_LOW) for _ in range(STREAMS)]
                stream = pack_stream(states, [word(32) for _ in range(words)])
                edited = body.edit(point_model=point_model, stream=stream)
                cases.append((f"{point_model}-{words}-{fill}",
                              _targeted_payload(lambda r, e=edited: r.edit(body=e.pack()), name)))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


# --- ANS: sampled corruptions of payloads over several blocks. ---------------


@pytest.mark.parametrize("name", sorted(LARGE_ANS))
def test_multi_block_ans_truncations_and_bit_flips_behind_a_valid_tag(name):
    data = untagged(LARGE_ANS[name])
    raw = RawPayload.parse(LARGE_ANS[name])
    stream_at = raw.header_len() + len(AnsBody.parse(raw.body).model.pack())
    rng = random.Random(len(data))
    # Truncations: inside the model, at and next to word boundaries of the stream.
    lengths = set(range(raw.header_len(), stream_at + 40))
    for _ in range(40):
        cut = rng.randrange(stream_at + 32, len(data))
        lengths.update({cut, cut - cut % 4, len(data) - 4 * rng.randint(1, 8)})
    for length in sorted(lengths):
        with pytest.raises(cepam.FormatError):
            cepam.decode(retag(data[:length]), secret=SECRET)
    # Bit flips: every bit of the model, and sampled bits of the stream (first and last
    # words included: the decoder reads them at the start and at the end).
    bits = list(range(8 * raw.header_len(), 8 * stream_at))
    bits += list(range(8 * stream_at, 8 * (stream_at + 36)))
    bits += list(range(8 * len(data) - 32, 8 * len(data)))
    bits += rng.sample(range(8 * stream_at, 8 * len(data)), 60)
    cases = []
    results = {"ok": 0, "format": 0}
    for bit in bits:
        flipped = bytearray(data)
        flipped[bit // 8] ^= 0x80 >> (bit % 8)
        cases.append((f"bit {bit}", retag(bytes(flipped))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]
    for label, payload in cases[-60:]:
        results[outcome(payload)] += 1
    # A flipped stream bit is almost always caught (the states must end at 2^31).
    assert results["format"] >= 55, results


# --- ANS: hand-built streams (escape abuse). ----------------------------------


def _escape_payload(M, *, n=1, mechanism=1, H=None, escape_h=False, scale=0.25,
                    m_code=put_escaped_m, dims=None) -> RawPayload:
    p = acceptance(mechanism, n, scale=scale)
    stream = escape_stream(M, n=n, H=H, p=p, escape_h=escape_h, m_code=m_code)
    return forged_ans(n=n, mechanism=mechanism, scale=scale, shape=dims or (len(M),),
                      stream=stream)


@pytest.mark.parametrize("mechanism,n", [(1, 1), (2, 1), (3, 1), (1, 2), (2, 4), (1, 8)],
                         ids=["gauss-n1", "laplace-n1", "sdq-n1", "gauss-n2", "laplace-n4",
                              "gauss-n8"])
def test_every_coordinate_escaped_with_maximal_raw_length_decodes(mechanism, n):
    """The longest legal escape (6 + 55 raw bits: |M| = 2^53) for every coordinate, over
    more than two blocks, with every H escaped at the trial cap where H is coded."""
    N = 2 * ANS_BLOCK + 3
    M = [MAX_ABS_M if i % 2 else -MAX_ABS_M for i in range(N * n)]
    assert zigzag(MAX_ABS_M).bit_length() == 55
    H = [1 << 16] * N  # the trial cap, escaped (raw 16 bits = 65535)
    raw = _escape_payload(M, n=n, mechanism=mechanism, H=H)
    payload = raw.tagged()
    with peak_allocation() as traced:
        assert outcome(payload) == "ok"
    peak = traced.peak
    assert peak < 8 * len(payload) + 4 * MB, peak
    H2, M2 = symbols_of(raw)
    assert M2.tolist() == M
    assert H2.tolist() == (H if acceptance(mechanism, n) < 1
                           else [1] * N)


@pytest.mark.parametrize("length,z,match", [
    (56, 1 << 55, "out of range"),
    (63, (1 << 63) - 1, "out of range"),
    (55, (1 << 55) - 1, "out of range"),  # zigzag: -2^54
    (55, (1 << 54) + 2, "out of range"),  # 2^53 + 1
    (54, (1 << 54) - 1, None),  # -2^53: accepted
    (55, 1 << 54, None),  # 2^53: accepted
], ids=["len-56", "len-63", "minus-2^54", "2^53+1", "minus-2^53", "2^53"])
def test_escaped_coordinates_beyond_2_53_are_rejected(length, z, match):
    def code(enc, j, length=length, z=z):
        put_escaped_m(enc, 0, length=length, z=z)

    raw = _escape_payload([0, 0, 0], m_code=code)
    if match is None:
        assert outcome(raw.tagged()) == "ok"
    else:
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(raw.tagged(), secret=SECRET)


@pytest.mark.parametrize("j", [0, 1, -1, 2, -2])
@pytest.mark.parametrize("mechanism,n", [(1, 1), (3, 1), (1, 2)], ids=["gauss", "sdq", "gauss-n2"])
def test_escaped_coordinates_inside_the_table_are_non_canonical(j, mechanism, n):
    """An escape must code a value the table cannot: one inside it is a FormatError."""
    M = [1 << 40] * (3 * n)
    M[n] = j  # sub-vector 1, coordinate 0
    raw = _escape_payload(M, n=n, mechanism=mechanism)
    with pytest.raises(cepam.FormatError, match="non-canonical"):
        cepam.decode(raw.tagged(), secret=SECRET)


def test_escape_with_a_zero_length_is_non_canonical():
    def code(enc, j):
        put_escaped_m(enc, 0, length=0, z=0)  # M = 0, inside every table

    with pytest.raises(cepam.FormatError, match="non-canonical"):
        cepam.decode(_escape_payload([1], m_code=code).tagged(), secret=SECRET)


def test_escape_with_leading_zero_raw_bits_decodes_or_is_a_format_error():
    """The escape's length field is not required to be minimal (documents the current
    rule: the value, not its length, is checked)."""
    def code(enc, j):
        put_escaped_m(enc, j, length=55)  # 2^40 in 55 raw bits

    raw = _escape_payload([1 << 40, -(1 << 40)], m_code=code)
    assert outcome(raw.tagged()) in ("ok", "format")


@pytest.mark.parametrize("h,match", [(1, "non-canonical"), (2, "non-canonical"),
                                     (64, "non-canonical"), (65, None), (1000, None),
                                     (1 << 16, None)])
@pytest.mark.parametrize("mechanism,n", [(1, 2), (2, 2), (2, 4)],
                         ids=["gauss-n2", "laplace-n2", "laplace-n4"])
def test_escaped_trial_indices(h, match, mechanism, n):
    """H escapes carry H - 1 in 16 raw bits: H <= 64 is non-canonical (the table codes
    it), 65 .. 65536 (the cap, the largest 16 bits can say) decode."""
    N = 5
    H = [3, h, 1, h, 64]
    M = [1 << 45] * (N * n)
    cum = geometric_cum(acceptance(mechanism, n))

    def stream():
        enc = RansEncoder()
        for j in range(N):
            put_h(enc, H[j], cum, escape=(H[j] == h))
        for v in M:
            put_escaped_m(enc, v)
        return enc.finish()

    raw = forged_ans(n=n, mechanism=mechanism, shape=(N * n,), stream=stream())
    if match:
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(raw.tagged(), secret=SECRET)
    else:
        assert outcome(raw.tagged()) == "ok"
        assert symbols_of(raw)[0].tolist() == H


def test_escapes_under_a_tiny_scale_are_non_canonical():
    """With a tiny scale the table spans every |M| <= 2^53 (in coarse symbols and raw
    offsets), so no escape is canonical."""
    for scale in (1e-300, 5e-324):
        raw = _escape_payload([MAX_ABS_M, -MAX_ABS_M], scale=scale)
        with pytest.raises(cepam.FormatError, match="non-canonical"):
            cepam.decode(raw.tagged(), secret=SECRET)


@pytest.mark.parametrize("coder", CODERS)
def test_an_empty_update_and_hostile_variants(coder):
    """m = 0: the ANS body is a source model and no segment; anything else there is a
    FormatError."""
    payload = cepam.encode(np.zeros((0, 3), np.float32), cepam.Gaussian(sigma=0.1),
                           secret=SECRET, round=0, client=0, coder=coder)
    assert cepam.decode(payload, secret=SECRET).shape == (0, 3)
    raw = RawPayload.parse(payload)
    if coder == "ans":
        model, length = AnsModel.parse(raw.body)
        assert length == len(raw.body)
        empty = segment(pack_stream([RANS_LOW] * STREAMS, []))
        bad_bodies = [model.pack() + empty, model.pack() + empty[:4], model.pack() + bytes(1),
                      model.edit(a=math.nan).pack()]
    else:
        body = GolombBody.parse(raw.body)
        bad_bodies = [body.edit(m_bits=1, sections=b"\x80").pack(),
                      body.edit(sections=b"\x00").pack(), raw.body[:-1]]
    for bad in bad_bodies + [b""]:
        with pytest.raises(cepam.FormatError):
            cepam.decode(raw.edit(body=bad).tagged(), secret=SECRET)


def test_a_trial_index_escape_on_a_lattice_without_trials_is_not_read():
    """Gaussian on Z^1, Laplace on Z^1 and SDQ code no H: an H escape there is read as an
    M escape (length 0xFFFF >> 10 = 63 bits: out of range)."""
    for mechanism in (1, 2, 3):
        enc = RansEncoder()
        enc.put(ESCAPE, 1)
        enc.put_raw(0xFFFF, 16)
        raw = forged_ans(mechanism=mechanism, shape=(1,), stream=enc.finish())
        with pytest.raises(cepam.FormatError):
            cepam.decode(raw.tagged(), secret=SECRET)


def test_final_states_and_trailing_words_are_checked():
    raw = _escape_payload([1 << 40] * 7)
    states, words = unpack_stream(AnsBody.parse(raw.body).stream)
    assert outcome(raw.tagged()) == "ok" and len(words) > 2
    for edit, match in (
        (lambda s, w: (s, w + [0]), "trailing data"),  # a word the decoder never reads
        (lambda s, w: (s, w[:-1]), "entropy-coded"),  # one word short
        (lambda s, w: ([s[0] + 1] + s[1:], w), None),  # a state off by one
        (lambda s, w: (s[:3] + [s[3] ^ (1 << 40)], w), None),
        (lambda s, w: (s, [w[0] ^ 1] + w[1:]), None),
        (lambda s, w: (s, w[:-1] + [w[-1] ^ (1 << 31)]), None),
    ):
        bad = raw.edit(body=UNIFORM_MODEL.pack() + segment(pack_stream(*edit(list(states),
                                                                             list(words)))))
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(bad.tagged(), secret=SECRET)


# --- ANS: long streams, large declared sizes, and the allocation bound. ------

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


def _zero_word_payload(n, mechanism, m, words, *, states=(RANS_LOW,) * 4,
                       model=UNIFORM_MODEL) -> bytes:
    return forged_ans(n=n, mechanism=mechanism, shape=(m,), model=model,
                      stream=pack_stream(states, []) + words).tagged()


@pytest.mark.parametrize("label,n,mechanism,m,words", ZERO_WORD_CASES,
                         ids=[c[0] for c in ZERO_WORD_CASES])
def test_streams_of_constant_words_with_a_large_declared_size_fail(label, n, mechanism, m, words):
    """Constant words behind valid states, declaring many coordinates: the decoder runs out
    of words or ends in the wrong state (work bounded by m); it allocates the output
    (m values) and O(4096) per block, nothing more."""
    for states in ((RANS_LOW,) * 4, ((1 << 63) - 1,) * 4, (0x5A5A5A5A5A5A5A5A,) * 4):
        payload = _zero_word_payload(n, mechanism, m, words, states=states)
        with peak_allocation() as traced:
            assert outcome(payload) == "format", (label, states)
        peak = traced.peak
        assert peak < 4 * m + 6 * len(payload) + 2 * MB, (label, peak)


def test_a_peaked_source_model_with_no_words_fails():
    """All the model's mass in one bin: each coordinate costs a tiny fraction of a bit,
    so 32 bytes of states could stand for many coordinates; the decoder still ends in
    the wrong state (or runs out) and says so."""
    peaked = AnsModel.of([0] * 31 + [4096] + [0] * 31, a=1e-3)
    for m, mechanism in ((100_000, 1), (100_000, 3)):
        payload = _zero_word_payload(1, mechanism, m, b"", model=peaked,
                                     states=((1 << 62) + (1 << 23),) * 4)
        assert outcome(payload) == "format"


def test_max_coordinates_refuses_a_large_declared_size_before_allocating():
    """A server that passes its model size refuses more, before allocating anything."""
    m = 10**6
    payload = _zero_word_payload(1, 1, m + 1, b"\xff" * 64)
    with peak_allocation() as traced:
        with pytest.raises(cepam.FormatError, match="max_coordinates"):
            cepam.decode(payload, secret=SECRET, max_coordinates=m)
        codec = cepam.Codec(cepam.Gaussian(sigma=0.25), secret=SECRET, client=6,
                            allow_unclipped=True)
        with pytest.raises(cepam.FormatError, match="max_coordinates"):
            codec.decode(payload, max_coordinates=m)
    peak = traced.peak
    assert peak < 6 * len(payload) + MB, peak
    # At the limit the payload is read (and fails on its body).
    assert outcome(_zero_word_payload(1, 1, m, b"\xff" * 64), max_coordinates=m) == "format"


@pytest.mark.parametrize("coder", CODERS)
def test_2_62_coordinates_are_refused_up_front(coder):
    raw = RawPayload.parse(BASES[f"{coder}-gauss-n1"])
    for m in (1 << 62, U64, 1 << 57):
        payload = raw.edit(m=m, entries=_entries(raw, dims=(m,))).tagged()
        with peak_allocation() as traced:
            for limit in (1 << 28, 1 << 62, 1 << 64):
                with pytest.raises(cepam.FormatError, match="too large"):
                    cepam.decode(payload, secret=SECRET, max_coordinates=limit)
        peak = traced.peak
        assert peak < 6 * len(payload) + MB, peak


def test_a_tiny_valid_ans_payload_for_many_coordinates_allocates_only_its_output():
    """A constant update costs almost nothing with ANS: a short payload may decode to many
    values, allocating the output (bounded by max_coordinates) and O(4096) per block."""
    m = 1 << 18
    payload = cepam.encode(np.zeros(m, np.float32), cepam.Gaussian(sigma=10.0), secret=SECRET,
                           round=0, client=0)
    assert len(payload) < m // 8
    with peak_allocation() as traced:
        y = cepam.decode(payload, secret=SECRET)
    peak = traced.peak
    assert y.shape == (m,) and y.dtype == np.float32
    assert peak < 4 * m + 20 * len(payload) + 2 * MB, peak
    with pytest.raises(cepam.FormatError, match="max_coordinates"):
        cepam.decode(payload, secret=SECRET, max_coordinates=m - 1)


# --- ANS: numeric extremes of the model range and the noise scale. -----------


def _extreme_cases():
    base = RawPayload.parse(BASES["ans-gauss-n1"])
    sdq = RawPayload.parse(BASES["ans-sdq-n1"])
    lap = RawPayload.parse(BASES["ans-laplace-n2"])
    cases = []
    for raw, name in ((base, "gauss-n1"), (sdq, "sdq-n1"), (lap, "laplace-n2")):
        body = AnsBody.parse(raw.body)
        for a in (math.ldexp(1.0, -1018), 1.0, 1e300, DBL_MAX / 2,
                  math.nextafter(DBL_MAX / 2, math.inf), 1.79e308, DBL_MAX):
            for scale in (5e-324, 1e-300, 1.0, 1e280, 1e300, DBL_MAX):
                edited = raw.edit(scale=scale, body=body.edit(model=body.model.edit(a=a)).pack())
                cases.append((f"{name} A={a!r} scale={scale!r}", edited.tagged()))
    return cases


def test_extreme_model_ranges_and_scales_do_not_crash_the_decoder():
    """Source-model ranges near DBL_MAX (2A overflows, so the model's bin width is
    infinite) with huge noise scales (cell edges near A): decoded in a child process,
    so that a crash of the native decoder fails this test only."""
    cases = _extreme_cases()
    results = decode_in_child(cases)
    bad = sorted(f"{label}: {r}" for label, r in results.items() if r not in ("ok", "format"))
    assert not bad, bad
    assert len(results) == len(cases)


_HONEST_EXTREME_CHILD = r"""
import numpy as np, cepam
x = np.array([1.7e308, -1.7e308, 1.0e308, 5e307, -1.2e308, 0.0] * 4)
for sigma in (1e300, 1e295):
    for coder in ("golomb", "ans"):
        try:
            p = cepam.encode(x, cepam.Gaussian(sigma=sigma), secret=bytes(32), round=0,
                             client=0, coder=coder)
        except cepam.EncodingError:
            print(sigma, coder, "refused", flush=True)
            continue
        y = cepam.decode(p, secret=bytes(32))
        print(sigma, coder, "ok", y.shape, flush=True)
"""


def test_an_honest_update_near_dbl_max_round_trips_or_is_refused():
    """An update with |x| near DBL_MAX and a noise scale large enough for LRSUQ
    (|x / beta| < 2^50): the source model's range A is then above DBL_MAX / 2.  Encoding
    must give a payload that decodes, or an EncodingError; never a crash (in a child)."""
    proc = subprocess.run([sys.executable, "-c", _HONEST_EXTREME_CHILD], capture_output=True,
                          text=True)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    done = [line for line in proc.stdout.splitlines() if line.endswith(("refused", "(24,)"))]
    assert len(done) == 4, proc.stdout


# --- Golomb: hand-forged bodies, prefix-code limits and zero runs. -----------


def test_forged_prefix_codes_at_the_limits():
    # -2^53 and 2^53 - 1 are accepted (|M| <= 2^53 is the decoder's bound).
    assert outcome(forged(shape=(2,), m_code=expg((1 << 53) - 1) + expg(-(1 << 53)))
                   .tagged()) == "ok"
    with pytest.raises(cepam.FormatError, match="out of range|longer than allowed"):
        cepam.decode(forged(shape=(1,), m_code=expg((1 << 53) + 1)).tagged(), secret=SECRET)
    with pytest.raises(cepam.FormatError, match="out of range|longer than allowed"):
        cepam.decode(forged(shape=(1,), m_code=expg(-(1 << 53) - 1)).tagged(), secret=SECRET)
    # Order 54: every coordinate takes exactly 55 bits.
    assert outcome(forged(shape=(2,), expg_k=54, m_code=expg(0, 54) + expg(-(1 << 53), 54))
                   .tagged()) == "ok"
    # 56 leading zeros in the M code: longer than any legal code.
    with pytest.raises(cepam.FormatError, match="longer than allowed"):
        cepam.decode(forged(shape=(1,), m_code="0" * 56 + "1" * 57).tagged(), secret=SECRET)
    # Trial index at the cap (65536) is accepted, one more is not.
    cap = 1 << 16
    at_cap = forged(n=2, golomb=1, shape=(2,), h_code=unary(cap), m_code=expg(0) * 2)
    assert outcome(at_cap.tagged()) == "ok"
    above = forged(n=2, golomb=1, shape=(2,), h_code=unary(cap + 1), m_code=expg(0) * 2)
    with pytest.raises(cepam.FormatError, match="longer than allowed|above the cap"):
        cepam.decode(above.tagged(), secret=SECRET)
    # The same with the largest Golomb parameter: H - 1 = 65535 in 16 bits.
    big_g = forged(n=2, golomb=1 << 16, shape=(2,), h_code="1" + "1" * 16, m_code=expg(0) * 2)
    assert outcome(big_g.tagged()) == "ok"
    big_g_q1 = forged(n=2, golomb=1 << 16, shape=(2,), h_code="01" + "0" * 16,
                      m_code=expg(0) * 2)
    with pytest.raises(cepam.FormatError):
        cepam.decode(big_g_q1.tagged(), secret=SECRET)
    # Trailing bits inside a declared section.
    with pytest.raises(cepam.FormatError, match="trailing"):
        cepam.decode(forged(shape=(1,), m_code=expg(3) + "1").tagged(), secret=SECRET)
    # Laplace on Z^2 with an H above 1 decodes; on Z^1 an H above 1 is rejected.
    lap2 = forged(n=2, mechanism=2, golomb=1, shape=(2,), h_code=unary(9), m_code=expg(0) * 2)
    assert outcome(lap2.tagged()) == "ok"
    lap1 = forged(n=1, mechanism=2, golomb=1, shape=(1,), h_code=unary(2), m_code=expg(0))
    with pytest.raises(cepam.FormatError, match="trial index"):
        cepam.decode(lap1.tagged(), secret=SECRET)
    # SDQ codes no H either.
    sdq = forged(n=1, mechanism=3, golomb=1, shape=(1,), h_code=unary(2), m_code=expg(0))
    with pytest.raises(cepam.FormatError, match="trial index"):
        cepam.decode(sdq.tagged(), secret=SECRET)
    assert outcome(forged(n=1, mechanism=3, shape=(2,), m_code=expg(5) + expg(-(1 << 53)))
                   .tagged()) == "ok"


@pytest.mark.parametrize("value", [(1 << 53), -(1 << 53), (1 << 53) - 1, -(1 << 53) + 1])
@pytest.mark.parametrize("k", [0, 3, 54])
def test_body_coder_decodes_every_coordinate_it_encodes(value, k):
    """The native body coder accepts |M| <= 2^53 on encode (MAX_ABS_M), so the body
    decoder must accept the same range, or a body it wrote is a FormatError."""
    assert _core.MAX_ABS_M == 1 << 53
    H = np.ones(1, np.uint32)
    M = np.array([value], np.int64)
    body, h_bits, m_bits = hooks.body_encode(H, M, golomb=0, expg_k=k)
    H2, M2 = hooks.body_decode(body, N=1, count=1, golomb=0, expg_k=k, h_bits=h_bits,
                               m_bits=m_bits)
    assert M2.tolist() == [value] and H2.tolist() == [1]


def _zero_run_payloads(body_bytes: int) -> list[tuple[str, int, int, bytes]]:
    """(label, declared coordinates, coordinates the body can hold, payload): all-zero
    Golomb sections of body_bytes bytes, declaring as many coordinates as fit, or more,
    in each Golomb parameter / exp-Golomb order regime."""
    bits = 8 * body_bytes
    half = bits // 2
    out = []
    for n, golomb, k in ((1, 0, 0), (2, 1, 0), (2, 1 << 16, 0), (4, 3, 7), (8, 1, 54)):
        h_bits = half if golomb else 0
        m_bits = bits - h_bits
        capacity = m_bits // (k + 1)  # the most coordinates the M section can hold
        for declared in (capacity, capacity + 1, 4 * capacity, 1 << 62):
            raw = forged(n=n, golomb=golomb, expg_k=k, shape=(declared,))
            raw = raw.edit(body=GolombBody(golomb, k, h_bits, m_bits, bytes(body_bytes)).pack())
            out.append((f"n={n} g={golomb} k={k} declared={declared}", declared, capacity,
                        raw.tagged()))
    # Zeros in the H section only (the M section is all ones: zero-free codes).
    raw = forged(n=2, golomb=1, shape=(half,)).edit(body=GolombBody(
        1, 0, half, half, bytes(half // 8) + b"\xff" * (half // 8)).pack())
    out.append(("zero H section", half, half, raw.tagged()))
    return out


ZERO_RUNS = _zero_run_payloads(256 * 1024)


@pytest.mark.parametrize("label,declared,capacity,payload", ZERO_RUNS,
                         ids=[z[0].replace(" ", ",") for z in ZERO_RUNS])
def test_long_zero_runs_in_the_golomb_body_fail_fast_with_little_allocation(
        label, declared, capacity, payload):
    with peak_allocation() as traced:
        assert outcome(payload) == "format", label
    peak = traced.peak
    if declared > capacity:
        # Rejected before allocating anything sized by the declared count (the Golomb
        # sections bound it): only copies of the payload itself.
        assert peak < 6 * len(payload) + MB, (label, peak)
    else:
        # Linear in the payload: H (uint32), M (int64) and the output are
        # allocated for at most 8 coordinates per body byte.
        assert peak < 160 * len(payload) + 4 * MB, (label, peak)


def test_every_trial_index_at_the_cap_decodes():
    """The slowest legal H section (65535 zeros before each one) still decodes."""
    cap = 1 << 16
    subvectors = 16
    raw = forged(n=2, golomb=1, shape=(2 * subvectors,), h_code=unary(cap) * subvectors,
                 m_code=expg(0) * (2 * subvectors))
    assert outcome(raw.tagged()) == "ok"


def test_a_valid_dense_golomb_body_allocates_in_proportion_to_its_length():
    """The densest legal body (1 bit per coordinate) decodes; allocation is linear."""
    m = 8 * 64 * 1024
    payload = forged(shape=(m,), m_code="1" * m).tagged()
    with peak_allocation() as traced:
        y = cepam.decode(payload, secret=SECRET)
    peak = traced.peak
    assert y.shape == (m,) and y.dtype == np.float32
    assert peak < 200 * len(payload) + 4 * MB, peak


def test_hostile_cases_do_not_grow_peak_rss():
    """All targeted, 2^62-sized, zero-run and constant-word payloads together: peak RSS
    grows < 200 MB and Python/numpy allocations stay small (tracemalloc sees numpy's
    buffers)."""
    resource = pytest.importorskip("resource")  # Unix only
    payloads = [_targeted_payload(edit, base) for _, base, edit, _, _ in TARGETED]
    payloads += [p for *_, p in _zero_run_payloads(128 * 1024)]
    payloads += [_zero_word_payload(n, mech, m, words) for _, n, mech, m, words in
                 ZERO_WORD_CASES]
    rss_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with peak_allocation() as traced:
        for payload in payloads:
            try:
                outcome(payload)
            except Exception:  # noqa: BLE001 - wrong types are reported by other tests
                pass
    peak = traced.peak
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kb) / 1024
    assert peak < 64 * MB, peak
    assert rss_growth_mb < 200, rss_growth_mb


# --- The native body entry points on hostile bodies. -------------------------


@pytest.mark.parametrize("name", ["golomb-gauss-n2", "ans-gauss-n2", "ans-gauss-n2-m300",
                                  "golomb-sdq-n1", "ans-laplace-n4-clip", "ans-a2-low",
                                  "ans-e8-escapes", "ans-d4-high"])
def test_native_body_functions_raise_format_errors_on_hostile_bodies(name):
    """_core.decode, _core.testing.decode_symbols and _core.body_parts (the tools' entry points) on truncated
    and bit-flipped bodies: a result or FormatError, nothing else."""
    raw = RawPayload.parse(BASES[name])
    key = stream_key(SECRET, Context(raw.round, raw.client, raw.message))
    kw = dict(m=raw.m, key=key, coder=raw.coder,
              params=_core.Params(mechanism=raw.mechanism, scale=raw.scale,
                                  lattice=raw.lattice, n=raw.n))
    bodies = [raw.body[:k] for k in range(len(raw.body))]
    for bit in range(0, 8 * len(raw.body), 3):
        b = bytearray(raw.body)
        b[bit // 8] ^= 1 << (bit % 8)
        bodies.append(bytes(b))
    bad = []
    for i, body in enumerate(bodies):
        for call in (lambda: _core.decode(body, dtype="float64", **kw),
                     lambda: hooks.decode_symbols(body, **kw),
                     lambda: _core.body_parts(body, coder=raw.coder, lattice=raw.lattice)):
            try:
                call()
            except cepam.FormatError:
                pass
            except Exception as exc:  # noqa: BLE001
                bad.append(f"body {i}: {type(exc).__name__}: {exc}")
    assert not bad, bad[:10]


# --- Torch-declared entries. -------------------------------------------------


def _torch_kind_payload(coder: str = "ans") -> bytes:
    return _targeted_payload(lambda r: r.edit(entries=_entries(r, kind=1)), f"{coder}-gauss-n1")


@pytest.mark.parametrize("coder", CODERS)
def test_torch_kind_entry_decodes_to_numpy_on_request(coder):
    assert outcome(_torch_kind_payload(coder)) == "ok"


def test_torch_kind_entry_without_torch_is_a_clear_cepam_error(tmp_path):
    # In a fresh interpreter that cannot import torch (whether or not this
    # one can), as for a user who installed cepam without torch.
    path = tmp_path / "payload.bin"
    path.write_bytes(_torch_kind_payload())
    code = ("import pathlib, cepam\n"
            "try:\n"
            f"    cepam.decode(pathlib.Path(sys.argv[1]).read_bytes(), secret={SECRET!r})\n"
            "except cepam.InvalidArgumentError as exc:\n"
            "    print('InvalidArgumentError:', exc)\n")
    proc = run_without({"torch"}, code, str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("InvalidArgumentError:") and "torch" in proc.stdout, proc.stdout


def test_torch_kind_entry_with_torch_decodes_to_a_tensor():
    torch = pytest.importorskip("torch")
    y = cepam.decode(_torch_kind_payload(), secret=SECRET)
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (24,)
