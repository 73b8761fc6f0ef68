"""The clipping norm's sum of squares (csrc/lrsuq/norm.cpp): the fixed order
that the payload depends on, and the fast order for estimates."""
import math

import numpy as np
import pytest

from cepam import _core
from cepam.errors import InvalidArgumentError


def fixed_order_reference(x):
    """Four accumulators, element i into i mod 4, the rest into 0, then (a0 + a1) + (a2 + a3)."""
    v = [float(t) for t in x]
    whole = len(v) // 4 * 4
    acc = [0.0] * 4
    for i in range(whole):
        acc[i % 4] += v[i] * v[i]
    for i in range(whole, len(v)):
        acc[0] += v[i] * v[i]
    return (acc[0] + acc[1]) + (acc[2] + acc[3])


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
