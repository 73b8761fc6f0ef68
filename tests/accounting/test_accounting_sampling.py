"""Client sampling and the two neighbouring relations (cepam.accounting.cohort,
.subsampled_gaussian, ClientLevelRound): against dp-accounting where the
mechanism is the standard one, against a brute-force computation of the
actual mechanism (per-client noise, the cohort's law, the top-up, the empty
round) on a small grid, and against today's values without sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")
from scipy import stats  # noqa: E402

from cepam.accounting import (  # noqa: E402
    ClientLevelRound, Ledger, PLDAccountant, calibrate_client_sigma, client_epsilon,
    cohort_cap, cohort_tail, population, topup_noise_std,
)
from cepam.accounting.subsampled_gaussian import _add, _remove  # noqa: E402
from cepam.errors import InvalidArgumentError  # noqa: E402

DELTA = 1e-5


# ---------------------------------------------------------------- dp-accounting
@pytest.mark.parametrize("sigma,clients,q,rounds", [
    (0.08, 100, 0.1, 50), (0.05, 100, 0.01, 100), (0.3, 20, 0.05, 300), (0.2, 25, 0.5, 20),
])
def test_add_remove_matches_dp_accounting(sigma, clients, q, rounds):
    """Where cepam's mechanism is the standard one (add/remove, the noise on the
    sum topped up to T clients' worth: the Poisson-subsampled Gaussian of noise
    multiplier sigma sqrt(T) / clip), eps is within 1 % of dp-accounting's PLD
    and never below it."""
    dpa = pytest.importorskip("dp_accounting")
    cap = cohort_cap(clients=clients, sample_rate=q)
    z = sigma * math.sqrt(cap) / 1.0
    acc = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), rounds)
    reference = acc.get_epsilon(DELTA)
    ours = client_epsilon(sigma=sigma, clip=1.0, rounds=rounds, clients=clients, delta=DELTA,
                          sample_rate=q, relation="add-remove", threat_model="aggregate")
    assert ours >= reference
    assert ours <= reference * 1.01


def test_sample_rate_one_is_todays_value():
    """sample_rate=1 (the default) gives the exact Gaussian composition it
    always gave: mu = sqrt(R) 2 clip / (sigma sqrt(m))."""
    from cepam.accounting import gaussian_epsilon

    for clients, tm, m in ((10, "client", 9), (10, "aggregate", 10), (1, "server", 1)):
        expected = gaussian_epsilon(DELTA, mu=math.sqrt(40) * 2 * 0.5 / (0.7 * math.sqrt(m)))
        for kwargs in ({}, {"sample_rate": 1.0, "relation": "replace-one"}):
            assert client_epsilon(sigma=0.7, clip=0.5, rounds=40, clients=clients, delta=DELTA,
                                  threat_model=tm, **kwargs) == expected


def test_add_remove_below_replace_one_from_ten_clients():
    """The add/remove relation moves the sum by clip, not 2 clip: below
    replace-one for every cohort of 10 or more, sampled or not."""
    for clients in (10, 30, 100):
        for q in (1.0, 0.2):
            if q < 1 and clients * round(1 / q) != round(clients / q):
                continue
            kw = dict(sigma=0.5, clip=1.0, rounds=20, clients=clients, delta=DELTA,
                      sample_rate=q)
            assert client_epsilon(relation="add-remove", **kw) < client_epsilon(
                relation="replace-one", **kw)


def test_single_client_add_remove():
    """One client in all (derived in docs/privacy.md): removing it leaves an
    empty round, which releases the top-up noise alone, T = 2 clients' worth;
    so the pair is N(x, 2 sigma^2) against N(0, 2 sigma^2), one Gaussian of
    mu = clip / (sigma sqrt 2) (against the aggregate; a curious client, who
    could only be that one client, is not an adversary here)."""
    from cepam.accounting import gaussian_epsilon

    assert cohort_cap(clients=1) == 2
    assert cohort_tail(clients=1, sample_rate=1.0, cap=2) == 0.0
    eps = client_epsilon(sigma=5.0, clip=1.0, rounds=3, clients=1, delta=DELTA,
                         relation="add-remove", threat_model="aggregate")
    assert eps == gaussian_epsilon(DELTA, mu=math.sqrt(3) / (5.0 * math.sqrt(2)))


def test_add_remove_against_the_server_view_is_refused():
    with pytest.raises(InvalidArgumentError, match="presence"):
        client_epsilon(sigma=1.0, clip=1.0, rounds=1, clients=10, delta=DELTA,
                       relation="add-remove", threat_model="server")
    with pytest.raises(InvalidArgumentError, match="replace-one"):
        ClientLevelRound(sigma=1.0, clip=1.0, clients=10, sample_rate=0.5, sampling="fixed",
                         relation="add-remove")


def test_calibration_with_sampling_is_five_times_smaller():
    """The issue's check: eps 4 at delta 1e-5 over 100 rounds of 100 clients a
    round, add/remove; Poisson rate 0.01 (a population of 10,000) against
    every client every round."""
    kw = dict(target_epsilon=4, target_delta=1e-5, rounds=100, clients=100,
              relation="add-remove", clip=1)
    sampled = calibrate_client_sigma(sample_rate=0.01, **kw)
    unsampled = calibrate_client_sigma(**kw)
    assert unsampled / sampled >= 5
    eps = client_epsilon(sigma=sampled, clip=1, rounds=100, clients=100, delta=1e-5,
                         sample_rate=0.01, relation="add-remove")
    assert 4 * 0.995 < eps <= 4


def test_calibration_meets_the_target_in_every_setting():
    for kw in ({"relation": "replace-one", "sample_rate": 0.1},
               {"relation": "add-remove", "sample_rate": 0.1, "count_sigma": 2.0},
               {"relation": "add-remove"}, {"relation": "replace-one", "count_sigma": 3.0}):
        sigma = calibrate_client_sigma(target_epsilon=2.0, target_delta=1e-6, rounds=30,
                                       clients=50, clip=0.5, **kw)
        eps = client_epsilon(sigma=sigma, clip=0.5, rounds=30, clients=50, delta=1e-6, **kw)
        assert 2.0 * 0.99 < eps <= 2.0, kw


def test_count_noise_costs_privacy():
    """Adaptive clipping's released count adds to the round's mu in quadrature."""
    base = dict(sigma=0.5, clip=1.0, rounds=10, clients=20, delta=DELTA)
    with_count = client_epsilon(count_sigma=1.0, **base)
    assert with_count > client_epsilon(**base)
    z = 1 / ClientLevelRound(sigma=0.5, clip=1.0, clients=20, count_sigma=1.0).mu
    assert z == pytest.approx((19 * (1 / (0.5 / 2) ** 2 + 1)) ** -0.5 * 19, rel=1e-12) or \
        z == pytest.approx(math.sqrt(19) / math.sqrt((2 / 0.5) ** 2 + 1), rel=1e-12)


def test_cohort_helpers():
    assert population(clients=100, sample_rate=0.1) == 1000
    with pytest.raises(InvalidArgumentError):
        population(clients=10.55, sample_rate=0.1)
    cap = cohort_cap(clients=100, sample_rate=0.1)
    assert stats.binom.sf(cap, 1001, 0.1) <= 1e-12 < stats.binom.sf(cap - 1, 1001, 0.1)
    assert topup_noise_std(sigma=0.5, cohort=cap - 4, cap=cap) == 1.0
    assert topup_noise_std(sigma=0.5, cohort=cap + 3, cap=cap) == 0.0


def test_a_smaller_cohort_tail_gives_a_finite_eps_where_the_default_gives_none(tmp_path):
    """Each add/remove round pays tail (1 + e^eps) in delta: at eps about
    9.6 and delta 1e-8 the default 1e-12 alone exceeds delta (no finite
    eps), where dp-accounting certifies 9.61 for the Poisson-subsampled
    Gaussian of noise multiplier 0.5 (review). A tail of 1e-30 raises T
    from 36 to 56 at the same central noise (sigma sqrt(T) = 0.5) and gives
    9.73. The cap is the smallest T with P(Binomial(N + 1, q) > T) <= tail,
    also below 1e-17, where scipy's isf returns the whole population."""
    n, q = 10, 0.1
    assert (cohort_cap(clients=n, sample_rate=q), cohort_cap(clients=n, sample_rate=q,
                                                             tail=1e-30)) == (36, 56)
    for tail in (1e-12, 1e-20, 1e-30, 1e-100):
        cap = cohort_cap(clients=n, sample_rate=q, tail=tail)
        assert stats.binom.sf(cap, 101, q) <= tail < stats.binom.sf(cap - 1, 101, q)
    eps = {}
    for tail in (1e-12, 1e-30):
        cap = cohort_cap(clients=n, sample_rate=q, tail=tail)
        eps[tail] = client_epsilon(sigma=0.5 / math.sqrt(cap), clip=1.0, rounds=1, clients=n,
                                   delta=1e-8, sample_rate=q, relation="add-remove",
                                   cohort_tail=tail)
    assert eps[1e-12] == math.inf and 9.61 < eps[1e-30] < 9.61 * 1.02
    # Calibration meets the target; the round records and rebuilds its tail.
    sigma = calibrate_client_sigma(target_epsilon=8.0, target_delta=1e-8, rounds=100,
                                   clients=100, clip=1.0, sample_rate=0.01,
                                   relation="add-remove", cohort_tail=1e-30)
    event = ClientLevelRound(sigma=sigma, clip=1.0, clients=100, sample_rate=0.01,
                             relation="add-remove", cohort_tail=1e-30)
    assert event.cap == 234 and event.describe()["cohort_tail"] == 1e-30
    assert 7.9 < PLDAccountant().compose(event, 100).get_epsilon(1e-8) <= 8.0
    with Ledger(tmp_path / "l.db", delta=1e-8) as ledger:
        ledger.record(event, run_id="a", round=1)
        assert ledger.events()[0].event == event
    assert "cohort_tail" not in ClientLevelRound(sigma=1.0, clip=1.0, clients=4).describe()
    for bad in (0.0, 1e-3, float("nan")):
        with pytest.raises(InvalidArgumentError, match="cohort_tail must"):
            cohort_cap(clients=n, sample_rate=q, tail=bad)


