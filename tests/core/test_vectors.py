"""Known-answer tests: ChaCha20 (RFC 8439) and ChaCha8 block functions, HKDF (RFC 5869)."""

import pytest

from cepam._core import testing as hooks
from cepam.keys import hkdf, hkdf_expand, hkdf_extract

# RFC 8439 section 2.3.2 and appendix A.1 (block function test vectors).
CHACHA_VECTORS = [
    (  # 2.3.2
        bytes(range(32)), 1, bytes.fromhex("000000090000004a00000000"),
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
    ),
    (  # A.1 test vector 1
        bytes(32), 0, bytes(12),
        "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
        "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
    ),
    (  # A.1 test vector 2
        bytes(32), 1, bytes(12),
        "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
        "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f",
    ),
    (  # A.1 test vector 3
        bytes(31) + b"\x01", 1, bytes(12),
        "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a"
        "8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0",
    ),
    (  # A.1 test vector 4
        bytes([0, 0xFF]) + bytes(30), 2, bytes(12),
        "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca"
        "13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096",
    ),
    (  # A.1 test vector 5
        bytes(32), 0, bytes(11) + b"\x02",
        "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7"
        "8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d",
    ),
]


# ChaCha8 (4 double rounds, the LRSUQ streams since format version 9):
# draft-strombergson-chacha-test-vectors-01, TC1 (all-zero 256-bit key and
# 64-bit IV), its first two blocks.  With a zero IV, the original ChaCha's
# state (64-bit counter, 64-bit IV) is RFC 8439's (32-bit counter, 96-bit
# nonce) with block counter 0 and 1 and a zero nonce.
CHACHA8_VECTORS = [
    (
        0,
        "3e00ef2f895f40d67f5bb8e81f09a5a12c840ec3ce9a7f3b181be188ef711a1e"
        "984ce172b9216f419f445367456d5619314a42a3da86b001387bfdb80e0cfe42",
    ),
    (
        1,
        "d2aefa0deaa5c151bf0adb6c01f2a5adc0fd581259f9a2aadcf20f8fd566a26b"
        "5032ec38bbc5da98ee0c6f568b872a65a08abf251deb21bb4b56e5d8821e68aa",
    ),
]


@pytest.mark.parametrize("key,counter,nonce,expected", CHACHA_VECTORS)
def test_chacha20_block_rfc8439(key, counter, nonce, expected):
    assert hooks.chacha20_block(key, counter, nonce).hex() == expected
    assert hooks.chacha20_block(key, counter, nonce, double_rounds=10).hex() == expected


@pytest.mark.parametrize("counter,expected", CHACHA8_VECTORS)
def test_chacha8_block(counter, expected):
    assert hooks.chacha20_block(bytes(32), counter, bytes(12), double_rounds=4).hex() == expected


@pytest.mark.parametrize("double_rounds", [0, 11, -1])
def test_chacha_block_refuses_other_round_counts(double_rounds):
    with pytest.raises(ValueError, match="double_rounds"):
        hooks.chacha20_block(bytes(32), 0, bytes(12), double_rounds=double_rounds)


def _words_of_blocks(key, stream, first, count):
    """Words [first, first + count) of an LRSUQ stream, from the block
    function: word w of stream s is bytes 8(w%8).. of block w//8 with nonce
    (hi, s, purpose), ChaCha8 (format version 9)."""
    import struct

    purpose = 0x4C525351
    out = []
    for w in range(first, first + count):
        block = w // 8
        nonce = struct.pack("<III", block >> 32, stream, purpose)
        data = hooks.chacha20_block(key, block & 0xFFFFFFFF, nonce, double_rounds=4)
        out.append(struct.unpack_from("<Q", data, 8 * (w % 8))[0])
    return out


def test_keystream_words_are_the_block_function():
    key = bytes(range(7, 39))
    for stream, first in [(0, 0), (1, 5), (3, 8 * 2**32 + 3), (65536, 12345)]:
        words = hooks.keystream_words(key, stream, first, 21)
        assert [int(v) for v in words] == _words_of_blocks(key, stream, first, 21)


@pytest.mark.parametrize("level", ["portable", "avx2", "avx512"])
def test_keystream_batches_carry_the_block_counter_into_the_nonce(level):
    """The SIMD kernels compute 16 consecutive blocks from one counter; where
    the batch crosses a multiple of 2^32 blocks, the counter wraps and the
    nonce word takes the carry, as the block function says (every level;
    where the CPU lacks one, CEPAM_SIMD only caps the level)."""
    import json
    import os
    import subprocess
    import sys

    key = bytes(range(3, 35))
    cases = [(2, 8 * (2**32 - 5) + 3, 300), (7, 8 * (2**33 - 9), 257), (0, 8 * (2**32 - 16), 128)]
    script = (
        "import json, sys\n"
        "from cepam._core import testing as hooks\n"
        "key = bytes(range(3, 35))\n"
        f"print(json.dumps([[int(v) for v in hooks.keystream_words(key, s, f, c)] for s, f, c in "
        f"{cases!r}]))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], env={**os.environ, "CEPAM_SIMD": level},
                         capture_output=True, text=True, check=True)
    got = json.loads(run.stdout)
    assert got == [_words_of_blocks(key, s, f, c) for s, f, c in cases]


# RFC 5869 appendix A, SHA-256 cases 1-3.
HKDF_VECTORS = [
    (
        "0b" * 22, "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9", 42,
        "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    (
        "".join(f"{i:02x}" for i in range(0x00, 0x50)),
        "".join(f"{i:02x}" for i in range(0x60, 0xB0)),
        "".join(f"{i:02x}" for i in range(0xB0, 0x100)),
        82,
        "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
        "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    (
        "0b" * 22, "", "", 42,
        "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
    ),
]


@pytest.mark.parametrize("ikm,salt,info,length,prk,okm", HKDF_VECTORS)
def test_hkdf_rfc5869(ikm, salt, info, length, prk, okm):
    ikm, salt, info = bytes.fromhex(ikm), bytes.fromhex(salt), bytes.fromhex(info)
    assert hkdf_extract(salt, ikm).hex() == prk
    assert hkdf_expand(bytes.fromhex(prk), info, length).hex() == okm
    assert hkdf(ikm, salt=salt, info=info, length=length).hex() == okm


def test_deterministic_log_and_cosine_are_accurate():
    import numpy as np

    rng = np.random.default_rng(0)
    x = np.concatenate([np.exp(rng.uniform(-745 * 0.9, 0, 200_000)), [1.0, 0.5, 2.0**-53]])
    got = hooks.det_log(x)
    ref = np.log(x)
    assert np.all(np.abs(got - ref) <= 2.5e-16 * np.maximum(1.0, np.abs(ref)))
    assert hooks.det_log(np.array([1.0]))[0] == 0.0
    t = np.concatenate([rng.uniform(0, 1, 200_000), [0.0, 0.125, 0.25, 0.375, 0.5, 0.75]])
    assert np.max(np.abs(hooks.det_cos2pi_squared(t) - np.cos(2 * np.pi * t) ** 2)) < 2e-15
