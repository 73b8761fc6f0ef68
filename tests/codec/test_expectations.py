"""A server enforces the noise its accountant assumes: decoding with
expectations refuses an authentic payload encoded with other settings."""

import math
import pickle

import warnings

import numpy as np
import pytest

import cepam

from conftest import SECRET_A, SECRET_B

X = np.random.default_rng(0).normal(scale=1e-2, size=64).astype(np.float32)
G = cepam.Gaussian(sigma=1e-3)


def enc(mechanism=G, *, round=0, client=4, clip=1.0, secret=SECRET_A):
    return cepam.encode(X, mechanism, secret=secret, round=round, client=client, clip=clip)


def test_error_class_and_attributes():
    assert issubclass(cepam.UnexpectedPayloadError, cepam.CepamError)
    assert issubclass(cepam.UnexpectedPayloadError, ValueError)
    assert not issubclass(cepam.UnexpectedPayloadError, cepam.FormatError)
    err = cepam.UnexpectedPayloadError("client", 4, 3)
    assert (err.field, err.expected, err.actual) == ("client", 4, 3)
    again = pickle.loads(pickle.dumps(err))
    assert (again.field, again.expected, again.actual, str(again)) == \
        ("client", 4, 3, str(err))


@pytest.mark.parametrize("payload_kw,expect,field", [
    (dict(mechanism=cepam.Laplace(b=1e-3)), dict(expect_mechanism=G), "mechanism"),
    (dict(mechanism=cepam.Gaussian(sigma=1e-4)), dict(expect_mechanism=G), "mechanism"),
    (dict(mechanism=cepam.SDQ(step=1e-3)), dict(expect_mechanism=cepam.Laplace(b=1e-3)),
     "mechanism"),
    (dict(clip=2.0), dict(expect_clip=1.0), "clip"),
    (dict(clip=None), dict(expect_clip=1.0), "clip"),
    (dict(client=3), dict(expect_client=4), "client"),
    (dict(round=7), dict(expect_round=6), "round"),
], ids=["mechanism-law", "mechanism-scale", "sdq-for-laplace", "clip", "no-clip", "client",
        "round"])
def test_decode_refuses_each_unexpected_field(payload_kw, expect, field):
    payload = enc(**payload_kw)
    with pytest.raises(cepam.UnexpectedPayloadError, match=field) as info:
        cepam.decode(payload, secret=SECRET_A, **expect)
    assert info.value.field == field
    assert info.value.expected == next(iter(expect.values()))
    # without the expectation the same payload decodes
    assert cepam.decode(payload, secret=SECRET_A).shape == X.shape


def test_matching_expectations_decode():
    payload = enc(round=2)
    y = cepam.decode(payload, secret=SECRET_A, expect_mechanism=cepam.Gaussian(sigma=1e-3),
                     expect_clip=1.0, expect_client=4, expect_round=2)
    assert y.shape == X.shape and float(np.std(y - X)) < 2e-3


def test_authentication_comes_first():
    """A forged payload is an AuthenticationError, whatever it declares."""
    payload = enc(cepam.Laplace(b=5.0), client=9, secret=SECRET_B)
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(payload, secret=SECRET_A, expect_mechanism=G, expect_client=4)


def test_server_codec_enforces_its_settings():
    """The issue's example: a Laplace(b=1) server for client 4 got a Gaussian
    sigma = 1e-3 payload from client 3 and decoded it."""
    server = cepam.Codec(cepam.Laplace(b=1.0), secret=SECRET_A, client=4, clip=1.0)
    with pytest.raises(cepam.UnexpectedPayloadError) as info:
        server.decode(enc(G, client=3))
    assert info.value.field == "mechanism"
    assert info.value.actual == G and info.value.expected == cepam.Laplace(b=1.0)
    with pytest.raises(cepam.UnexpectedPayloadError, match="client"):
        server.decode(enc(cepam.Laplace(b=1.0), client=3))
    with pytest.raises(cepam.UnexpectedPayloadError, match="clip"):
        server.decode(enc(cepam.Laplace(b=1.0), clip=5.0))
    ok = enc(cepam.Laplace(b=1.0), round=3)
    assert server.decode(ok).shape == X.shape
    assert server.decode(ok, round=3).shape == X.shape
    with pytest.raises(cepam.UnexpectedPayloadError, match="round") as info:
        server.decode(ok, round=4)
    assert (info.value.expected, info.value.actual) == (4, 3)
    # The round's expectation is kept for the next payload of that round
    # only: each round asked for is enforced, whatever came before.
    later = enc(cepam.Laplace(b=1.0), round=4)
    for payload, asked, fine in [(later, 4, True), (ok, 4, False), (ok, np.uint64(3), True),
                                 (later, 3, False), (later, np.int64(4), True), (ok, 3, True)]:
        if fine:
            assert server.decode(payload, round=asked).shape == X.shape
        else:
            with pytest.raises(cepam.UnexpectedPayloadError, match="round"):
                server.decode(payload, round=asked)
    with pytest.raises(cepam.InvalidTypeError):
        server.decode(ok, round=True)
    # The mechanism compared by code and scale: another scale is refused.
    with pytest.raises(cepam.UnexpectedPayloadError, match="mechanism"):
        server.decode(enc(cepam.Laplace(b=1.0 + 2**-52), round=3), round=3)


