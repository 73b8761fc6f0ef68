"""Sealed payloads (format version 5): nothing about the update in clear.

* No window of a payload's bytes holds a statistic the encoder computes from
  the update (float64, float32, either byte order, any offset), for every
  coder and lattice; the same search finds them in the opened (decrypted)
  body, so it is not a search that cannot succeed.
* Any altered bit is an AuthenticationError before anything is parsed or
  decrypted: the parsers and the native decoder are replaced by functions
  that fail if called.
* The keystream is RFC 8439 ChaCha20 (checked against the ``cryptography``
  package); padding, finite outputs, pickling and secrets in messages.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import struct
import subprocess

import numpy as np
import pytest

import cepam
from cepam import _core, padding, payload as payload_format, sealing
from cepam._core import testing as hooks
from cepam.keys import Context, seal_key
from cepam.lattices import LATTICE_CODES
from cepam.mechanisms import core_params
from cepam.payload import pack_sealed, sealed_head
from cepam.sealing import open_payload, seal
from cepam.template import bare

from helpers.forge import NONCE, chacha20

SECRET = bytes(range(100, 132))
OTHER = bytes(range(1, 33))

# (coder, mechanism, lattice, dim): every coder with every lattice it takes.
SETTINGS = [
    *[(coder, "gaussian", "Z", n) for coder in ("ans", "golomb") for n in (1, 2, 3, 8)],
    *[(coder, "gaussian", lat, None) for coder in ("ans", "golomb") for lat in ("A2", "D4", "E8")],
    *[(coder, "gaussian", "auto", None) for coder in ("ans", "golomb")],
    *[(coder, "laplace", "Z", n) for coder in ("ans", "golomb") for n in (1, 2)],
    *[(coder, "sdq", "Z", 1) for coder in ("ans", "golomb")],
]
MECHANISMS = {"gaussian": cepam.Gaussian(sigma=0.01), "laplace": cepam.Laplace(b=0.01),
              "sdq": cepam.SDQ(step=0.02)}


def _update(seed: int, scale: float = 0.04) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_t(5, size=3001) * scale).astype(np.float64)


def _encode(x, setting, *, clip=None, pad=None, round=0):
    """x's payload under a fixed nonce: the public headers of two calls
    differ only where their settings do."""
    coder, mech, lattice, dim = setting
    return cepam.encode(x, MECHANISMS[mech], secret=SECRET, round=round, client=7, dim=dim,
                        lattice=lattice, clip=clip, coder=coder, pad=pad, nonce=NONCE)


def _statistics(x: np.ndarray, clip: float | None) -> list[float]:
    """Statistics of x the encoder computes (or could): sums, norms, the clip
    factor, the source model's range A and its derived scales, extremes, moments."""
    flat = np.ascontiguousarray(x.ravel())
    sumsq = _core.sum_of_squares(flat)
    norm = math.sqrt(sumsq)
    factor = clip / norm if clip is not None and norm > clip else 1.0
    clipped = flat * factor
    peak = float(np.max(np.abs(flat)))
    a = float(np.max(np.abs(clipped)))
    stats = [sumsq, norm, factor, min(norm, clip or math.inf), norm / math.sqrt(flat.size),
             min(norm, clip or math.inf) / math.sqrt(flat.size), peak, peak * factor, a, 2 * a,
             1024.0 / (2 * a), float(flat.max()), float(flat.min()), float(clipped.max()),
             float(clipped.min()), float(flat.mean()), float(flat.std()), float(np.sum(flat)),
             float(np.sum(np.abs(flat))), float(np.sum(clipped ** 2))]
    # Values equal to a public parameter (the clip, when the update is clipped)
    # are no statistic of x.
    return [s for s in stats if math.isfinite(s) and s != 0.0 and s != clip]


def _windows_matching(data: bytes, values: list[float]) -> list[str]:
    """Every offset where a float64 or float32 of one of values sits in data
    (little- or big-endian), as descriptions."""
    found = []
    for width, fmt in ((8, "d"), (4, "f")):
        wanted = {struct.pack("<" + fmt, v): v for v in values}
        wanted.update({struct.pack(">" + fmt, v): v for v in values})
        for offset in range(len(data) - width + 1):
            hit = wanted.get(data[offset : offset + width])
            if hit is not None:
                found.append(f"offset {offset}: {hit!r} as {width}-byte float")
    return found


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("clip", [None, 2.0])
def test_no_window_of_a_payload_holds_a_statistic_of_the_update(setting, clip):
    x = _update(seed=len(str(setting)) + (clip is not None))
    stats = _statistics(x, clip)
    for pad in (None, "bucket"):
        payload = _encode(x, setting, clip=clip, pad=pad)
        assert _windows_matching(payload, stats) == [], (setting, pad)
    if setting[0] == "ans":
        # Control: the opened body starts with the source model's range A, as
        # an exact float64 -- the statistic the seal keeps out of the payload.
        body = open_payload(payload, SECRET)[1].body
        assert any("as 8-byte" in hit for hit in _windows_matching(body, stats))


