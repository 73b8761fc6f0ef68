"""The Golomb coder's codes computed by the code shared with the GPU
(csrc/coding/golomb_core.hpp), a unit of 256 sub-vectors at a time from the
whole update's H and M as the CUDA kernels compute them (each unit's bits
counted, the body laid out from the counts, each unit's codes written at its
bit offsets into the zeroed body): the CPU's bodies, bit for bit, on every
lattice and mechanism, one segment and several.  The GPU run of the same
kernels is compared in tests/core/test_cuda.py."""

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks
from cepam.errors import InvalidArgumentError

GAUSSIAN, LAPLACE, SDQ = 1, 2, 3
Z, A2, D4, E8 = 1, 2, 3, 4
GOLOMB = 1
KEY = bytes(range(32))
SEGMENT = _core.SEGMENT_COORDINATES
# (mechanism, lattice, n): the codec's settings with the Golomb coder.
SETTINGS = [(GAUSSIAN, Z, 1), (GAUSSIAN, Z, 2), (GAUSSIAN, Z, 3), (GAUSSIAN, Z, 8),
            (LAPLACE, Z, 1), (LAPLACE, Z, 2), (LAPLACE, Z, 4), (SDQ, Z, 1),
            (GAUSSIAN, A2, 2), (GAUSSIAN, D4, 4), (GAUSSIAN, E8, 8)]


def _inputs(kind, m, dtype, seed):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.normal(scale=3.0, size=m)
    elif kind == "heavy":  # a few huge coordinates among small ones: long codes
        x = rng.standard_cauchy(size=m) * 1e-3
        x[rng.integers(0, m, 3)] = [1e6, -3e7, 2.5e5]
    elif kind == "constant":
        x = np.full(m, 0.37)
    else:  # "tiny": far below the noise (every coordinate's code one bit or so)
        x = rng.normal(scale=1e-9, size=m)
    return x.astype(dtype)


def _check(x, mech, lattice, n, *, scale=0.5, factor=0.75):
    params = _core.Params(mechanism=mech, scale=scale, lattice=lattice, n=n)
    expected = _core.encode(x, key=KEY, params=params, factor=factor, coder=GOLOMB, threads=2)
    H, M = hooks.encode_lattice(x, key=KEY, params=params, factor=factor)
    golomb = hooks.golomb_parameter(_core.acceptance_probability(params))
    assert hooks.golomb_body_by_units(H, M, golomb=golomb, n=n) == expected
    return expected


@pytest.mark.parametrize("mech,lattice,n", SETTINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["normal", "heavy", "constant", "tiny"])
def test_golomb_codes_by_the_shared_code_give_the_cpu_body(mech, lattice, n, dtype, kind):
    """One segment (m = 4,099: units of 256 sub-vectors, the last short)."""
    _check(_inputs(kind, 4099, dtype, seed=n + 10 * mech + 100 * lattice), mech, lattice, n)


@pytest.mark.parametrize("mech,lattice,n", [(GAUSSIAN, Z, 1), (GAUSSIAN, Z, 3),
                                            (LAPLACE, Z, 2), (GAUSSIAN, E8, 8)])
def test_golomb_codes_of_several_segments_give_the_cpu_body(mech, lattice, n):
    """Three segments, the last one short; a unit's codes straddle the
    words other units write (every unit's bit offset is arbitrary)."""
    m = 2 * SEGMENT + 1_001
    body = _check(_inputs("heavy", m, np.float32, seed=7 * n), mech, lattice, n)
    assert len(body) > 1000


@pytest.mark.parametrize("mech,lattice,n", [(GAUSSIAN, Z, 1), (GAUSSIAN, Z, 3),
                                            (GAUSSIAN, E8, 8)])
def test_golomb_segments_of_their_own_orders_give_the_cpu_body(mech, lattice, n):
    """Format version 7: segments of different scales take different orders,
    each chosen from the segment's own bit lengths (the units' histograms
    added into their segment's)."""
    rng = np.random.default_rng(n)
    size = SEGMENT // n * n  # coordinates a segment
    x = np.concatenate([rng.normal(scale=s, size=size) for s in (0.01, 1000.0, 30.0)])
    body = _check(x.astype(np.float32), mech, lattice, n)
    orders, at = [], 4
    for _ in range(3):
        orders.append(body[at])
        at += 17 + sum((int.from_bytes(body[at + i:at + i + 8], "little") + 7) // 8
                       for i in (1, 9))
    assert at == len(body) and len(set(orders)) == 3, orders


def test_golomb_codes_of_empty_and_single_coordinate_updates():
    for m in (0, 1, 2, 255, 256, 257):
        _check(_inputs("normal", m, np.float64, seed=m), GAUSSIAN, Z, 2)


def test_the_host_twin_refuses_what_the_stage_cannot_hold():
    H = np.ones(4, np.uint32)
    M = np.zeros(8, np.int64)
    assert hooks.golomb_body_by_units(H, M, golomb=1, n=2)
    with pytest.raises(InvalidArgumentError, match="n coordinates"):
        hooks.golomb_body_by_units(H, M[:7], golomb=1, n=2)
    with pytest.raises(InvalidArgumentError, match="trial indices"):
        hooks.golomb_body_by_units(np.array([1, 2, 1, 1], np.uint32), M, golomb=0, n=2)
    with pytest.raises(InvalidArgumentError, match="trial indices"):
        hooks.golomb_body_by_units(np.array([1, 0, 1, 1], np.uint32), M, golomb=1, n=2)
    with pytest.raises(InvalidArgumentError, match="too large"):
        hooks.golomb_body_by_units(H, np.full(8, 1 << 60, np.int64), golomb=1, n=2)
    with pytest.raises(InvalidArgumentError, match="n must be"):
        hooks.golomb_body_by_units(H, M, golomb=1, n=9)
