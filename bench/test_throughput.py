"""Encode/decode throughput (pytest-benchmark).  Run:

    python -m pytest bench/ --benchmark-enable --benchmark-columns=min,median,mean

Figures are reported, never asserted.  2^22 float32 coordinates, one thread.
"""

import numpy as np
import pytest

import cepam

M = 1 << 22
SECRET = bytes(range(32))


@pytest.fixture(scope="module")
def update():
    return np.random.default_rng(0).normal(scale=0.01, size=M).astype(np.float32)


def _payload(x, dim):
    return cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0, client=0,
                        dim=dim, clip=1.0)


@pytest.mark.parametrize("dim", [1, 2])
def test_encode(benchmark, update, dim):
    benchmark.group = f"gaussian n={dim}, 2^22 float32"
    payload = benchmark.pedantic(_payload, args=(update, dim), rounds=5, warmup_rounds=1)
    benchmark.extra_info["coords_per_s_at_min"] = M / benchmark.stats.stats.min
    benchmark.extra_info["bits_per_coordinate"] = cepam.inspect(payload).bits_per_coordinate


@pytest.mark.parametrize("dim", [1, 2])
def test_decode(benchmark, update, dim):
    benchmark.group = f"gaussian n={dim}, 2^22 float32"
    payload = _payload(update, dim)
    y = benchmark.pedantic(cepam.decode, args=(payload,), kwargs={"secret": SECRET}, rounds=5,
                           warmup_rounds=1)
    benchmark.extra_info["coords_per_s_at_min"] = M / benchmark.stats.stats.min
    assert y.shape == update.shape