def test_the_lattice_auto_chose_is_not_in_the_public_header():
    small, large = _update(1, scale=0.001), _update(1, scale=0.05)
    payloads = [_encode(x, ("ans", "gaussian", "auto", None)) for x in (small, large)]
    opened = [open_payload(p, SECRET)[1] for p in payloads]
    assert [(s.lattice, s.n) for s in opened] == [(1, 1), (4, 8)]
    headers = [p[: cepam.inspect(p).header_bits // 8] for p in payloads]
    assert headers[0] == headers[1]  # same public header whatever the choice


# ---------------------------------------------------------------------------
# Altered bits: AuthenticationError before anything is parsed or decrypted.
# ---------------------------------------------------------------------------


class _Touched(AssertionError):
    pass


def _forbid(name):
    def fail(*args, **kwargs):
        raise _Touched(f"{name} was called before the tag was verified")
    return fail


@pytest.fixture
def parsers_forbidden(monkeypatch):
    """Every parser, the decryption and the native decoders fail if called."""
    for module, name in [(sealing, "_parse_header"), (sealing, "parse_sealed_head"),
                         (payload_format, "parse_header"), (payload_format, "_parse_header"),
                         (payload_format, "parse_sealed"),
                         (payload_format, "parse_sealed_head"), (_core, "seal_xor"),
                         (_core, "unseal"), (_core, "decode"), (_core, "decode_symbols"),
                         (_core, "body_parts"), (hooks, "body_decode")]:
        monkeypatch.setattr(module, name, _forbid(f"{module.__name__}.{name}"))


FLIP_SETTINGS = [("ans", "gaussian", "Z", 1), ("golomb", "gaussian", "Z", 2),
                 ("ans", "gaussian", "E8", None), ("ans", "laplace", "Z", 2)]


@pytest.fixture(scope="module")
def flip_payloads():
    x = _update(3, scale=0.02)[:400]
    return {f"{s[0]}-{s[2]}{s[3] or ''}-{pad}": _encode(x, s, clip=1.0, pad=pad)
            for s in FLIP_SETTINGS for pad in (None, "bucket")}


def test_the_opened_header_and_sections_hold_every_field(flip_payloads):
    # (built by payload.from_fields, tuple.__new__, which takes any length)
    for payload in flip_payloads.values():
        header, sealed = open_payload(payload, SECRET)
        assert len(header) == len(payload_format.Header._fields)
        assert len(sealed) == len(payload_format.Sealed._fields)
        assert header == payload_format.parse_header(payload)[0]
        assert header == payload_format.Header(*header[:-1], nonce=header.nonce)
        assert sealed == payload_format.Sealed(*sealed)
    plain = pack_sealed(1, 1, b"body", 3)
    head = payload_format.parse_sealed_head(plain, 1, size=len(plain))
    assert len(head) == len(payload_format.SealedHead._fields) and head.size == len(plain) - 7
    assert payload_format.parse_sealed(plain, 1) == payload_format.Sealed(1, 1, b"body", 3)


def test_the_forbidden_parsers_are_the_ones_decode_uses(flip_payloads, parsers_forbidden):
    payload = next(iter(flip_payloads.values()))
    with pytest.raises(_Touched):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(_Touched):
        cepam.inspect(payload, secret=SECRET)


def test_every_bit_flip_after_the_version_is_an_authentication_error_before_parsing(
        flip_payloads, parsers_forbidden):
    for name, payload in flip_payloads.items():
        for bit in range(8 * 5, 8 * len(payload)):  # magic and version: FormatError
            flipped = bytearray(payload)
            flipped[bit // 8] ^= 1 << (bit % 8)
            for read in (lambda p: cepam.decode(p, secret=SECRET),
                         lambda p: cepam.inspect(p, secret=SECRET)):
                with pytest.raises(cepam.AuthenticationError):
                    read(bytes(flipped))


def test_wrong_secret_and_truncation_are_refused_before_parsing(flip_payloads,
                                                                parsers_forbidden):
    payload = flip_payloads["ans-Z1-None"]
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(payload, secret=OTHER)
    for length in range(cepam.payload.MIN_PAYLOAD, len(payload)):
        with pytest.raises(cepam.AuthenticationError):
            cepam.decode(payload[:length], secret=SECRET)


# ---------------------------------------------------------------------------
# The keystream and the keys.
# ---------------------------------------------------------------------------


def reference_chacha20(key: bytes, nonce: bytes, data: bytes) -> bytes:
    """data XOR RFC 8439 ChaCha20 from the ``cryptography`` package (an
    independent implementation; the test skips without it)."""
    pytest.importorskip("cryptography.hazmat.primitives.ciphers")
    return chacha20(key, nonce, data)


@pytest.mark.parametrize("length", [0, 1, 63, 64, 65, 4095, 4096, 4097, 100_003])
def test_seal_keystream_is_rfc8439_chacha20(length):
    rng = np.random.default_rng(length)
    key = rng.bytes(32)
    data = rng.bytes(length)
    buffer = bytearray(data)
    _core.seal_xor(buffer, key=key)
    nonce = struct.pack("<I", 0) + bytes(8) + b"SEAL"  # counter 0; nonce (0, 0, "SEAL")
    expected = reference_chacha20(key, nonce, data)
    assert bytes(buffer) == expected
    _core.seal_xor(buffer, key=key)
    assert bytes(buffer) == data


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_the_keystream_by_parts_is_the_whole_keystream(threads):
    """seal_xor on several threads (parts of 1 MiB) and unseal at any offset:
    the same bytes as RFC 8439 ChaCha20 from block 0."""
    rng = np.random.default_rng(threads)
    key = rng.bytes(32)
    data = rng.bytes(3 * (1 << 20) + 12345)
    nonce = bytes(12) + b"SEAL"
    expected = reference_chacha20(key, nonce, data)
    buffer = bytearray(data)
    _core.seal_xor(buffer, key=key, threads=threads)
    assert bytes(buffer) == expected
    for start, stop in [(0, len(data)), (1, 70), (63, 65), ((1 << 20) - 5, 2 * (1 << 20) + 7),
                        (100_001, len(data)), (len(data), len(data))]:
        got = _core.unseal(data, start=start, stop=stop, first=start, key=key, threads=threads)
        assert got == expected[start:stop], (start, stop)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("m", [5_000, 3 * (1 << 17) + 12_345, 40 * (1 << 17)])
def test_a_coded_body_is_sealed_as_its_bytes(m, coder, threads):
    """encode writes the body's parts straight into the sealed payload
    (_core.CodedBody): the payload of its bytes, for bodies under and over
    the 1 MiB where the parts are written in parallel, with padding, and
    once only."""
    x = (np.random.default_rng(m).standard_normal(m) * 1e-2).astype(np.float32)
    mechanism = cepam.Gaussian(sigma=1e-3)
    z = LATTICE_CODES["Z"]
    code = payload_format.CODER_CODES[coder]
    kwargs = dict(key=bytes(32), params=core_params(mechanism, lattice=z, n=1), factor=1.0,
                  coder=code, threads=threads)
    body = _core.encode(x, **kwargs)
    coded = _core.encode_coded_body(x, **kwargs)
    assert len(coded) == len(body)
    header = payload_format.Header(mechanism.code, mechanism.scale, code, 0.5, Context(1, 2, 3),
                                   bare(m), nonce=NONCE)
    sealed = sealed_head(z, 1, 77)
    assert (seal(header, sealed, secret=SECRET, body=coded, padding=77, threads=threads)
            == seal(header, sealed, secret=SECRET, body=body, padding=77, threads=threads))
    with pytest.raises(cepam.InvalidArgumentError, match="once"):
        seal(header, sealed, secret=SECRET, body=coded, threads=threads)
    with pytest.raises(cepam.InvalidArgumentError, match="once"):
        len(coded)
    with pytest.raises(TypeError, match="bytes or a CodedBody"):
        _core.seal_payload(b"", b"", bytearray(3), padding=0, key=bytes(32), threads=1,
                           tag_bytes=16, tag_of=lambda data: bytes(16))


def _advised_huge(data: bytes) -> bool:
    """Whether the middle of ``data``'s buffer lies in a mapping advised for
    huge pages (Linux's /proc/self/smaps: ``hg`` among its VmFlags)."""
    address = np.frombuffer(data, dtype=np.uint8).ctypes.data + len(data) // 2
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split()[0]
            if "-" in first and not first.endswith(":"):
                start, stop = (int(a, 16) for a in first.split("-"))
                inside = start <= address < stop
            elif inside and first == "VmFlags:":
                return "hg" in line.split()[1:]
    raise AssertionError("no mapping holds the buffer")


THP = "/sys/kernel/mm/transparent_hugepage/enabled"


@pytest.mark.skipif(not os.path.exists(THP),
                    reason="no transparent huge pages (Linux) here")
def test_a_large_payload_and_its_opened_body_are_advised_huge_pages():
    """The payload (seal) and the opened body (unseal), written once through,
    are advised huge pages: faulted in 2 MiB at a time, not 4 KiB (at
    m = 10^8, about 12,000 faults fewer a call)."""
    header = payload_format.Header(cepam.Gaussian(sigma=1.0).code, 1.0,
                                   payload_format.CODER_CODES["ans"], 0.5, Context(1, 2, 3),
                                   bare(10), nonce=NONCE)
    body = np.random.default_rng(5).bytes(6 << 20)
    head = sealed_head(LATTICE_CODES["Z"], 1, 0, digest=bytes(payload_format.DIGEST_BYTES))
    for threads in (1, 3):
        payload = seal(header, head, secret=SECRET, body=body, threads=threads)
        _, opened = open_payload(payload, SECRET, threads=threads)
        assert opened.body == body
        assert _advised_huge(payload) and _advised_huge(opened.body)


def test_unseal_checks_its_range():
    with pytest.raises(cepam.InvalidArgumentError, match="within"):
        _core.unseal(bytes(10), start=4, stop=11, first=0, key=bytes(32))
    with pytest.raises(cepam.InvalidArgumentError, match="within"):
        _core.unseal(bytes(10), start=5, stop=4, first=0, key=bytes(32))


def test_seal_xor_checks_its_arguments():
    with pytest.raises(cepam.InvalidArgumentError, match="32 bytes"):
        _core.seal_xor(bytearray(4), key=bytes(31))
    with pytest.raises((TypeError, BufferError, ValueError)):
        _core.seal_xor(b"read-only", key=bytes(32))
    with pytest.raises(cepam.InvalidArgumentError, match="contiguous"):
        _core.seal_xor(np.zeros(4, dtype=np.uint32), key=bytes(32))


def test_the_seal_key_is_per_message_and_apart_from_the_stream_key():
    keys = {seal_key(SECRET, Context(r, c, m), NONCE) for r, c, m in
            [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]}
    keys.add(seal_key(OTHER, Context(0, 0, 0), NONCE))
    keys.add(seal_key(SECRET, Context(0, 0, 0), bytes(16)))  # another nonce
    keys.add(cepam.keys.stream_key(SECRET, Context(0, 0, 0), NONCE))
    keys.add(cepam.keys.stream_key(SECRET, Context(0, 0, 0), bytes(16)))
    assert len(keys) == 8


def test_the_sealed_section_is_the_body_encrypted_under_the_context():
    x = _update(5)
    a = _encode(x, ("ans", "gaussian", "Z", 1), round=1)
    b = _encode(x, ("ans", "gaussian", "Z", 1), round=2)
    header_a, sealed_a = open_payload(a, SECRET)
    offset = cepam.inspect(a).header_bits // 8
    plain = pack_sealed(sealed_a.lattice, sealed_a.n, sealed_a.body, 0)
    key = seal_key(SECRET, header_a.context, header_a.nonce)
    nonce = bytes(12) + b"SEAL"
    cipher = reference_chacha20(key, nonce, plain)
    assert a[offset:-16] == cipher
    # Another round: another keystream (the bodies differ too, by the dithers).
    assert a[offset:offset + 6] != b[offset:offset + 6]


def test_inspect_shows_the_public_fields_and_says_the_rest_is_sealed():
    payload = _encode(_update(6), ("golomb", "gaussian", "Z", 2), clip=1.0)
    public = cepam.inspect(payload)
    assert public.sealed and (public.lattice, public.dim, public.body_bits) == (None,) * 3
    shown = public.as_dict()
    assert "encrypted" in shown["sealed"] and "lattice" not in shown
    assert set(shown["bits"]) == {"header", "sealed", "tag", "total"}
    opened = cepam.inspect(payload, secret=SECRET)
    assert (opened.lattice, opened.dim) == ("Z", 2) and opened.padding_bits == 0
    assert opened.as_dict()["lattice"] == "Z"
    with pytest.raises(cepam.AuthenticationError):
        cepam.inspect(payload, secret=OTHER)


def test_inspect_with_the_secret_range_checks_golomb_sections():
    """A Golomb body (sealed by a holder of the secret) declaring an H section
    of 2^64 - 1 bits: decode and inspect both refuse it."""
    payload = _encode(_update(7)[:8], ("golomb", "gaussian", "Z", 1))
    header, sealed = open_payload(payload, SECRET)
    body = bytearray(sealed.body)
    body[5:13] = struct.pack("<Q", (1 << 64) - 1)
    bad = seal(header, pack_sealed(sealed.lattice, sealed.n, bytes(body), 0), secret=SECRET)
    with pytest.raises(cepam.FormatError, match="section length"):
        cepam.decode(bad, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="section length"):
        cepam.inspect(bad, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="section length"):
        _core.body_parts(bytes(body), coder=1)
    assert cepam.inspect(bad).body_bits is None  # without the secret: not read


# ---------------------------------------------------------------------------
# Padding.
# ---------------------------------------------------------------------------


def test_bucket_lengths_are_quarter_octaves():
    sizes = sorted({padding.bucket_length(n) for n in range(1, 5000)})
    assert sizes[:12] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]
    for size in sizes:
        j = math.floor(4 * math.log2(size) + 1e-9)
        assert size == math.ceil(2 ** (j / 4) - 1e-9)
    assert padding.bucket_length(4097) == 4871  # ceil(2^12.25)
    for n in (1, 17, 4096, 10**6 + 1, 10**9):
        assert n <= padding.bucket_length(n) <= math.ceil(n * 2 ** 0.25) + 1


@pytest.mark.parametrize("coder", ["ans", "golomb"])
def test_padding_rules_and_round_trip(coder):
    x = _update(8)
    plain = _encode(x, (coder, "gaussian", "auto", None), clip=1.0)
    y = cepam.decode(plain, secret=SECRET)
    bucket = _encode(x, (coder, "gaussian", "auto", None), clip=1.0, pad="bucket")
    assert len(bucket) == padding.bucket_length(len(plain))
    fixed = _encode(x, (coder, "gaussian", "auto", None), clip=1.0, pad=len(plain) + 1000)
    assert len(fixed) == len(plain) + 1000
    for p in (bucket, fixed):
        np.testing.assert_array_equal(cepam.decode(p, secret=SECRET), y)
        info = cepam.inspect(p, secret=SECRET)
        assert info.padding_bits == 8 * (len(p) - len(plain))
    with pytest.raises(cepam.EncodingError, match="padded size"):
        _encode(x, (coder, "gaussian", "auto", None), clip=1.0, pad=len(plain) - 1)


@pytest.mark.parametrize("setting", [("ans", "gaussian", "auto", None),
                                     ("golomb", "gaussian", "Z", 1),
                                     ("ans", "laplace", "Z", 2), ("ans", "sdq", "Z", 1)],
                         ids=lambda s: "-".join(map(str, s)))
def test_pad_max_gives_one_length_for_every_update_of_a_configuration(setting):
    """Updates from all-zero to the clip norm, dense, sparse and heavy-tailed:
    one length, set by the public settings."""
    rng = np.random.default_rng(11)
    m, clip = 4000, 1.0
    sparse = np.zeros(m)
    sparse[rng.choice(m, 40, replace=False)] = rng.normal(size=40)
    updates = [np.zeros(m), rng.normal(size=m) * 1e-4, rng.normal(size=m),
               rng.uniform(-1, 1, m), rng.standard_t(2, m), sparse, np.full(m, 0.3)]
    lengths = {len(_encode(u, setting, clip=clip, pad="max")) for u in updates}
    assert len(lengths) == 1


def test_level_lengths_are_eight_third_octaves_below_the_bound():
    assert (padding.LEVELS, padding.LEVELS_PER_OCTAVE) == (8, 3)
    assert padding.level_lengths(9391) == (9391, 7454, 5916, 4696, 3727, 2958, 2348, 1864)
    assert padding.level_lengths(1000, count=3, per_octave=1) == (1000, 500, 250)
    for top in (1, 7, 100, 4097, 12_681, 10**6 + 1, 10**12):
        levels = padding.level_lengths(top)
        assert len(levels) == 8 and levels[0] == top and list(levels) == sorted(levels)[::-1]
        for j, size in enumerate(levels):  # ceil(top / 2^(j/3)), exactly
            assert size ** 3 * 2 ** j >= top ** 3
            assert size == 1 or (size - 1) ** 3 * 2 ** j < top ** 3
        for high, low in zip(levels, levels[1:]):  # consecutive: at most 2^(1/3) (+1 byte)
            assert high <= low * 2 ** (1 / 3) + 1
    for bad in (0, -3):
        with pytest.raises(cepam.InvalidArgumentError):
            padding.level_lengths(bad)
        with pytest.raises(cepam.InvalidArgumentError):
            padding.level_lengths(100, count=bad)
        with pytest.raises(cepam.InvalidArgumentError):
            padding.level_lengths(100, per_octave=bad)
    for bad in (1.5, True, "100"):
        with pytest.raises(cepam.InvalidTypeError):
            padding.level_lengths(bad)



def test_level_lengths_are_exact_and_bounded_up_to_the_longest_payload():
    """2**80 never returned (a loop of single steps from a float estimate),
    per_octave=10**6 and count=10**8 hung: the arguments are bounded by what
    a payload can be, and every accepted value is computed exactly at once."""
    top = padding.MAX_LENGTH
    q, count = padding.MAX_LEVELS_PER_OCTAVE, padding.MAX_LEVEL_COUNT
    levels = padding.level_lengths(top, count=count, per_octave=q)
    assert levels[0] == top and len(levels) == count
    for j in (1, 17, count - 1):
        size = levels[j]  # the smallest size with size^q 2^j >= top^q
        assert size ** q << j >= top ** q and (size - 1) ** q << j < top ** q
    for kw in (dict(max_bytes=2**80), dict(max_bytes=top + 1), dict(count=10**8),
               dict(per_octave=10**6), dict(count=count + 1), dict(per_octave=q + 1)):
        with pytest.raises(cepam.InvalidArgumentError, match="at most"):
            padding.level_lengths(**{"max_bytes": 1000, **kw})


def test_bucket_length_takes_numpy_ints_and_refuses_the_rest():
    """np.int64 and 1.5 raised AttributeError (no bit_length), None TypeError."""
    assert padding.bucket_length(np.int64(100)) == padding.bucket_length(100) == 108
    for bad in (None, 1.5, True, "100", np.float64(100.0)):
        with pytest.raises(cepam.InvalidTypeError, match="length"):
            padding.bucket_length(bad)
    for bad in (-1, padding.MAX_LENGTH + 1):
        with pytest.raises(cepam.InvalidArgumentError, match="length"):
            padding.bucket_length(bad)


@pytest.mark.parametrize("setting", [("ans", "gaussian", "auto", None),
                                     ("golomb", "gaussian", "Z", 1), ("ans", "sdq", "Z", 1)],
                         ids=lambda s: "-".join(map(str, s)))
def test_pad_levels_gives_only_the_declared_lengths_and_bounds_the_overhead(setting):
    """Updates from all-zero to above the clip norm: every padded length is one
    of the 8 levels below pad="max"'s size (3 bits at most), the smallest one
    that fits, so at most 2^(1/3) times the unpadded length above the lowest
    level; the padding is sealed and decoding returns the unpadded values."""
    rng = np.random.default_rng(12)
    m, clip = 4000, 1.0
    updates = [np.zeros(m)] + [rng.normal(size=m) * norm / math.sqrt(m)
                               for norm in (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)]
    top = len(_encode(updates[0], setting, clip=clip, pad="max"))
    levels = padding.level_lengths(top)
    seen = set()
    for u in updates:
        plain = _encode(u, setting, clip=clip)
        padded = _encode(u, setting, clip=clip, pad="levels")
        assert len(padded) == min(size for size in levels if size >= len(plain))
        if len(plain) >= levels[-1]:
            assert len(padded) <= 2 ** (1 / 3) * len(plain) + 1
        assert cepam.inspect(padded, secret=SECRET).padding_bits == 8 * (
            len(padded) - len(plain))
        np.testing.assert_array_equal(cepam.decode(padded, secret=SECRET),
                                      cepam.decode(plain, secret=SECRET))
        seen.add(len(padded))
    assert seen <= set(levels) and 1 < len(seen) <= 8
    assert math.log2(len(set(levels))) <= 3.0


def test_pad_levels_refuses_a_payload_above_the_bound():
    with pytest.raises(cepam.EncodingError, match="more than the padded size 100"):
        padding.padding_bytes("levels", 101, max_bytes=100)
    assert padding.padding_bytes("levels", 100, max_bytes=100) == 0
    assert padding.padding_bytes("levels", 1, max_bytes=100) == padding.level_lengths(100)[-1] - 1
    assert padding.uses_bound("levels") and padding.uses_bound("max")
    assert not any(padding.uses_bound(p) for p in (None, "bucket", 100))


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
def test_a_server_tells_from_the_public_header_whether_a_length_is_padded_as_told(setting):
    """padding.is_padded_as, from the public header and the encoder's
    lattice settings alone: every payload padded by a rule (whole and bare
    structures, updates from zero to the clip norm) has a length the rule
    gives; any other payload (the unpadded ones; one padded under another
    lattice setting) is judged by its length against the lengths the
    encoder itself pads to (pad="max"'s, the levels below it, the buckets)."""
    coder, mech, lattice, dim = setting
    rng = np.random.default_rng(13)
    m, clip = 3001, 1.0
    updates = [np.zeros(m)] + [rng.normal(size=m) * norm / math.sqrt(m)
                               for norm in (0.03, 0.3, 1.0)]
    coincidences = 0  # unpadded lengths that one of the three rules gives too
    for structure in (True, False):
        def encoded(u, pad, lattice=lattice, dim=dim):
            return cepam.encode(u, MECHANISMS[mech], secret=SECRET, round=0, client=7,
                                dim=dim, lattice=lattice, clip=clip, coder=coder, pad=pad,
                                nonce=NONCE, structure=structure)

        top = len(encoded(updates[0], "max"))
        for u in updates:
            plain = encoded(u, None)
            size = len(plain) + 100
            gives = {None: True, "bucket": padding.bucket_length(len(plain)) == len(plain),
                     "levels": len(plain) in padding.level_lengths(top),
                     "max": len(plain) == top, size: False}
            for pad, plain_fits in gives.items():
                assert padding.is_padded_as(encoded(u, pad), pad, lattice=lattice, dim=dim)
                assert padding.is_padded_as(plain, pad, lattice=lattice, dim=dim) == plain_fits
                coincidences += plain_fits and pad in ("bucket", "levels", "max")
        if mech == "gaussian":  # the bound of another lattice setting
            z_top = len(encoded(updates[0], "max", lattice="Z", dim=1))
            assert padding.is_padded_as(encoded(updates[0], "max"), "max", lattice="Z",
                                        dim=1) == (top == z_top)
    assert coincidences <= 2  # of 24: the unpadded lengths miss the rules' lengths


def test_is_padded_as_checks_its_arguments():
    good = _encode(_update(3), ("ans", "gaussian", "Z", 1), clip=1.0, pad="max")
    assert padding.is_padded_as(good, "max", lattice="Z")
    with pytest.raises(cepam.InvalidArgumentError):
        padding.is_padded_as(good, "huge")
    with pytest.raises(cepam.InvalidTypeError):
        padding.is_padded_as(good.decode("latin-1"), "max")
    for pad in ("max", "bucket", None):  # (checked whatever the rule needs)
        with pytest.raises(cepam.InvalidArgumentError, match="prefer"):
            padding.is_padded_as(good, pad, lattice="Z", prefer="bits")
        with pytest.raises(cepam.InvalidArgumentError):
            padding.is_padded_as(good, pad, lattice="E7")
    with pytest.raises(cepam.FormatError):
        padding.is_padded_as(good[:20], "bucket")
    unclipped = _encode(_update(3), ("ans", "gaussian", "Z", 1))
    with pytest.raises(cepam.InvalidArgumentError, match="clip"):
        padding.is_padded_as(unclipped, "max")
    assert padding.is_padded_as(unclipped, None)


def test_pad_arguments_are_checked():
    x = _update(9)
    for bad in ("buckets", "", 0, -5):
        with pytest.raises(cepam.InvalidArgumentError):
            _encode(x, ("ans", "gaussian", "Z", 1), pad=bad)
    for bad in (1.5, b"max", True, [1]):
        with pytest.raises(cepam.InvalidTypeError):
            _encode(x, ("ans", "gaussian", "Z", 1), pad=bad)
    for bad in ("Levels", "level"):
        with pytest.raises(cepam.InvalidArgumentError, match="'levels'"):
            _encode(x, ("ans", "gaussian", "Z", 1), pad=bad)
    for needs_clip in ("max", "levels"):
        with pytest.raises(cepam.InvalidArgumentError, match="clip"):
            _encode(x, ("ans", "gaussian", "Z", 1), pad=needs_clip)
    # One nonce for both payloads, so one noise: with fresh ones the unpadded
    # length (704 bytes, sd 7) passes the bucket edge at 725 in about one
    # payload in 1,000.
    codec = cepam.Codec(cepam.Gaussian(sigma=0.01), secret=SECRET, clip=1.0, pad="bucket")
    assert len(codec.encode(x, round=0, nonce=NONCE)) == padding.bucket_length(
        len(cepam.encode(x, cepam.Gaussian(sigma=0.01), secret=SECRET, round=0, client=0,
                         clip=1.0, nonce=NONCE)))


# ---------------------------------------------------------------------------
# Edges: finite outputs, pickling, secrets in messages.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("mechanism", [cepam.Gaussian(sigma=1e308), cepam.Laplace(b=1e307),
                                       cepam.Gaussian(sigma=1e38)])
