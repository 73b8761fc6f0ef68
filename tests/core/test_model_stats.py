"""The entropy coder's source model from statistics (coding/model_stats.hpp):
the GPU's kernels reduce x factor to the range and the per-cell integer
counts, and the host fits the model from those (SourceModel::fit_from)
without seeing x.  Here the kernels' host twin (_core.testing.model_statistics,
the same functions one element at a time) stands in for them: the model
bytes must be the CPU's fit, whatever the input."""

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks
from cepam.errors import InvalidArgumentError

Z1 = _core.Params(mechanism=1, scale=0.05, lattice=1, n=1)
PARAMS = [Z1, _core.Params(mechanism=1, scale=0.5, lattice=4, n=8),
          _core.Params(mechanism=2, scale=1e-3, lattice=1, n=3)]


def _inputs():
    rng = np.random.default_rng(7)
    yield "gaussian", rng.normal(size=100_003)
    yield "heavy tails", rng.standard_cauchy(size=70_001)
    yield "student t(1.5), tiny", rng.standard_t(1.5, size=5_000) * 1e-6
    yield "constant", np.full(4_097, 0.25)
    yield "zeros", np.zeros(300)
    yield "one", np.array([-3.0])
    yield "three", np.array([1e-3, 0.0, -2e-3])
    yield "several segments", rng.laplace(size=300_000) * 1e-2
    yield "huge", rng.normal(size=1_000) * 1e300
    yield "subnormal", rng.normal(size=1_000) * 1e-310
    yield "one outlier", np.concatenate([rng.normal(size=50_000) * 1e-4, [50.0]])


CASES = [(name, x, dtype) for name, x in _inputs() for dtype in (np.float32, np.float64)]


@pytest.mark.parametrize("name,x,dtype", CASES, ids=[f"{c[0]}-{c[2].__name__}" for c in CASES])
@pytest.mark.parametrize("factor", [1.0, 0.37, 1e-5])
def test_the_model_from_the_twins_statistics_is_the_cpu_fit(name, x, dtype, factor):
    with np.errstate(over="ignore"):  # "huge" in float32: infinities, a model all the same
        x = x.astype(dtype)
    rng, counts = hooks.model_statistics(x, factor=factor)
    assert counts.dtype == np.uint64 and counts.shape == (1024,) and int(counts.sum()) == x.size
    for params in PARAMS:
        expected = hooks.source_model_fit(x, factor=factor, params=params, threads=3)
        assert hooks.source_model_fit(x, factor=factor, params=params) == expected
        assert hooks.source_model_from_statistics(rng, counts, params=params) == expected


def test_the_model_of_no_data_is_the_cpu_fit():
    x = np.zeros(0, np.float32)
    rng, counts = hooks.model_statistics(x, factor=1.0)
    assert rng == 1.0 and not counts.any()
    assert (hooks.source_model_from_statistics(rng, counts, params=Z1)
            == hooks.source_model_fit(x, factor=1.0, params=Z1))


def test_nan_is_skipped_by_the_maximum_and_counted_somewhere():
    x = np.array([1.0, np.nan, -2.0, 0.5])
    rng, counts = hooks.model_statistics(x, factor=1.0)
    assert rng == 2.0 and int(counts.sum()) == 4
    assert (hooks.source_model_from_statistics(rng, counts, params=Z1)
            == hooks.source_model_fit(x, factor=1.0, params=Z1))


def test_the_statistics_are_checked():
    with pytest.raises(InvalidArgumentError, match="1024"):
        hooks.source_model_from_statistics(1.0, np.zeros(10, np.uint64), params=Z1)
