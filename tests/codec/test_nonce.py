"""Format version 8: a fresh nonce in every payload, so two encodes never share
a keystream, a dither or a latent scale by accident (issue 40, item 1).

Under one secret, round and client, two updates x1, x2 give payloads whose
sealed sections are encrypted under different keystreams and whose noises
are independent: y1 - y2 = (x1 - x2) + (z1 - z2) with z1, z2 independent, so
where the update is a tenth of sigma, y1 - y2 is nearly all noise.  Had the
two shared their dithers and latent scales (format version 7), z1 - z2 would
be nearly zero and y1 - y2 would be x1 - x2 (correlation 0.994, issue 40).
"""

import numpy as np
import pytest

import cepam
from cepam.sealing import open_payload

SECRET = bytes(range(50, 82))
SIGMA = 0.1
M = 20_000  # correlations of independent noises: standard deviation 1/sqrt(M) = 0.007
MECH = cepam.Gaussian(sigma=SIGMA)
# Where the nonce sits in the public header: after magic, version, mechanism,
# coder, container, reserved, scale and clip (26 bytes) and the context (24).
NONCE_AT = 50


def updates():
    """Two different updates of rms sigma / 10 (fixed seeds)."""
    rng = np.random.default_rng(40)
    return [(rng.standard_normal(M) * SIGMA / 10).astype(np.float64) for _ in range(2)]


def sealed_section(payload):
    """The ciphertext between the public header and the tag."""
    offset = cepam.inspect(payload).header_bits // 8
    return np.frombuffer(payload[offset:-16], np.uint8)


def plaintext(payload):
    """The sealed section in clear (lattice, n, padding, body)."""
    _, sealed = open_payload(payload, SECRET)
    from cepam.payload import pack_sealed
    return np.frombuffer(bytes(pack_sealed(sealed.lattice, sealed.n, sealed.body,
                                           sealed.padding)), np.uint8)


def assert_independent(p1, p2, x1, x2, *, secret=SECRET):
    """p1, p2 encode x1, x2: their ciphertexts' XOR is not their plaintexts'
    (no shared keystream), and the noises of their decodes are independent
    (y1 - y2 nearly uncorrelated with x1 - x2, each noise uncorrelated with
    the other)."""
    c1, c2 = sealed_section(p1), sealed_section(p2)
    q1, q2 = plaintext(p1), plaintext(p2)
    n = min(len(c1), len(c2))
    assert not np.array_equal(c1[:n] ^ c2[:n], q1[:n] ^ q2[:n])
    # Not even a prefix of the keystreams agrees (a shared keystream would
    # make every byte agree): the XORs agree in about 1/256 of the bytes.
    assert np.mean((c1[:n] ^ c2[:n]) == (q1[:n] ^ q2[:n])) < 0.02
    y1 = cepam.decode(p1, secret=secret)
    y2 = cepam.decode(p2, secret=secret)
    y1 = np.ravel(y1["w"] if isinstance(y1, dict) else y1).astype(np.float64)
    y2 = np.ravel(y2["w"] if isinstance(y2, dict) else y2).astype(np.float64)
    x1 = np.ravel(x1).astype(np.float64)
    x2 = np.ravel(x2).astype(np.float64)
    if not np.array_equal(x1, x2):
        assert abs(np.corrcoef(y1 - y2, x1 - x2)[0, 1]) < 0.2
    assert abs(np.corrcoef(y1 - x1, y2 - x2)[0, 1]) < 0.05
    # Each noise has the mechanism's scale: nothing cancels between them.
    assert np.std((y1 - x1) - (y2 - x2)) == pytest.approx(SIGMA * np.sqrt(2), rel=0.05)


@pytest.mark.parametrize("coder", ["ans", "golomb"])
def test_two_module_level_encodes_of_one_context_share_no_randomness(coder):
    x1, x2 = updates()
    kw = dict(secret=SECRET, round=3, client=7, clip=10.0, coder=coder)
    p1, p2 = cepam.encode(x1, MECH, **kw), cepam.encode(x2, MECH, **kw)
    assert cepam.inspect(p1).nonce != cepam.inspect(p2).nonce
    assert_independent(p1, p2, x1, x2)


def test_the_same_update_twice_gives_two_independent_noises():
    x, _ = updates()
    kw = dict(secret=SECRET, round=3, client=7, clip=10.0)
    p1, p2 = cepam.encode(x, MECH, **kw), cepam.encode(x, MECH, **kw)
    assert p1 != p2
    assert_independent(p1, p2, x, x)


def test_two_codecs_of_one_client_share_no_randomness():
    x1, x2 = updates()
    first = cepam.Codec(MECH, secret=SECRET, client=7, clip=10.0)
    second = cepam.Codec(MECH, secret=SECRET, client=7, clip=10.0)  # knows nothing of the first
    p1, p2 = first.encode(x1, round=3), second.encode(x2, round=3)
    assert_independent(p1, p2, x1, x2)
    # The server's codec decodes both; each client codec still refuses its own repeat.
    server = cepam.Codec(MECH, secret=SECRET, client=7, clip=10.0)
    np.testing.assert_array_equal(server.decode(p1), cepam.decode(p1, secret=SECRET))
    with pytest.raises(cepam.ContextReuseError):
        first.encode(x2, round=3)


def test_a_nonce_makes_payloads_deterministic_and_is_checked():
    x, _ = updates()
    kw = dict(secret=SECRET, round=3, client=7, clip=10.0)
    nonce = bytes(range(16))
    p1 = cepam.encode(x, MECH, nonce=nonce, **kw)
    assert p1 == cepam.encode(x, MECH, nonce=bytearray(nonce), **kw)
    assert cepam.inspect(p1).nonce == nonce
    assert p1.find(nonce) == NONCE_AT
    codec = cepam.Codec(MECH, secret=SECRET, client=7, clip=10.0)
    assert codec.encode(x, round=3, nonce=nonce) == p1
    assert cepam.encode(x, MECH, nonce=bytes(16), **kw) != p1
    with pytest.raises(cepam.InvalidArgumentError, match="16 bytes"):
        cepam.encode(x, MECH, nonce=bytes(15), **kw)
    with pytest.raises(cepam.InvalidTypeError, match="nonce"):
        cepam.encode(x, MECH, nonce="0" * 16, **kw)
    with pytest.raises(cepam.InvalidArgumentError, match="16 bytes"):
        cepam.Codec(MECH, secret=SECRET, client=8).encode(x, round=0, nonce=bytes(17))


@pytest.mark.parametrize("position", [0, 7, 15])
def test_a_tampered_nonce_fails_authentication(position):
    x, _ = updates()
    payload = bytearray(cepam.encode(x, MECH, secret=SECRET, round=3, client=7, clip=10.0))
    payload[NONCE_AT + position] ^= 0x01
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(bytes(payload), secret=SECRET)
    with pytest.raises(cepam.AuthenticationError):
        cepam.inspect(bytes(payload), secret=SECRET)


def test_a_version_7_payload_is_refused_by_version():
    """A version 7 payload (no nonce) is not read as version 8: the version byte
    is checked before the length and the tag."""
    payload = bytearray(cepam.encode(updates()[0][:10], MECH, secret=SECRET, round=0, client=0,
                                     clip=10.0))
    payload[4] = 7
    del payload[NONCE_AT:NONCE_AT + 16]  # a version 7 header has no nonce
    for data in (bytes(payload), bytes(payload[:70])):
        with pytest.raises(cepam.FormatError, match="version 7"):
            cepam.decode(data, secret=SECRET)
        with pytest.raises(cepam.FormatError, match="version 7"):
            cepam.inspect(data)