def test_scales_whose_outputs_overflow_are_refused_on_encode(coder, mechanism):
    with pytest.raises(cepam.EncodingError, match="too large"):
        cepam.encode(np.zeros(10, np.float32), mechanism, secret=SECRET, round=0, client=0,
                     coder=coder, clip=1.0)
    if mechanism.scale < 1e300:  # float64 updates have room for it
        y = cepam.decode(cepam.encode(np.zeros(10), mechanism, secret=SECRET, round=0, client=0,
                                      coder=coder), secret=SECRET)
        assert np.all(np.isfinite(y))


def test_float16_entries_are_checked_against_their_decoded_dtype():
    # float16 entries decode to float32 by default: a noise that would overflow
    # float16 is encodable, and only dtype="input" (a cast back) refuses it.  A fixed
    # nonce: with fresh ones, some draw would leave all 8 values under 65504.
    x = {"half": np.ones(8, np.float16), "full": np.ones(8, np.float32)}
    with pytest.raises(cepam.EncodingError, match="float32"):
        cepam.encode(x, cepam.Gaussian(sigma=1e38), secret=SECRET, round=0, client=0)
    payload = cepam.encode(x, cepam.Gaussian(sigma=1e6), secret=SECRET, round=0, client=0,
                           nonce=NONCE)
    y = cepam.decode(payload, secret=SECRET)
    assert np.all(np.isfinite(y["half"])) and y["half"].dtype == np.float32
    with pytest.raises(cepam.DecodingError, match="float16"):
        cepam.decode(payload, secret=SECRET, dtype="input")


