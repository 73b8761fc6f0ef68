"""Calibration: sigma for a target (eps, delta, rounds) and back."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")

from cepam.accounting import (
    FLSetting,
    calibrate_sigma,
    delta_after_rounds,
    epsilon_after_rounds,
)
from cepam.errors import InvalidArgumentError, InvalidTypeError

PAPER = dict(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666)


@pytest.mark.parametrize("target_eps,rounds", [(1.0, 80), (8.0, 80), (0.5, 5)])
def test_calibration_inverts_evaluation(target_eps, rounds):
    s = FLSetting(**PAPER)
    rtol = 1e-3
    sigma = calibrate_sigma(target_epsilon=target_eps, target_delta=1e-5, rounds=rounds,
                            setting=s, rtol=rtol)
    at = epsilon_after_rounds(sigma=sigma, delta=1e-5, rounds=rounds, setting=s)
    below = epsilon_after_rounds(sigma=sigma / (1 + 2 * rtol), delta=1e-5, rounds=rounds,
                                 setting=s)
    assert at <= target_eps < below
    assert at == pytest.approx(target_eps, rel=1e-2)
    # delta at the target eps is at most the target delta
    assert delta_after_rounds(sigma=sigma, epsilon=target_eps, rounds=rounds,
                              setting=s) <= 1e-5 * (1 + 1e-9)


def test_a_small_target_reads_back_on_calibrations_grid():
    """Below eps 0.01 calibration reads eps on a grid of target / 100, as its
    docstring says to read the sigma back (the default grid reads about 1 %
    above: every reader, the ledger's too, on the same default)."""
    s = FLSetting(**PAPER)
    sigma = calibrate_sigma(target_epsilon=0.005, target_delta=1e-5, rounds=80, setting=s)
    assert epsilon_after_rounds(sigma=sigma, delta=1e-5, rounds=80, setting=s,
                                discretization=0.005 / 100) <= 0.005
    assert epsilon_after_rounds(sigma=sigma, delta=1e-5, rounds=80, setting=s) < 0.005 * 1.02


@pytest.mark.parametrize("target_eps,target_delta", [(0.003, 1e-3), (1e-4, 1e-5)])
def test_calibration_to_an_epsilon_the_grid_reaches_as_zero(target_eps, target_delta):
    """Where a sigma's eps on the grid is exactly 0 (it meets any target),
    the search took it for one that misses every target and scipy's root
    finder raised a raw ValueError."""
    s = FLSetting(**PAPER)
    sigma = calibrate_sigma(target_epsilon=target_eps, target_delta=target_delta, rounds=10,
                            setting=s)
    fine = dict(rounds=10, setting=s, discretization=target_eps / 100)  # (calibration's)
    assert delta_after_rounds(sigma=sigma, epsilon=target_eps, **fine) <= target_delta * (
        1 + 1e-9)
    assert delta_after_rounds(sigma=sigma / 1.1, epsilon=target_eps, **fine) > target_delta


def test_paper_bound_needs_much_more_noise():
    s = FLSetting(**PAPER)
    kw = dict(target_epsilon=2.0, target_delta=1e-5, rounds=10, setting=s, rtol=3e-2)
    tight = calibrate_sigma(**kw)
    paper = calibrate_sigma(**kw, bound="paper")
    assert epsilon_after_rounds(sigma=paper, delta=1e-5, rounds=10, setting=s,
                                bound="paper") <= 2.0
    assert paper > 10 * tight


def test_only_sigma_over_clip_matters():
    kw = dict(delta=1e-5, rounds=10)
    a = epsilon_after_rounds(sigma=0.3, setting=FLSetting(**PAPER), **kw)
    b = epsilon_after_rounds(sigma=0.6, setting=FLSetting(**{**PAPER, "clip": 2.0}), **kw)
    assert a == pytest.approx(b, rel=1e-9)


def test_target_met_by_subsampling_alone_is_rejected():
    s = FLSetting(**PAPER)
    used = 1 - (1 - s.sampling_probability) ** 80  # ~0.51
    with pytest.raises(InvalidArgumentError, match="subsampling alone"):
        calibrate_sigma(target_epsilon=1.0, target_delta=0.6, rounds=80, setting=s)
    assert used < 0.6


def test_no_finite_eps_for_negligible_noise():
    s = FLSetting(**PAPER)
    assert epsilon_after_rounds(sigma=1e-12, delta=1e-5, rounds=80, setting=s) == math.inf
    # but a delta above the chance of being used gives a finite (zero) eps
    assert epsilon_after_rounds(sigma=1e-12, delta=0.6, rounds=80, setting=s) == 0.0


@pytest.mark.parametrize("kw,err", [
    (dict(target_epsilon=0.0), InvalidArgumentError),
    (dict(target_epsilon=-1.0), InvalidArgumentError),
    (dict(target_delta=0.0), InvalidArgumentError),
    (dict(target_delta=1.0), InvalidArgumentError),
    (dict(target_delta=-1e-5), InvalidArgumentError),
    (dict(rounds=0), InvalidArgumentError),
    (dict(rounds=2.0), InvalidTypeError),
    (dict(bound="loose"), InvalidArgumentError),
    (dict(rtol=0.0), InvalidArgumentError),
    (dict(rtol=5e-324), InvalidArgumentError),  # (scipy's root finder raised ValueError)
    (dict(rtol=10**400), InvalidArgumentError),  # (float() raised OverflowError)
    (dict(setting=None), InvalidTypeError),
])
def test_bad_calibration_input(kw, err):
    args = dict(target_epsilon=1.0, target_delta=1e-5, rounds=10, setting=FLSetting(**PAPER))
    with pytest.raises(err):
        calibrate_sigma(**{**args, **kw})


def test_bad_evaluation_input():
    s = FLSetting(**PAPER)
    with pytest.raises(InvalidArgumentError):
        epsilon_after_rounds(sigma=0.0, delta=1e-5, rounds=10, setting=s)
    with pytest.raises(InvalidArgumentError):
        epsilon_after_rounds(sigma=1.0, delta=1.0, rounds=10, setting=s)
    with pytest.raises(InvalidArgumentError):
        delta_after_rounds(sigma=1.0, epsilon=-1.0, rounds=10, setting=s)


@pytest.mark.parametrize("call", [
    lambda s, big: epsilon_after_rounds(sigma=1.0, delta=1e-5, rounds=big, setting=s),
    lambda s, big: delta_after_rounds(sigma=1.0, epsilon=1.0, rounds=big, setting=s),
    lambda s, big: calibrate_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=big, setting=s),
    lambda s, big: FLSetting(clip=1.0, clients=big, samples_per_round=15, dataset_size=1666),
], ids=["epsilon_after_rounds", "delta_after_rounds", "calibrate_sigma", "FLSetting"])
def test_an_int_beyond_float64_is_refused_not_overflowed(call):
    """An int above float64's range raised OverflowError where the accounting
    took it as a float."""
    with pytest.raises(InvalidArgumentError, match="float64"):
        call(FLSetting(**PAPER), 2**1100)


def test_paper_listed_sigma_for_delta_001_is_not_needed_by_its_formula():
    """The paper lists sigma = 0.1375 for (eps, delta) = (1, 0.01) per round, but
    its own formula meets that target without noise (docs/privacy.md, sec. 3)."""
    s = FLSetting(**PAPER, threat_model="aggregate")
    with pytest.raises(InvalidArgumentError, match="holds for every sigma"):
        calibrate_sigma(target_epsilon=1.0, target_delta=0.01, rounds=1, setting=s,
                        bound="paper")
