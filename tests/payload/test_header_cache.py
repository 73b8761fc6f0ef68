"""parse_header keeps the structures it has built (cepam.payload._entries):
a header whose entries are the bytes of one parsed before, under the same
container, m and count, takes that structure without reading them again.
The cache must never change a parse: every header, hostile ones included,
parses to the same header (or the same error) with the cache warm as with
it empty."""

from __future__ import annotations

import random

import numpy as np
import pytest

import cepam
from cepam import payload as payload_format
from cepam.errors import FormatError

from helpers.forge import RawPayload
from helpers.hostile import BASES

SECRET = bytes(range(32))


def _outcome(data: bytes) -> object:
    try:
        header, offset = payload_format.parse_header(data)
    except FormatError as e:
        return ("FormatError", str(e))
    return header, offset


def _cold(data: bytes) -> object:
    payload_format._PARSED.clear()
    return _outcome(data)


@pytest.mark.parametrize("name", ["golomb-dict-n2", "ans-dict-n2", "ans-gauss-n2-m300"])
def test_a_warm_cache_parses_every_flip_and_truncation_of_a_header_as_a_cold_one(name):
    payload = BASES[name]
    end = RawPayload.parse(payload).header_len()
    rng = random.Random(7)
    variants = [payload[:cut] + payload[cut + 1:] for cut in range(end)]  # a byte less
    variants += [payload[:cut] + bytes(16) for cut in range(end)]  # cut, then a short tail
    variants += [payload[:cut] for cut in range(end + 24)]  # cut: the header in the tag's place
    for bit in range(8 * end):
        flipped = bytearray(payload)
        flipped[bit // 8] ^= 1 << (bit % 8)
        variants.append(bytes(flipped))
    variants += [bytes(rng.getrandbits(8) if rng.random() < 0.01 else b for b in payload)
                 for _ in range(200)]
    for data in variants:
        cold = _cold(data)
        _outcome(payload)  # the original's structure cached
        assert _outcome(data) == cold
        assert _outcome(data) == cold  # (and with the variant's own cached, if it parsed)


def test_a_servers_payloads_share_their_structure_object():
    x = {"a.weight": np.ones((3, 4), np.float32), "b.bias": np.ones(5, np.float32)}
    mech = cepam.Gaussian(sigma=0.1)
    first, second = (cepam.encode(x, mech, secret=SECRET, round=r, client=1, clip=10.0)
                     for r in (1, 2))
    h1, _ = payload_format.parse_header(first)
    h2, _ = payload_format.parse_header(second)
    assert h1.structure is h2.structure and h1.context != h2.context
    y = {"a.weight": np.ones((4, 3), np.float32), "b.bias": np.ones(5, np.float32)}
    third = cepam.encode(y, mech, secret=SECRET, round=3, client=1, clip=10.0)
    h3, _ = payload_format.parse_header(third)  # the same m, container and count
    assert [e.shape for e in h3.structure.entries] == [(4, 3), (5,)]
    assert cepam.decode(third, secret=SECRET)["a.weight"].shape == (4, 3)


def _kept_bytes() -> int:
    return sum(len(raw) for raw, _ in payload_format._PARSED.values())


def test_the_cache_is_bounded_in_structures_and_bytes(monkeypatch):
    mech = cepam.Gaussian(sigma=0.1)
    for m in range(1, 3 * payload_format._PARSED_KEYS):
        payload_format.parse_header(cepam.encode(np.ones(m, np.float32), mech, secret=SECRET,
                                                 round=m, client=1, clip=10.0))
        assert len(payload_format._PARSED) <= payload_format._PARSED_KEYS
    monkeypatch.setattr(payload_format, "_PARSED_BYTES", 2000)
    payload_format._PARSED.clear()
    sizes = []
    for count in range(1, 120, 3):  # dicts of count entries, 26 to 28 bytes an entry
        x = {f"layer{i}.weight": np.ones(2, np.float32) for i in range(count)}
        payload = cepam.encode(x, mech, secret=SECRET, round=count, client=1, clip=10.0)
        header, offset = payload_format.parse_header(payload)
        size = offset - payload_format._FIXED.size  # the entries' bytes
        sizes.append(size)
        assert _kept_bytes() <= 2000
        kept = [s for _, s in payload_format._PARSED.values()]
        assert any(s is header.structure for s in kept) == (size <= 2000), size
    assert min(sizes) < 2000 < max(sizes)
