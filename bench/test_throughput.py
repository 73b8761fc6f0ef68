"""Encode/decode throughput of the whole path (Python API), pytest-benchmark:

    python -m pytest bench/test_throughput.py --benchmark-enable \
        --benchmark-columns=min,median --benchmark-group-by=param:coder

2^22 float32 coordinates, Gaussian sigma = 1e-3, one thread.  Figures are
reported (extra_info holds coordinates per second at the best round), never
asserted.
"""

import numpy as np
import pytest

import cepam

M = 1 << 22
SECRET = bytes(range(32))


@pytest.fixture(scope="module")
def update():
    return np.random.default_rng(0).normal(scale=0.01, size=M).astype(np.float32)


def _payload(x, dim, coder, round=0):
    return cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=SECRET, round=round, client=0,
                        lattice="Z", dim=dim, clip=None, coder=coder, threads=1)


@pytest.mark.parametrize("coder", ["golomb", "ans"])
@pytest.mark.parametrize("dim", [1, 2])
def test_encode(benchmark, update, dim, coder):
    payload = benchmark.pedantic(_payload, args=(update, dim, coder), rounds=5,
                                 warmup_rounds=1)
    benchmark.extra_info["M_coords_per_s"] = M / benchmark.stats.stats.min / 1e6
    benchmark.extra_info["bits_per_coordinate"] = cepam.inspect(payload).bits_per_coordinate


@pytest.mark.parametrize("coder", ["golomb", "ans"])
@pytest.mark.parametrize("dim", [1, 2])
def test_decode(benchmark, update, dim, coder):
    payload = _payload(update, dim, coder)
    y = benchmark.pedantic(cepam.decode, args=(payload,), kwargs={"secret": SECRET, "threads": 1},
                           rounds=5, warmup_rounds=1)
    benchmark.extra_info["M_coords_per_s"] = M / benchmark.stats.stats.min / 1e6
    assert y.shape == update.shape