def test_ledger_keeps_one_relation(tmp_path):
    ledger = Ledger(tmp_path / "l.db", name="fed", delta=DELTA)
    add = ClientLevelRound(sigma=0.1, clip=1.0, clients=100, sample_rate=0.1,
                           relation="add-remove")
    ledger.record(add, run_id="a", round=0)
    assert Ledger(tmp_path / "l.db", name="fed", delta=DELTA).events()[0].event == add
    with pytest.raises(InvalidArgumentError, match="one neighbouring relation"):
        ledger.record(ClientLevelRound(sigma=0.1, clip=1.0, clients=100), run_id="b", round=0)
    eps = ledger.epsilon_with([(add, 49)])
    assert eps == pytest.approx(PLDAccountant().compose(add, 50).get_epsilon(DELTA), rel=1e-9)
    # A GaussianEvent names no relation: it joins, and the terms stay add/remove's.
    from cepam.accounting import GaussianEvent

    ledger.record(GaussianEvent(noise_multiplier=3.0), run_id="c", round=0)
    assert ledger.report()["terms"].startswith("add-remove neighbours, client level")


def test_an_accountant_and_an_analysis_keep_one_relation_and_one_level():
    """A composition that mixes relations or levels has no one eps: a
    client-level round composed with 80 sample-level ones read 3.1 where the
    client-level eps of the 81 rounds is 50, and a replace-one round (no
    top-up: its noise tells the cohort) composed into an add/remove eps
    added 0.08.  The accountant refuses the mix as the ledger does, and an
    analysis refuses events not at its own level and relation."""
    from cepam.accounting import (CepamGaussianRound, FLSetting, GaussianEvent,
                                  create_analysis)

    setting = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
    sample = CepamGaussianRound(sigma=0.5, setting=setting)
    client = ClientLevelRound(sigma=0.5, clip=1.0, clients=30)
    add = ClientLevelRound(sigma=0.05, clip=1.0, clients=100, sample_rate=0.01,
                           relation="add-remove")
    with pytest.raises(InvalidArgumentError, match="one level"):
        PLDAccountant().compose(sample, 80).compose(client)
    with pytest.raises(InvalidArgumentError, match="one neighbouring relation"):
        PLDAccountant().compose(add, 100).compose(client)
    # A GaussianEvent is at the caller's level: it goes with either.
    both = PLDAccountant().compose(add, 2).compose(GaussianEvent(noise_multiplier=2.0))
    assert both.get_epsilon(DELTA) > PLDAccountant().compose(add, 2).get_epsilon(DELTA)
    analysis = create_analysis("client", clip=1.0, relation="add-remove")
    with pytest.raises(InvalidArgumentError, match="cannot account a client level event "
                                                   "under relation 'replace-one'"):
        analysis.epsilon([(client, 1)], delta=DELTA)
    with pytest.raises(InvalidArgumentError, match="cannot account a sample level event"):
        analysis.epsilon([(sample, 1)], delta=DELTA)
    with pytest.raises(InvalidArgumentError, match="cannot account a client level event"):
        create_analysis("tight", setting=setting).epsilon([(add, 1)], delta=DELTA)
    assert analysis.epsilon([(add, 3)], delta=DELTA) == pytest.approx(
        PLDAccountant().compose(add, 3).get_epsilon(DELTA), rel=1e-12)


