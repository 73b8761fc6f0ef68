"""The error decode(encode(x)) - x has exactly the mechanism's law, whatever x is.

Every test runs on fixed secrets and a fixed payload nonce (NONCE; with a
fresh nonce per payload, format version 8's default and since, the 160 or so checks at
p > 1e-6 would fail about once in 6,000 runs), so it is deterministic;
thresholds are p > 1e-6, so a correct implementation does not fail by chance
and a wrong one (a wrong latent law, a missing dither, an x-dependent error)
fails by far.
"""

import math

import numpy as np
import pytest

stats = pytest.importorskip("scipy.stats", reason="the statistical tests need scipy")

import cepam
from cepam import _core
from cepam._core import testing as hooks
from cepam.keys import stream_key
from cepam.mechanisms import core_params
from cepam.sealing import open_payload

from conftest import SECRET_A, SECRET_B

P_MIN = 1e-6
SAMPLES = 200_000  # per coordinate position and per input
SIGMA = 1e-3
B = 1e-3
NONCE = bytes(range(16))  # the payload nonce of every encode here (deterministic noise)

CASES = [
    pytest.param(cepam.Gaussian(sigma=SIGMA), 1, id="gaussian-n1"),
    pytest.param(cepam.Gaussian(sigma=SIGMA), 2, id="gaussian-n2"),
    pytest.param(cepam.Gaussian(sigma=SIGMA), 3, id="gaussian-n3"),
    pytest.param(cepam.Gaussian(sigma=SIGMA), 8, id="gaussian-n8"),
    pytest.param(cepam.Laplace(b=B), 1, id="laplace-n1"),
    pytest.param(cepam.Laplace(b=B), 2, id="laplace-n2"),
]

# Fixed inputs, in units of the noise scale: zero; inside the first cell;
# exactly on a cell boundary of the unscaled lattice (x / beta - v = 1/2 for
# beta = 1, v = 0); far outside the noise (huge); negative and irregular.
FIXED_INPUTS = {
    "zero": 0.0,
    "quarter-sigma": 0.25,
    "half-integer": 0.5 / SIGMA,  # x = 0.5
    "huge": 1e5,
    "negative": -7.3,
}


def marginal_cdf(mechanism):
    if isinstance(mechanism, cepam.Gaussian):
        return stats.norm(scale=mechanism.sigma).cdf
    return stats.laplace(scale=mechanism.b).cdf


def trial_indices(payload: bytes, secret: bytes) -> np.ndarray:
    header, sealed = open_payload(payload, secret)
    H, _ = _core.decode_symbols(sealed.body, m=header.m,
                                key=stream_key(secret, header.context, header.nonce),
                                params=_core.Params(mechanism=header.mechanism,
                                                    scale=header.scale, lattice=sealed.lattice,
                                                    n=sealed.n),
                                coder=header.coder)
    return H


def errors_for(x: np.ndarray, mechanism, n: int, *, secret=SECRET_A, round=0, coder="ans"):
    payload = cepam.encode(x, mechanism, secret=secret, round=round, client=1, dim=n,
                           coder=coder, nonce=NONCE)
    y = cepam.decode(payload, secret=secret)
    return (y - x).reshape(-1, n), payload


def check_error_law(z: np.ndarray, mechanism, n: int) -> None:
    cdf = marginal_cdf(mechanism)
    for k in range(n):
        p = stats.kstest(z[:, k], cdf).pvalue
        assert p > P_MIN, f"coordinate {k}: KS p = {p:.3g}"
    if isinstance(mechanism, cepam.Gaussian):
        radial = np.sum(z * z, axis=1) / mechanism.sigma**2
        p = stats.kstest(radial, stats.chi2(n).cdf).pvalue
        assert p > P_MIN, f"||z||^2 / sigma^2 against chi2({n}): p = {p:.3g}"
    else:
        radial = np.sum(np.abs(z), axis=1) / mechanism.b
        p = stats.kstest(radial, stats.gamma(n).cdf).pvalue
        assert p > P_MIN, f"||z||_1 / b against Gamma({n}): p = {p:.3g}"


