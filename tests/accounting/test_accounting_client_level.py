"""Client-level accounting (any training loop): exact Gaussian composition,
checked against dp-accounting, and the calibration helper."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")

from cepam.accounting import (
    ClientLevelRound,
    FLSetting,
    Ledger,
    PLDAccountant,
    calibrate_client_sigma,
    client_epsilon,
    client_noise_multiplier,
    epsilon_after_rounds,
    noise_drowns_update,
    sampling_probability,
)
from cepam.errors import InvalidArgumentError, InvalidTypeError


# Noise multipliers z from 0.7 to 8 (eps up to about 60 after 100 rounds),
# each reached from sigma through the threat model's m.
GRID = [(z, rounds, clients, tm)
        for z in (0.7, 2.0, 8.0)
        for rounds in (1, 2, 10, 100)
        for clients, tm in ((10, "client"), (10, "aggregate"), (1, "server"))]


@functools.lru_cache(maxsize=None)
def _dp_accounting(z: float, rounds: int, delta: float) -> tuple[float, float]:
    """dp-accounting's (optimistic, pessimistic) eps of the composed Gaussian:
    computed once per (z, rounds), shared by the three threat models."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld

    acc = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.GaussianDpEvent(z), rounds)
    lower = pld.from_gaussian_mechanism(z, value_discretization_interval=1e-4,
                                        pessimistic_estimate=False,
                                        use_connect_dots=False).self_compose(rounds)
    return lower.get_epsilon_for_delta(delta), acc.get_epsilon(delta)


@pytest.mark.parametrize("z,rounds,clients,threat_model", GRID)
def test_client_epsilon_matches_dp_accounting(z, rounds, clients, threat_model):
    """Ours is exact: between dp-accounting's optimistic (lower) and
    pessimistic (upper) PLD estimates of the same composed Gaussian, and
    within 1 % of the pessimistic one, which it never exceeds."""
    pytest.importorskip("dp_accounting")
    clip, delta = 1.0, 1e-5
    m = {"client": clients - 1, "aggregate": clients, "server": 1}[threat_model]
    sigma = z * 2 * clip / math.sqrt(m)
    assert client_noise_multiplier(sigma=sigma, clip=clip, clients=clients,
                                   threat_model=threat_model) == pytest.approx(z, rel=1e-14)

    ours = client_epsilon(sigma=sigma, clip=clip, rounds=rounds, clients=clients, delta=delta,
                          threat_model=threat_model)
    lower, upper = _dp_accounting(z, rounds, delta)
    assert lower - 1e-9 <= ours <= upper + 1e-9
    assert ours == pytest.approx(upper, rel=1e-2)


@pytest.mark.parametrize("rounds", [1, 7, 100])
def test_the_ledger_event_composes_to_the_same_epsilon(rounds):
    event = ClientLevelRound(sigma=2.0, clip=1.0, clients=10)
    acct = PLDAccountant().compose(event, count=rounds)
    exact = client_epsilon(sigma=2.0, clip=1.0, rounds=rounds, clients=10, delta=1e-5)
    assert acct.get_epsilon(1e-5) == pytest.approx(exact, rel=1e-3)
    assert acct.get_epsilon(1e-5) >= exact - 1e-9


@pytest.mark.parametrize("target", [0.5, 1.0, 4.0, 8.0, 30.0])
@pytest.mark.parametrize("rounds,clients,threat_model",
                         [(1, 3, "client"), (20, 10, "client"), (100, 100, "aggregate"),
                          (5, 1, "server")])
