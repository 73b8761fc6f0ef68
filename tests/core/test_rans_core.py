"""The rANS encoder's arithmetic shared by the CPU and the GPU
(csrc/coding/rans_core.hpp): streams coded the way the CUDA kernel codes an
ANS body's segments (one independent stream each, flat caller-provided
buffers) are the CPU coder's bytes, bit for bit, and decode.  The GPU run of
the same kernel is compared in tests/core/test_cuda.py."""

import numpy as np
import pytest

from cepam._core import testing as hooks
from cepam.errors import InvalidArgumentError

SCALE = 1 << 24


def _symbols(rng, count, kind):
    """(start, freq) intervals of `count` symbols of a model of `kind`."""
    if kind == "uniform-raw":  # raw 16-bit values, as the coder's raw bits
        start = rng.integers(0, 1 << 16, count).astype(np.uint32) << 8
        return start, np.full(count, 1 << 8, np.uint32)
    if kind == "geometric":
        p = 0.5 ** np.arange(1, 25)
    elif kind == "skewed":  # long runs of frequent symbols, rare escapes of freq 1
        p = np.array([1.0 - 3e-7, 1e-7, 1e-7, 1e-7])
    else:  # "random": a fresh random table
        p = rng.random(rng.integers(2, 300)) ** 4
    p = p / p.sum()
    freq = np.maximum(1, np.floor(p * SCALE)).astype(np.int64)
    freq[np.argmax(freq)] += SCALE - freq.sum()
    cum = np.concatenate([[0], np.cumsum(freq)])
    k = rng.choice(len(freq), size=count, p=freq / SCALE)
    return cum[k].astype(np.uint32), freq[k].astype(np.uint32)


@pytest.mark.parametrize("kind", ["uniform-raw", "geometric", "skewed", "random"])
@pytest.mark.parametrize("seed", range(3))
def test_segments_coded_as_on_the_gpu_are_the_cpu_streams(kind, seed):
    rng = np.random.default_rng(seed)
    # Segments of every length modulo the four states, empty ones, and one
    # as long as an ANS body's segment of Z (2^17 coordinates and their H).
    counts = [0, 1, 2, 3, 4, 5, 7, 8, 1000, 0, 4099] + list(rng.integers(0, 3000, 6))
    if seed == 0:
        counts.append((1 << 17) + (1 << 17) // 8)
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64)
    start, freq = _symbols(rng, int(first[-1]), kind)
    streams = hooks.rans_encode_segments(start, freq, first)
    assert len(streams) == len(counts)
    for s, stream in enumerate(streams):
        a, b = int(first[s]), int(first[s + 1])
        assert stream == hooks.ans_encode_intervals(start[a:b], freq[a:b]), (kind, s)


def test_shared_streams_decode():
    rng = np.random.default_rng(11)
    p = np.array([0.7, 0.2, 0.05, 0.05])
    freq_table = np.floor(p * SCALE).astype(np.int64)
    freq_table[0] += SCALE - freq_table.sum()
    cum = np.concatenate([[0], np.cumsum(freq_table)]).astype(np.uint32)
    k = rng.choice(4, size=10_001, p=p)
    first = np.array([0, 3, 5000, 10_001], np.uint64)
    streams = hooks.rans_encode_segments(cum[k], freq_table[k].astype(np.uint32), first)
    for s, stream in enumerate(streams):
        a, b = int(first[s]), int(first[s + 1])
        np.testing.assert_array_equal(hooks.ans_decode_table(stream, cum, b - a), k[a:b])


@pytest.mark.parametrize("first", [[1, 4], [0, 3], [0, 5, 4], []])
def test_segment_offsets_are_checked(first):
    start = np.zeros(4, np.uint32)
    freq = np.full(4, SCALE, np.uint32)
    with pytest.raises(InvalidArgumentError):
        hooks.rans_encode_segments(start, freq, np.array(first, np.uint64))


def test_bad_intervals_are_refused():
    with pytest.raises(InvalidArgumentError):
        hooks.rans_encode_segments(np.array([SCALE - 1], np.uint32), np.array([2], np.uint32),
                                   np.array([0, 1], np.uint64))


# --- whole ANS bodies, coded as the GPU path codes them -----------------------

