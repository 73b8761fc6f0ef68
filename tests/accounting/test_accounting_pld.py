"""Privacy loss distributions and the accountant: composition cross-checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")

from cepam.accounting import (
    CepamGaussianRound,
    FLSetting,
    GaussianEvent,
    PLDAccountant,
    PrivacyLossDistribution,
    ProfileEvent,
    gaussian_delta,
    gaussian_epsilon,
    tight_gaussian_delta,
    tight_gaussian_epsilon,
)
from cepam.accounting import pld as pld_mod
from cepam.errors import InvalidArgumentError, InvalidTypeError

PAPER = dict(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("noise,rounds", [(1.0, 1), (3.0, 10), (10.0, 100), (30.0, 1000)])
def test_repeated_gaussians_match_closed_form_and_dp_accounting(noise, rounds):
    """R Gaussians with noise multiplier z compose to one with z / sqrt(R)."""
    acct = PLDAccountant().compose(GaussianEvent(noise), rounds)
    exact = gaussian_epsilon(1e-6, mu=math.sqrt(rounds) / noise)
    ours = acct.get_epsilon(1e-6)
    assert exact - 1e-9 <= ours <= exact * (1 + 2e-3) + 2e-4  # pessimistic and tight
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    ref = pld_privacy_accountant.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                               value_discretization_interval=1e-3)
    ref.compose(dpa.GaussianDpEvent(noise), rounds)
    assert ours == pytest.approx(ref.get_epsilon(1e-6), rel=2e-3, abs=2e-4)
    assert acct.get_delta(1.0) == pytest.approx(ref.get_delta(1.0), rel=2e-3, abs=1e-12)


@pytest.mark.parametrize("noise,rounds", [(5.0, 10_000), (1.0, 100), (20.0, 1000)])
def test_small_deltas_after_many_rounds_stay_pessimistic(noise, rounds):
    """The composed PLD's far upper tail, on which a delta of 1e-12 rests,
    is 1e-11 of its largest bin after 10^4 rounds: one FFT's rounding made
    it 10 % low there (eps 339.735 against the exact 339.833 at noise 5)."""
    acct = PLDAccountant().compose(GaussianEvent(noise), rounds)
    for delta in (1e-10, 1e-12):
        exact = gaussian_epsilon(delta, mu=math.sqrt(rounds) / noise)
        assert exact <= acct.get_epsilon(delta) <= exact * (1 + 1e-4)


def test_single_round_pld_dominates_and_hugs_the_profile():
    s = FLSetting(**PAPER)
    ev = CepamGaussianRound(sigma=0.4, setting=s)
    acct = PLDAccountant().compose(ev)
    eps = np.array([0.0, 0.01, 0.1, 0.3, 1.0, 2.0])
    exact = tight_gaussian_delta(eps, sigma=0.4, setting=s)
    got = np.array([acct.get_delta(e) for e in eps])
    assert np.all(got >= exact - 1e-15)
    np.testing.assert_allclose(got, exact, rtol=1e-3, atol=1e-12)
    e_exact = tight_gaussian_epsilon(1e-6, sigma=0.4, setting=s)
    assert e_exact - 1e-9 <= acct.get_epsilon(1e-6) <= e_exact + acct.discretization()


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("sigma", [0.3, 1.5])
def test_cepam_round_is_between_add_remove_poisson_and_a_few_percent_above(sigma):
    """The symmetrised replace-one PLD is never below dp_accounting's Poisson
    (add/remove, fixed direction) accounting of the same pair, and close to it."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    s = FLSetting(**PAPER)
    ours = PLDAccountant().compose(CepamGaussianRound(sigma=sigma, setting=s), 80)
    ref = pld_privacy_accountant.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                               value_discretization_interval=3e-4)
    ref.compose(dpa.PoissonSampledDpEvent(s.sampling_probability,
                                          dpa.GaussianDpEvent(s.noise_multiplier(sigma))), 80)
    e_ours, e_ref = ours.get_epsilon(1e-5), ref.get_epsilon(1e-5)
    assert e_ref * (1 - 2e-3) <= e_ours <= e_ref * 1.15


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("bound,sigmas", [("tight", (0.5, 1.0)), ("paper", (5.0, 8.0))])
def test_numpy_and_dp_accounting_backends_agree(bound, sigmas):
    pytest.importorskip("dp_accounting")
    s = FLSetting(**PAPER)
    events = [(CepamGaussianRound(sigma=sigmas[0], setting=s, bound=bound), 30),
              (CepamGaussianRound(sigma=sigmas[1], setting=s, bound=bound), 20)]
    a = PLDAccountant()
    b = PLDAccountant(backend="dp_accounting")
    for ev, n in events:
        a.compose(ev, n)
        b.compose(ev, n)
    assert a.discretization() == b.discretization()
    assert a.get_epsilon(1e-5) == pytest.approx(b.get_epsilon(1e-5), rel=1e-4)
    assert a.get_delta(1.0) == pytest.approx(b.get_delta(1.0), rel=1e-4, abs=1e-13)


