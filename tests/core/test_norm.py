"""The clipping norm's sum of squares (csrc/lrsuq/norm.cpp): the fixed order
that the payload depends on, and the fast order for estimates; and the host
twin of the GPU's kernel (csrc/lrsuq/norm_block.hpp, shared by the host and
the device; the GPU's own run is compared in tests/core/test_cuda.py)."""
import math

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks
from cepam.errors import InvalidArgumentError


BLOCK = 1 << 16  # elements of a block (csrc/lrsuq/norm.hpp, format version 5)
THREADS = (1, 2, 3, 7)


def block_reference(v):
    """Four accumulators, element i into i mod 4, the rest into 0, then (a0 + a1) + (a2 + a3)."""
    whole = len(v) // 4 * 4
    acc = [0.0] * 4
    for i in range(whole):
        acc[i % 4] += v[i] * v[i]
    for i in range(whole, len(v)):
        acc[0] += v[i] * v[i]
    return (acc[0] + acc[1]) + (acc[2] + acc[3])


def tree_reference(sums):
    """Adjacent pairs, level by level (an odd last one goes up as it is)."""
    sums = list(sums)
    if not sums:
        return 0.0
    while len(sums) > 1:
        sums = [sums[j] + sums[j + 1] for j in range(0, len(sums) - 1, 2)] + (
            [sums[-1]] if len(sums) % 2 else [])
    return sums[0]


def fixed_order_reference(x):
    """Blocks of BLOCK elements, each by block_reference, the sums by tree_reference."""
    v = [float(t) for t in x]
    return tree_reference(block_reference(v[i : i + BLOCK]) for i in range(0, len(v), BLOCK))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [0, 1, 3, 4, 5, 15, 16, 17, 1001, 20011])
def test_fixed_order_is_the_documented_order(dtype, m):
    x = np.random.default_rng(m).normal(0, 3, m).astype(dtype)
    assert _core.sum_of_squares(x) == fixed_order_reference(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 17, 20011])
def test_any_order_agrees_to_rounding(dtype, m):
    x = np.random.default_rng(m).normal(0, 3, m).astype(dtype)
    exact = math.fsum(float(t) * float(t) for t in x)
    assert _core.sum_of_squares(x, fixed_order=False) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("fixed", [True, False])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_entries_are_named(fixed, bad):
    x = np.ones(37, np.float32)
    x[29] = bad
    with pytest.raises(InvalidArgumentError, match="flat index 29"):
        _core.sum_of_squares(x, fixed_order=fixed)


@pytest.mark.parametrize("fixed", [True, False])
def test_overflowing_squares_are_rescaled(fixed):
    assert _core.sum_of_squares(np.full(5, 1e200), fixed_order=fixed) == math.inf
    assert _core.sum_of_squares(np.array([3e150, 4e150]), fixed_order=fixed) == pytest.approx(25e300)
    assert _core.sum_of_squares(np.zeros(9), fixed_order=fixed) == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 3, 5 * BLOCK + 17])
def test_blocks_and_tree_are_the_documented_order_for_every_thread_count(dtype, m):
    """Each accumulator at its own scale, so that another order of a
    block's four sums ((a0 + a2) + (a1 + a3), say) gives other bits: one
    thread takes four whole blocks together (their chains interleaved),
    more threads one block each."""
    scales = np.resize(np.array([1e4, 3.0, 1e-3, 7.0]), m)
    x = (np.random.default_rng(m).normal(0, 1, m) * scales).astype(dtype)
    expected = fixed_order_reference(x)
    for threads in THREADS:
        assert _core.sum_of_squares(x, threads=threads) == expected, threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block", range(4))