GAUSSIAN, LAPLACE = 1, 2
Z, A2, D4, E8 = 1, 2, 3, 4
ANS = 2
KEY = bytes(range(32))
BODY_CONFIGS = [(GAUSSIAN, Z, 1), (LAPLACE, Z, 1), (GAUSSIAN, Z, 3), (LAPLACE, Z, 2),
                (GAUSSIAN, A2, 2), (GAUSSIAN, D4, 4), (GAUSSIAN, E8, 8)]


@pytest.mark.parametrize("mech,lattice,n", BODY_CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,spread", [(1031, 3.0), (300_001, 0.2)])
def test_ans_bodies_coded_by_segment_streams_are_the_cpu_bodies(mech, lattice, n, dtype, m,
                                                                spread):
    """Every segment's symbols, then all the segments' streams coded at once
    by the kernel's code (several segments at m = 300,001; small values, where
    the point model of A2/D4/E8 wins some segments), give the CPU's body."""
    from cepam import _core

    x = np.random.default_rng(m + 10 * lattice + n).normal(scale=spread, size=m).astype(dtype)
    kw = dict(key=KEY, params=_core.Params(mechanism=mech, scale=0.5, lattice=lattice, n=n),
              factor=0.75)
    expected = _core.encode(x, coder=ANS, threads=2, **kw)
    assert hooks.ans_body_by_streams(x, **kw) == expected


@pytest.mark.parametrize("m", [1, 8193, (1 << 20) + 5])
def test_the_most_compressible_ans_bodies_coded_by_segment_streams_are_the_cpu_bodies(m):
    """Zeros under a large noise: streams of a few words, at the bomb rule's
    lower bound on the body's length (payload/body.hpp)."""
    from cepam import _core

    x = np.zeros(m, np.float32)
    kw = dict(key=KEY, params=_core.Params(mechanism=GAUSSIAN, scale=1e3, lattice=Z, n=1),
              factor=1.0)
    expected = _core.encode(x, coder=ANS, **kw)
    assert hooks.ans_body_by_streams(x, **kw) == expected


@pytest.mark.parametrize("kind", ["uniform-raw", "geometric", "skewed", "random", "extremes"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_streams_coded_together_are_each_streams_bytes(kind, k):
    """AnsEncoder::finish_together (the ANS body's groups of segments; with
    AVX-512 two streams' states a register, the quotient from a reciprocal
    estimate put right by the remainder) codes each stream as it is coded
    alone: streams of unequal lengths (the common groups in step, the rest
    one run at a time), every length modulo the four states, and the
    division's extremes (freq 1 after states near 2^63, freq 2^24 - 1)."""
    rng = np.random.default_rng(k)
    counts = [40_003, 39_998, 41_001, 5][:k]
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64)
    if kind == "extremes":
        freq = rng.choice(np.array([1, 2, 3, SCALE - 1, SCALE // 2 + 1], np.uint32), int(first[-1]))
        start = (rng.random(freq.size) * (SCALE - freq)).astype(np.uint32)
    else:
        start, freq = _symbols(rng, int(first[-1]), kind)
    streams = hooks.ans_encode_together(start, freq, first)
    assert len(streams) == k
    for s, stream in enumerate(streams):
        a, b = int(first[s]), int(first[s + 1])
        assert stream == hooks.ans_encode_intervals(start[a:b], freq[a:b]), (kind, s)


@pytest.mark.parametrize("first", [[0], [0, 1, 2, 3, 4, 5]])
def test_streams_coded_together_are_one_to_four(first):
    with pytest.raises(InvalidArgumentError):
        hooks.ans_encode_together(np.zeros(5, np.uint32), np.full(5, SCALE, np.uint32),
                                  np.array(first, np.uint64))


def _reference_step(x, start, freq, words):
    """rans_encode_step in Python integers (rans_core.hpp)."""
    if x >= ((1 << 31) >> 24 << 32) * freq:
        words.append(x & 0xFFFFFFFF)
        x >>= 32
    return (x // freq << 24) + x % freq + start


def test_scalar_step_puts_every_quotient_estimate_right():
    """The scalar step (rans_core.hpp's rans_encode_step, every stream's
    outside the AVX-512 kernel) estimates x / freq as x times 1 / freq; the
    remainder puts the estimate right whichever way it is off.  Found by
    search: states whose estimate is one too large (a negative remainder)
    or one too small (a remainder of freq: multiples of freq above 2^53),
    then random ones, shifted or not, and freq 1 and 3, against the exact
    step in Python integers."""
    too_large = [(2019981812827934976, 7898677), (8281019643292527616, 15474317),
                 (779385759208267136, 2286583), (559812721140452096, 1097860),
                 (1131724062118039040, 3369900)]
    too_small = [(3922689457583388360, 13372794), (2134365609315362657, 8579701),
                 (2326944589493061174, 7444619), (1281086482865287245, 2524935),
                 (84521369229544104, 492456)]
    rng = np.random.default_rng(5)
    cases = too_large + too_small
    while len(cases) < 4096:
        f = int(rng.choice([1, 3, SCALE - 1, int(rng.integers(1, SCALE))]))
        x = int(rng.integers(1 << 31, min(f << 39, 1 << 63))) if rng.random() < 0.7 else \
            int(rng.integers(min(f << 39, (1 << 63) - 1), 1 << 63))
        cases.append((x, f))
    x = np.array([c[0] for c in cases], np.uint64)
    freq = np.array([c[1] for c in cases], np.uint32)
    start = (rng.random(len(cases)) * (SCALE - freq)).astype(np.uint32)
    states, words, emitted = hooks.ans_encode_step(x, start, freq)
    for k in range(len(cases)):
        out = []
        assert int(states[k]) == _reference_step(int(x[k]), int(start[k]), int(freq[k]), out)
        assert bool(emitted[k]) == bool(out) and (not out or int(words[k]) == out[0])


def test_avx512_group_step_puts_every_quotient_estimate_right():
    """The AVX-512 kernel estimates x / freq from a reciprocal; the remainder
    puts the estimate right whichever way it is off.  Found by search: states
    whose estimate is one too large (a negative remainder: about 1 in 10^5
    random states of the range that is not shifted) or one too small (a
    remainder of freq: multiples of freq above 2^53, where the state rounds
    as a double), then random ones, shifted or not, against the exact step
    in Python integers."""
    import cepam

    if cepam.simd_level() != "avx512":
        pytest.skip("the AVX-512 rANS kernel runs only with AVX-512")
    too_large = [(1045834494942676645, 2308876), (2016339174419909762, 5129393),
                 (2682414490315028239, 6706649), (5409988047532354308, 13011933),
                 (718633259085492720, 1890268)]
    too_small = [(4705746495574477080, 8684440), (6848202693572762912, 13824928),
                 (2068128176551994997, 4107213)]
    rng = np.random.default_rng(5)
    cases = too_large + too_small
    while len(cases) < 64:  # random states, with and without the shift, and freq 1
        f = int(rng.choice([1, 3, int(rng.integers(1, SCALE))]))
        x = int(rng.integers(1 << 31, min(f << 39, 1 << 63))) if rng.random() < 0.7 else \
            int(rng.integers(min(f << 39, (1 << 63) - 1), 1 << 63))
        cases.append((x, f))
    for i in range(0, len(cases), 8):
        group = cases[i:i + 8]
        x = np.array([c[0] for c in group], np.uint64)
        freq = np.array([c[1] for c in group], np.uint32)
        start = (rng.random(8) * (SCALE - freq)).astype(np.uint32)
        states, words_a, words_b = hooks.ans_encode_group_avx512(x, start, freq)
        expected, words = [0] * 8, ([], [])
        for r in range(2):  # RansRun::group: state 3 first
            for s in (3, 2, 1, 0):
                k = 4 * r + s
                expected[k] = _reference_step(int(x[k]), int(start[k]), int(freq[k]), words[r])
        assert [int(v) for v in states] == expected
        assert [int(w) for w in words_a] == words[0] and [int(w) for w in words_b] == words[1]
    with pytest.raises(InvalidArgumentError):
        hooks.ans_encode_group_avx512(np.full(8, 1, np.uint64), np.zeros(8, np.uint32),
                                      np.ones(8, np.uint32))