@pytest.mark.parametrize("coder", [1, 2])
def test_a_sealed_payload_decoding_to_infinity_is_refused(coder):
    """A malicious client (holding the secret) seals a body coded at
    sigma = 1e308: its tag verifies, its values are +-inf; decode refuses it."""
    x = np.zeros(16)
    context = Context(0, 1, 0)
    body = _core.encode(x, key=cepam.keys.stream_key(SECRET, context, NONCE),
                        params=_core.Params(mechanism=1, scale=1e308, lattice=1, n=1), factor=1.0,
                        coder=coder)
    flat, structure = cepam.flatten.flatten(x)
    header = payload_format.Header(1, 1e308, coder, math.inf, context, structure, nonce=NONCE)
    hostile = seal(header, pack_sealed(1, 1, body, 0), secret=SECRET)
    with pytest.raises(cepam.FormatError, match="overflow"):
        cepam.decode(hostile, secret=SECRET)
    # float16 entries: finite in float32 (the default output), infinite once
    # cast back (sigma = 1e5).
    flat, structure = cepam.flatten.flatten(np.ones(16, np.float16))
    body = _core.encode(flat, key=cepam.keys.stream_key(SECRET, context, NONCE),
                        params=_core.Params(mechanism=1, scale=1e5, lattice=1, n=1), factor=1.0,
                        coder=coder)
    header = payload_format.Header(1, 1e5, coder, math.inf, context, structure, nonce=NONCE)
    hostile = seal(header, pack_sealed(1, 1, body, 0), secret=SECRET)
    assert np.all(np.isfinite(cepam.decode(hostile, secret=SECRET)))
    with pytest.raises(cepam.FormatError, match="overflow float16"):
        cepam.decode(hostile, secret=SECRET, dtype="input")


