"""Payloads without structure (encode(structure=False)) and decode(like=...)."""

import struct

import numpy as np
import pytest

import cepam
from cepam.payload import parse_header
from cepam.structure import BARE

from conftest import SECRET_A

MECH = cepam.Gaussian(sigma=1e-3)
RNG = np.random.default_rng(11)
UPDATE = {
    "conv.weight": RNG.normal(scale=0.01, size=(6, 1, 5, 5)).astype(np.float32),
    "conv.bias": RNG.normal(scale=0.01, size=(6,)).astype(np.float32),
    "fc.weight": RNG.normal(scale=0.01, size=(10, 96)).astype(np.float32),
}


def _encode(x, structure, **kwargs):
    return cepam.encode(x, MECH, secret=SECRET_A, round=3, client=1, clip=1.0,
                        structure=structure, **kwargs)


def test_bare_payload_decodes_to_the_template_bit_for_bit():
    full, bare = _encode(UPDATE, True), _encode(UPDATE, False)
    assert len(bare) < len(full)
    a = cepam.decode(full, secret=SECRET_A)
    b = cepam.decode(bare, secret=SECRET_A, like=UPDATE)
    assert list(b) == list(UPDATE)
    for name in UPDATE:
        assert b[name].shape == UPDATE[name].shape and b[name].dtype == np.float32
        assert np.array_equal(a[name], b[name])
    # A list template gives a list; the template's values are not read.
    zeros = [np.zeros_like(v) for v in UPDATE.values()]
    c = cepam.decode(bare, secret=SECRET_A, like=zeros)
    assert isinstance(c, list) and all(np.array_equal(x, y) for x, y in zip(c, a.values()))


def test_bare_payload_header_carries_m_only():
    bare = _encode(UPDATE, False)
    info = cepam.inspect(bare)
    assert not info.has_structure and info.as_dict()["entries"] == []
    assert info.coordinates == sum(v.size for v in UPDATE.values())
    header, _ = parse_header(bare)
    assert header.structure.container == BARE
    # The saving is the entries: names, kinds, dtypes, shapes.
    full = _encode(UPDATE, True)
    entries = sum(2 + len(n) + 3 + 8 * v.ndim for n, v in UPDATE.items())
    assert len(full) - len(bare) == pytest.approx(entries, abs=16)  # bodies may differ slightly


def test_bare_payload_needs_a_template_of_the_right_size():
    bare = _encode(UPDATE, False)
    with pytest.raises(cepam.InvalidArgumentError, match="like="):
        cepam.decode(bare, secret=SECRET_A)
    short = dict(UPDATE, **{"conv.bias": np.zeros(5, np.float32)})
    with pytest.raises(cepam.FormatError, match="coordinates"):
        cepam.decode(bare, secret=SECRET_A, like=short)
    with pytest.raises(cepam.InvalidTypeError):
        cepam.decode(bare, secret=SECRET_A, like="not a template")


def test_structured_payload_must_match_its_template():
    full = _encode(UPDATE, True)
    renamed = {f"x.{k}": v for k, v in UPDATE.items()}
    with pytest.raises(cepam.FormatError, match="does not match"):
        cepam.decode(full, secret=SECRET_A, like=renamed)
    wide = {k: v.astype(np.float64) for k, v in UPDATE.items()}
    with pytest.raises(cepam.FormatError, match="does not match"):
        cepam.decode(full, secret=SECRET_A, like=wide)
    same = cepam.decode(full, secret=SECRET_A, like=UPDATE)
    assert all(np.array_equal(same[k], v) for k, v in cepam.decode(full, secret=SECRET_A).items())


def test_container_flag_and_m_are_authenticated():
    bare = bytearray(_encode(UPDATE, False))
    flipped = bytearray(bare)
    container_offset = 4 + 1 + 1 + 1  # magic, version, mechanism, coder (format v3)
    assert flipped[container_offset] == 4
    flipped[container_offset] = 3  # container: bare -> dict
    with pytest.raises((cepam.AuthenticationError, cepam.FormatError)):
        cepam.decode(bytes(flipped), secret=SECRET_A, like=UPDATE)
    m_offset = 4 + 1 + 3 + 2 + 16 + 24  # ... container, reserved, scale, clip, context
    (m,) = struct.unpack_from("<Q", bare, m_offset)
    assert m == sum(v.size for v in UPDATE.values())
    struct.pack_into("<Q", bare, m_offset, m - 1)
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(bytes(bare), secret=SECRET_A, like=UPDATE)


def test_bare_header_with_entries_is_malformed():
    bare = _encode(UPDATE, False)
    header, offset = parse_header(bare)
    forged = bare[:offset - 4] + struct.pack("<I", 1) + bare[offset:]
    with pytest.raises(cepam.FormatError):
        parse_header(forged)


def test_codec_object_and_argument_checks():
    codec = cepam.Codec(MECH, secret=SECRET_A, client=1, clip=1.0, structure=False)
    payload = codec.encode(UPDATE, round=0)
    assert not cepam.inspect(payload).has_structure
    assert list(codec.decode(payload, like=UPDATE)) == list(UPDATE)
    with pytest.raises(cepam.InvalidTypeError):
        cepam.Codec(MECH, secret=SECRET_A, structure="no")
    with pytest.raises(cepam.InvalidTypeError):
        _encode(UPDATE, 0)
