"""The ANS coder's symbols computed by the code shared with the GPU
(csrc/coding/symbol_core.hpp and point_table.hpp), a unit of work at a time
from the whole update's H, M, beta and V as the CUDA kernel computes them,
then coded by the rANS kernel's host twin: the CPU's bodies, bit for bit, on
Z^n and on A2, D4 and E8 (the box model's offsets from the coordinates coded
before, and the point model's tables where the update is small against the
noise).  The GPU run of the same kernels is compared in
tests/core/test_cuda.py."""

import numpy as np
import pytest

from cepam._core import testing as hooks

GAUSSIAN, LAPLACE, SDQ = 1, 2, 3
# The mechanisms and dimensions the codec takes on Z^n (Laplace n <= 4, SDQ n = 1).
CONFIGS = [(GAUSSIAN, 1), (GAUSSIAN, 2), (GAUSSIAN, 3), (GAUSSIAN, 8), (LAPLACE, 1),
           (LAPLACE, 2), (LAPLACE, 3), (SDQ, 1)]
Z, A2, D4, E8 = 1, 2, 3, 4
BOX_LATTICES = [(A2, 2), (D4, 4), (E8, 8)]  # (the point model's lattices; Gaussian only)
ANS = 2
KEY = bytes(range(32))


def _inputs(kind, m, dtype, seed):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.normal(scale=3.0, size=m)
    elif kind == "heavy":  # a few huge coordinates among small ones: escapes, coarse tables
        x = rng.standard_cauchy(size=m) * 1e-3
        x[rng.integers(0, m, 3)] = [1e6, -3e7, 2.5e5]
    elif kind == "constant":
        x = np.full(m, 0.37)
    else:  # "tiny": far below the noise
        x = rng.normal(scale=1e-9, size=m)
    return x.astype(dtype)


def _check(x, mech, n, *, scale=0.5, factor=0.75, lattice=Z):
    from cepam import _core

    kw = dict(key=KEY, params=_core.Params(mechanism=mech, scale=scale, lattice=lattice, n=n),
              factor=factor)
    expected = _core.encode(x, coder=ANS, threads=2, **kw)
    got = hooks.ans_body_by_streams(x, shared_symbols=True, **kw)
    assert got == expected


@pytest.mark.parametrize("mech,n", CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["normal", "heavy", "constant", "tiny"])
def test_z_symbols_by_the_shared_code_give_the_cpu_body(mech, n, dtype, kind):
    """One segment (m = 4,099) per case, every input kind."""
    _check(_inputs(kind, 4099, dtype, seed=n + 10 * mech), mech, n)


@pytest.mark.parametrize("mech,n,dtype", [(GAUSSIAN, 1, np.float32), (LAPLACE, 2, np.float64),
                                          (GAUSSIAN, 8, np.float64), (SDQ, 1, np.float32)])
@pytest.mark.parametrize("kind", ["normal", "heavy"])
def test_z_symbols_of_several_segments_give_the_cpu_body(mech, n, dtype, kind):
    """Several segments of 2^17 coordinates, the last one partial."""
    _check(_inputs(kind, 3 * (1 << 17) + 1001, dtype, seed=7 * n), mech, n)


@pytest.mark.parametrize("scale", [1e-6, 1e3])
def test_z_symbols_at_extreme_scales_give_the_cpu_body(scale):
    """Tiny noise (coarse tables: values over many cells) and huge noise
    (streams of a few words, padded to the bomb rule's length)."""
    x = _inputs("normal", 20_000, np.float64, seed=3)
    _check(x, GAUSSIAN, 1, scale=scale, factor=1.0)
    _check(np.zeros(8193, np.float32), GAUSSIAN, 2, scale=scale, factor=1.0)