def test_a_codec_cannot_be_pickled_or_copied_and_hides_its_secret():
    codec = cepam.Codec(cepam.Gaussian(sigma=0.1), secret=SECRET, client=3, pad="bucket")
    for dump in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(cepam.InvalidTypeError, match="secret"):
            dump(codec)
    for text in (repr(codec), str(codec)):
        assert SECRET.hex() not in text and repr(SECRET) not in text


def test_errors_never_show_the_secret():
    payload = _encode(_update(10), ("ans", "gaussian", "Z", 1))
    messages = []
    for call in (lambda: cepam.decode(payload, secret=OTHER),
                 lambda: cepam.decode(payload[:-1], secret=SECRET),
                 lambda: cepam.decode(payload, secret=SECRET[:31]),
                 lambda: cepam.encode(np.zeros(4), cepam.Gaussian(sigma=1.0), secret=SECRET[:31],
                                      round=0, client=0),
                 lambda: cepam.encode(np.zeros(4), cepam.Gaussian(sigma=1.0), secret=SECRET,
                                      round=-1, client=0),
                 lambda: cepam.Codec(cepam.Gaussian(sigma=1.0), secret=SECRET, pad="x"),
                 lambda: cepam.inspect(payload, secret=OTHER)):
        with pytest.raises(cepam.CepamError) as info:
            call()
        messages.append(str(info.value))
    for text in messages:
        for secret in (SECRET, OTHER, SECRET[:31]):
            assert secret.hex() not in text and repr(secret) not in text