# ---------------------------------------------------------------- brute force
def _hockey_stick(p, q, alpha, *, dim, clip):
    """H_alpha(P || Q) of two output laws of a round, computed from the laws
    themselves.  A law is (mass of "nothing released", [(weight, b, v)]): a
    mixture of N(b clip e_1, v I_dim).  The likelihood ratio depends on y_1 and
    s = ||y_2..d||^2 only (s / v is chi-square with dim - 1 degrees of
    freedom), so the integral is two-dimensional."""
    (atom_p, comp_p), (atom_q, comp_q) = p, q
    vs = [v for _, _, v in comp_p + comp_q]
    vmax, vmin = max(vs), min(vs)
    y = np.linspace(-clip - 12 * math.sqrt(vmax), clip + 12 * math.sqrt(vmax), 4001)
    if dim > 1:
        s_lo = stats.chi2.ppf(1e-13, dim - 1) * vmin
        s_hi = stats.chi2.isf(1e-13, dim - 1) * vmax
        s = np.geomspace(max(s_lo, 1e-300), s_hi, 1201)
    else:
        s = None

    def density(components):
        by_variance = {}  # one chi-square factor per variance
        for w, b, v in components:
            f = w * stats.norm.pdf(y, loc=b * clip, scale=math.sqrt(v))
            by_variance[v] = by_variance.get(v, 0.0) + f
        total = 0.0
        for v, f in by_variance.items():
            if s is not None:  # the chi-square factor, normalised on the grid
                g = stats.chi2.pdf(s / v, dim - 1) / v
                f = np.outer(f, g / np.trapezoid(g, s))
            total = total + f
        return total

    gap = np.maximum(density(comp_p) - alpha * density(comp_q), 0.0)
    integral = np.trapezoid(gap, y, axis=0)
    if s is not None:
        integral = np.trapezoid(integral, s)
    return float(integral) + max(atom_p - alpha * atom_q, 0.0)


