"""The bomb rule: a payload's declared size is checked against what its body
can honestly carry (at most 1024 coordinates a body bit) before the decoder
allocates or computes anything in proportion to it, and every payload the
encoder emits satisfies the rule (it pads ANS bodies that would be shorter).

Peak memory is measured in a fresh subprocess (``ru_maxrss``), so that
nothing this process allocated before counts.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cepam
from cepam.keys import TAG_BYTES
from cepam.payload import pack_header, parse_header
from cepam.sealing import open_payload
from cepam.structure import Structure

from helpers.forge import NONCE, retag

SECRET = bytes(range(32))
COORDINATES_PER_BODY_BIT = 1024
MIB = 1 << 20


def body_length(payload: bytes) -> int:
    """The length of the (sealed) body, which the rule bounds."""
    return len(open_payload(payload, SECRET)[1].body)


def min_body_bytes(m: int) -> int:
    return -(-m // (8 * COORDINATES_PER_BODY_BIT))


def redeclared(payload: bytes, m: int, secret: bytes = SECRET) -> bytes:
    """The payload with its header claiming m coordinates (one 1-D entry),
    the body unchanged, and a valid tag: what a malicious client can send."""
    header, offset = parse_header(payload)
    entry = dataclasses.replace(header.structure.entries[0], shape=(m,))
    forged = header._replace(structure=Structure(header.structure.container, (entry,)))
    data = pack_header(forged) + payload[offset:-TAG_BYTES]
    return retag(data, secret)


def most_compressible(m: int, mechanism: cepam.Mechanism, **kw) -> bytes:
    """A constant far below the noise: the shortest ANS payloads there are
    (under one fixed nonce: each coder's payload codes the same symbols)."""
    return cepam.encode(np.full(m, 1e-300), mechanism, secret=SECRET, round=0, client=0,
                        lattice="Z", dim=1, nonce=NONCE, **kw)


# Peak memory of a block of code, in a fresh interpreter: the kernel's
# high-water mark (VmHWM) reset to the current RSS first (writing 5 to
# /proc/self/clear_refs), since ru_maxrss carries the parent's peak over
# fork and exec.  Linux only.
MEASURE = """
import json, cepam
def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":"))
def measured(fn):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    try:
        result, error = fn(), None
    except cepam.CepamError as exc:
        result, error = None, str(exc)
    return result, error, (status("VmHWM") - before) * 1024
"""


def peak_memory(payload: bytes, **decode_args) -> dict:
    """Decodes payload in a fresh interpreter: the error (or None), the
    decoded size and the growth of peak RSS in bytes."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs")
    code = MEASURE + textwrap.dedent(f"""
        payload = bytes.fromhex({payload.hex()!r})
        y, error, grew = measured(lambda: cepam.decode(payload, secret={SECRET!r}, **{decode_args!r}))
        print(json.dumps({{"error": error, "size": None if y is None else int(y.size),
                           "grew": grew}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("coder", ["ans", "golomb"])
def test_a_forged_1kb_payload_declaring_2_28_coordinates_is_refused_before_allocating(coder):
    payload = redeclared(most_compressible(4096, cepam.Gaussian(sigma=1.0), coder=coder), 1 << 28)
    assert len(payload) <= 1024
    result = peak_memory(payload, max_coordinates=1 << 28)
    assert result["error"] is not None and "more than its length can carry" in result["error"]
    # A decode of 2^28 coordinates would need 1 GiB (float32) at least.
    assert result["grew"] < 4 * MIB


def test_a_forged_payload_declaring_2_40_coordinates_is_a_format_error_not_memory_error():
    payload = redeclared(most_compressible(4096, cepam.Gaussian(sigma=1.0)), 1 << 40)
    with pytest.raises(cepam.FormatError, match="length can carry"):
        cepam.decode(payload, secret=SECRET, max_coordinates=1 << 56)


def test_the_rule_is_exact_at_its_boundary():
    """A body of L bytes may declare 8192 L coordinates, not one more."""
    payload = most_compressible(4096, cepam.Gaussian(sigma=1.0))
    limit = 8 * COORDINATES_PER_BODY_BIT * body_length(payload)
    with pytest.raises(cepam.FormatError, match="length can carry"):
        cepam.decode(redeclared(payload, limit + 1), secret=SECRET, max_coordinates=1 << 56)
    # At the limit the rule passes; the body (coded for 4096) then fails
    # further on, in the entropy decoder.
    with pytest.raises(cepam.FormatError) as info:
        cepam.decode(redeclared(payload, limit), secret=SECRET, max_coordinates=1 << 56)
    assert "length can carry" not in str(info.value)


MECHANISMS = [cepam.Gaussian(sigma=1.0), cepam.Laplace(b=1.0), cepam.SDQ(step=1.0)]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("m", [1, 8192, 8193, 1 << 16, (1 << 20) + 5])
def test_the_most_compressible_payloads_are_padded_and_decode(mechanism, m):
    payload = most_compressible(m, mechanism)
    body = body_length(payload)
    assert min_body_bytes(m) <= body
    y = cepam.decode(payload, secret=SECRET)
    assert y.shape == (m,) and np.all(np.isfinite(y))
    # The same coordinates as the unpadded stream would give: the values
    # are those of the Golomb coder (the same LRSUQ symbols).
    golomb = most_compressible(m, mechanism, coder="golomb")
    np.testing.assert_array_equal(y, cepam.decode(golomb, secret=SECRET))


def test_padding_is_added_only_where_the_rule_needs_it():
    # Below 8192 coordinates a body of one byte suffices: no padding, and the
    # payload is as short as before the rule (the source model and one
    # segment: its length and four rANS states).  Larger bodies hold a segment
    # (4-byte length, 32 bytes of states) per 2^17 coordinates, already more
    # than the rule's byte per 8192: the encoder adds nothing to them either
    # (padding remains for a body the segments would leave too short).
    small = most_compressible(8192, cepam.Gaussian(sigma=1.0))
    large = most_compressible(1 << 20, cepam.Gaussian(sigma=1.0))
    assert body_length(small) < 64
    segments = (1 << 20) // (1 << 17)
    assert min_body_bytes(1 << 20) <= body_length(large) <= body_length(small) + segments * 40


def _with_last_segment_extended(payload: bytes, extra: bytes) -> bytes:
    """The payload with ``extra`` appended to its last ANS segment's stream
    (the segment's length updated), sealed and tagged again: a client's own
    forgery."""
    import struct

    from cepam.payload import pack_sealed
    from cepam.sealing import seal

    header, sealed = open_payload(payload, SECRET)
    body = bytearray(sealed.body)
    pos = cepam.inspect(payload, secret=SECRET).body_bits["model"] // 8
    while True:  # walk the segments: u32 length, then the segment
        (size,) = struct.unpack_from("<I", body, pos)
        if pos + 4 + size == len(body):
            break
        pos += 4 + size
    struct.pack_into("<I", body, pos, size + len(extra))
    return seal(header, pack_sealed(sealed.lattice, sealed.n, bytes(body) + extra, 0),
                secret=SECRET)


def test_extra_padding_words_behind_a_valid_tag_are_refused():
    payload = most_compressible(1 << 20, cepam.Gaussian(sigma=1.0))
    forged = _with_last_segment_extended(payload, bytes(64))  # 16 zero words: padding symbols
    with pytest.raises(cepam.FormatError, match="trailing data"):
        cepam.decode(forged, secret=SECRET)


@pytest.mark.parametrize("lattice,dim", [("Z", 1), ("Z", 2), ("Z", 8), ("A2", 2), ("D4", 4),
                                         ("E8", 8)])
@pytest.mark.parametrize("coder", ["ans", "golomb"])
def test_every_lattice_s_most_compressible_payload_meets_the_rule_and_decodes(lattice, dim, coder):
    m = 1 << 16
    for x in (np.full(m, 1e-300), np.zeros(m, np.float32)):
        payload = cepam.encode(x, cepam.Gaussian(sigma=100.0), secret=SECRET, round=0, client=0,
                               lattice=lattice, dim=dim, coder=coder)
        assert min_body_bytes(m) <= body_length(payload)
        assert cepam.decode(payload, secret=SECRET).shape == (m,)


def test_a_padded_payload_costs_memory_in_proportion_to_its_length():
    """The 2^24-coordinate constant: its payload (now >= 2 KiB) decodes in a
    fresh process within 64 MiB of peak memory per KiB of payload."""
    m = 1 << 24
    payload = most_compressible(m, cepam.Gaussian(sigma=1.0))
    result = peak_memory(payload)
    assert result["size"] == m and result["error"] is None
    # The float64 output itself (128 MiB) is the bulk of it.
    assert 8 * m <= result["grew"] <= 64 * MIB * len(payload) / 1024


@pytest.mark.parametrize("offset", [-1, -4, -9])
def test_a_corrupted_padding_word_is_refused(offset):
    payload = most_compressible(1 << 20, cepam.Gaussian(sigma=1.0))
    data = bytearray(payload[:-TAG_BYTES])
    data[offset] ^= 0x10  # in the last words of the stream: padding symbols
    data = bytes(data)
    with pytest.raises(cepam.FormatError, match="entropy-coded body"):
        cepam.decode(retag(data, SECRET), secret=SECRET)