def test_compose_equals_self_compose():
    pld = PrivacyLossDistribution.from_privacy_profile(
        lambda e: gaussian_delta(e, mu=0.7), discretization=1e-3, epsilon_max=30.0)
    two = pld.compose(pld)
    self2 = pld.self_compose(2)
    for eps in (0.0, 0.5, 1.5):
        assert two.get_delta_for_epsilon(eps) == pytest.approx(
            self2.get_delta_for_epsilon(eps), rel=1e-9, abs=1e-14)


def test_epsilon_grows_with_rounds():
    s = FLSetting(**PAPER)
    eps = [PLDAccountant().compose(CepamGaussianRound(sigma=0.4, setting=s), r).get_epsilon(1e-5)
           for r in (1, 2, 5, 10, 20, 80, 300)]
    assert all(b > a for a, b in zip(eps, eps[1:]))


def test_paper_setting_over_80_rounds():
    """sigma = 0.001: no meaningful privacy over 80 rounds at delta = 1e-5."""
    s = FLSetting(**PAPER, threat_model="aggregate")
    tight = PLDAccountant().compose(CepamGaussianRound(sigma=0.001, setting=s), 80)
    paper = PLDAccountant().compose(CepamGaussianRound(sigma=0.001, setting=s, bound="paper"), 80)
    used = 1 - (1 - s.sampling_probability) ** 80
    # Without effective noise, delta at any moderate eps is the chance of being used.
    assert tight.get_delta(100.0) == pytest.approx(used, rel=1e-6)
    e = tight.get_epsilon(1e-5)
    assert 1e5 < e < 1e6
    assert paper.get_epsilon(1e-5) == math.inf
    assert paper.get_delta(100.0) >= used


def test_lower_hull_matches_brute_force():
    rng = np.random.default_rng(1)
    x = np.linspace(-3, 3, 120)
    d = np.minimum.accumulate(np.clip(1 / (1 + np.exp(2 * x)) + 0.05 * rng.random(120), 0, 1))
    got = pld_mod._lower_hull(x, d)
    ex = np.exp(x)
    best = d.copy()
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            k = np.arange(i, j + 1)
            best[k] = np.minimum(best[k], d[i] + (d[j] - d[i]) * (ex[k] - ex[i]) / (ex[j] - ex[i]))
    np.testing.assert_allclose(got, best, atol=1e-14)


def test_nonconvex_profile_gives_valid_masses():
    """The paper's profile is not convex in e^eps (its group-privacy factor makes
    it rise again, so the running minimum is flat, then drops); the PLD uses
    the lower convex hull."""
    s = FLSetting(**PAPER)
    ev = CepamGaussianRound(sigma=0.5, setting=s, bound="paper")
    h = 1.0
    m, full = pld_mod.profile_grid_deltas(ev.privacy_profile, discretization=h,
                                          epsilon_max=56_000.0)
    k = np.arange(0, m + 1) * h
    raw = np.minimum.accumulate(ev.privacy_profile(k))
    assert pld_mod._ctd_masses_symmetric(raw, h) is None      # not convex
    assert np.all(full[m:] <= raw + 1e-15)          # a minorant of the bound ...
    assert np.max(raw - full[m:]) > 1e-3            # ... strictly below somewhere
    masses = pld_mod._ctd_masses(full, h)
    assert masses.min() >= 0 and masses.sum() + full[-1] == pytest.approx(1.0, abs=1e-9)
    # ... and still above the tight bound (an upper bound on the true profile)
    assert np.all(full[m:] >= tight_gaussian_delta(k, sigma=0.5, setting=s) - 1e-12)


