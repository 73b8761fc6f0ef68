"""The native HMAC-SHA256 and HKDF-SHA256 (random/sha256.hpp) against
Python's hashlib, on both compression functions (SHA-NI and portable)."""

import hashlib
import hmac
import os
import subprocess
import sys

import numpy as np
import pytest

from cepam._native import core
from cepam.errors import InvalidArgumentError, InvalidTypeError
from cepam.keys import (FORMAT_TAG, TAIL_BYTES, Context, SecretKeys, guard_fingerprint, hkdf,
                        hkdf_expand, hkdf_extract, mac_key, payload_tag, seal_key, stream_key)


def _reference_hkdf(ikm, salt, info, length):
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    out, block = b"", b""
    for i in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
    return out[:length]


def test_hmac_and_hkdf_match_hashlib():
    rng = np.random.default_rng(0)
    for n in [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 70_000]:
        for key_len in [0, 16, 32, 64, 65, 100]:
            key, data = rng.bytes(key_len), rng.bytes(n)
            assert core.hmac_sha256(key, data) == hmac.new(key, data, hashlib.sha256).digest()
    assert core.hmac_sha256(b"k", memoryview(b"abcdef")[1:4]) == \
        hmac.new(b"k", b"bcd", hashlib.sha256).digest()
    for length in [1, 16, 32, 33, 64, 100, 8160]:
        ikm, salt, info = rng.bytes(32), rng.bytes(14), rng.bytes(45)
        want = _reference_hkdf(ikm, salt, info, length)
        assert hkdf(ikm, salt=salt, info=info, length=length) == want
        assert hkdf_expand(hkdf_extract(salt, ikm), info, length) == want
        assert hkdf(ikm, salt=b"", info=info, length=length) == _reference_hkdf(ikm, b"", info,
                                                                                 length)


def test_rfc5869_case_1():
    okm = hkdf(bytes([0x0b] * 22), salt=bytes(range(13)), info=bytes(range(0xf0, 0xfa)),
               length=42)
    assert okm.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                         "34007208d5b887185865")


def test_hkdf_length_checked():
    from cepam.errors import InvalidArgumentError

    for length in (0, 8161):
        with pytest.raises(InvalidArgumentError):
            hkdf(bytes(32), salt=b"s", info=b"i", length=length)


def test_the_key_helpers_check_their_arguments():
    """None raised pybind11's "incompatible function arguments" TypeError,
    hkdf(-1) bytes()'s ValueError (and hkdf(5) took five zero bytes),
    hkdf(2**63) OverflowError, and guard_fingerprint took b""."""
    secret, nonce = bytes(range(32)), bytes(16)
    for call in (lambda: mac_key(None), lambda: stream_key(None, Context(0, 0), nonce),
                 lambda: seal_key(None, Context(0, 0), nonce), lambda: SecretKeys(None),
                 lambda: guard_fingerprint(None), lambda: payload_tag(None, b""),
                 lambda: payload_tag(mac_key(secret), None),
                 lambda: stream_key(secret, (0, 0), nonce)):
        with pytest.raises(InvalidTypeError):
            call()
    for ikm in (-1, 2**63, 5, None, "secret"):
        with pytest.raises(InvalidTypeError, match="ikm"):
            hkdf(ikm, salt=b"", info=b"", length=32)
    for length, err in ((None, InvalidTypeError), (2.0, InvalidTypeError),
                        (2**63, InvalidArgumentError), (-1, InvalidArgumentError)):
        with pytest.raises(err, match="length"):
            hkdf(secret, salt=b"", info=b"", length=length)
        with pytest.raises(err, match="length"):
            hkdf_expand(secret, b"", length)
    with pytest.raises(InvalidTypeError, match="salt"):
        hkdf_extract(None, secret)
    for short in (b"", bytes(31)):
        with pytest.raises(InvalidArgumentError, match="32 bytes"):
            guard_fingerprint(short)
        with pytest.raises(InvalidArgumentError, match="32 bytes"):
            mac_key(short)
    assert guard_fingerprint(bytearray(secret)) == guard_fingerprint(secret)
    assert hkdf(secret, salt=b"", info=b"", length=np.int64(32)) == \
        hkdf(secret, salt=b"", info=b"", length=32)


def test_portable_compression_gives_the_same_bytes():
    code = ("import hashlib, hmac; from cepam._native import core; "
            "assert not core.testing.sha256_uses_sha_ni(); "
            "d = bytes(range(256)) * 5; "
            "assert core.hmac_sha256(b'key', d) == hmac.new(b'key', d, hashlib.sha256).digest()")
    env = dict(os.environ, CEPAM_SIMD="portable")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_a_secrets_keys_are_hkdf_of_their_labels():
    # SecretKeys extracts once and expands each key in one HMAC: the bytes
    # of RFC 5869's HKDF-SHA256 with salt FORMAT_TAG, for every label.
    secret, nonce = bytes(range(32)), bytes(range(100, 116))
    context = Context(2**64 - 1, 7, 3)
    keys = SecretKeys(secret)
    tail = context.pack() + nonce
    for got, info in [(keys.mac(), b"/mac"), (keys.stream(context, nonce), b"/stream" + tail),
                      (keys.seal(context, nonce), b"/seal" + tail)]:
        assert got == _reference_hkdf(secret, FORMAT_TAG, FORMAT_TAG + info, 32)
    assert mac_key(secret) == keys.mac()
    assert stream_key(secret, context, nonce) == keys.stream(context, nonce)
    assert seal_key(secret, context, nonce) == keys.seal(context, nonce)
    assert SecretKeys.of(keys) is keys
    # One payload's keys in one native call, kept for the same context and
    # nonce (objects, or their packed tail as a header holds it).
    assert keys.payload(context, nonce) == (keys.stream(context, nonce), keys.seal(context, nonce),
                                            keys.mac())
    assert keys.payload_at(tail) == keys.payload(context, nonce)
    assert SecretKeys(secret).payload_at(tail) == keys.payload(context, nonce)
    assert len(tail) == TAIL_BYTES
    assert SecretKeys(secret).mac() == keys.mac()
    bound = SecretKeys(secret)
    at = bound.payload_at(tail)
    bound.bind(context, nonce)  # (the objects that pack to tail: payload takes the kept keys)
    assert bound.payload(context, nonce) is at
    other = Context(2**64 - 1, 7, 4)
    assert keys.stream(other, nonce) == _reference_hkdf(
        secret, FORMAT_TAG, FORMAT_TAG + b"/stream" + other.pack() + nonce, 32)
    assert keys.seal(context, bytes(16)) == _reference_hkdf(
        secret, FORMAT_TAG, FORMAT_TAG + b"/seal" + context.pack() + bytes(16), 32)
    assert keys.stream(context, bytes(nonce)) == keys.stream(Context(2**64 - 1, 7, 3), nonce)


def test_hkdf_keys_are_hkdf_of_each_info():
    # One Extract, then each info's first Expand block: RFC 5869's bytes,
    # for salts empty (32 zero bytes), short and longer than a SHA block.
    rng = np.random.default_rng(3)
    infos = (b"", rng.bytes(1), rng.bytes(54), rng.bytes(55), rng.bytes(119), rng.bytes(300))
    for ikm, salt in [(rng.bytes(32), b""), (rng.bytes(32), FORMAT_TAG), (rng.bytes(7), rng.bytes(65)),
                      (b"", rng.bytes(64))]:
        assert core.hkdf_keys(ikm, salt=salt, infos=infos) == tuple(
            _reference_hkdf(ikm, salt, info, 32) for info in infos)
        assert core.hkdf_keys(ikm, salt=salt, infos=()) == ()
