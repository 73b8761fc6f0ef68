"""Hostile payloads: the decoder (the server) must survive anything a client sends.

A client holds its own secret, so it can send a *correctly tagged* hostile
payload: the header and body parsers are tested both without re-tagging (the
tag check must reject the payload) and behind a valid tag, recomputed over the
corrupted content with the client's MAC key.  On every input the decoder must
either decode to an update with the structure its header declares, or raise
``cepam.FormatError`` (``AuthenticationError`` when the tag is wrong): never
another exception, a crash, a hang, or an allocation out of proportion to the
payload's length.

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import dataclasses
import math
import random
import struct
import tracemalloc
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

import cepam
from cepam.keys import TAG_BYTES, mac_key, payload_tag

SECRET = bytes(range(7, 39))
OTHER_SECRET = bytes(range(200, 232))
MAC = mac_key(SECRET)

HEADER_PREFIX = struct.Struct("<4sBBBBBBHdd")  # magic .. clip
CONTEXT = struct.Struct("<QQQQ")  # round, client, message, m
CODER = struct.Struct("<IBQQ")  # golomb, exp-Golomb order, h_bits, m_bits
MIN_PAYLOAD = HEADER_PREFIX.size + CONTEXT.size + 4 + CODER.size + TAG_BYTES
U64 = (1 << 64) - 1
MB = 1 << 20


# ---------------------------------------------------------------------------
# An independent (test-side) model of the payload format, to forge payloads.
# ---------------------------------------------------------------------------


def retag(data: bytes, secret: bytes = SECRET) -> bytes:
    """data || a valid tag: what a client holding `secret` can send."""
    key = MAC if secret == SECRET else mac_key(secret)
    return bytes(data) + payload_tag(key, bytes(data))


def untagged(payload: bytes) -> bytes:
    return payload[:-TAG_BYTES]


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
    golomb: int = 0
    expg_k: int = 0
    h_bits: int = 0
    m_bits: int = 0
    body: bytes = b""

    @classmethod
    def parse(cls, payload: bytes) -> "RawPayload":
        """Parses a well-formed payload (written independently of cepam.payload)."""
        pos = 0

        def take(fmt):
            nonlocal pos
            s = struct.Struct(fmt) if isinstance(fmt, str) else fmt
            out = s.unpack_from(payload, pos)
            pos += s.size
            return out

        magic, version, mech, lat, n, coder, cont, res, scale, clip = take(HEADER_PREFIX)
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
        golomb, k, h_bits, m_bits = take(CODER)
        body = payload[pos:-TAG_BYTES]
        return cls(magic, version, mech, lat, n, coder, cont, res, scale, clip, rnd, client,
                   message, m, entries, None, golomb, k, h_bits, m_bits, body)

    def data(self) -> bytes:
        """Header || body, without the tag."""
        out = [
            HEADER_PREFIX.pack(self.magic, self.version, self.mechanism, self.lattice, self.n,
                               self.coder, self.container, self.reserved, self.scale,
                               self.clip),
            CONTEXT.pack(self.round, self.client, self.message, self.m),
            struct.pack("<I", len(self.entries) if self.count is None else self.count),
        ]
        for e in self.entries:
            ndim = len(e.dims) if e.ndim is None else e.ndim
            out.append(struct.pack("<H", len(e.name)) + e.name)
            out.append(struct.pack("<BBB", e.kind, e.dtype, ndim))
            out.append(struct.pack(f"<{len(e.dims)}Q", *e.dims))
        out.append(CODER.pack(self.golomb, self.expg_k, self.h_bits, self.m_bits))
        out.append(self.body)
        return b"".join(out)

    def header_len(self) -> int:
        return len(self.data()) - len(self.body)

    def tagged(self) -> bytes:
        return retag(self.data())

    def edit(self, **changes) -> "RawPayload":
        return dataclasses.replace(self, **changes)


def bits_to_bytes(bits: str) -> bytes:
    """MSB-first bit string -> bytes, zero-padded to a byte."""
    bits = bits + "0" * (-len(bits) % 8)
    return bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))


def expg(value: int, k: int = 0) -> str:
    """Order-k exp-Golomb code of zigzag(value) (the M section's code)."""
    z = (value << 1) if value >= 0 else ((-value << 1) - 1)
    v = z + (1 << k)
    return "0" * (v.bit_length() - k - 1) + format(v, "b")


def unary(h: int) -> str:
    """Golomb code of h - 1 with parameter 1."""
    return "0" * (h - 1) + "1"


def forged(*, n=1, mechanism=1, golomb=0, expg_k=0, h_code="", m_code="", shape=None,
           entries=None, container=0, m=None, scale=0.25, clip=math.inf) -> RawPayload:
    """A payload forged from H and M bit strings (m coordinates, N = ceil(m / n))."""
    if entries is None:
        entries = [RawEntry(b"", 0, 1, tuple(shape))]
    if m is None:
        m = sum(math.prod(e.dims) for e in entries)
    return RawPayload(b"CEPM", 1, mechanism, 1, n, 1, container, 0, scale, clip, 5, 6, 7, m,
                      entries, None, golomb, expg_k, len(h_code), len(m_code),
                      bits_to_bytes(h_code) + bits_to_bytes(m_code))


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
            assert tuple(leaf.shape) == e.shape and str(leaf.dtype) == f"torch.{e.dtype}"
            continue
        assert leaf.shape == e.shape
        want = "float32" if e.dtype == "bfloat16" else e.dtype  # numpy has no bfloat16
        assert leaf.dtype == np.dtype(want)


def outcome(payload: bytes, *, secret: bytes = SECRET, output: str = "numpy") -> str:
    """'ok' (decoded, with the declared structure) or 'format' (FormatError).

    Any other exception propagates.  output='numpy' by default so that a header
    whose entries claim to be torch tensors decodes without torch.
    """
    with warnings.catch_warnings():
        # A hostile body may hold values that overflow float16: a warning, not an error.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = cepam.decode(payload, secret=secret, output=output)
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


# ---------------------------------------------------------------------------
# Small valid payloads to corrupt (a few dozen coordinates each).
# ---------------------------------------------------------------------------


def _make_bases() -> dict[str, bytes]:
    rng = np.random.default_rng(20240611)
    x = rng.normal(size=24).astype(np.float32)
    g, lap = cepam.Gaussian(sigma=0.1), cepam.Laplace(b=0.1)

    def enc(value, mech, **kw):
        return cepam.encode(value, mech, secret=SECRET, round=3, client=11, **kw)

    return {
        "gauss-n1": enc(x, g, dim=1),
        "gauss-n2": enc(x, g, dim=2),
        "gauss-n3-f64-padded": enc(rng.normal(size=25), g, dim=3),  # last sub-vector padded
        "laplace-n1": enc(x, lap, dim=1),
        "laplace-n2": enc(x, lap, dim=2),
        "laplace-n4-clip": enc(x, lap, dim=4, clip=2.0),
        "dict-n2": enc({"layer.weight": x[:12].reshape(3, 4),
                        "layer.bias": x[12:16].astype(np.float16),
                        "é": rng.normal(size=(2, 2, 2))}, g, dim=2),
        "tuple-laplace-n3": enc((x[:5], x[5:].astype(np.float64)), lap, dim=3),
    }


BASES = _make_bases()
BASE_NAMES = sorted(BASES)


def test_bases_are_valid_and_decode():
    for name, payload in BASES.items():
        assert outcome(payload) == "ok", name
        assert 48 < len(payload) < 400, name


def test_forged_payload_helper_matches_the_format():
    """The test-side model round-trips real payloads and forges decodable ones."""
    for payload in BASES.values():
        assert RawPayload.parse(payload).tagged() == payload
    ok = forged(shape=(3,), m_code=expg(0) + expg(-1) + expg(5)).tagged()
    assert outcome(ok) == "ok"
    ok2 = forged(n=2, golomb=1, shape=(3,), h_code=unary(1) + unary(3),
                 m_code=expg(0) * 4).tagged()
    assert outcome(ok2) == "ok"


# ---------------------------------------------------------------------------
# Without a valid tag.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gauss-n2", "dict-n2"])
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


@pytest.mark.parametrize("name", ["gauss-n1", "dict-n2"])
def test_every_truncation_without_retag_is_rejected(name):
    payload = BASES[name]
    for length in range(len(payload)):
        expected = cepam.FormatError if length < MIN_PAYLOAD else (
            cepam.FormatError, cepam.AuthenticationError)
        with pytest.raises(expected):
            cepam.decode(payload[:length], secret=SECRET)


def test_truncation_below_minimum_says_too_short():
    with pytest.raises(cepam.FormatError, match="too short"):
        cepam.decode(BASES["gauss-n1"][: MIN_PAYLOAD - 1], secret=SECRET)
    with pytest.raises(cepam.FormatError, match="too short"):
        cepam.decode(b"", secret=SECRET)


@pytest.mark.parametrize("magic", [b"CEPN", b"cepm", b"\x00\x00\x00\x00", b"PK\x03\x04"])
@pytest.mark.parametrize("retagged", [False, True], ids=["tag-stale", "tag-valid"])
def test_wrong_magic_is_a_format_error(magic, retagged):
    data = magic + untagged(BASES["gauss-n2"])[4:]
    payload = retag(data) if retagged else data + BASES["gauss-n2"][-TAG_BYTES:]
    with pytest.raises(cepam.FormatError, match="magic"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="magic"):
        cepam.inspect(payload)


@pytest.mark.parametrize("version", [0, 2, 3, 0x81, 255])
@pytest.mark.parametrize("retagged", [False, True], ids=["tag-stale", "tag-valid"])
def test_wrong_version_is_a_format_error(version, retagged):
    raw = RawPayload.parse(BASES["laplace-n2"]).edit(version=version)
    payload = raw.tagged() if retagged else raw.data() + BASES["laplace-n2"][-TAG_BYTES:]
    with pytest.raises(cepam.FormatError, match="version"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="version"):
        cepam.inspect(payload)


@pytest.mark.parametrize("name", BASE_NAMES)
def test_wrong_secret_is_an_authentication_error(name):
    with pytest.raises(cepam.AuthenticationError, match="tag"):
        cepam.decode(BASES[name], secret=OTHER_SECRET)
    codec = cepam.Codec(cepam.Gaussian(sigma=0.1), secret=OTHER_SECRET, client=11)
    with pytest.raises(cepam.AuthenticationError):
        codec.decode(BASES[name])


def test_payload_tagged_under_another_secret_is_an_authentication_error():
    forged_elsewhere = retag(untagged(BASES["gauss-n1"]), secret=OTHER_SECRET)
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(forged_elsewhere, secret=SECRET)
    assert outcome(forged_elsewhere, secret=OTHER_SECRET) == "ok"


def test_tag_edits_and_trailing_bytes_without_retag_are_authentication_errors():
    p = BASES["dict-n2"]
    for bad in (p[:-1] + bytes([p[-1] ^ 0x80]), p[:-TAG_BYTES] + bytes(TAG_BYTES),
                p + b"\x00", p + p[-TAG_BYTES:], untagged(p) + b"\x00" + p[-TAG_BYTES:]):
        with pytest.raises(cepam.AuthenticationError):
            cepam.decode(bad, secret=SECRET)


def test_a_tagged_payload_for_a_2_62_coordinate_update_without_retag_is_rejected():
    raw = RawPayload.parse(BASES["gauss-n1"])
    raw = raw.edit(m=1 << 62, entries=[RawEntry(b"", 0, 1, (1 << 62,))])
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(raw.data() + BASES["gauss-n1"][-TAG_BYTES:], secret=SECRET)


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
    p = BASES["tuple-laplace-n3"]
    for like in (bytearray(p), memoryview(p)):
        assert_declared_structure(cepam.decode(like, secret=SECRET), p)
        assert cepam.inspect(like).coordinates == 24


def test_inspect_on_every_single_bit_flip_of_the_header_raises_format_error_only():
    """inspect() reads hostile headers without the secret: info or FormatError."""
    for name in ("dict-n2", "laplace-n4-clip"):
        payload = BASES[name]
        header_bits = 8 * RawPayload.parse(payload).header_len()
        for bit in range(header_bits):
            flipped = bytearray(payload)
            flipped[bit // 8] ^= 1 << (bit % 8)
            try:
                info = cepam.inspect(bytes(flipped))
            except cepam.FormatError:
                continue
            assert info.coordinates == sum(math.prod(e.shape) for e in info.structure.entries)
            info.as_dict()  # and it can be shown


def test_inspect_on_every_truncation_raises_format_error():
    payload = BASES["dict-n2"]
    for length in range(len(payload)):
        with pytest.raises(cepam.FormatError):
            cepam.inspect(payload[:length])


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


@pytest.mark.parametrize("name", ["dict-n2", "laplace-n4-clip"])
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


@pytest.mark.parametrize("name", ["gauss-n2", "dict-n2"])
def test_every_truncation_of_the_body_keeping_declared_lengths_is_a_format_error(name):
    """Drop trailing body bytes but keep the header's section lengths, re-tagged."""
    data = untagged(BASES[name])
    header_len = RawPayload.parse(BASES[name]).header_len()
    for length in range(header_len, len(data)):
        with pytest.raises(cepam.FormatError, match="length|section"):
            cepam.decode(retag(data[:length]), secret=SECRET)


@pytest.mark.parametrize("garbage", [b"\x00", b"\xff", b"\x00" * 8, b"CEPM", bytes(range(64))])
def test_trailing_garbage_behind_a_valid_tag_is_a_format_error(garbage):
    for name in ("gauss-n1", "dict-n2"):
        with pytest.raises(cepam.FormatError, match="body length"):
            cepam.decode(retag(untagged(BASES[name]) + garbage), secret=SECRET)


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
            data[i : i + 8] = struct.pack("<Q", rng.choice([0, 1, U64, 1 << 62, 1 << 63, 1 << 32]))
    return bytes(data)


def test_seeded_random_mutations_behind_a_valid_tag_decode_or_are_format_errors():
    rng = random.Random(0xCE9A)
    pool = [untagged(p) for p in BASES.values()]
    cases = []
    for i in range(4000):
        cases.append((f"mutation {i}", retag(_random_mutation(rng, pool))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


def test_seeded_random_mutations_include_both_outcomes():
    """Guards the fuzz test above against testing only one path."""
    rng = random.Random(0xCE9A)
    pool = [untagged(p) for p in BASES.values()]
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


def _h_bytes(r: RawPayload) -> int:
    return (r.h_bits + 7) // 8


def _padding_bit(r: RawPayload, section: str, *, first: bool) -> RawPayload:
    """Sets the first or last padding bit of the H or M section."""
    start = 0 if section == "H" else 8 * _h_bytes(r)
    bits = r.h_bits if section == "H" else r.m_bits
    pad = -bits % 8
    assert pad > 0, "pick a base payload whose section has padding"
    bit = start + bits + (0 if first else pad - 1)
    return r.edit(body=_set_bit(r.body, bit, 1))


# (id, base payload, edit: RawPayload -> RawPayload, expected outcome, message regex)
TARGETED = [
    # Declared sizes.
    ("m-2^62-single-dim", "gauss-n1",
     lambda r: r.edit(m=1 << 62, entries=_entries(r, dims=(1 << 62,))), FORMAT, None),
    ("m-2^62-two-dims", "gauss-n2",
     lambda r: r.edit(m=1 << 62, entries=_entries(r, dims=(1 << 31, 1 << 31))), FORMAT, None),
    ("m-2^62-shape-unchanged", "gauss-n1", lambda r: r.edit(m=1 << 62), FORMAT, "add up|too large"),
    ("m-2^64-1-n1", "gauss-n1",
     lambda r: r.edit(m=U64, entries=_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^64-1-n2", "gauss-n2",
     lambda r: r.edit(m=U64, entries=_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^64-3-n4", "laplace-n4-clip",
     lambda r: r.edit(m=U64 - 2, entries=_entries(r, dims=(U64 - 2,))), FORMAT, None),
    ("m-2^64-1-n8", "gauss-n1",
     lambda r: r.edit(n=8, m=U64, entries=_entries(r, dims=(U64,))), FORMAT, None),
    ("m-zero", "gauss-n1", lambda r: r.edit(m=0), FORMAT, None),
    ("m-one-more", "gauss-n1", lambda r: r.edit(m=r.m + 1), FORMAT, "add up"),
    ("m-one-less", "gauss-n1", lambda r: r.edit(m=r.m - 1), FORMAT, "exceed|add up"),
    ("m-one-more-than-body-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m + 1, entries=_entries(r, dims=(r.m + 1,))), FORMAT, None),
    ("dims-huge-product", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1 << 32, 1 << 32, 1 << 32))), FORMAT, "exceed|too large"),
    ("dims-32-times-2^64-1", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(U64,) * 32)), FORMAT, "exceed|too large"),
    ("dims-product-wraps-2^64", "gauss-n1",
     lambda r: r.edit(entries=_entries(r, dims=(1 << 32, 1 << 32, r.m))), FORMAT, "exceed|too large"),
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
       "mechanism") for c in (0, 3, 255)],
    *[(f"lattice-{c}", "gauss-n2", (lambda c: lambda r: r.edit(lattice=c))(c), FORMAT,
       "lattice") for c in (0, 2, 255)],
    *[(f"coder-{c}", "gauss-n2", (lambda c: lambda r: r.edit(coder=c))(c), FORMAT, "coder")
      for c in (0, 2, 255)],
    *[(f"container-{c}", "dict-n2", (lambda c: lambda r: r.edit(container=c))(c), FORMAT,
       "container") for c in (4, 255)],
    ("dict-as-single-container", "dict-n2", lambda r: r.edit(container=0), FORMAT, None),
    ("dict-as-list-container", "dict-n2", lambda r: r.edit(container=1), FORMAT, "named"),
    ("list-as-dict-container", "tuple-laplace-n3", lambda r: r.edit(container=3),
     FORMAT, "duplicate"),
    *[(f"reserved-{v:#x}", "gauss-n1", (lambda v: lambda r: r.edit(reserved=v))(v), FORMAT,
       "reserved") for v in (1, 0x100, 0xFFFF)],
    *[(f"scale-{v}", "gauss-n2", (lambda v: lambda r: r.edit(scale=v))(v), FORMAT, "scale")
      for v in (math.nan, -math.nan, -1.0, 0.0, -0.0, math.inf, -math.inf)],
    *[(f"clip-{v}", "laplace-n4-clip", (lambda v: lambda r: r.edit(clip=v))(v), FORMAT, "clip")
      for v in (math.nan, -1.0, 0.0, -0.0, -math.inf)],
    ("clip-inf", "laplace-n4-clip", lambda r: r.edit(clip=math.inf), EITHER, None),
    ("scale-subnormal", "gauss-n2", lambda r: r.edit(scale=5e-324), EITHER, None),
    ("scale-max-float", "laplace-n2", lambda r: r.edit(scale=1.7976931348623157e308),
     EITHER, None),
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
    # Section lengths.
    ("h_bits-2^64-1", "gauss-n2", lambda r: r.edit(h_bits=U64), FORMAT, None),
    ("m_bits-2^64-1", "gauss-n2", lambda r: r.edit(m_bits=U64), FORMAT, None),
    ("both-bits-2^64-1", "gauss-n2", lambda r: r.edit(h_bits=U64, m_bits=U64), FORMAT, None),
    ("h_bits-2^61", "gauss-n2", lambda r: r.edit(h_bits=1 << 61), FORMAT, None),
    ("h_bits-plus-1", "gauss-n2", lambda r: r.edit(h_bits=r.h_bits + 1), FORMAT, None),
    ("h_bits-minus-1", "gauss-n2", lambda r: r.edit(h_bits=r.h_bits - 1), FORMAT, None),
    ("m_bits-plus-1", "gauss-n2", lambda r: r.edit(m_bits=r.m_bits + 1), FORMAT, None),
    ("m_bits-minus-1", "gauss-n2", lambda r: r.edit(m_bits=r.m_bits - 1), FORMAT, None),
    ("m_bits-plus-1-n1", "laplace-n1", lambda r: r.edit(m_bits=r.m_bits + 1), FORMAT, None),
    ("m_bits-minus-1-n1", "laplace-n1", lambda r: r.edit(m_bits=r.m_bits - 1), FORMAT, None),
    ("h_bits-on-constant-H", "gauss-n1", lambda r: r.edit(h_bits=1, body=b"\x80" + r.body),
     FORMAT, None),
    ("bits-moved-between-sections", "gauss-n2",
     lambda r: r.edit(h_bits=r.h_bits + 8, m_bits=r.m_bits - 8), FORMAT, None),
    ("m_bits-zero", "gauss-n1", lambda r: r.edit(m_bits=0, body=b""), FORMAT, None),
    # Coder parameters.
    ("golomb-0-where-H-varies", "gauss-n2", lambda r: r.edit(golomb=0), FORMAT, None),
    ("golomb-0-H-section-dropped", "laplace-n2",
     lambda r: r.edit(golomb=0, h_bits=0, body=r.body[_h_bytes(r):]), EITHER, None),
    ("golomb-2^16+1", "gauss-n2", lambda r: r.edit(golomb=(1 << 16) + 1), FORMAT, "Golomb"),
    ("golomb-2^32-1", "gauss-n2", lambda r: r.edit(golomb=(1 << 32) - 1), FORMAT, "Golomb"),
    ("golomb-2^16", "gauss-n2", lambda r: r.edit(golomb=1 << 16), EITHER, None),
    *[(f"golomb-{g}-reinterpreted", "laplace-n2", (lambda g: lambda r: r.edit(golomb=g))(g),
       EITHER, None) for g in (1, 2, 3, 7, 255)],
    ("golomb-1-on-n1", "gauss-n1",
     lambda r: r.edit(golomb=1, h_bits=24, body=bits_to_bytes("1" * 24) + r.body), EITHER, None),
    ("H-2-on-n1", "gauss-n1",
     lambda r: r.edit(golomb=1, h_bits=25, body=bits_to_bytes("01" + "1" * 23) + r.body),
     FORMAT, "trial index"),
    *[(f"expg-order-{k}", "gauss-n2", (lambda k: lambda r: r.edit(expg_k=k))(k), FORMAT,
       "exp-Golomb") for k in (55, 56, 63, 64, 128, 255)],
    *[(f"expg-order-{k}-reinterpreted", "gauss-n2", (lambda k: lambda r: r.edit(expg_k=k))(k),
       EITHER, None) for k in (0, 1, 2, 3, 54)],
    # Padding bits of each section.
    ("H-padding-first-bit", "laplace-n2", lambda r: _padding_bit(r, "H", first=True),
     FORMAT, "padding"),
    ("H-padding-last-bit", "laplace-n2", lambda r: _padding_bit(r, "H", first=False),
     FORMAT, "padding"),
    ("M-padding-first-bit", "laplace-n2", lambda r: _padding_bit(r, "M", first=True),
     FORMAT, "padding"),
    ("M-padding-last-bit", "dict-n2", lambda r: _padding_bit(r, "M", first=False),
     FORMAT, "padding"),
    ("body-all-zero", "gauss-n2", lambda r: r.edit(body=bytes(len(r.body))), FORMAT, None),
    ("body-all-ones", "gauss-n2", lambda r: r.edit(body=b"\xff" * len(r.body)), FORMAT, None),
    # Context: any values are fine (another key: noise, but the declared structure).
    ("context-max", "dict-n2", lambda r: r.edit(round=U64, client=U64, message=U64), EITHER,
     None),
]


