"""The Maxwell ziggurat (csrc/random/maxwell.hpp), Gaussian Z^1's latent
since format version 10: its table is the generator's, its layers have one
area and their fast intervals lie under the density, each of its slow paths
draws its piece's law, and its draws through the codec are the Maxwell law
(the radius of a uniform point of [-R, R] that is N(0, 1))."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from cepam import _core

from helpers.paths import ROOT

hooks = _core.testing
P_MIN = 1e-6
KEY = bytes(range(32))
LAYERS = hooks.maxwell_layers()
N = len(LAYERS["start"])


def density(x):
    """f(x) = x^2 exp(-x^2 / 2), the table's unnormalised density."""
    return x * x * np.exp(-0.5 * x * x)


def word(layer: int, low: int) -> int:
    """The word of a layer (its top 10 bits) and its low 53 bits."""
    return (layer << 54) | low


def random_reserve(rng, n=256):
    return rng.integers(0, 2**64, size=n, dtype=np.uint64)


def test_the_table_is_the_generators_output():
    pytest.importorskip("mpmath")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "maxwell_ziggurat.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_layers_have_one_area_and_cover_the_density():
    stats = pytest.importorskip("scipy.stats")
    start, width, lo, hi, y, dy = (LAYERS[k] for k in ("start", "width", "lo", "hi", "y", "dy"))
    assert N == 1024
    v = width[1:] * dy[1:]  # the rectangles' areas
    assert np.max(np.abs(v / v[0] - 1)) < 1e-15  # (2.2e-16 measured)
    # The base: its rectangle [L_1, R_1] x [0, y_1], the left piece and the
    # tail (scipy's Maxwell law is f / sqrt(pi / 2)).
    total = math.sqrt(math.pi / 2)
    L1, R1, y1 = lo[0], hi[0], dy[0]
    base = y1 * (R1 - L1) + total * (stats.maxwell.cdf(L1) + stats.maxwell.sf(R1))
    assert base == pytest.approx(v[0], rel=1e-12)
    assert width[0] * y1 == pytest.approx(v[0], rel=1e-13)  # layer 0's width: v / y_1
    assert LAYERS["left_edge"] == pytest.approx(L1, rel=1e-15)
    assert LAYERS["base_height"] == y1
    assert LAYERS["left_share"] == pytest.approx(
        stats.maxwell.cdf(L1) / (stats.maxwell.cdf(L1) + stats.maxwell.sf(R1)), rel=1e-12)
    # Layer i >= 1 spans its level set {f >= y_i}; its fast interval is the
    # next level set, inside its own, where f is at least the layer's top.
    assert y[0] == 0 and np.allclose(y[1:], y[:-1] + dy[:-1], rtol=1e-12, atol=0)
    assert np.allclose(density(start[1:]), y[1:], rtol=1e-9)
    assert np.allclose(density(start[1:] + width[1:]), y[1:], rtol=1e-9)
    inner = lo[1:-1] <= hi[1:-1]
    assert np.all(inner) and lo[-1] > hi[-1]  # the top layer's is empty (the mode)
    assert np.all(lo[1:-1] >= start[1:-1]) and np.all(hi[1:-1] <= start[1:-1] + width[1:-1])
    assert np.all(density(lo[1:-1]) >= (y + dy)[1:-1] * (1 - 1e-12))
    assert np.all(density(hi[1:-1]) >= (y + dy)[1:-1] * (1 - 1e-12))
    assert (y + dy)[-1] == pytest.approx(2 / math.e, rel=1e-15)
    assert np.all(np.diff(lo[:-1]) > 0) and np.all(np.diff(hi[:-1]) < 0)


def test_a_fast_word_reads_no_reserve_and_lands_in_its_fast_interval():
    rng = np.random.default_rng(1)
    start, width, lo, hi = (LAYERS[k] for k in ("start", "width", "lo", "hi"))
    fast = slow = 0
    for w in rng.integers(0, 2**64, size=20_000, dtype=np.uint64):
        i = int(w) >> 54
        u = (int(w) & ((1 << 53) - 1)) * 2.0**-53
        x0 = start[i] + u * width[i]
        x, used = hooks.maxwell_draw(int(w), random_reserve(rng))
        if lo[i] <= x0 <= hi[i]:
            assert (x, used) == (x0, 0)
            fast += 1
        else:
            assert used >= 1
            slow += 1
    assert 0.993 < fast / (fast + slow) < 0.999  # 99.59 % of words


@pytest.mark.parametrize("layer", [1, 2, 300, 700, 1000, 1023])
@pytest.mark.parametrize("where", [0.02, 0.5, 0.98])
def test_a_wedge_keeps_its_abscissa_with_the_densitys_probability(layer, where):
    """An abscissa x of layer i outside its fast interval (at `where` of a
    side's wedge) is kept after one reserve word with probability
    (f(x) - y_i) / dy_i, and else the draw starts over."""
    stats = pytest.importorskip("scipy.stats")
    start, width, lo, hi, y, dy = (LAYERS[k][layer]
                                   for k in ("start", "width", "lo", "hi", "y", "dy"))
    side = (lo - start) if where < 0.5 else (start + width - hi)  # a wedge's width
    target = start + where * side if where < 0.5 else hi + where * side
    low = int((target - start) / width * 2.0**53)
    w = word(layer, low)
    x0 = start + (low * 2.0**-53) * width
    assert not lo <= x0 <= hi
    p = (density(x0) - y) / dy
    rng = np.random.default_rng(layer)
    n = 20_000
    kept = 0
    for _ in range(n):
        x, used = hooks.maxwell_draw(w, random_reserve(rng))
        kept += (x, used) == (x0, 1)
    assert stats.binomtest(kept, n, min(max(p, 0.0), 1.0)).pvalue > P_MIN


