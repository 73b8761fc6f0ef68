"""The source model's grid table and quantile lines (coding/source_model.cpp:
tabulate and derive, loops compiled for the SIMD level in use): the grid
value at cell edge i of bin b is the exact integer

    C_i = c_b 2^10 + floor((i - e_b) (c_{b+1} - c_b) 2^10 / (e_{b+1} - e_b)),

the coded CDF, so it must be that integer on every level; the quantile of
level l in bin b is e_b + (l - c_b + 1/2) (e_{b+1} - e_b) / (c_{b+1} - c_b),
which only guides the decoder's search, as does the line of each level
(the SIMD decoders' finer guess): the bin's slope rounded to 2^-20 cells,
and the level's start from e_b by that slope."""

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks

Z1 = _core.Params(mechanism=1, scale=0.05, lattice=1, n=1)


def serialized(bins: int, growth: int, knots: list[int]) -> bytes:
    """A model as the format writes it (SourceModel::serialize): A, K, g,
    the code order (12 here), then the K - 1 free knot increments in an
    exp-Golomb code of that order, most significant bit first."""
    order, bits = 12, []
    for b in range(bins - 1):
        u = knots[b + 1] - knots[b] + (1 << order)
        bits += [0] * (u.bit_length() - order - 1) + [int(c) for c in bin(u)[2:]]
    bits += [0] * (-len(bits) % 8)
    body = bytes(int("".join(map(str, bits[i : i + 8])), 2) for i in range(0, len(bits), 8))
    return struct.pack("<d", 1.0) + bytes([bins, growth, order]) + body