def check_geometric(H: np.ndarray, p_accept: float) -> None:
    if p_accept == 1.0:
        assert np.all(H == 1)
        return
    # Chi-square goodness of fit on bins 1..K and a tail bin, K so that the
    # expected count in the last regular bin is at least 20.
    N = len(H)
    K = 1
    while N * p_accept * (1 - p_accept) ** K >= 20:
        K += 1
    probs = [p_accept * (1 - p_accept) ** (h - 1) for h in range(1, K + 1)]
    probs.append(1.0 - sum(probs))
    observed = [np.sum(H == h) for h in range(1, K + 1)] + [np.sum(H > K)]
    p = stats.chisquare(observed, np.array(probs) * N).pvalue
    assert p > P_MIN, f"H against Geometric({p_accept:.4f}): p = {p:.3g}"


@pytest.mark.parametrize("mechanism,n", CASES)
@pytest.mark.parametrize("name", list(FIXED_INPUTS))
def test_error_law_for_fixed_inputs(mechanism, n, name):
    x = np.full(SAMPLES * n, FIXED_INPUTS[name] * mechanism.scale)
    z, payload = errors_for(x, mechanism, n)
    check_error_law(z, mechanism, n)
    p_accept = _core.acceptance_probability(core_params(mechanism, lattice=1, n=n))
    check_geometric(trial_indices(payload, SECRET_A), p_accept)


@pytest.mark.parametrize("mechanism,n", CASES)
def test_error_law_and_independence_for_random_inputs(mechanism, n):
    rng = np.random.default_rng(20261122 + n)
    m = SAMPLES * n
    # A mix of scales, from far below to far above the noise.
    x = rng.normal(size=m) * mechanism.scale * 10.0 ** rng.uniform(-2, 3, size=m)
    # The Golomb coder here, the ANS coder for the fixed inputs: both must
    # carry H and M exactly.
    z, payload = errors_for(x, mechanism, n, secret=SECRET_B, round=7, coder="golomb")
    check_error_law(z, mechanism, n)
    # Independence of x: no correlation of the error (or its square) with x,
    # |x| or the position of x / scale within a unit cell; under independence
    # each correlation is about N(0, 1 / m), so 5.5 / sqrt(m) is p ~ 4e-8.
    flat = z.reshape(-1)
    bound = 5.5 / math.sqrt(m)
    frac = np.mod(x / mechanism.scale, 1.0)
    for name, feature in [("x", x), ("|x|", np.abs(x)), ("frac", frac)]:
        for zname, target in [("z", flat), ("z^2", flat**2)]:
            r = np.corrcoef(feature, target)[0, 1]
            assert abs(r) < bound, f"corr({name}, {zname}) = {r:.2e} (bound {bound:.2e})"
    p_accept = _core.acceptance_probability(core_params(mechanism, lattice=1, n=n))
    check_geometric(trial_indices(payload, SECRET_B), p_accept)


def test_error_does_not_depend_on_the_input_two_sample():
    """Errors for x = 0 and x = huge are the same law (two-sample KS)."""
    mech = cepam.Gaussian(sigma=SIGMA)
    z0, _ = errors_for(np.zeros(SAMPLES * 2), mech, 2, round=1)
    z1, _ = errors_for(np.full(SAMPLES * 2, 123.456), mech, 2, round=2)
    for k in range(2):
        assert stats.ks_2samp(z0[:, k], z1[:, k]).pvalue > P_MIN


@pytest.mark.parametrize("n", range(1, 9))
def test_gaussian_latent_is_chi2_n_plus_2(n):
    r = hooks.latent_radius(key=SECRET_A, params=_core.Params(mechanism=1, scale=1.0, lattice=1, n=n),
                            first=3,
                            count=400_000)
    assert stats.kstest(r**2, stats.chi2(n + 2).cdf).pvalue > P_MIN