@pytest.mark.parametrize("piece", ["left", "tail"])
def test_the_base_pieces_draw_their_part_of_the_law(piece):
    """A layer-0 word beyond the base's rectangle goes to the left piece
    (first reserve word below left_share) or to the tail: what it returns is
    the Maxwell law restricted to [0, L_1] or beyond R_1."""
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2 if piece == "left" else 3)
    beyond = word(0, (1 << 53) - 1)  # u just below 1: x = L_1 + u v / y_1 > R_1
    L1, R1 = LAYERS["lo"][0], LAYERS["hi"][0]
    share = LAYERS["left_share"]
    draws, used = [], []
    for _ in range(20_000):
        reserve = random_reserve(rng)
        u0 = rng.uniform(0, share) if piece == "left" else rng.uniform(share, 1)
        reserve[0] = np.uint64(int(u0 * 2.0**53) << 11)
        x, k = hooks.maxwell_draw(beyond, reserve)
        draws.append(x)
        used.append(k)
    draws = np.array(draws)
    if piece == "left":
        assert np.all(draws < L1)
        cdf = lambda t: stats.maxwell.cdf(t) / stats.maxwell.cdf(L1)  # noqa: E731
        assert 2.0 < np.mean(used) < 10.0  # a try is kept with probability about 1/3
    else:
        assert np.all(draws > R1)
        cdf = lambda t: 1 - stats.maxwell.sf(t) / stats.maxwell.sf(R1)  # noqa: E731
        assert np.mean(used) < 3.1  # a try is kept with probability 0.995
    assert stats.kstest(draws, cdf).pvalue > P_MIN


def test_a_reserve_that_never_accepts_ends_at_its_last_word():
    """Every try of the reserve rejected (the left piece's x at 0, where f
    is 0, and its y near y_1): the draw stops within its 256 words, with an
    x of the piece, instead of looping."""
    reserve = np.zeros(256, dtype=np.uint64)  # word 0: the left piece; odd words: x = 0
    reserve[2::2] = np.uint64(2**64 - 1)  # y = y_1 (1 - 2^-53)
    x, used = hooks.maxwell_draw(word(0, (1 << 53) - 1), reserve)
    assert used == 255 and 0 <= x < LAYERS["lo"][0]  # 1 + 127 tries of two words
    with pytest.raises(ValueError, match="fewer words"):
        hooks.maxwell_draw(word(0, (1 << 53) - 1), reserve[:10])


def test_the_codecs_radii_are_maxwell_and_independent():
    """sigma R over 2^22 sub-vectors (about 17,000 of them through the slow
    path): R follows the Maxwell law, R^2 chi2(3), and neighbours are
    independent."""
    stats = pytest.importorskip("scipy.stats")
    params = _core.Params(mechanism=1, scale=2.0, lattice=1, n=1)
    r = hooks.latent_radius(key=KEY, params=params, first=5, count=1 << 22) / 2.0
    assert stats.kstest(r, stats.maxwell.cdf).pvalue > P_MIN
    assert stats.kstest(r[::4] ** 2, stats.chi2(3).cdf).pvalue > P_MIN
    assert stats.spearmanr(r[:-1:2], r[1::2]).pvalue > P_MIN
    tail = r[r > LAYERS["hi"][0]]  # about 180 draws of the tail
    assert len(tail) > 100
    assert stats.kstest(tail, lambda t: 1 - stats.maxwell.sf(t) / stats.maxwell.sf(
        LAYERS["hi"][0])).pvalue > P_MIN


def test_the_simd_levels_give_the_portable_radii():
    """kernels::maxwell_radii's lanes (AVX-512, AVX2, NEON) against the
    portable loop, through a child process per level (CEPAM_SIMD caps it)."""
    code = ("import hashlib, cepam._core as c; "
            "p = c.Params(mechanism=1, scale=0.7, lattice=1, n=1);"
            "r = c.testing.latent_radius(key=bytes(range(32)), params=p, first=3, count=100_003);"
            "print(c.simd_level(), hashlib.sha256(r.tobytes()).hexdigest())")
    seen = {}
    for level in ("portable", "avx2", "avx512"):
        env = {**os.environ, "CEPAM_SIMD": level}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env=env).stdout.split()
        seen[out[0]] = out[1]
    assert len(set(seen.values())) == 1, seen


def test_the_per_sub_vector_arithmetic_reads_the_reserve_as_the_batch_does():
    """The CUDA kernels' radius (lrsuq/subvector.hpp: one sub-vector, its
    reserve read by a StreamReader) against the batch's (the reserves'
    first blocks gathered), over 20,000 sub-vectors of which about 80 take
    the slow path."""
    params = _core.Params(mechanism=1, scale=0.5, lattice=1, n=1)
    x = np.random.default_rng(4).normal(size=20_000)
    H, M = hooks.encode_lattice(x, factor=1.0, key=KEY, params=params)
    H2, M2, beta2, V2 = hooks.encode_subvectors(x, factor=1.0, key=KEY, params=params)
    beta, V = hooks.lattice_side_info(H, key=KEY, params=params)
    assert beta2.tobytes() == beta.tobytes() and np.array_equal(M2, M)
    radii = hooks.latent_radius(key=KEY, params=params, first=0, count=20_000)
    slow = sum(hooks.maxwell_draw(int(w), np.zeros(256, np.uint64))[1] > 0
               for w in hooks.keystream_words(key=KEY, stream=0, first_word=0, count=20_000))
    assert slow > 40
    assert np.array_equal(beta, radii / 0.5)  # beta = r / rho, rho = 1/2
