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
