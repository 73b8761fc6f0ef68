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
                        structure=structure, nonce=bytes(16), **kwargs)  # one noise for both


def test_bare_payload_decodes_to_the_template_bit_for_bit():
    full, bare = _encode(UPDATE, True), _encode(UPDATE, False)
    assert len(bare) < len(full)
    a = cepam.decode(full, secret=SECRET_A)
    b = cepam.decode(bare, secret=SECRET_A, like=UPDATE)
    assert list(b) == list(UPDATE)
    for name in UPDATE:
        assert b[name].shape == UPDATE[name].shape and b[name].dtype == np.float32
        assert np.array_equal(a[name], b[name])
    # The template's values are not read.
    zeros = {k: np.zeros_like(v) for k, v in UPDATE.items()}
    c = cepam.decode(bare, secret=SECRET_A, like=zeros)
    assert all(np.array_equal(c[k], a[k]) for k in UPDATE)
    # A list template has no names: not the structure that was encoded.
    with pytest.raises(cepam.FormatError, match="not the structure"):
        cepam.decode(bare, secret=SECRET_A, like=list(zeros.values()))


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


def test_a_structured_mismatch_names_the_first_differing_entry():
    full = _encode(UPDATE, True)
    wide = dict(UPDATE, **{"conv.bias": UPDATE["conv.bias"].astype(np.float64)})
    with pytest.raises(cepam.FormatError, match=r"at entry 1: the payload has 'conv.bias' "
                       r"float32 of shape \(6,\), the template 'conv.bias' float64 of shape"):
        cepam.decode(full, secret=SECRET_A, like=wide)
    fewer = {k: v for k, v in UPDATE.items() if k != "fc.weight"}
    with pytest.raises(cepam.FormatError, match=r"at entry 2: the payload has 'fc.weight' "
                       r"float32 of shape \(10, 96\), the template no entry there \(it has 2\)"):
        cepam.decode(full, secret=SECRET_A, like=fewer)
    with pytest.raises(cepam.FormatError, match="the payload is a mapping, the template a list"):
        cepam.decode(full, secret=SECRET_A, like=list(UPDATE.values()))


def test_a_bare_mismatch_says_what_it_can():
    """A bare payload carries only its structure's digest: a template of
    the same size is refused without a misleading count, and one that fits
    under another buffers= choice is told so."""
    bare = _encode(SMALL, False)
    swapped = {"w": np.zeros((3, 2), np.float32), "b": np.zeros(4, np.float32)}
    with pytest.raises(cepam.FormatError) as same_size:
        cepam.decode(bare, secret=SECRET_A, like=swapped)
    assert "both have 10 coordinates" in str(same_size.value)
    assert "the template has" not in str(same_size.value)
    model = {"conv.weight": np.full((4, 3), 0.01, np.float32),
             "bn.running_mean": np.full(3, 0.02, np.float32)}
    local = cepam.encode(model, MECH, secret=SECRET_A, round=3, client=1, clip=1.0,
                         structure=False, buffers="local")
    with pytest.raises(cepam.FormatError, match="with buffers='local', not 'separate'"):
        cepam.decode(local, secret=SECRET_A, like=model)


def test_container_flag_and_m_are_authenticated():
    bare = bytearray(_encode(UPDATE, False))
    flipped = bytearray(bare)
    container_offset = 4 + 1 + 1 + 1  # magic, version, mechanism, coder (format v3)
    assert flipped[container_offset] == 4
    flipped[container_offset] = 3  # container: bare -> dict
    with pytest.raises((cepam.AuthenticationError, cepam.FormatError)):
        cepam.decode(bytes(flipped), secret=SECRET_A, like=UPDATE)
    m_offset = 4 + 1 + 3 + 2 + 16 + 24 + 16  # ... reserved, scale, clip, context, nonce (v8 on)
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


# ------------------------------------------------- a bare payload is bound to its structure

SMALL = {"w": np.arange(6, dtype=np.float32).reshape(2, 3) * 1e-3,
         "b": np.arange(4, dtype=np.float32) * 1e-3}


@pytest.mark.parametrize("template", [
    {"b": np.zeros(4, np.float32), "w": np.zeros((2, 3), np.float32)},      # keys reordered
    {"w": np.zeros((3, 2), np.float32), "b": np.zeros(4, np.float32)},      # w transposed
    {"w": np.zeros(6, np.float32), "b": np.zeros(4, np.float32)},           # w flattened
    {"w": np.zeros((2, 3), np.float64), "b": np.zeros(4, np.float32)},      # dtype changed
    {"w": np.zeros((2, 3), np.float32), "c": np.zeros(4, np.float32)},      # renamed
    {"w": np.zeros((2, 2), np.float32), "b": np.zeros(6, np.float32)},      # sizes moved
    [np.zeros((2, 3), np.float32), np.zeros(4, np.float32)],                 # no names
    np.zeros(10, np.float32),                                                # one array
], ids=["reordered", "transposed", "flattened", "dtype", "renamed", "resized", "list", "single"])
def test_a_template_of_another_structure_with_the_same_size_is_refused(template):
    payload = _encode(SMALL, False)
    with pytest.raises(cepam.FormatError, match="not the structure this bare payload"):
        cepam.decode(payload, secret=SECRET_A, like=template)
    codec = cepam.Codec(MECH, secret=SECRET_A, client=1, clip=1.0)
    with pytest.raises(cepam.FormatError, match="not the structure this bare payload"):
        codec.decode(payload, like=template)


def test_the_same_structure_from_torch_or_numpy_is_accepted():
    torch = pytest.importorskip("torch")
    payload = _encode({k: torch.from_numpy(v) for k, v in SMALL.items()}, False)
    out = cepam.decode(payload, secret=SECRET_A, like=SMALL)
    assert [k for k in out] == ["w", "b"] and out["w"].shape == (2, 3)


def test_the_binding_costs_eight_sealed_bytes():
    """The digest is in the sealed section (encrypted): the public header is
    unchanged, and the bare payload grows by 8 bytes over header + body."""
    from cepam.payload import DIGEST_BYTES, SEALED_HEADER_BYTES, pack_header
    from cepam.keys import TAG_BYTES
    from cepam.sealing import open_payload

    payload = _encode(SMALL, False)
    header, sealed = open_payload(payload, SECRET_A)
    assert DIGEST_BYTES == 8 and len(sealed.digest) == 8
    assert len(payload) == (len(pack_header(header)) + SEALED_HEADER_BYTES + 8
                            + len(sealed.body) + TAG_BYTES)
    full_header, full_sealed = open_payload(_encode(SMALL, True), SECRET_A)
    assert full_sealed.digest == b""