def test_cli_inspect_shows_public_fields_and_opens_with_a_secret_file(tmp_path, capsys):
    import json

    from cepam.cli import main

    payload = _encode(_update(12), ("ans", "gaussian", "E8", None), clip=1.0, pad="bucket")
    (tmp_path / "p.bin").write_bytes(payload)
    (tmp_path / "key").write_bytes(SECRET)
    (tmp_path / "other").write_bytes(OTHER)
    for name in ("key", "other"):
        (tmp_path / name).chmod(0o600)  # a secret file only its owner may read
    assert main(["inspect", str(tmp_path / "p.bin"), "--json"]) == 0
    public = json.loads(capsys.readouterr().out)
    assert "lattice" not in public and "encrypted" in public["sealed"]
    assert main(["inspect", str(tmp_path / "p.bin"), "--json", "--secret-file",
                 str(tmp_path / "key")]) == 0
    opened = json.loads(capsys.readouterr().out)
    assert opened["lattice"] == "E8" and opened["bits"]["padding"] > 0
    assert main(["inspect", str(tmp_path / "p.bin"), "--secret-file",
                 str(tmp_path / "other")]) == 1
    assert "tag does not verify" in capsys.readouterr().err


@pytest.mark.parametrize("content, hex_hint", [(SECRET.hex().encode() + b"\n", True),
                                               (SECRET.hex().upper().encode(), True),
                                               (SECRET[:16], False)])
