"""Analytic Gaussian mechanism (Balle and Wang 2018) and numerical robustness."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")

from cepam.accounting import (
    FLSetting,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    gaussian_noise_multiplier,
    paper_gaussian_delta,
    paper_gaussian_round,
    tight_gaussian_delta,
    tight_gaussian_round,
)
from cepam.accounting.analytic_gaussian import gaussian_log_delta
from cepam.errors import InvalidArgumentError


def _scipy_reference(eps: float, mu: float) -> float:
    from scipy.stats import norm

    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 2.5, 7.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0])
def test_delta_matches_textbook_formula_where_it_is_stable(mu, eps):
    ref = _scipy_reference(eps, mu)
    got = gaussian_delta(eps, mu=mu)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("noise", [0.3, 1.0, 4.0, 30.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-6, 1e-10])
def test_epsilon_and_sigma_match_dp_accounting(noise, delta):
    gm = pytest.importorskip("dp_accounting.gaussian_mechanism")
    ours = gaussian_epsilon(delta, mu=1.0 / noise)
    theirs = gm.get_epsilon_gaussian(noise, delta)
    assert ours == pytest.approx(theirs, rel=1e-8, abs=1e-10)
    if theirs > 0:
        assert gaussian_noise_multiplier(theirs, delta) == pytest.approx(noise, rel=1e-7)


def test_delta_matches_dp_accounting_privacy_loss_class():
    plm = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    for noise in (0.5, 1.0, 3.0):
        ref = plm.GaussianPrivacyLoss(noise, sensitivity=1.0)
        for eps in (0.0, 0.5, 2.0, 6.0):
            assert gaussian_delta(eps, mu=1 / noise) == pytest.approx(
                ref.get_delta_for_epsilon(eps), rel=1e-7, abs=1e-14)


def test_round_trips():
    for mu in (0.2, 1.0, 5.0):
        for delta in (1e-3, 1e-9):
            eps = gaussian_epsilon(delta, mu=mu)
            assert gaussian_delta(eps, mu=mu) == pytest.approx(delta, rel=1e-8)
            assert gaussian_mu(eps, delta) == pytest.approx(mu, rel=1e-7)


def test_epsilon_is_never_below_the_root():
    """Brent's answer lies within its tolerance of the root, on either side:
    139 of these 240 came back just below it (delta(eps) above the target by
    1e-13 relative), an eps smaller than the one derived."""
    for mu in np.logspace(-2, 3, 60):
        for delta in (1e-3, 1e-5, 1e-8, 1e-12):
            eps = gaussian_epsilon(delta, mu=float(mu))
            assert eps == 0.0 or gaussian_log_delta(eps, float(mu)) <= math.log(delta)


def test_epsilon_beyond_float64_is_inf():
    assert gaussian_epsilon(1e-5, mu=1e308) == math.inf  # (scipy raised RuntimeError)
    assert gaussian_epsilon(1e-5, mu=1e150) == pytest.approx(0.5e300, rel=1e-12)


def test_epsilon_zero_when_delta_is_loose():
    # delta(0) = 2 Phi(mu/2) - 1
    assert gaussian_epsilon(0.9, mu=0.5) == 0.0


def test_delta_is_monotone_and_bounded():
    eps = np.linspace(0, 40, 401)
    for mu in (0.1, 1.0, 10.0):
        d = gaussian_delta(eps, mu=mu)
        assert np.all(np.diff(d) <= 1e-16)
        assert np.all((d >= 0) & (d <= 1))
    # increasing in mu at fixed eps
    mus = np.logspace(-2, 2, 41)
    d = np.array([gaussian_delta(1.0, mu=m) for m in mus])
    assert np.all(np.diff(d) >= 0)
    inner = (d[:-1] > 1e-300) & (d[1:] < 1 - 1e-15)
    assert inner.sum() > 10 and np.all(np.diff(d)[inner] > 0)


def test_extreme_arguments_give_no_nan_or_overflow():
    eps = np.array([0.0, 1e-6, 1.0, 1e3, 1e5, 1e9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for mu in (1e-13, 1e-6, 1.0, 1e6, 1e13):
            d = gaussian_delta(eps, mu=mu)
            assert np.all(np.isfinite(d)) and np.all((d >= 0) & (d <= 1))
    assert gaussian_delta(1e5, mu=1e13) == 1.0
    assert gaussian_delta(1.0, mu=1e-13) == 0.0
    # tiny mu at eps = 0: delta = erf(mu / (2 sqrt 2)) ~ mu / sqrt(2 pi)
    assert gaussian_delta(0.0, mu=1e-10) == pytest.approx(1e-10 / math.sqrt(2 * math.pi), rel=1e-5)


@pytest.mark.parametrize("threat_model", ["aggregate", "client", "server"])
def test_cepam_bounds_are_finite_over_extreme_sigma_and_eps_tilde(threat_model):
    s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666, threat_model=threat_model)
    eps = np.array([0.0, 1e-6, 1.0, 10.0, 1e3, 1e5, 1e9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for sigma in np.logspace(-12, 12, 13):
            for et in (1e-6, 1.0, 5.9, 100.0, 1e5):
                for fn in (tight_gaussian_round, paper_gaussian_round):
                    g = fn(et, sigma=sigma, setting=s)
                    assert math.isfinite(g.epsilon) and 0.0 <= g.delta <= 1.0
            for fn in (tight_gaussian_delta, paper_gaussian_delta):
                d = fn(eps, sigma=sigma, setting=s)
                assert np.all(np.isfinite(d)) and np.all((d >= 0) & (d <= 1))
    # eps_t = 1e5 does not overflow eps = log(1 + p (e^eps_t - 1)) ~ eps_t + log p
    g = tight_gaussian_round(1e5, sigma=1.0, setting=s)
    assert g.epsilon == pytest.approx(1e5 + math.log(s.sampling_probability), rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, 1.0, 2.0, float("nan")])
def test_bad_delta_raises(bad):
    with pytest.raises(InvalidArgumentError):
        gaussian_epsilon(bad, mu=1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_bad_mu_raises(bad):
    with pytest.raises(InvalidArgumentError):
        gaussian_delta(1.0, mu=bad)


def test_negative_epsilon_raises():
    with pytest.raises(InvalidArgumentError):
        gaussian_delta(-0.1, mu=1.0)
    with pytest.raises(InvalidArgumentError):
        gaussian_mu(-1.0, 1e-5)