def test_infinity_mass_and_identity():
    pld = PrivacyLossDistribution.from_privacy_profile(
        lambda e: np.full_like(e, 0.25), discretization=0.1, epsilon_max=1.0)
    assert pld.infinity_mass == pytest.approx(0.25)
    assert pld.get_epsilon_for_delta(0.2) == math.inf
    assert pld.get_epsilon_for_delta(0.3) == 0.0
    three = pld.self_compose(3)
    assert three.infinity_mass == pytest.approx(1 - 0.75**3, rel=1e-9)
    ident = PrivacyLossDistribution.identity(discretization=0.1)
    assert ident.get_delta_for_epsilon(0.0) == 0.0 and ident.get_epsilon_for_delta(1e-9) == 0.0
    assert PLDAccountant().get_epsilon(1e-5) == 0.0


def test_custom_profile_event():
    ev = ProfileEvent(lambda e: gaussian_delta(e, mu=0.5), name="gauss")
    a = PLDAccountant().compose(ev, 4).get_epsilon(1e-5)
    b = PLDAccountant().compose(GaussianEvent(2.0), 4).get_epsilon(1e-5)
    assert a == pytest.approx(b, rel=1e-12)
    assert ev.describe() == {"event": "profile", "name": "gauss"}


def test_accountant_bad_input():
    acct = PLDAccountant()
    with pytest.raises(InvalidTypeError):
        acct.compose(object())
    with pytest.raises(InvalidArgumentError):
        acct.compose(GaussianEvent(1.0), 0)
    with pytest.raises(InvalidArgumentError):
        GaussianEvent(0.0)
    with pytest.raises(InvalidArgumentError):
        PLDAccountant(discretization=-1.0)
    with pytest.raises(InvalidArgumentError):
        PLDAccountant(backend="tensorflow")
    acct.compose(GaussianEvent(1.0))
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(InvalidArgumentError):
            acct.get_epsilon(bad)
    with pytest.raises(InvalidArgumentError):
        acct.get_delta(-1.0)
    with pytest.raises(InvalidArgumentError):
        CepamGaussianRound(sigma=1.0, setting=FLSetting(**PAPER), bound="loose")
    with pytest.raises(InvalidArgumentError):
        PrivacyLossDistribution.from_privacy_profile(lambda e: e * 0 + 2.0,
                                                     discretization=0.1, epsilon_max=1.0)
    p1 = PrivacyLossDistribution.identity(discretization=0.1)
    with pytest.raises(InvalidArgumentError):
        p1.compose(PrivacyLossDistribution.identity(discretization=0.2))


@pytest.mark.parametrize("profile,err,match", [
    (lambda e: None, InvalidTypeError, "array of deltas"),  # (numpy: "cannot accumulate")
    (lambda e: np.full(3, 0.1), InvalidArgumentError, "one delta per eps"),
    (lambda e: np.linspace(0, 1, len(e)), InvalidArgumentError, "never rise"),  # (gave eps 0)
], ids=["none", "shape", "rising"])
def test_a_profile_event_s_deltas_are_checked(profile, err, match):
    with pytest.raises(err, match=match):
        PLDAccountant().compose(ProfileEvent(profile)).get_epsilon(1e-5)


def test_a_profile_rising_by_rounding_only_is_taken():
    ripple = ProfileEvent(lambda e: gaussian_delta(e, mu=0.5) + 1e-14 * (np.arange(e.size) % 2))
    eps = PLDAccountant().compose(ripple, 4).get_epsilon(1e-5)
    assert eps == pytest.approx(PLDAccountant().compose(GaussianEvent(2.0), 4).get_epsilon(1e-5),
                                rel=1e-6)


def test_an_array_backend_is_a_type_error():
    """numpy's ambiguous truth value (a ValueError) before."""
    with pytest.raises(InvalidTypeError, match="backend"):
        PLDAccountant(backend=np.array([1.0, 2.0]))