def test_a_secret_file_not_of_32_raw_bytes_says_what_it_must_hold(tmp_path, capsys, content,
                                                                  hex_hint):
    from cepam.cli import main

    (tmp_path / "p.bin").write_bytes(_encode(_update(12), ("ans", "gaussian", "Z", 1)))
    (tmp_path / "key").write_bytes(content)
    (tmp_path / "key").chmod(0o600)
    assert main(["inspect", str(tmp_path / "p.bin"), "--secret-file",
                 str(tmp_path / "key")]) == 2
    err = capsys.readouterr().err
    assert f"holds {len(content)} bytes; a secret file must hold the 32 raw bytes" in err
    assert ("64 hex digits; convert it with" in err) == hex_hint
    if hex_hint:  # the conversion it names gives a file that works
        command = err.split("convert it with: ")[1].split(" < HEXFILE")[0]
        converted = subprocess.run(command, shell=True, input=content, capture_output=True,
                                   check=True).stdout
        assert converted == SECRET


PAD_MAX_SETTINGS = [
    ("ans", "gaussian", "auto", None), ("ans", "gaussian", "Z", 1), ("ans", "gaussian", "Z", 8),
    ("ans", "gaussian", "D4", None), ("golomb", "gaussian", "Z", 1),
    ("golomb", "gaussian", "Z", 3), ("golomb", "gaussian", "E8", None),
    ("ans", "laplace", "Z", 1), ("golomb", "laplace", "Z", 2), ("ans", "sdq", "Z", 1),
]


@pytest.mark.parametrize("setting", PAD_MAX_SETTINGS, ids=lambda s: "-".join(map(str, s)))
def test_pad_max_holds_the_hardest_updates_measured_at_the_clip(setting):
    """The sources that came closest to max_payload_bytes (bench/pad_max_margin.py):
    constant, two-valued, Gaussian and Cauchy updates at the clip norm."""
    rng = np.random.default_rng(13)
    m = 2000
    for ratio in (0.3, 3.0, 100.0):
        clip = ratio * MECHANISMS[setting[1]].std * math.sqrt(m)
        for x in (np.ones(m), np.sign(rng.normal(size=m)), rng.normal(size=m),
                  rng.standard_cauchy(m)):
            x = x * (clip / np.linalg.norm(x))
            payload = _encode(x, setting, clip=clip, pad="max")
            assert cepam.inspect(payload, secret=SECRET).padding_bits > 0


# ---------------------------------------------------------------------------
# The payload tag (format version 5): per-segment HMACs combined.
# ---------------------------------------------------------------------------

SEGMENT = 1 << 20