def _round_laws(*, others, q, sigma, cap, shift_p, shift_q, topup):
    """The laws of one round's released sum when the target's update is
    shift_p (resp. shift_q) clips along e_1, or absent (None): others ~
    Binomial(others, q) clients with zero updates (the adversary knows them),
    the target in with probability q; noise max(cap, k) sigma^2 with the
    top-up (an empty round releases that noise alone), k sigma^2 and nothing
    released for an empty round without."""
    def law(shift):
        atom, comps = 0.0, []
        for j in range(others + 1):
            pj = stats.binom.pmf(j, others, q)
            for b, pb in ((0, 1 - q), (1, q)) if shift is not None else ((0, 1.0),):
                k, w = j + b, pj * pb
                if w < 1e-16:  # changes H by at most 1e-16 (1 + alpha)
                    continue
                if k == 0 and not topup:
                    atom += w
                    continue
                v = (max(cap, k) if topup else k) * sigma ** 2
                comps.append((w, 0.0 if shift is None else b * shift, v))
        return atom, comps

    return law(shift_p), law(shift_q)


EPS_GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


@pytest.mark.parametrize("clients,q,sigma,dim", [(12, 0.3, 0.3, 1), (12, 0.3, 0.3, 8),
                                                 (6, 0.3, 0.5, 3), (2, 0.5, 1.0, 4)])