def test_calibration_round_trips(target, rounds, clients, threat_model):
    sigma = calibrate_client_sigma(target_epsilon=target, target_delta=1e-5, rounds=rounds,
                                   clients=clients, clip=0.7, threat_model=threat_model)
    eps = client_epsilon(sigma=sigma, clip=0.7, rounds=rounds, clients=clients, delta=1e-5,
                         threat_model=threat_model)
    assert eps <= target
    assert eps >= 0.99 * target
    # sigma scales with the clip: the guarantee depends on sigma / clip only
    assert calibrate_client_sigma(target_epsilon=target, target_delta=1e-5, rounds=rounds,
                                  clients=clients, clip=1.4, threat_model=threat_model) \
        == pytest.approx(2 * sigma, rel=1e-8)


def test_record_level_never_exceeds_client_level():
    """A record is part of one client's data: the record-level bound of the
    paper's loop is at most the client-level eps at the same sigma."""
    for sigma in (0.3, 1.0, 3.0):
        setting = FLSetting(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666)
        record = epsilon_after_rounds(sigma=sigma, delta=1e-5, rounds=20, setting=setting)
        client = client_epsilon(sigma=sigma, clip=1.0, rounds=20, clients=30, delta=1e-5)
        assert record <= client


def test_minibatch_epochs_fit_the_record_level_setting():
    """50 local steps of 32 samples on 1,000 samples per client: 1,600 draws
    with replacement (more than |D|) are a valid setting."""
    s = FLSetting(clip=1.0, clients=10, samples_per_round=50 * 32, dataset_size=1000)
    assert s.sampling_probability == pytest.approx(1 - (1 - 1 / 1000) ** 1600, rel=1e-12)
    assert sampling_probability(dataset_size=1, samples_per_round=5) == 1.0
    eps = epsilon_after_rounds(sigma=2.0, delta=1e-5, rounds=5, setting=s)
    assert 0 < eps <= client_epsilon(sigma=2.0, clip=1.0, rounds=5, clients=10, delta=1e-5)


def test_ledger_records_client_level_rounds(tmp_path):
    with Ledger(tmp_path / "l.db", delta=1e-5) as ledger:
        ledger.record(ClientLevelRound(sigma=2.0, clip=1.0, clients=10), run_id="a", round=0)
        ledger.record(ClientLevelRound(sigma=2.0, clip=1.0, clients=10), run_id="a", round=1)
        spent = ledger.epsilon()
    assert spent == pytest.approx(client_epsilon(sigma=2.0, clip=1.0, rounds=2, clients=10,
                                                 delta=1e-5), rel=1e-3)
    assert json.dumps(ClientLevelRound(sigma=2.0, clip=1.0, clients=10).describe())


@pytest.mark.parametrize("kw,err", [
    (dict(sigma=0.0), InvalidArgumentError),
    (dict(clip=-1.0), InvalidArgumentError),
    (dict(clients=1), InvalidArgumentError),          # 'client' needs another client
    (dict(clients=2.5), InvalidTypeError),
    (dict(threat_model="eve"), InvalidArgumentError),
    (dict(rounds=0), InvalidArgumentError),
    (dict(delta=1.0), InvalidArgumentError),
    # Extremes that raised raw Python or numpy errors.
    (dict(sample_rate=1e-300), InvalidArgumentError),  # population beyond MAX_POPULATION
    (dict(sample_rate=5e-324), InvalidArgumentError),
    (dict(clients=1e308, sample_rate=0.1), InvalidArgumentError),
    (dict(sigma=1e-200, sample_rate=0.1), InvalidArgumentError),  # (clip / sigma)^2 overflows
    (dict(sigma=10**400), InvalidArgumentError),
    (dict(sigma=1e300), InvalidArgumentError),  # mu underflows ("mu must be > 0" before)
    (dict(relation=np.array(["add-remove"])), InvalidTypeError),
    (dict(relation=None), InvalidTypeError),
    (dict(count_sigma=1e-170), InvalidArgumentError),  # 1 / count_sigma^2: ZeroDivisionError
    (dict(count_sigma=1e160), InvalidArgumentError),  # OverflowError
    (dict(count_sigma=1e-320), InvalidArgumentError),
])
def test_bad_arguments_raise(kw, err):
    args = dict(sigma=1.0, clip=1.0, rounds=3, clients=5, delta=1e-5) | kw
    with pytest.raises(err):
        client_epsilon(**args)


