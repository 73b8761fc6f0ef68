"""The encoder's reciprocal kernel (``kernels::reciprocals``: 1 / beta for
the scaled inputs t = x / beta) gives the division's bits.

With AVX-512 it runs without the divider (an estimate, Newton steps and
Markstein's correction, lrsuq/batch_kernels.cpp); these tests compare it
with numpy's IEEE division bit for bit where that argument is tightest:
significands at and near all ones (the case Markstein's step excludes, which
the kernel divides), near 1, random ones over the whole exponent range and
at the kernel's exponent bounds (+-1000), zeros, infinities, NaN and
subnormals; lengths that leave a scalar tail.  (Without AVX-512 the kernel
is the division itself.)"""

import numpy as np
import pytest

from cepam._core import testing as hooks

ULP_BITS = 52


def _same_bits(b: np.ndarray) -> None:
    got = hooks.reciprocals(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want = 1.0 / b
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got[~nan].view(np.uint64) != want[~nan].view(np.uint64))
    assert bad.size == 0, [(float.hex(float(b[~nan][i])), float.hex(float(got[~nan][i])))
                           for i in bad[:5]]


def _with_significands(significands: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """Doubles (1 + s 2^-52) 2^e, both signs, for every s and e given."""
    s = np.repeat(significands.astype(np.uint64), len(exponents))
    e = np.tile((exponents + 1023).astype(np.uint64), len(significands))
    b = ((e << np.uint64(ULP_BITS)) | s).view(np.float64)
    return np.concatenate([b, -b])


def test_significands_near_all_ones_and_near_one():
    top = (1 << ULP_BITS) - 1
    near = np.array([top - k for k in range(4096)] + list(range(4096)), dtype=np.uint64)
    exponents = np.array([-1001, -1000, -999, -300, -30, -1, 0, 1, 7, 30, 300, 999, 1000, 1001])
    _same_bits(_with_significands(near, exponents))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_doubles_over_the_exponent_range(seed):
    rng = np.random.default_rng(seed)
    n = 1_000_003  # (a scalar tail)
    significands = rng.integers(0, 1 << ULP_BITS, n, dtype=np.uint64)
    biased = rng.integers(0, 2047, n, dtype=np.uint64)  # subnormals (0) to the largest
    bits = (biased << np.uint64(ULP_BITS)) | significands
    b = bits.view(np.float64) * rng.choice([-1.0, 1.0], n)
    _same_bits(b)


def test_the_scales_the_encoder_divides_by():
    # beta = r / rho with r = sigma sqrt(chi2): moderate magnitudes, dense
    rng = np.random.default_rng(3)
    b = 1e-3 * np.sqrt(rng.chisquare(3, 2_000_001)) / 0.5
    _same_bits(b)


def test_special_values():
    tiny = np.finfo(np.float64).tiny
    b = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, tiny / 2, 5e-324,
                  np.finfo(np.float64).max, 1.0, -1.0, 2.0, 0.5, 3.0, 0.1] * 3)
    _same_bits(b)
    for length in range(0, 20):
        _same_bits(np.linspace(0.3, 7.0, length))
