"""The per-sub-vector arithmetic that the CUDA kernels run (csrc/lrsuq/subvector.hpp),
checked on the host against the CPU codec, bit for bit.

``hooks.encode_subvectors`` / ``decode_subvectors`` run the kernels' device
functions on the host, one sub-vector at a time; the CPU codec runs the same
formulas over chunks with SIMD batches.  Equal outputs here mean the GPU,
which compiles the same functions without FMA contraction, computes the bytes
the CPU computes (tests/test_cuda.py checks that on a GPU when there is one).
"""

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks
from cepam.errors import EncodingError, FormatError

KEY = bytes(range(32))
GAUSSIAN, LAPLACE, UNIFORM = 1, 2, 3
Z, A2, D4, E8 = 1, 2, 3, 4

CONFIGS = (
    [(GAUSSIAN, Z, n) for n in range(1, 9)]
    + [(LAPLACE, Z, n) for n in range(1, 5)]
    + [(UNIFORM, Z, 1), (GAUSSIAN, A2, 2), (GAUSSIAN, D4, 4), (GAUSSIAN, E8, 8)]
)


def _input(m, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3.0, size=m)
    x[:: 7] = 0.0                  # exact zeros
    x[3:: 11] *= 1e3               # large values
    x[5:: 13] = rng.normal(scale=1e-6, size=x[5:: 13].size)
    return x.astype(dtype)


def _kw(mech, lattice, n, scale=0.5):
    return dict(key=KEY, params=_core.Params(mechanism=mech, scale=scale, lattice=lattice, n=n))


@pytest.mark.parametrize("mech,lattice,n", CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_encode_matches_the_cpu_codec(mech, lattice, n, dtype):
    m = 1031  # not a multiple of any n > 1: the last sub-vector is padded
    x = _input(m, dtype, seed=mech * 100 + lattice * 10 + n)
    kw = _kw(mech, lattice, n)
    H, M = hooks.encode_lattice(x, factor=0.75, **kw)
    H2, M2, beta2, V2 = hooks.encode_subvectors(x, factor=0.75, **kw)
    np.testing.assert_array_equal(H2, H)
    np.testing.assert_array_equal(M2, M)
    beta, V = hooks.lattice_side_info(H, **kw)
    assert beta2.tobytes() == beta.tobytes()
    assert V2.tobytes() == V.tobytes()
    if lattice != Z or (n > 1 and mech != UNIFORM):
        assert H.max() > 1  # rejected trials were exercised


@pytest.mark.parametrize("mech,lattice,n", CONFIGS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_decode_matches_the_cpu_codec(mech, lattice, n, dtype):
    m = 517
    x = _input(m, np.float64, seed=n)
    kw = _kw(mech, lattice, n)
    H, M = hooks.encode_lattice(x, factor=1.0, **kw)
    y = hooks.decode_lattice(H, M, m=m, dtype=dtype, **kw)
    y2 = hooks.decode_subvectors(H, M, m=m, dtype=dtype, **kw)
    assert y2.dtype == y.dtype and y2.tobytes() == y.tobytes()


@pytest.mark.parametrize("mech,lattice,n", [(GAUSSIAN, Z, 1), (GAUSSIAN, E8, 8), (LAPLACE, Z, 3)])
def test_input_too_large_is_the_same_error(mech, lattice, n):
    x = np.zeros(40)
    x[17] = 1e300
    kw = _kw(mech, lattice, n, scale=1e-3)
    with pytest.raises(EncodingError) as cpu:
        hooks.encode_lattice(x, factor=1.0, **kw)
    with pytest.raises(EncodingError) as hd:
        hooks.encode_subvectors(x, factor=1.0, **kw)
    assert str(hd.value) == str(cpu.value)
    assert f"sub-vector {17 // n}" in str(hd.value)


def test_bad_trial_and_coordinate_are_refused_like_the_cpu_codec():
    kw = _kw(GAUSSIAN, D4, 4)
    x = _input(64, np.float64, seed=1)
    H, M = hooks.encode_lattice(x, factor=1.0, **kw)
    bad_h = H.copy()
    bad_h[5] = 0
    bad_m = M.copy()
    bad_m[9] = 2**60
    for h, mm in ((bad_h, M), (H, bad_m)):
        with pytest.raises(FormatError) as cpu:
            hooks.decode_lattice(h, mm, m=64, dtype="float64", **kw)
        with pytest.raises(FormatError) as hd:
            hooks.decode_subvectors(h, mm, m=64, dtype="float64", **kw)
        assert str(hd.value) == str(cpu.value)


def test_keystream_block_function_is_rfc_8439():
    # chacha20_block now runs the shared (host and device) block function.
    out = hooks.chacha20_block(bytes(range(32)), 1, bytes.fromhex("000000090000004a00000000"))
    assert bytes(out).hex().startswith("10f1e7e4d13b5915500fdd1fa32071c4")


@pytest.mark.parametrize("mech,lattice,n", [(GAUSSIAN, Z, 1), (GAUSSIAN, Z, 3), (LAPLACE, Z, 2),
                                            (UNIFORM, Z, 1), (GAUSSIAN, A2, 2),
                                            (GAUSSIAN, D4, 4), (GAUSSIAN, E8, 8)])
@pytest.mark.parametrize("coder", [1, 2])
def test_a_stage_computed_elsewhere_codes_to_the_same_body(mech, lattice, n, coder):
    """The GPU path: the kernels' (H, M, beta, V) handed to the body coder
    give the bytes of the CPU codec, on any thread count."""
    x = _input(200_003, np.float32, seed=7)  # several ANS segments and Golomb chunks
    kw = _kw(mech, lattice, n)
    stage = hooks.encode_subvectors(x, factor=0.5, **kw)
    for threads in (1, 3):
        plain = _core.encode(x, factor=0.5, coder=coder, threads=threads, **kw)
        staged = _core.encode(x, factor=0.5, coder=coder, threads=threads, lattice_stage=stage,
                              **kw)
        assert staged == plain


def test_a_stage_of_the_wrong_size_is_refused():
    from cepam.errors import InvalidArgumentError

    x = _input(100, np.float64, seed=1)
    kw = _kw(GAUSSIAN, E8, 8)
    H, M, beta, V = hooks.encode_subvectors(x, factor=1.0, **kw)
    with pytest.raises(InvalidArgumentError, match="sizes"):
        _core.encode(x, factor=1.0, coder=2, lattice_stage=(H[:-1], M, beta, V), **kw)
    with pytest.raises(InvalidArgumentError, match=r"\(H, M, beta, V\)"):
        _core.encode(x, factor=1.0, coder=2, lattice_stage=(H, M), **kw)