def test_add_remove_never_below_the_brute_force(clients, q, sigma, dim):
    """The round's two directed profiles bound the actual mechanism's (the
    cohort's law, the top-up to T, the empty round) for both population
    sizes an add/remove pair can have, in several dimensions."""
    event = ClientLevelRound(sigma=sigma, clip=1.0, clients=clients, sample_rate=q,
                             relation="add-remove", threat_model="aggregate")
    remove, add = event.directed_profiles()
    size = population(clients=clients, sample_rate=q)
    for others in (size - 1, size):
        present, absent = _round_laws(others=others, q=q, sigma=sigma, cap=event.cap,
                                      shift_p=1.0, shift_q=None, topup=True)
        for eps in EPS_GRID:
            alpha = math.exp(eps)
            exact_remove = _hockey_stick(present, absent, alpha, dim=dim, clip=1.0)
            exact_add = _hockey_stick(absent, present, alpha, dim=dim, clip=1.0)
            assert float(remove(np.array([eps]))[0]) >= exact_remove * (1 - 1e-4) - 1e-9
            assert float(add(np.array([eps]))[0]) >= exact_add * (1 - 1e-4) - 1e-9


@pytest.mark.parametrize("clients,q,sigma,dim", [(12, 0.3, 0.3, 1), (12, 0.3, 0.3, 8),
                                                 (4, 0.5, 0.5, 3)])
def test_replace_one_never_below_the_brute_force(clients, q, sigma, dim):
    """Replace-one without top-up: the cohort's size shows in the noise, so the
    bound mixes Gaussians over it with weight q; it bounds the actual
    mechanism (antipodal updates, the worst case) in several dimensions."""
    event = ClientLevelRound(sigma=sigma, clip=1.0, clients=clients, sample_rate=q,
                             relation="replace-one", threat_model="aggregate")
    size = population(clients=clients, sample_rate=q)
    p, r = _round_laws(others=size - 1, q=q, sigma=sigma, cap=0, shift_p=1.0, shift_q=-1.0,
                       topup=False)
    for eps in EPS_GRID:
        exact = _hockey_stick(p, r, math.exp(eps), dim=dim, clip=1.0)
        assert float(event.privacy_profile(np.array([eps]))[0]) >= exact * (1 - 1e-4) - 1e-9


def test_the_brute_force_catches_an_analysis_that_ignores_the_variance():
    """Without the top-up, a client added to the round also adds its noise: in
    many dimensions the noise level alone gives it away.  The shifted-Gaussian
    analysis at the cohort's noise (what one gets by ignoring that) is then
    far below the truth, and the brute force shows it; cepam never uses it
    (add/remove always tops up)."""
    clients, sigma, dim = 10, 0.3, 2000
    present, absent = _round_laws(others=clients, q=1.0, sigma=sigma, cap=0, shift_p=1.0,
                                  shift_q=None, topup=False)
    mu_naive = 1.0 / (sigma * math.sqrt(clients))
    naive = float(_remove(np.array([1.0]), mu_naive, 1.0)[0])
    exact = _hockey_stick(present, absent, math.e, dim=dim, clip=1.0)
    assert exact > 3 * naive
    # the same mechanism with the top-up is the shifted Gaussian at T = 11
    present, absent = _round_laws(others=clients, q=1.0, sigma=sigma, cap=11, shift_p=1.0,
                                  shift_q=None, topup=True)
    exact = _hockey_stick(present, absent, math.e, dim=dim, clip=1.0)
    bound = float(_remove(np.array([1.0]), 1.0 / (sigma * math.sqrt(11)), 1.0)[0])
    assert exact == pytest.approx(bound, rel=1e-3)