def _targeted_payload(edit, base):
    return edit(RawPayload.parse(BASES[base])).tagged()


@pytest.mark.parametrize("case_id,base,edit,expected,match", TARGETED,
                         ids=[t[0] for t in TARGETED])
def test_targeted_header_edit_behind_a_valid_tag(case_id, base, edit, expected, match):
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


def test_targeted_either_cases_reach_both_outcomes():
    """Sanity: the EITHER cases above include both outcomes, so neither kind is vacuous."""
    seen = set()
    for case_id, base, edit, expected, _ in TARGETED:
        if expected == EITHER:
            try:
                seen.add(outcome(_targeted_payload(edit, base)))
            except Exception:  # noqa: BLE001 - the parametrized test reports it
                pass
    assert seen == {"ok", "format"}


# --- Hand-forged bodies: prefix-code limits and zero runs. -------------------


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


@pytest.mark.parametrize("value", [(1 << 53), -(1 << 53), (1 << 53) - 1, -(1 << 53) + 1])
@pytest.mark.parametrize("k", [0, 3, 54])
def test_body_coder_decodes_every_coordinate_it_encodes(value, k):
    """The native body coder accepts |M| <= 2^53 on encode (MAX_ABS_M), so the body
    decoder must accept the same range, or a body it wrote is a FormatError."""
    from cepam import _core

    assert _core.MAX_ABS_M == 1 << 53
    H = np.ones(1, np.uint32)
    M = np.array([value], np.int64)
    body, h_bits, m_bits = _core.body_encode(H, M, golomb=0, expg_k=k)
    H2, M2 = _core.body_decode(body, N=1, count=1, golomb=0, expg_k=k, h_bits=h_bits,
                               m_bits=m_bits)
    assert M2.tolist() == [value] and H2.tolist() == [1]


