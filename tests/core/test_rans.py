"""The rANS coder against constriction (issue 3): with the same probabilities,
our code lengths match constriction's AnsCoder within 0.1%, and they decode."""

import numpy as np
import pytest

from cepam._core import testing as hooks

constriction = pytest.importorskip("constriction")

SCALE = 1 << 24


def frequency_table(p):
    """p quantized to 24-bit frequencies, each at least 1, summing to 2^24."""
    freq = np.maximum(1, np.floor(np.asarray(p) * SCALE)).astype(np.int64)
    freq[np.argmax(freq)] += SCALE - freq.sum()
    assert freq.min() >= 1 and freq.sum() == SCALE
    return freq.astype(np.uint32)


DISTRIBUTIONS = {
    "geometric-16": 0.5 ** np.arange(1, 17),
    "uniform-256": np.ones(256),
    "skewed": np.array([0.999, 0.0005, 0.0003, 0.0002]),
    "dyadic": np.array([0.5, 0.25, 0.125, 0.125]),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_code_lengths_match_constriction(name):
    p = DISTRIBUTIONS[name] / DISTRIBUTIONS[name].sum()
    freq = frequency_table(p)
    cum = np.concatenate([[0], np.cumsum(freq)]).astype(np.uint32)
    q = freq / SCALE
    symbols = np.random.default_rng(7).choice(len(q), size=200_000, p=q).astype(np.int32)

    ours = hooks.ans_encode_intervals(cum[symbols], freq[symbols])
    coder = constriction.stream.stack.AnsCoder()
    coder.encode_reverse(symbols, constriction.stream.model.Categorical(q, perfect=False))
    theirs = coder.num_bits()
    ideal = -np.sum(np.log2(q[symbols]))

    assert abs(8 * len(ours) - theirs) <= 0.001 * theirs + 256, (8 * len(ours), theirs)
    assert 8 * len(ours) <= ideal * 1.001 + 256 + 64  # states and the last word
    decoded = hooks.ans_decode_table(ours, cum, len(symbols))
    np.testing.assert_array_equal(decoded, symbols)


@pytest.mark.parametrize("cut", ["drop-word", "extra-word", "short"])
def test_decoder_rejects_streams_that_do_not_end_where_the_encoder_did(cut):
    """A flipped bit can decode to other symbols (the payload tag catches
    that); a stream of the wrong length never decodes."""
    freq = frequency_table(np.array([0.9, 0.1]))
    cum = np.concatenate([[0], np.cumsum(freq)]).astype(np.uint32)
    symbols = np.random.default_rng(1).choice(2, size=5000, p=[0.9, 0.1])
    data = hooks.ans_encode_intervals(cum[symbols], freq[symbols])
    data = {"drop-word": data[:-4], "extra-word": data + bytes(4), "short": data[:20]}[cut]
    with pytest.raises(Exception) as info:
        hooks.ans_decode_table(data, cum, len(symbols))
    assert type(info.value).__name__ == "FormatError"


def reference_encode(start, freq):
    """rANS as rans.hpp describes it, in Python integers: four 64-bit states,
    symbol i to state i mod 4, coded last to first; the final states, then
    the 32-bit words in decoding order, little-endian."""
    low = 1 << 31
    x = [low] * 4
    words = []
    for i in reversed(range(len(start))):
        s, f = int(start[i]), int(freq[i])
        if x[i % 4] >= ((low >> 24) << 32) * f:
            words.append(x[i % 4] & 0xFFFFFFFF)
            x[i % 4] >>= 32
        x[i % 4] = ((x[i % 4] // f) << 24) + x[i % 4] % f + s
    return (b"".join(v.to_bytes(8, "little") for v in x)
            + b"".join(w.to_bytes(4, "little") for w in reversed(words)))


@pytest.mark.parametrize("kind", ["extremes", "random"])
def test_encoder_division_is_exact(kind):
    # The encoder divides in floating point and corrects by the remainder
    # (rans.cpp); the largest quotients come with freq = 1, states near 2^63
    # with the largest freq.
    rng = np.random.default_rng(7)
    n = 4099  # not a multiple of the four states
    if kind == "extremes":
        freq = rng.choice(np.array([1, 2, 3, SCALE - 1, SCALE // 2 + 1], np.uint32), n)
    else:
        freq = np.maximum(1, rng.integers(0, SCALE, n)).astype(np.uint32)
    start = (rng.random(n) * (SCALE - freq)).astype(np.uint32)
    assert hooks.ans_encode_intervals(start, freq) == reference_encode(start, freq)
