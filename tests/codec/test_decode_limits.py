"""Decode limits from what the server expects: with ``like=``, a payload that
declares more coordinates than the template holds is refused after its tag
verifies and before anything is decoded (the bomb: an authentic payload, made
with the secret, declaring millions of coordinates)."""

import numpy as np
import pytest

import cepam
from cepam import codec as codec_module
from cepam import decoding

from conftest import SECRET_A

G = cepam.Gaussian(sigma=1.0)
BOMB_COORDINATES = 1 << 22
SMALL = np.zeros(1000, np.float32)


@pytest.fixture(scope="module")
def bombs():
    """Authentic payloads of 2^22 zeros (about 10 KB each), with and without
    their structure."""
    zeros = np.zeros(BOMB_COORDINATES, np.float32)
    return {structure: cepam.encode(zeros, G, secret=SECRET_A, round=0, client=1, clip=1.0,
                                    structure=structure)
            for structure in (True, False)}


@pytest.fixture
def no_native_decode(monkeypatch):
    """Fails the test if the native decoder is reached."""
    def refuse(*args, **kwargs):
        raise AssertionError("the native decoder was called")

    monkeypatch.setattr(decoding._core, "decode", refuse)


def test_a_bomb_is_refused_before_decoding_with_a_small_template(bombs, no_native_decode):
    # A bare payload by its declared size; a structured one by its header's
    # entries against the template's (the first that differs named).
    with pytest.raises(cepam.FormatError,
                       match=rf"declares {BOMB_COORDINATES} coordinates, more than the "
                             r"template's size \(like=\) 1000: refused before decoding"):
        cepam.decode(bombs[False], secret=SECRET_A, like=SMALL)
    with pytest.raises(cepam.FormatError, match=rf"shape \({BOMB_COORDINATES},\).*\(1000,\)"):
        cepam.decode(bombs[True], secret=SECRET_A, like=SMALL)


def test_a_server_codec_takes_the_limit_from_its_template(bombs, no_native_decode):
    server = cepam.Codec(G, secret=SECRET_A, client=1, clip=1.0)
    with pytest.raises(cepam.FormatError, match=r"template's size \(like=\) 1000"):
        server.decode(bombs[False], like=SMALL)
    with pytest.raises(cepam.FormatError, match=r"template's size \(like=\) 6"):
        server.decode(bombs[False], like={"w": np.zeros((2, 3), np.float32),
                                          "steps": np.zeros(4, np.int64)})  # ints: not coded


def test_an_explicit_limit_overrides_the_template(bombs, no_native_decode):
    with pytest.raises(cepam.FormatError, match=r"more than max_coordinates 10\b"):
        cepam.decode(bombs[True], secret=SECRET_A, like=np.zeros(BOMB_COORDINATES, np.float32),
                     max_coordinates=10)


def test_a_template_of_the_payloads_size_decodes():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    payload = cepam.encode(x, G, secret=SECRET_A, round=0, client=1, clip=100.0,
                           structure=False)
    assert cepam.decode(payload, secret=SECRET_A, like=SMALL).shape == (1000,)


def test_a_bare_decode_accepts_the_bomb_up_to_the_default(bombs):
    """Without a template the default is 2^28 coordinates (docs/guide/security.md)."""
    assert codec_module.DEFAULT_MAX_COORDINATES == 1 << 28
    assert cepam.decode(bombs[True], secret=SECRET_A).shape == (BOMB_COORDINATES,)
    with pytest.raises(cepam.FormatError, match=r"more than max_coordinates 4194303"):
        cepam.decode(bombs[True], secret=SECRET_A, max_coordinates=BOMB_COORDINATES - 1)


def test_ties_do_not_lower_the_limit():
    """A template whose entries are tied still admits a payload that codes
    them apart (an encoder that did not know the tie): the limit counts
    every entry."""
    w = np.ones(8, np.float32)
    update = {"a": w * 0.5, "b": w * 0.25}
    payload = cepam.encode(update, G, secret=SECRET_A, round=0, client=1, clip=10.0)
    shared = np.zeros(8, np.float32)
    out = cepam.decode(payload, secret=SECRET_A, like={"a": shared, "b": shared})
    assert set(out) == {"a", "b"}