def _independence_p(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of the chi-square test of independence on the 10 x 10 table
    of a's and b's deciles."""
    def deciles(v):
        return np.searchsorted(np.quantile(v, np.linspace(0.1, 0.9, 9)), v)

    table = np.zeros((10, 10))
    np.add.at(table, (deciles(a), deciles(b)), 1)
    return stats.chi2_contingency(table).pvalue


def test_gaussian_z1_latents_of_neighbours_are_independent():
    """Sub-vectors j and j + 1 of Gaussian Z^1 draw their latents from
    neighbouring words of one block (format version 10: the Maxwell
    ziggurat, tests/core/test_maxwell.py): independent chi2(3) latents."""
    params = _core.Params(mechanism=1, scale=1.0, lattice=1, n=1)
    r = hooks.latent_radius(key=SECRET_A, params=params, first=0, count=400_000)
    a, b = r[0::2] ** 2, r[1::2] ** 2
    assert stats.kstest(a, stats.chi2(3).cdf).pvalue > P_MIN
    assert stats.kstest(b, stats.chi2(3).cdf).pvalue > P_MIN
    assert stats.kstest(a + b, stats.chi2(6).cdf).pvalue > P_MIN
    assert stats.spearmanr(a, b).pvalue > P_MIN
    assert _independence_p(a, b) > P_MIN


def test_gaussian_z1_noises_of_neighbours_are_independent():
    """The decoded noise of neighbouring coordinates: independent Gaussians
    (their magnitudes uncorrelated, the deciles' table flat)."""
    z, _ = errors_for(np.zeros(200_000), cepam.Gaussian(sigma=SIGMA), 1, round=3)
    a, b = z.ravel()[0::2], z.ravel()[1::2]
    assert stats.spearmanr(np.abs(a), np.abs(b)).pvalue > P_MIN
    assert _independence_p(a, b) > P_MIN


def test_gaussian_z1_radii_of_any_range_are_those_of_the_whole():
    """Ranges cut anywhere (inside a block of words, around the sub-vectors
    whose ziggurat draws read their reserve, which are gathered sixteen at a
    time): every range gives the radii of the whole."""
    params = _core.Params(mechanism=1, scale=0.5, lattice=1, n=1)
    whole = hooks.latent_radius(key=SECRET_B, params=params, first=0, count=20_000)
    assert all(hooks.latent_radius(key=SECRET_B, params=params, first=j, count=1)[0] == whole[j]
               for j in range(0, 20_000, 7))
    for first, count in [(0, 1), (3, 5), (7, 9), (8, 8), (15, 1), (16, 16), (5, 300), (17, 700),
                         (0, 1000), (999, 1), (0, 20_000), (4_097, 9_000)]:
        part = hooks.latent_radius(key=SECRET_B, params=params, first=first, count=count)
        assert np.array_equal(part, whole[first:first + count]), (first, count)


@pytest.mark.parametrize("n", range(1, 5))
def test_laplace_latent_is_gamma_n_plus_1(n):
    r = hooks.latent_radius(key=SECRET_B, params=_core.Params(mechanism=2, scale=2.0, lattice=1, n=n),
                            first=0,
                            count=400_000)
    assert stats.kstest(r / 2.0, stats.gamma(n + 1).cdf).pvalue > P_MIN


@pytest.mark.parametrize("n,expected", [(1, 1.0), (2, 0.785), (3, 0.524), (8, 0.0159)])
def test_packing_densities(n, expected):
    gaussian = _core.Params(mechanism=1, scale=1.0, lattice=1, n=n)
    laplace = _core.Params(mechanism=2, scale=1.0, lattice=1, n=min(n, 4))
    assert _core.acceptance_probability(gaussian) == pytest.approx(expected, abs=5e-4)
    assert _core.acceptance_probability(laplace) == pytest.approx(
        1 / math.factorial(n if n <= 4 else 4))


def test_a_wrong_noise_law_is_detected():
    """The checks have power: a Gaussian with 1% more variance fails them."""
    rng = np.random.default_rng(5)
    z = rng.normal(scale=SIGMA * 1.01, size=(SAMPLES, 1))
    with pytest.raises(AssertionError):
        check_error_law(z, cepam.Gaussian(sigma=SIGMA), 1)
    with pytest.raises(AssertionError):
        check_geometric(rng.geometric(0.80, size=100_000), 0.785)


def test_clipping_scales_the_whole_update():
    mech = cepam.Gaussian(sigma=1e-6)
    x = {"a": np.full(1000, 3.0), "b": np.full(3000, -4.0)}
    norm = math.sqrt(1000 * 9 + 3000 * 16)
    payload = cepam.encode(x, mech, secret=SECRET_A, round=0, client=0, clip=2.0)
    y = cepam.decode(payload, secret=SECRET_A)
    assert np.allclose(y["a"], 3.0 * 2.0 / norm, atol=1e-5)
    assert np.allclose(y["b"], -4.0 * 2.0 / norm, atol=1e-5)
    # below the bound nothing is scaled
    payload = cepam.encode(x, mech, secret=SECRET_A, round=1, client=0, clip=2 * norm)
    assert np.allclose(cepam.decode(payload, secret=SECRET_A)["a"], 3.0, atol=1e-5)