def test_privacy_command_with_sampling_and_relation(capsys):
    """cepam privacy --sample-rate --relation: the calibrated sigma is
    calibrate_client_sigma's, and the report names the relation, level and
    threat model."""
    import json

    from cepam.cli import main

    argv = ["privacy", "--target-eps", "4", "--delta", "1e-5", "--clip", "1", "--clients",
            "100", "--rounds", "100", "--sample-rate", "0.01", "--relation", "add-remove",
            "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sigma"] == calibrate_client_sigma(
        target_epsilon=4, target_delta=1e-5, rounds=100, clients=100, clip=1,
        sample_rate=0.01, relation="add-remove")
    assert report["cohort_cap"] == cohort_cap(clients=100, sample_rate=0.01)
    assert report["inputs"]["relation"] == "add-remove" and report["method"]["level"] == "client"
    assert report["total"]["epsilon"] <= 4
    assert main(argv[:-1]) == 0
    text = capsys.readouterr().out
    assert "relation: add-remove" in text and "threat model: client" in text
    # record level takes no sampling: a usage error, named
    assert main(["privacy", "--sigma", "1", "--delta", "1e-5", "--clip", "1", "--clients", "10",
                 "--samples-per-round", "5", "--dataset-size", "100", "--sample-rate",
                 "0.5"]) != 0
    assert "client-level options" in capsys.readouterr().err


# ---------------------------------------------------------------- noise against the update
def test_calibration_warns_when_the_noise_drowns_the_update():
    """Issue 38's case: eps 8 over 100 rounds of 4 clients needs a sigma whose
    noise on the average exceeds a whole update's norm; with the model's size
    the bar is clip / sqrt(d) per coordinate."""
    import warnings

    from cepam import NoiseWarning
    from cepam.accounting import average_noise

    kw = dict(target_epsilon=8, target_delta=1e-5, clip=1.0)
    with pytest.warns(NoiseWarning, match="times the clip") as caught:
        sigma = calibrate_client_sigma(rounds=100, clients=4, **kw)
    noise = average_noise(sigma=sigma, clients=4)
    assert noise == sigma / 2 and noise > 1.0
    assert f"{noise:.4g} per coordinate" in str(caught[0].message)
    with pytest.warns(NoiseWarning, match=r"sqrt\(25818 coordinates\)"):
        calibrate_client_sigma(rounds=20, clients=10, coordinates=25818, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 1,000 clients a round: no warning for 1,000 weights
        sigma = calibrate_client_sigma(rounds=100, clients=1000, coordinates=1000, **kw)
    assert average_noise(sigma=sigma, clients=1000) < 1.0 / math.sqrt(1000)
    cap = cohort_cap(clients=100, sample_rate=0.1)
    assert average_noise(sigma=0.5, clients=100, sample_rate=0.1, relation="add-remove") == \
        pytest.approx(0.5 * math.sqrt(cap) / 100, rel=1e-15)


def test_privacy_command_notes_when_the_noise_drowns_the_update(capsys):
    from cepam.cli import main

    assert main(["privacy", "--target-eps", "8", "--delta", "1e-5", "--clip", "1", "--clients",
                 "10", "--rounds", "20", "--coordinates", "25818"]) == 0
    out = capsys.readouterr().out
    assert "note: the noise on the released average, 0.5659 per coordinate" in out
    assert main(["privacy", "--target-eps", "8", "--delta", "1e-5", "--clip", "1", "--clients",
                 "1000", "--rounds", "100", "--coordinates", "1000"]) == 0
    assert "note:" not in capsys.readouterr().out


def test_small_hidden_cohorts_are_exact_and_large_ones_rounded_down():
    """The law of m, the clients whose noise is hidden (replace-one, Poisson):
    below about 200 it is the binomial law itself (rounding down to the
    grid floor(1.005^k) took every such m to m - 1: eps 25.25 for 18.91 at
    3 clients, q = 0.5, 10 rounds); above, each m is rounded down by at most
    0.5 %, never up."""
    from cepam.accounting.cohort import hidden_cohort_law

    m, p = hidden_cohort_law(clients=3, sample_rate=0.5, sampling="poisson",
                             threat_model="aggregate")
    np.testing.assert_array_equal(m, np.arange(1, 7))
    np.testing.assert_allclose(p, stats.binom.pmf(np.arange(6), 5, 0.5), rtol=1e-12)
    m, p = hidden_cohort_law(clients=2000, sample_rate=0.5, sampling="poisson",
                             threat_model="aggregate")
    j = np.arange(4000)
    exact_mean = float(np.dot(j + 1, stats.binom.pmf(j, 3999, 0.5)))
    assert exact_mean / 1.005 <= float(np.dot(m, p)) <= exact_mean
