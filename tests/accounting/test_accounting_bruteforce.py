"""Brute force: the exact hockey-stick divergence of small CEPAM rounds.

A client holds ``n`` scalar samples; a round draws ``tau`` indices uniformly
with replacement, sums the drawn values (a stand-in for ``tau`` SGD steps),
clips the sum to ``[-gamma, gamma]`` and the adversary sees it plus Gaussian
noise with the setting's noise multiplier. Enumerating all ``n**tau`` index
sequences gives the output laws on neighbouring datasets as explicit Gaussian
mixtures; their hockey-stick divergence is integrated numerically. Being the
true divergence for one pair of datasets, it must stay below every valid
bound (the paper's and the tight one), and for data that saturate the clip in
opposite directions it must *equal* the tight bound.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

norm = pytest.importorskip("scipy.stats",
                           reason="cepam.accounting needs scipy (cepam[privacy])").norm

from cepam.accounting import (
    CepamGaussianRound,
    FLSetting,
    PLDAccountant,
    paper_gaussian_delta,
    tight_gaussian_delta,
)
from cepam.accounting._numeric import amplified_epsilon

GRID = 100_001
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed it


def _centers(values, tau, clip):
    """Distinct clipped sums over all index sequences, with their probabilities."""
    n = len(values)
    sums = [np.clip(sum(values[i] for i in seq), -clip, clip)
            for seq in itertools.product(range(n), repeat=tau)]
    c, counts = np.unique(np.round(sums, 12), return_counts=True)
    return c, counts / counts.sum()


def _density(y, centers, weights, std):
    return sum(w * norm.pdf(y, c, std) for c, w in zip(centers, weights))


def hockey_stick(values_d, values_d2, tau, clip, std, eps):
    """H_{e^eps}(M(D) || M(D')) by numerical integration (vectorised in eps)."""
    cp, wp = _centers(values_d, tau, clip)
    cq, wq = _centers(values_d2, tau, clip)
    y = np.linspace(-clip - 12 * std, clip + 12 * std, GRID)
    p, q = _density(y, cp, wp, std), _density(y, cq, wq, std)
    eps = np.atleast_1d(eps)
    dy = y[1] - y[0]
    return np.array([_trapezoid(np.maximum(p - math.exp(e) * q, 0.0), dx=dy) for e in eps])


def _setting(tau, n, clients=1, threat_model="aggregate"):
    return FLSetting(clip=1.0, clients=clients, samples_per_round=tau, dataset_size=n,
                     threat_model=threat_model)


def _std(setting, sigma):
    """Noise std in units of the victim's clipped update (sensitivity 2 gamma)."""
    return 2 * setting.clip * setting.noise_multiplier(sigma)


@pytest.mark.parametrize("tau,n", [(1, 3), (2, 3), (2, 5)])
@pytest.mark.parametrize("sigma", [0.8, 2.0])
def test_tight_bound_is_attained_by_saturating_data(tau, n, sigma):
    s = _setting(tau, n)
    big = 100.0
    d = [big * 10 * tau] + [-big] * (n - 1)  # sample 0 drawn -> +gamma, else -gamma
    d2 = [-big] * n  # sample 0 replaced by an ordinary one -> always -gamma
    eps_t = np.array([0.05, 0.5, 1.5, 3.0])
    eps = amplified_epsilon(eps_t, s.sampling_probability)
    brute = hockey_stick(d, d2, tau, 1.0, _std(s, sigma), eps)
    tight = tight_gaussian_delta(eps, sigma=sigma, setting=s)
    assert np.all(brute > 1e-6)
    np.testing.assert_allclose(brute, tight, rtol=1e-6)
    paper = paper_gaussian_delta(eps, sigma=sigma, setting=s)
    assert np.all(brute <= paper * (1 + 1e-6))
    # the reverse order of neighbours is covered too
    brute_rev = hockey_stick(d2, d, tau, 1.0, _std(s, sigma), eps)
    assert np.all(brute_rev <= tight * (1 + 1e-6))


@pytest.mark.parametrize("seed", range(6))
def test_random_data_stay_below_both_bounds(seed):
    rng = np.random.default_rng(seed)
    tau = 1 + seed % 2
    n = 3 + seed % 3
    sigma = [0.5, 1.0, 2.5][seed % 3]
    threat = ["aggregate", "client"][seed % 2]
    s = _setting(tau, n, clients=3, threat_model=threat)
    d = list(rng.normal(0, 1.5, n))
    d2 = list(d)
    d2[0] = float(rng.normal(0, 3.0))
    eps = np.array([0.0, 0.1, 0.5, 1.0, 2.0])
    std = _std(s, sigma)
    tight = tight_gaussian_delta(eps, sigma=sigma, setting=s)
    paper = paper_gaussian_delta(eps, sigma=sigma, setting=s)
    for a, b in ((d, d2), (d2, d)):
        brute = hockey_stick(a, b, tau, 1.0, std, eps)
        assert brute[0] > 1e-4  # the pair is distinguishable at all
        assert np.all(brute <= tight + 1e-9)
        assert np.all(brute <= paper + 1e-9)


def test_two_rounds_switching_direction_stay_below_composed_bound():
    """Round 1 behaves like 'remove' (the replaced sample looks absent), round 2
    like 'add': the composition must still be dominated by the accountant's
    symmetrised PLD of two tight rounds."""
    tau, n, sigma = 1, 3, 2.0
    s = _setting(tau, n)
    std = _std(s, sigma)
    big = 50.0
    r1 = ([big, -big, -big], [-big, -big, -big])   # D: sample 0 pushes to +gamma
    r2 = ([-big, -big, -big], [big, -big, -big])   # D': sample 0 pushes to +gamma
    y = np.linspace(-1 - 9 * std, 1 + 9 * std, 1601)
    dens = []
    for a, b in (r1, r2):
        cp, wp = _centers(a, tau, 1.0)
        cq, wq = _centers(b, tau, 1.0)
        dens.append((_density(y, cp, wp, std), _density(y, cq, wq, std)))
    pp = np.outer(dens[0][0], dens[1][0])
    qq = np.outer(dens[0][1], dens[1][1])
    dy = y[1] - y[0]
    acct = PLDAccountant().compose(CepamGaussianRound(sigma=sigma, setting=s), 2)
    for eps in (0.0, 0.3, 0.8):
        brute = float(np.maximum(pp - math.exp(eps) * qq, 0).sum() * dy * dy)
        assert brute > 1e-3
        assert brute <= acct.get_delta(eps) + 1e-6