def test_server_codec_without_clip_accepts_any_clip_but_none():
    server = cepam.Codec(G, secret=SECRET_A, client=4)
    for clip in (0.5, 100.0):
        assert server.decode(enc(clip=clip)).shape == X.shape
    with pytest.raises(cepam.UnexpectedPayloadError, match="allow_unclipped") as info:
        server.decode(enc(clip=None))
    assert info.value.field == "clip" and info.value.actual is None
    lenient = cepam.Codec(G, secret=SECRET_A, client=4, allow_unclipped=True)
    assert lenient.decode(enc(clip=None)).shape == X.shape


def test_encoding_without_a_clip_warns_once_per_codec():
    codec = cepam.Codec(G, secret=SECRET_A, client=4)
    with pytest.warns(cepam.PrivacyWarning, match="no differential-privacy guarantee"):
        codec.encode(X, round=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cepam.PrivacyWarning)
        codec.encode(X, round=1)  # once per codec
        cepam.Codec(G, secret=SECRET_A, client=4, clip=1.0).encode(X, round=0)
    with pytest.warns(cepam.PrivacyWarning):
        cepam.encode(X, G, secret=SECRET_A, round=0, client=4)


def test_lattice_and_coder_are_the_senders_choice():
    """Only what the accountant depends on is enforced."""
    server = cepam.Codec(G, secret=SECRET_A, client=4, clip=1.0, lattice="Z", dim=1)
    for kw in (dict(lattice="E8"), dict(dim=3), dict(coder="golomb")):
        payload = cepam.encode(X, G, secret=SECRET_A, round=0, client=4, clip=1.0, **kw)
        assert server.decode(payload).shape == X.shape


def test_clip_compared_exactly():
    payload = enc(clip=1.0)
    with pytest.raises(cepam.UnexpectedPayloadError):
        cepam.decode(payload, secret=SECRET_A, expect_clip=math.nextafter(1.0, 2.0))


# ------------------------------------------- one definition (cepam.expected.Expected)

def test_one_expectation_checks_every_header_field_the_strategy_enforces():
    from cepam.expected import Expected
    from cepam.payload import parse_header

    payload = cepam.encode(X, G, secret=SECRET_A, round=3, client=4, message=9, clip=1.0)
    header, _ = parse_header(payload)
    Expected.checked(mechanism=G, clip=1.0, client=4, round=3, message=9,
                     coordinates=X.size, clipped=True).enforce(header)  # all as encoded
    for field, value in [("mechanism", cepam.Gaussian(sigma=2e-3)), ("clip", 2.0),
                         ("client", 5), ("round", 4), ("message", 8),
                         ("coordinates", X.size + 1)]:
        with pytest.raises(cepam.UnexpectedPayloadError) as caught:
            Expected.checked(**{field: value}).enforce(header)
        assert caught.value.field == field and caught.value.expected == value


def test_an_expectation_is_checked_like_the_encoders_arguments():
    from cepam.expected import Expected

    with pytest.raises(cepam.InvalidArgumentError):
        Expected.checked(message=-1)
    with pytest.raises(cepam.InvalidTypeError):
        Expected.checked(coordinates=1.5)
    with pytest.raises(cepam.InvalidArgumentError):
        Expected.checked(clip=0.0)


def test_bare_payloads_are_told_from_their_prefix_alone():
    from cepam.payload import is_bare

    structured = enc()
    bare = cepam.encode(X, G, secret=SECRET_A, round=0, client=4, clip=1.0, structure=False)
    assert is_bare(bare) and not is_bare(structured)
    assert not is_bare(bare[:7]) and not is_bare(b"")
    assert is_bare(memoryview(bare))


def test_every_difference_is_listed_in_order():
    from cepam.expected import Expected
    from cepam.payload import parse_header

    payload = cepam.encode(X, G, secret=SECRET_A, round=3, client=4, clip=1.0)
    header, _ = parse_header(payload)
    wrong = Expected.checked(mechanism=cepam.Gaussian(sigma=2e-3), clip=2.0, client=4,
                             round=5).differences(header)
    assert wrong == [("mechanism", cepam.Gaussian(sigma=2e-3), G), ("clip", 2.0, 1.0),
                     ("round", 5, 3)]
    assert Expected.checked(client=4, round=3).differences(header) == []
