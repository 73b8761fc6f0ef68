"""The clip's sum of squares by blocks as the CUDA kernel computes it
(csrc/lrsuq/norm_block.hpp, shared by the host and the device), against a
reference of format version 5's definition: blocks of 2^16 elements, four
accumulators a block (element i into accumulator i mod 4, in index order,
the elements after the last group of four into accumulator 0), the block
sum (a0 + a1) + (a2 + a3), and the block sums added by a fixed pairwise
tree.  The GPU's own run is compared in tests/test_cuda.py."""

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks

BLOCK = 1 << 16


def _sequential(v: np.ndarray) -> float:
    """v[0] + v[1] + ... from 0.0, left to right (numpy's cumsum adds in order)."""
    return float(np.cumsum(v)[-1]) if v.size else 0.0


def reference(x: np.ndarray) -> tuple[float, float]:
    x = x.astype(np.float64)
    sums = []
    for lo in range(0, x.size, BLOCK):
        b = x[lo : lo + BLOCK]
        whole = b.size // 4 * 4
        acc = [_sequential(np.square(b[l:whole:4])) for l in range(4)]
        acc[0] = _sequential(np.concatenate([[acc[0]], np.square(b[whole:])]))
        sums.append((acc[0] + acc[1]) + (acc[2] + acc[3]))
    while len(sums) > 1:
        pairs = [sums[2 * j] + sums[2 * j + 1] for j in range(len(sums) // 2)]
        sums = pairs + ([sums[-1]] if len(sums) % 2 else [])
    return (sums[0] if sums else 0.0), float(np.max(np.abs(x))) if x.size else 0.0


@pytest.mark.parametrize("m", [0, 1, 3, 5, 4099, BLOCK, BLOCK + 1, 2 * BLOCK + 3,
                               5 * BLOCK + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_and_tree_are_the_definition(m, dtype):
    rng = np.random.default_rng(m)
    x = (rng.normal(size=m) * 10.0 ** rng.integers(-3, 4, size=m)).astype(dtype)
    total, maxabs = hooks.sum_of_squares_blocks(x)
    ref_total, ref_max = reference(x)
    assert (total, maxabs) == (ref_total, ref_max)
    assert np.float64(total).tobytes() == np.float64(ref_total).tobytes()


@pytest.mark.parametrize("m", [1, 7, 4099, BLOCK])
def test_one_block_is_the_cpu_codec_sum(m):
    """Up to one block the order is the CPU codec's fixed order of format
    version 4 too (lrsuq/norm.hpp), so the two agree bit for bit."""
    x = np.random.default_rng(m).normal(size=m).astype(np.float32)
    assert hooks.sum_of_squares_blocks(x)[0] == _core.sum_of_squares(x)


def test_non_finite_inputs_ask_for_the_second_pass():
    x = np.ones(3 * BLOCK, np.float32)
    x[BLOCK + 5] = np.nan
    assert np.isnan(hooks.sum_of_squares_blocks(x)[0])
    x[BLOCK + 5] = np.inf
    assert hooks.sum_of_squares_blocks(x)[0] == np.inf