def test_each_of_four_blocks_taken_together_sums_in_the_documented_order(dtype, block):
    """One block of four whole ones non-zero, so that the total is that
    block's sum alone (the tree adds zeros): its accumulators, each at its
    own scale, combined as (a0 + a1) + (a2 + a3) where the four blocks are
    taken together (one thread), for several draws (another order of the
    four sums differs from it in about half of them)."""
    for seed in range(4):
        m = 4 * BLOCK + 3
        x = (np.random.default_rng(seed).normal(0, 1, m)
             * np.resize(np.array([1e4, 3.0, 1e-3, 7.0]), m)).astype(dtype)
        x[: block * BLOCK] = 0
        x[(block + 1) * BLOCK:] = 0
        assert _core.sum_of_squares(x, threads=1) == fixed_order_reference(x), seed


def test_the_tree_is_not_a_running_sum():
    """The tree's order matters: a running sum of the block sums differs in
    its last bits on this input (seed 7; for most seeds they agree), so the
    test above tells them apart."""
    x = np.random.default_rng(7).normal(0, 3, 5 * BLOCK + 17)
    v = [float(t) for t in x]
    sums = [block_reference(v[i : i + BLOCK]) for i in range(0, len(v), BLOCK)]
    running = 0.0
    for t in sums:
        running += t
    assert running != tree_reference(sums) == _core.sum_of_squares(x, threads=3)


@pytest.mark.parametrize("level", ["portable", "avx2"])
def test_every_simd_level_gives_the_same_bits(level):
    """CEPAM_SIMD caps the instruction set; the fixed order's bits do not move."""
    import os
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from cepam import _core\n"
        "for m in (17, 5 * (1 << 16) + 5):\n"
        "    for dtype in (np.float32, np.float64):\n"
        "        x = np.random.default_rng(m).normal(0, 3, m).astype(dtype)\n"
        "        print(*(_core.sum_of_squares(x, threads=t).hex() for t in (1, 3)))\n"
    )
    env = {**os.environ, "CEPAM_SIMD": level}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True)
    expected = []
    for m in (17, 5 * BLOCK + 5):  # (four whole blocks taken together on one thread)
        for dtype in (np.float32, np.float64):
            x = np.random.default_rng(m).normal(0, 3, m).astype(dtype)
            expected.append(f"{fixed_order_reference(x).hex()} {fixed_order_reference(x).hex()}")
    assert run.stdout.split("\n")[:-1] == expected


@pytest.mark.parametrize("threads", THREADS)
def test_rescaling_over_blocks_is_the_same_for_every_thread_count(threads):
    """Squares whose sum underflows (below 2^-900) are summed again as
    (x / max|x|)^2, in index order within each block, the blocks by the tree;
    a sum that overflows is +inf."""
    m = 3 * BLOCK + 1
    assert _core.sum_of_squares(np.full(m, 1e200), threads=threads) == math.inf
    x = np.random.default_rng(8).normal(0, 1, m) * 1e-160
    maxabs = float(np.max(np.abs(x)))
    v = [float(t) / maxabs for t in x]
    sums = []
    for i in range(0, m, BLOCK):
        total = 0.0
        for u in v[i : i + BLOCK]:
            total += u * u
        sums.append(total)
    expected = tree_reference(sums) * maxabs * maxabs
    assert 0.0 < expected < 2.0 ** -900
    assert _core.sum_of_squares(x, threads=threads) == expected


@pytest.mark.parametrize("fixed", [True, False])
@pytest.mark.parametrize("threads", THREADS)
def test_the_first_non_finite_entry_is_named_for_every_thread_count(fixed, threads):
    x = np.ones(4 * BLOCK, np.float32)
    x[3 * BLOCK + 5] = np.inf
    x[BLOCK + 7] = np.nan
    with pytest.raises(InvalidArgumentError, match=f"flat index {BLOCK + 7}$"):
        _core.sum_of_squares(x, fixed_order=fixed, threads=threads)


@pytest.mark.parametrize("threads", [0, -1, 1025])
def test_thread_count_is_checked(threads):
    with pytest.raises(InvalidArgumentError, match="threads"):
        _core.sum_of_squares(np.ones(4), threads=threads)


# --- the GPU kernel's host twin ------------------------------------------------