def _models():
    """Serialised models: those the encoder fits to updates of 1 to 10^5
    coordinates (light and heavy tails, a few values), and models of every
    bin count, of growths from 0 to the largest and of random knots (zero
    increments among them), which give bins of every width."""
    rng = np.random.default_rng(11)
    xs = [rng.normal(size=100_000), rng.standard_cauchy(size=20_000), rng.laplace(size=3_000),
          rng.normal(size=10), np.array([0.5]), np.full(64, -0.2),
          rng.standard_t(1.2, size=50_000), np.concatenate([np.zeros(999), [1.0]])]
    for x in xs:
        for factor in (1.0, 1e-3):
            yield hooks.source_model_fit(x, factor=factor, params=Z1)
    for bins in range(2, 65, 2):
        for growth in (0, 1, 3, 7, 13, 19, 26, 41, 64):
            inner = np.sort(rng.integers(0, 4097, size=bins - 1))
            if growth % 2:
                inner[: bins // 3] = inner[0]  # (repeated knots: empty bins)
            yield serialized(bins, growth, [0, *map(int, np.sort(inner)), 4096])


def reference_grid(edges: np.ndarray, knots: np.ndarray) -> np.ndarray:
    grid = np.empty(1025)
    for b in range(len(edges) - 1):
        e0, width = int(edges[b]), int(edges[b + 1] - edges[b])
        c, d = int(knots[b]) << 10, int(knots[b + 1] - knots[b]) << 10
        grid[e0 : e0 + width] = [c + (i * d) // width for i in range(width)]
    grid[1024] = 1 << 22
    return grid


def reference_quantiles(edges: np.ndarray, knots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The quantile of each level, and its line (start and slope in units
    of 2^-20 cells, packed as two 32-bit halves)."""
    quantile, line = np.full(4096, np.nan), np.zeros(4096, dtype=np.uint64)
    for b in range(len(edges) - 1):
        lo, hi = int(knots[b]), int(knots[b + 1])
        if hi > lo:
            scale = float(edges[b + 1] - edges[b]) / float(hi - lo)
            k = np.arange(hi - lo)
            quantile[lo:hi] = float(edges[b]) + (k + 0.5) * scale
            slope = np.uint64(np.floor(scale * 2.0**20 + 0.5))
            start = (np.uint64(int(edges[b])) << np.uint64(20)) + k.astype(np.uint64) * slope
            line[lo:hi] = start | slope << np.uint64(32)
    return quantile, line


def tables() -> list[tuple[np.ndarray, ...]]:
    return [hooks.source_model_tables(model) for model in _models()]


def test_the_grid_is_the_exact_integer_cdf_and_the_quantiles_their_lines():
    shapes = set()
    for edges, knots, grid, quantile, packed, line in tables():
        shapes.add((len(edges) - 1, int(edges[1] - edges[0])))
        assert edges[0] == 0 and edges[-1] == 1024 and knots[0] == 0 and knots[-1] == 4096
        np.testing.assert_array_equal(grid, reference_grid(edges, knots))
        want_quantile, want_line = reference_quantiles(edges, knots)
        np.testing.assert_array_equal(quantile, want_quantile)
        np.testing.assert_array_equal(line, want_line)
        # Half a level past its start, the line is (near) the level's quantile.
        half = (line & 0xFFFFFFFF) + 0.5 * (line >> 32)
        np.testing.assert_allclose(half * 2.0**-20, quantile, rtol=0, atol=2.0**-9)
        # The SIMD coders' copy (SourceModel::knot_slope_table): C_i and C_{i+1} - C_i.
        np.testing.assert_array_equal(packed & 0xFFFFFFFF, grid[:-1])
        np.testing.assert_array_equal(packed >> 32, np.diff(grid))
    assert len(shapes) > 100  # (bin counts and growths)


@pytest.mark.skipif(_core.simd_level() == "portable", reason="the portable level runs already")
def test_the_portable_level_gives_the_same_tables():
    code = ("import numpy as np, pickle, sys; sys.path.insert(0, %r); "
            "import test_source_model_tables as t; "
            "sys.stdout.buffer.write(pickle.dumps(t.tables()))") % os.path.dirname(__file__)
    env = dict(os.environ, CEPAM_SIMD="portable")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True).stdout
    import pickle

    for theirs, ours in zip(pickle.loads(out), tables(), strict=True):
        for a, b in zip(theirs, ours, strict=True):
            np.testing.assert_array_equal(a, b)


def exp_golomb_bits(increments: list[int], order: int) -> int:
    """Bits of ``increments`` in an exp-Golomb code of ``order``, coded one by one."""
    return sum(2 * (d + (1 << order)).bit_length() - order - 1 for d in increments)


def test_the_knots_are_coded_at_the_order_of_the_fewest_bits():
    """SourceModel::serialize's order (knot_order: every order's length from
    counts, in one pass) is the first of the fewest bits over the orders 0
    to 12 of coding each increment at each, and the body holds those bits:
    on the models the encoder fits and on random knots of every bin count,
    with repeated knots (zero increments), single large jumps (up to the
    whole 4096) and increments at and around powers of two."""
    rng = np.random.default_rng(5)
    models = list(_models())
    for bins in range(2, 65, 2):
        for _ in range(20):
            inner = np.sort(rng.integers(0, 4097, size=bins - 1))
            models.append(serialized(bins, 0, [0, *map(int, inner), 4096]))
        powers = [int(2 ** rng.integers(0, 12) + rng.integers(-1, 2)) for _ in range(bins - 1)]
        knots = np.minimum(np.cumsum([0, *powers]), 4096)
        models.append(serialized(bins, 0, [*map(int, knots[:-1]), 4096]))
        models.append(serialized(bins, 0, [0] * bins + [4096]))  # one jump of 4096
    for model in models:
        _, knots, *_ = hooks.source_model_tables(model)
        increments = [int(d) for d in np.diff(knots.astype(np.int64))[:-1]]
        lengths = [exp_golomb_bits(increments, k) for k in range(13)]
        order = lengths.index(min(lengths))
        again = hooks.source_model_reserialized(model)
        assert again[10] == order, (increments, lengths)
        assert len(again) == 11 + (lengths[order] + 7) // 8
        assert hooks.source_model_reserialized(again) == again