def _zero_run_payloads(body_bytes: int) -> list[tuple[str, int, int, bytes]]:
    """(label, declared coordinates, coordinates the body can hold, payload): all-zero
    bodies of body_bytes bytes, declaring as many coordinates as fit, or more, in each
    Golomb parameter / exp-Golomb order regime."""
    bits = 8 * body_bytes
    half = bits // 2
    out = []
    for n, golomb, k in ((1, 0, 0), (2, 1, 0), (2, 1 << 16, 0), (4, 3, 7), (8, 1, 54)):
        h_bits = half if golomb else 0
        m_bits = bits - h_bits
        capacity = m_bits // (k + 1)  # the most coordinates the M section can hold
        for declared in (capacity, capacity + 1, 4 * capacity, 1 << 62):
            raw = forged(n=n, golomb=golomb, expg_k=k, shape=(declared,))
            raw = raw.edit(h_bits=h_bits, m_bits=m_bits, body=bytes(body_bytes))
            out.append((f"n={n} g={golomb} k={k} declared={declared}", declared, capacity,
                        raw.tagged()))
    # Zeros in the H section only (the M section is all ones: zero-free codes).
    raw = forged(n=2, golomb=1, shape=(half,)).edit(
        h_bits=half, m_bits=half, body=bytes(half // 8) + b"\xff" * (half // 8))
    out.append(("zero H section", half, half, raw.tagged()))
    return out


def test_long_zero_runs_in_the_body_fail_fast_with_little_allocation():
    body_bytes = 256 * 1024
    tracemalloc.start()
    try:
        for label, declared, capacity, payload in _zero_run_payloads(body_bytes):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            assert outcome(payload) == "format", label
            peak = tracemalloc.get_traced_memory()[1] - base
            if declared > capacity:
                # Rejected before allocating anything sized by the declared count:
                # only copies of the payload itself.
                assert peak < 6 * len(payload) + MB, (label, peak)
            else:
                # Linear in the payload: H (uint32), M (int64) and the output are
                # allocated for at most 8 coordinates per body byte.
                assert peak < 160 * len(payload) + 4 * MB, (label, peak)
    finally:
        tracemalloc.stop()


def test_every_trial_index_at_the_cap_decodes():
    """The slowest legal H section (65535 zeros before each one) still decodes."""
    cap = 1 << 16
    subvectors = 16
    raw = forged(n=2, golomb=1, shape=(2 * subvectors,), h_code=unary(cap) * subvectors,
                 m_code=expg(0) * (2 * subvectors))
    assert outcome(raw.tagged()) == "ok"


def test_a_valid_dense_body_allocates_in_proportion_to_its_length():
    """The densest legal body (1 bit per coordinate) decodes; allocation is linear."""
    m = 8 * 64 * 1024
    payload = forged(shape=(m,), m_code="1" * m).tagged()
    tracemalloc.start()
    try:
        y = cepam.decode(payload, secret=SECRET)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert y.shape == (m,) and y.dtype == np.float32
    assert peak < 200 * len(payload) + 4 * MB, peak


def test_hostile_cases_do_not_grow_peak_rss():
    """All targeted, 2^62-sized and zero-run payloads together: peak RSS grows < 200 MB
    and Python/numpy allocations stay small (tracemalloc sees numpy's buffers)."""
    resource = pytest.importorskip("resource")  # Unix only
    payloads = [_targeted_payload(edit, base) for _, base, edit, _, _ in TARGETED]
    payloads += [p for *_, p in _zero_run_payloads(128 * 1024)]
    rss_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for payload in payloads:
            try:
                outcome(payload)
            except Exception:  # noqa: BLE001 - wrong types are reported by other tests
                pass
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kb) / 1024
    assert peak < 64 * MB, peak
    assert rss_growth_mb < 200, rss_growth_mb


# --- Torch-declared entries. -------------------------------------------------


def _torch_kind_payload() -> bytes:
    return _targeted_payload(lambda r: r.edit(entries=_entries(r, kind=1)), "gauss-n1")


def test_torch_kind_entry_decodes_to_numpy_on_request():
    assert outcome(_torch_kind_payload()) == "ok"


def test_torch_kind_entry_without_torch_is_a_clear_cepam_error():
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed")
    with pytest.raises(cepam.InvalidArgumentError, match="torch"):
        cepam.decode(_torch_kind_payload(), secret=SECRET)


def test_torch_kind_entry_with_torch_decodes_to_a_tensor():
    torch = pytest.importorskip("torch")
    y = cepam.decode(_torch_kind_payload(), secret=SECRET)
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (24,)