def reference_tag(secret: bytes, data: bytes) -> bytes:
    """docs/format.md's tag, recomputed here with hmac and hashlib alone:
    the MAC key by HKDF-SHA256 (RFC 5869), then
    t_i = HMAC(K, "cepam/seg" || u64 i || u64 len_i || segment_i) over 1 MiB
    segments and HMAC(K, "cepam/tag" || u64 L || u64 k || t_0 .. t_(k-1))[:16]."""
    import hashlib
    import hmac

    label = b"cepam/lrsuq/v1"
    prk = hmac.new(label, secret, hashlib.sha256).digest()
    key = hmac.new(prk, label + b"/mac" + b"\x01", hashlib.sha256).digest()
    segments = [data[i : i + SEGMENT] for i in range(0, len(data), SEGMENT)] or [b""]
    tags = [hmac.new(key, b"cepam/seg" + struct.pack("<QQ", i, len(seg)) + seg,
                     hashlib.sha256).digest() for i, seg in enumerate(segments)]
    outer = b"cepam/tag" + struct.pack("<QQ", len(data), len(segments)) + b"".join(tags)
    return hmac.new(key, outer, hashlib.sha256).digest()[:16]


@pytest.fixture(scope="module")
def long_payload():
    """A payload of over 3 MiB (4 MAC segments): a small update padded."""
    return _encode(_update(9), ("ans", "gaussian", "Z", 1), pad=3 * SEGMENT + 54321)


def test_the_tag_is_the_documented_construction(long_payload):
    small = _encode(_update(10), ("golomb", "gaussian", "Z", 2))
    for payload in (small, long_payload):
        assert payload[-16:] == reference_tag(SECRET, payload[:-16])
    assert len(long_payload) == 3 * SEGMENT + 54321
    mac = cepam.keys.mac_key(SECRET)
    data = np.random.default_rng(12).bytes(2 * SEGMENT + 1)
    native = cepam.keys._NATIVE_MAC_BYTES  # (up to it, the core's one-segment tag)
    for length in (0, 1, 22, 23, 86, 87, 150, native - 1, native, native + 1, SEGMENT - 1,
                   SEGMENT, SEGMENT + 1, 2 * SEGMENT, 2 * SEGMENT + 1):
        assert cepam.keys.payload_tag(mac, data[:length], threads=2) == \
            reference_tag(SECRET, data[:length]), length
    for length in (0, 23, native + 1, SEGMENT):  # the core's tag of any one segment
        assert _core.payload_tag(mac, data[:length]) == reference_tag(SECRET, data[:length])
    with pytest.raises(cepam.errors.InvalidArgumentError, match="more than one MAC segment"):
        _core.payload_tag(mac, data[: SEGMENT + 1])


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_payloads_about_the_native_tags_length_are_tagged_alike(extra):
    # Up to _NATIVE_MAC_BYTES before the tag, the core tags the payload as
    # it seals it; beyond, Python's segments: the same construction.
    x = _update(10)
    bare = _encode(x, ("ans", "gaussian", "Z", 1))
    size = cepam.keys._NATIVE_MAC_BYTES + 16 + extra
    payload = _encode(x, ("ans", "gaussian", "Z", 1), pad=size)
    assert len(payload) == size and len(bare) < size
    assert payload[-16:] == reference_tag(SECRET, payload[:-16])
    np.testing.assert_array_equal(cepam.decode(payload, secret=SECRET),
                                  cepam.decode(bare, secret=SECRET))


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_the_tag_and_payload_do_not_depend_on_threads(long_payload, threads):
    x = _update(9)
    payload = cepam.encode(x, MECHANISMS["gaussian"], secret=SECRET, round=0, client=7, dim=1,
                           coder="ans", pad=3 * SEGMENT + 54321, threads=threads, nonce=NONCE)
    assert payload == long_payload
    mac = cepam.keys.mac_key(SECRET)
    assert cepam.keys.payload_tag(mac, payload[:-16], threads=threads) == payload[-16:]
    np.testing.assert_array_equal(cepam.decode(payload, secret=SECRET, threads=threads),
                                  cepam.decode(long_payload, secret=SECRET, threads=1))


def _segments_of(payload: bytes) -> list[bytes]:
    data = payload[:-16]
    return [data[i : i + SEGMENT] for i in range(0, len(data), SEGMENT)]


def test_altered_reordered_truncated_extended_or_spliced_segments_are_refused(
        long_payload, parsers_forbidden):
    tag = long_payload[-16:]
    segs = _segments_of(long_payload)
    assert len(segs) == 4
    other = _encode(_update(11), ("ans", "gaussian", "Z", 1), pad=3 * SEGMENT + 54321, round=1)
    other_segs = _segments_of(other)
    assert all(a != b for a, b in zip(segs, other_segs))
    altered = []
    for i in range(len(segs)):  # one byte of one segment
        seg = bytearray(segs[i])
        seg[len(seg) // 2] ^= 0x01
        altered.append(b"".join(segs[:i]) + bytes(seg) + b"".join(segs[i + 1:]) + tag)
    forged = altered + [
        b"".join([segs[0], segs[2], segs[1], segs[3]]) + tag,  # reordered
        b"".join(segs[:3]) + tag,  # a whole segment dropped
        b"".join(segs[:3]) + segs[3][:-1] + tag,  # one byte short
        b"".join(segs) + b"\x00" + tag,  # extended by a byte
        b"".join(segs) + segs[3] + tag,  # extended by a segment
        b"".join(segs[:3] + [segs[2]]) + tag,  # a segment in another's place
        segs[0] + b"".join(other_segs[1:]) + tag,  # spliced, this payload's tag
        segs[0] + b"".join(other_segs[1:]) + other[-16:],  # spliced, the other's tag
        b"".join(segs) + bytes(16),  # no tag
    ]
    for payload in forged:
        with pytest.raises(cepam.AuthenticationError):
            cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(long_payload, secret=OTHER)
