"""A ``cepam.Codec``'s settings: checked once when it is built, fixed
afterwards (read-only attributes), the same payloads as ``cepam.encode``
with the same settings."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import cepam
import cepam.encoding

from conftest import SECRET_A

X = np.linspace(-0.5, 0.5, 64, dtype=np.float32)
G = cepam.Gaussian(sigma=0.1)

ATTRIBUTES = ("mechanism", "client", "lattice", "dim", "prefer", "clip", "coder", "non_float",
              "pad", "structure", "buffers", "ties", "threads", "allow_unclipped")


def _codec(**kw) -> cepam.Codec:
    return cepam.Codec(G, secret=SECRET_A, client=3, **kw)


def test_the_attributes_are_the_settings_as_checked():
    codec = _codec(lattice="D4", clip=2, coder="golomb", pad="bucket", structure=False,
                   threads=2, buffers="joint", ties={"b": "a"}, allow_unclipped=True)
    assert (codec.mechanism, codec.client, codec.lattice, codec.dim) == (G, 3, "D4", 4)
    assert codec.clip == 2.0 and isinstance(codec.clip, float)
    assert (codec.coder, codec.non_float, codec.pad, codec.structure) == (
        "golomb", "skip", "bucket", False)
    assert (codec.buffers, codec.threads, codec.allow_unclipped) == ("joint", 2, True)
    assert codec.ties == (("b", "a"),)
    default = _codec()
    assert (default.lattice, default.dim, default.prefer, default.clip, default.coder) == (
        "auto", None, "balanced", None, "ans")
    assert default.threads is None and default.allow_unclipped is False
    assert _codec(dim=3).lattice == "Z" and _codec(dim=3).dim == 3


@pytest.mark.parametrize("name", ATTRIBUTES)
def test_every_attribute_is_read_only(name):
    codec = _codec(clip=1.0)
    before = getattr(codec, name)
    with pytest.raises(AttributeError, match=rf"cannot set '{name}': a cepam.Codec's settings "
                                             r"are fixed when it is built"):
        setattr(codec, name, "junk")
    with pytest.raises(AttributeError, match="fixed when it is built"):
        delattr(codec, name)
    assert getattr(codec, name) == before


def test_no_attribute_can_be_added_or_replaced():
    """Not a new attribute, nor the private state: what a codec encodes with
    is what it was built with."""
    codec = _codec(clip=1.0)
    for name in ("secret", "_settings", "_used", "_coder"):
        with pytest.raises(AttributeError, match="fixed when it is built"):
            setattr(codec, name, None)
    assert not hasattr(codec, "_coder") and not hasattr(codec, "__dict__")


def test_a_setting_that_did_not_take_no_longer_seems_to():
    """Before: setting codec.lattice was ignored while codec.coder took
    effect.  Now neither can be set, and the payload is the codec's."""
    codec = _codec(clip=1.0, lattice="Z", coder="ans")
    for name, value in (("lattice", "E8"), ("coder", "golomb")):
        with pytest.raises(AttributeError):
            setattr(codec, name, value)
    info = cepam.inspect(codec.encode(X, round=0), secret=SECRET_A)
    assert (info.lattice, info.coder) == ("Z", "ans")


def test_the_settings_are_checked_once_not_at_each_call(monkeypatch):
    checks = []
    real = cepam.encoding._check_coder
    monkeypatch.setattr(cepam.encoding, "_check_coder",
                        lambda coder: checks.append(coder) or real(coder))
    codec = _codec(clip=1.0, coder="golomb")
    assert checks == ["golomb"]
    payloads = [codec.encode(X, round=r) for r in range(3)]
    for r, payload in enumerate(payloads):
        codec.decode(payload, round=r)
    assert checks == ["golomb"]
    cepam.encode(X, G, secret=SECRET_A, round=0, client=3, clip=1.0, coder="golomb")
    assert checks == ["golomb"] * 2  # cepam.encode checks its own arguments, once


@pytest.mark.parametrize("kw", [dict(), dict(lattice="E8", coder="golomb", pad="max"),
                                dict(lattice="auto", prefer="bits", structure=False)])
def test_a_codec_sends_what_encode_sends(kw):
    nonce = bytes(range(16))
    by_codec = _codec(clip=1.0, threads=2, **kw).encode(X, round=5, nonce=nonce)
    assert by_codec == cepam.encode(X, G, secret=SECRET_A, round=5, client=3, clip=1.0,
                                    nonce=nonce, **kw)


def test_threads_left_to_the_default_are_read_at_each_call(monkeypatch):
    codec = _codec(clip=1.0)  # threads=None: CEPAM_THREADS, else the cores, at each call
    monkeypatch.setenv("CEPAM_THREADS", "zero")
    with pytest.raises(cepam.InvalidArgumentError, match="CEPAM_THREADS"):
        codec.encode(X, round=0)
    monkeypatch.setenv("CEPAM_THREADS", "2")
    assert codec.decode(codec.encode(X, round=0), round=0).shape == X.shape


def test_a_codec_still_cannot_be_pickled_or_copied_and_hides_its_secret():
    codec = _codec(clip=1.0)
    for attempt in (lambda: pickle.dumps(codec), lambda: copy.copy(codec),
                    lambda: copy.deepcopy(codec)):
        with pytest.raises(cepam.InvalidTypeError, match="cannot be pickled or copied"):
            attempt()
    assert SECRET_A.hex() not in repr(codec) and repr(SECRET_A) not in repr(codec)