@pytest.mark.parametrize("lattice,n", BOX_LATTICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,rms", [(4099, 5.0), (3 * (1 << 17) + 1001, 5.0), (20_000, 2.5)])
def test_box_symbols_on_a2_d4_e8_give_the_cpu_body(lattice, n, dtype, m, rms):
    """Where the update spreads over more than a cell (rms/sigma = 10 and
    5 here), no sub-vector has a point table and the CPU's body is the box
    model's: the shared code gives it, with each coordinate's offset from
    the coordinates coded before it (one segment and several)."""
    x = (np.random.default_rng(m + n).normal(size=m) * rms).astype(dtype)
    _check(x, GAUSSIAN, n, lattice=lattice, factor=1.0)


def _segments(body, *, lattice, m, n):
    """Each segment's (model byte, stream) of an ANS body on A2, D4 or E8."""
    from cepam import _core

    at = _core.body_parts(body, coder=ANS, lattice=lattice, m=m, n=n)["model"] // 8
    out = []
    while at < len(body):
        size = int.from_bytes(body[at:at + 4], "little")  # (the model byte and the stream)
        out.append((body[at + 4], body[at + 5:at + 4 + size]))
        at += 4 + size
    return out


@pytest.mark.parametrize("lattice,n", BOX_LATTICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind,m", [("tiny", 4099), ("constant", 4099), ("rms 1", 300_001),
                                    ("rms 0.3", 3 * (1 << 17) + 77)])
def test_point_tables_by_the_shared_code_give_the_cpu_body(lattice, n, dtype, kind, m):
    """An update small against the noise: sub-vectors have point tables (the
    candidates enumerated, D4 and E8 walked, by coding/point_table.hpp,
    PointCoder's own code), so a segment's point stream (each such
    sub-vector's point, or the escape and its box symbols) is coded beside
    its box stream and the shorter taken: the CPU's body, one segment and
    several.  Here every segment has a table; most take the point model, a
    few (A2 at rms/sigma = 1, the short last segment at 0.3) the box
    model."""
    from cepam import _core

    if kind.startswith("rms"):
        x = np.random.default_rng(m + n).normal(size=m) * 0.5 * float(kind.split()[1])
        x = x.astype(dtype)
    else:
        x = _inputs(kind, m, dtype, seed=n)
    kw = dict(key=KEY, params=_core.Params(mechanism=GAUSSIAN, scale=0.5, lattice=lattice, n=n),
              factor=1.0)
    body = _core.encode(x, coder=ANS, threads=2, **kw)
    assert hooks.ans_body_by_streams(x, shared_symbols=True, **kw) == body
    segments = _segments(body, lattice=lattice, m=m, n=n)
    first, start, freq, tabled = hooks.body_symbols(x, **kw)
    assert len(tabled) == len(segments) and tabled.all()
    assert sum(points for points, _ in segments) >= len(segments) - 1 or kind == "rms 1"


@pytest.mark.parametrize("mech,lattice,n,m", [
    (GAUSSIAN, Z, 1, 4099), (LAPLACE, Z, 2, 3 * (1 << 17) + 5), (GAUSSIAN, Z, 3, 2 * (1 << 17)),
    (GAUSSIAN, E8, 8, 2 * (1 << 17) + 3)])
def test_the_symbol_hook_gives_each_segments_coded_symbols(mech, lattice, n, m):
    """hooks.body_symbols (what tests/core/test_cuda.py compares the GPU's
    symbols with, symbol by symbol): each segment's run of symbols, coded
    as a stream, is that segment's stream in the CPU's body."""
    from cepam import _core

    x = _inputs("heavy" if lattice == Z else "normal", m, np.float32, seed=m)
    kw = dict(key=KEY, params=_core.Params(mechanism=mech, scale=0.5, lattice=lattice, n=n),
              factor=0.75)
    first, start, freq, tabled = hooks.body_symbols(x, **kw)
    assert first.dtype == np.uint64 and start.dtype == freq.dtype == np.uint32
    assert first[0] == 0 and first[-1] == start.size == freq.size
    segments = -(-m // (n * ((1 << 17) // n)))  # segments of 2^17 // n sub-vectors
    # a box stream each, then (A2, D4, E8) a point stream each: empty without a table
    assert len(first) - 1 == segments * (1 if lattice == Z else 2) and len(tabled) == segments
    assert not tabled.any() and (lattice == Z or first[-1] == first[segments])
    body = _core.encode(x, coder=ANS, threads=2, **kw)
    streams = hooks.rans_encode_segments(start, freq, first)[:segments]
    at = len(hooks.source_model_fit(x, factor=0.75, params=kw["params"], threads=1))
    byte = 0 if lattice == Z else 1  # the model byte (0: the box model), in the length
    for stream in streams:
        size = int.from_bytes(body[at:at + 4], "little")
        assert body[at + 4:at + 4 + byte] == bytes(byte)
        assert body[at + 4 + byte:at + 4 + size] == stream
        at += 4 + size
    assert at == len(body)