@pytest.mark.parametrize("m", [0, 1, 3, 5, 4099, BLOCK, BLOCK + 1, 2 * BLOCK + 3,
                               5 * BLOCK + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_gpu_kernels_host_twin_is_the_definition(m, dtype):
    rng = np.random.default_rng(m)
    x = (rng.normal(size=m) * 10.0 ** rng.integers(-3, 4, size=m)).astype(dtype)
    total, maxabs = hooks.sum_of_squares_blocks(x)
    ref_total = fixed_order_reference(x)
    assert maxabs == (float(np.max(np.abs(x.astype(np.float64)))) if m else 0.0)
    assert np.float64(total).tobytes() == np.float64(ref_total).tobytes()


@pytest.mark.parametrize("m", [1, 7, 4099, BLOCK, BLOCK + 1, 3 * BLOCK + 5])
@pytest.mark.parametrize("threads", [1, 3])
def test_the_host_twin_is_the_cpu_codec_sum(m, threads):
    """The CPU codec's sum (lrsuq/norm.cpp: the same blocks and tree, its
    blocks on threads and in AVX2 lanes) and the GPU kernel's host twin
    agree bit for bit."""
    x = np.random.default_rng(m).normal(size=m).astype(np.float32)
    assert hooks.sum_of_squares_blocks(x)[0] == _core.sum_of_squares(x, threads=threads)


def test_non_finite_inputs_ask_for_the_second_pass():
    x = np.ones(3 * BLOCK, np.float32)
    x[BLOCK + 5] = np.nan
    assert np.isnan(hooks.sum_of_squares_blocks(x)[0])
    x[BLOCK + 5] = np.inf
    assert hooks.sum_of_squares_blocks(x)[0] == np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [0, 1, 5, 20011, 3 * BLOCK + 7])
@pytest.mark.parametrize("threads", [1, 3])
def test_the_pass_gives_the_largest_magnitude_with_the_sum(dtype, m, threads):
    """sum_of_squares_and_peak: the fixed-order sum and max |x| (exact, the
    value the encoder's source model would find), one pass, at every SIMD
    level the process runs (tests/codec/test_determinism.py compares the
    levels' payloads)."""
    x = (np.random.default_rng(m).standard_t(2, m) * 3).astype(dtype)
    if m > 3:
        x[m // 3] = -1e5  # the largest magnitude, negative, inside a block
    total, peak = _core.sum_of_squares_and_peak(x, threads)
    assert total == _core.sum_of_squares(x)
    assert peak == (float(np.max(np.abs(x))) if m else 0.0)
    with pytest.raises(InvalidArgumentError, match="flat index 0"):
        _core.sum_of_squares_and_peak(np.array([np.nan, 1.0]), threads)


@pytest.mark.parametrize("coder", [1, 2])  # Golomb (no source model), ANS
def test_the_encoders_body_is_the_same_with_the_peak_given(coder):
    """encode takes the peak from the clip's pass (no pass of the source
    model's own): the same body as without it, for float32 and float64,
    on one segment and on several; a non-finite peak is refused."""
    params = _core.Params(mechanism=1, scale=1e-3, lattice=1, n=1)
    key = bytes(range(1, 33))
    for m, dtype in ((1000, np.float32), (3 * 2**17 + 5, np.float64)):
        x = np.random.default_rng(m).normal(0, 1e-2, m).astype(dtype)
        _, peak = _core.sum_of_squares_and_peak(x)
        plain = _core.encode(x, key=key, params=params, factor=1.0, coder=coder, threads=2)
        given = _core.encode(x, key=key, params=params, factor=1.0, coder=coder, threads=2,
                             peak=peak)
        assert given == plain
        other = _core.encode(x, key=key, params=params, factor=1.0, coder=coder, threads=2,
                             peak=4 * peak)
        assert (other != plain) == (coder == 2)  # the model's range is the peak's
    with pytest.raises(InvalidArgumentError, match="peak"):
        _core.encode(x, key=key, params=params, factor=1.0, coder=coder, peak=math.nan)