def test_calibration_and_the_noise_note_take_a_subnormal_clip():
    """sigma scales with the clip, down to the smallest float (the search's
    probe at sigma 1 divided by zero there, and so did the note's ratio)."""
    sigma = calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=10, clients=10,
                                   clip=1.0)
    tiny = calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=10, clients=10,
                                  clip=2.0**-1060)
    assert tiny == pytest.approx(sigma * 2.0**-1060, rel=0.05)
    note = noise_drowns_update(sigma=1.0, clip=5e-324, clients=10, coordinates=100)
    assert "is inf times" in note


def test_add_remove_refusal_names_the_cohort_tail_not_the_count_noise():
    with pytest.raises(InvalidArgumentError, match="cohort exceeds the cap") as info:
        calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-12, rounds=100, clients=10,
                               clip=1.0, sample_rate=0.1, relation="add-remove")
    assert "count_sigma" not in str(info.value)


def test_calibration_refuses_bad_targets():
    with pytest.raises(InvalidArgumentError):
        calibrate_client_sigma(target_epsilon=0.0, target_delta=1e-5, rounds=1, clients=3,
                               clip=1.0)
    with pytest.raises(InvalidArgumentError):
        calibrate_client_sigma(target_epsilon=1.0, target_delta=0.0, rounds=1, clients=3,
                               clip=1.0)


@pytest.mark.parametrize("target", [1e200, 1e308])
@pytest.mark.parametrize("kw", [dict(), dict(count_sigma=1.0)], ids=["plain", "count"])
def test_calibration_refuses_a_target_no_privacy_is_left_in(target, kw):
    """eps 1e308 raised OverflowError (mu^2), and 1e200 gave sigma 8e-101:
    a target only a sigma below SIGMA_RANGE's 1e-9 clips meets is refused."""
    with pytest.raises(InvalidArgumentError, match="no privacy is left"):
        calibrate_client_sigma(target_epsilon=target, target_delta=1e-5, rounds=3, clients=10,
                               clip=1.0, **kw)


@pytest.mark.parametrize("call", [
    lambda big: client_noise_multiplier(sigma=1.0, clip=1.0, clients=big),
    lambda big: client_epsilon(sigma=1.0, clip=1.0, rounds=big, clients=10, delta=1e-5),
    lambda big: client_epsilon(sigma=1.0, clip=1.0, rounds=3, clients=big, delta=1e-5),
    lambda big: calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=big,
                                       clients=10, clip=1.0),
    lambda big: calibrate_client_sigma(target_epsilon=1.0, target_delta=1e-5, rounds=3,
                                       clients=big, clip=1.0),
    lambda big: ClientLevelRound(1.0, 1.0, big),
    lambda big: sampling_probability(dataset_size=big, samples_per_round=1),
    lambda big: sampling_probability(dataset_size=10, samples_per_round=big),
])
def test_an_int_beyond_float64_is_refused_not_overflowed(call):
    """Each raised OverflowError: int too large to convert to float."""
    with pytest.raises(InvalidArgumentError, match="float64"):
        call(2**1100)


def test_the_readme_table_is_what_the_calibration_gives():
    """README "Choosing sigma and clip": each row's sigma and noise on the average."""
    import re

    from helpers.paths import ROOT

    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| ([\d,]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text,
                      re.M)
    assert len(rows) == 3
    for clients, rounds, eps, sigma, noise in rows:
        k = int(clients.replace(",", ""))
        got = calibrate_client_sigma(target_epsilon=float(eps), target_delta=1e-5,
                                     rounds=int(rounds), clients=k, clip=1.0)
        assert f"{got:#.3g}" == sigma
        assert f"{got / math.sqrt(k):.2g}" == noise