def test_explicit_discretization_is_honoured_or_refused():
    """A step the caller passes is used as given (the review found 1e-5
    silently coarsened to 9e-5); one too fine for the event is refused with
    the step that works; None lets the accountant choose (and coarsen)."""
    s = FLSetting(**PAPER)
    event = CepamGaussianRound(sigma=0.3, setting=s)
    fine = PLDAccountant(discretization=1e-5).compose(event, 80)
    assert fine.discretization() == 1e-5
    auto = PLDAccountant().compose(event, 80)
    assert auto.discretization() > 1e-5
    # a finer grid is at least as tight and both stay above the truth
    assert fine.get_epsilon(1e-5) <= auto.get_epsilon(1e-5) + 1e-12
    assert fine.get_epsilon(1e-5) == pytest.approx(auto.get_epsilon(1e-5), rel=1e-3)
    tiny = CepamGaussianRound(sigma=1e-3, setting=s)   # losses reach ~7.5e4 nats
    with pytest.raises(InvalidArgumentError, match=r"too fine.*discretization >= "):
        PLDAccountant(discretization=1e-4).compose(tiny)
    coarse = PLDAccountant(discretization=1e-4, coarsen=True).compose(tiny)
    assert coarse.discretization() > 1e-4
    assert PLDAccountant().compose(tiny).discretization() == coarse.discretization()
    with pytest.raises(InvalidTypeError):
        PLDAccountant(coarsen="yes")


def test_cli_discretization_is_honoured(capsys):
    from cepam.cli import main

    args = ["privacy", "--sigma", "0.3", "--clip", "1", "--clients", "30", "--samples-per-round",
            "15", "--dataset-size", "1666", "--rounds", "80", "--delta", "1e-5", "--json"]
    assert main([*args, "--discretization", "1e-5"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["method"]["discretization"] == 1e-5


def test_cli_refuses_a_discretization_too_fine_for_sigma(capsys):
    from cepam.cli import main

    code = main(["privacy", "--sigma", "0.001", "--clip", "1", "--clients", "30",
                 "--samples-per-round", "15", "--dataset-size", "1666", "--rounds", "80",
                 "--delta", "1e-5", "--discretization", "1e-4"])
    assert code == 2
    assert "too fine" in capsys.readouterr().err


def test_a_law_of_almost_no_finite_mass_composes_to_infinite_epsilon():
    """All but e^-90 of 10^4 runs' mass is at +inf (one run: 0.991 at loss 0,
    the rest at +inf, as `cepam privacy --sigma 1e-6 ... --rounds 10000`
    makes): both Chernoff bounds fell outside the support and the window
    was empty, an internal error; now the composition keeps its finite
    part and certifies no finite eps."""
    one = PrivacyLossDistribution(discretization=1e-4, lower_index=0, probs=np.array([0.991]),
                                  infinity_mass=0.009)
    many = one.self_compose(10_000)
    assert many.probs.size >= 1 and np.all(np.isfinite(many.probs))
    assert many.infinity_mass == pytest.approx(1.0)
    assert many.get_epsilon_for_delta(1e-5) == math.inf
    assert one.self_compose(3).get_epsilon_for_delta(0.1) == 0.0  # (0.991^3 finite, at loss 0)


def test_a_composition_too_large_is_refused_or_coarsened(monkeypatch):
    """A caller's own grid keeps its step and refuses a composition of more
    bins than allowed (CompositionTooLarge, an InvalidArgumentError); where
    the accountant chooses the step it composes again on a coarser grid,
    which stays above the exact eps of 2,000 Gaussians and near it."""
    event = GaussianEvent(1.0)
    pld = PrivacyLossDistribution.from_privacy_profile(
        event.privacy_profile, discretization=1e-4, epsilon_max=40.0)
    with pytest.raises(pld_mod.CompositionTooLarge, match="needs .* bins, more than 1000") as e:
        pld.self_compose(2_000, max_bins=1_000)
    assert isinstance(e.value, InvalidArgumentError) and e.value.bins > 1_000
    import cepam.accounting.accountant as accountant

    monkeypatch.setattr(accountant, "_MAX_CHOSEN_BINS", 1 << 14)
    auto = PLDAccountant().compose(event, 2_000)
    exact = gaussian_epsilon(1e-5, mu=math.sqrt(2_000))
    assert auto.discretization() > 1e-4 and exact <= auto.get_epsilon(1e-5) <= exact * 1.05
    monkeypatch.setattr(accountant, "_COARSENINGS", 0)
    with pytest.raises(pld_mod.CompositionTooLarge):
        PLDAccountant().compose(event, 2_000).get_epsilon(1e-5)
