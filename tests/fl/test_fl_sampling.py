"""Client sampling, both relations' aggregation, adaptive clipping and central
DP in the built-in harness (``cepam fl run``), and :mod:`cepam.clipping`."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from cepam import accounting
from cepam.clipping import (AdaptiveClip, default_count_sigma, noised_unclipped_fraction,
                            noisy_bit)
from cepam.errors import InvalidArgumentError, InvalidTypeError
from cepam.fl.config import FLConfig

from helpers.paths import ROOT as REPO

torch = pytest.importorskip("torch")

from cepam.fl.builtin_engine import aggregate, sample_cohort  # noqa: E402
from cepam.fl.data import FILES, load_mnist  # noqa: E402
from cepam.fl.experiment import TensorMNIST, run_experiment  # noqa: E402
from cepam.fl.privacy import count_sigma, epsilon_at  # noqa: E402


# -- adaptive clipping -------------------------------------------------------------------------

def _follow(norms: np.ndarray, gamma: float, initial: float, rounds: int = 300,
            relation: str = "add-remove") -> list[float]:
    """The clip over ``rounds`` rounds of Poisson-sampled clients (q = 0.1)
    whose updates have the given norms, with Andrew et al.'s count noise."""
    n, q = 0.1 * norms.size, 0.1
    cap = accounting.cohort_cap(clients=n, sample_rate=q)
    cs = default_count_sigma(clients=n, cap=cap)
    clip = AdaptiveClip(initial_clip=initial, target_quantile=gamma, learning_rate=0.2)
    server = np.random.default_rng(1)
    clips = []
    for t in range(rounds):
        cohort = np.flatnonzero(server.random(norms.size) < q)
        bits = [noisy_bit(norms[c], clip=clip.clip, count_sigma=cs,
                          rng=np.random.default_rng([t, int(c)])) for c in cohort]
        clip.update(noised_unclipped_fraction(bits, relation=relation, clients=n, cap=cap,
                                              count_sigma=cs, rng=server))
        clips.append(clip.clip)
    return clips


@pytest.mark.parametrize("gamma,initial", [(0.5, 10.0), (0.5, 0.01), (0.8, 1.0)])
def test_the_adaptive_clip_moves_to_the_target_quantile(gamma, initial):
    norms = np.random.default_rng(0).lognormal(0.0, 0.5, size=1000)
    target = float(np.quantile(norms, gamma))
    clips = _follow(norms, gamma, initial)
    settled = float(np.mean(clips[-100:]))
    assert abs(settled / target - 1) < 0.1, (settled, target)
    # It moved towards the quantile from where it started.
    assert abs(math.log(clips[50] / target)) < abs(math.log(initial / target))


def test_the_adaptive_clip_under_replace_one_also_settles():
    norms = np.random.default_rng(2).lognormal(1.0, 0.3, size=1000)
    settled = float(np.mean(_follow(norms, 0.5, 1.0, relation="replace-one")[-100:]))
    assert abs(settled / float(np.median(norms)) - 1) < 0.1


def test_adaptive_clip_rule_state_and_checks():
    clip = AdaptiveClip(initial_clip=2.0, target_quantile=0.5, learning_rate=0.2)
    assert clip.update(0.5) == 2.0  # at the target: unchanged
    assert clip.update(1.0) == pytest.approx(2.0 * math.exp(-0.1))
    assert clip.update(math.nan) == pytest.approx(2.0 * math.exp(-0.1))  # no report
    assert clip.noise_std(0.3) == pytest.approx(0.3 * math.exp(-0.1))  # sigma / C_0 fixed
    again = AdaptiveClip(initial_clip=2.0, target_quantile=0.5, learning_rate=0.2)
    again.load_state_dict(clip.state_dict())
    assert again.clip == clip.clip
    with pytest.raises(InvalidArgumentError):
        AdaptiveClip(initial_clip=1.0, target_quantile=0.5, learning_rate=0.3).load_state_dict(
            clip.state_dict())
    for bad in (dict(initial_clip=0.0), dict(initial_clip=1.0, target_quantile=1.0),
                dict(initial_clip=1.0, learning_rate=-1.0)):
        with pytest.raises(InvalidArgumentError):
            AdaptiveClip(**bad)
    with pytest.raises(InvalidTypeError):
        AdaptiveClip(initial_clip="1")
    # an int beyond float64 raised OverflowError
    with pytest.raises(InvalidArgumentError, match="target_quantile must be a finite number"):
        AdaptiveClip(initial_clip=1.0, target_quantile=2**1100)
    with pytest.raises(InvalidArgumentError, match="noised_unclipped_fraction"):
        clip.update(2**1100)
    with pytest.raises(InvalidArgumentError):
        clip.update(math.inf)
    with pytest.raises(InvalidArgumentError):
        noisy_bit(-1.0, clip=1.0, count_sigma=0.1, rng=np.random.default_rng(0))
    with pytest.raises(InvalidTypeError):
        noisy_bit(1.0, clip=1.0, count_sigma=0.1, rng=0)
    with pytest.raises(InvalidArgumentError):
        noised_unclipped_fraction([1.0], relation="add-remove")
    with pytest.raises(InvalidArgumentError):
        noised_unclipped_fraction([1.0], relation="add-or-remove")


@pytest.mark.parametrize("bbar,learning_rate", [(1e4, 0.2), (-1e4, 0.2), (0.0, 1e300)])
def test_the_adaptive_clip_stays_positive_and_finite(bbar, learning_rate):
    """1e4 took the clip (and the noise std) to 0.0, which its own state then
    failed to load; -1e4 and eta 1e300 raised OverflowError: the clip stops
    at the bounds, CLIP_RANGE either way of the initial clip."""
    from cepam.clipping import CLIP_RANGE

    clip = AdaptiveClip(initial_clip=1.0, learning_rate=learning_rate)
    for _ in range(3):
        new = clip.update(bbar)
        assert 0.0 < new < math.inf and new == clip.clip
        assert new == (1.0 / CLIP_RANGE if bbar > 0.5 else CLIP_RANGE)
        assert 0.0 < clip.noise_std(1.0) < math.inf
    again = AdaptiveClip(initial_clip=1.0, learning_rate=learning_rate)
    again.load_state_dict(clip.state_dict())
    assert again.clip == clip.clip
    assert clip.update(0.5) == clip.clip  # (at the target: unchanged, also at a bound)


def test_adaptive_clip_state_is_checked_key_by_key():
    """{} raised KeyError, None TypeError, a None entry TypeError."""
    clip = AdaptiveClip(initial_clip=2.0)
    with pytest.raises(InvalidTypeError, match="state must be a dict"):
        clip.load_state_dict(None)
    with pytest.raises(InvalidArgumentError, match="'clip'"):
        clip.load_state_dict({})
    for key, bad, err in [("target_quantile", None, InvalidTypeError),
                          ("clip", "2", InvalidTypeError), ("clip", 0.0, InvalidArgumentError),
                          ("clip", 1e300, InvalidArgumentError)]:
        with pytest.raises(err, match=key):
            clip.load_state_dict({**clip.state_dict(), key: bad})
    assert clip.clip == 2.0


def test_the_reports_are_checked():
    """noisy_bit("x") raised float()'s ValueError, an array norm TypeError;
    bits of 1e308 raised fsum's OverflowError."""
    rng = np.random.default_rng(0)
    for norm, err in [("x", InvalidTypeError), (np.array([1.0, 2.0]), InvalidTypeError),
                      (None, InvalidTypeError), (True, InvalidTypeError),
                      (math.inf, InvalidArgumentError), (math.nan, InvalidArgumentError),
                      (10**400, InvalidArgumentError)]:
        with pytest.raises(err, match="norm"):
            noisy_bit(norm, clip=1.0, count_sigma=0.1, rng=rng)
    assert noisy_bit(np.float32(0.0), clip=1.0, count_sigma=1e-9, rng=rng) == pytest.approx(1.0)
    with pytest.raises(InvalidArgumentError, match="float64"):
        noised_unclipped_fraction([1e308] * 3)
    with pytest.raises(InvalidTypeError, match="noisy_bits"):
        noised_unclipped_fraction(["x"])


def test_the_noised_fraction_of_each_relation():
    assert noised_unclipped_fraction([1.0, 0.0, 0.5], relation="replace-one") == 0.5
    assert math.isnan(noised_unclipped_fraction([], relation="replace-one"))
    rng = np.random.default_rng(3)
    # k = T: no top-up, the fixed denominator n.
    assert noised_unclipped_fraction([1.0] * 5, relation="add-remove", clients=4, cap=5,
                                     count_sigma=0.3, rng=rng) == 5 / 4
    # k < T: top-up of std count_sigma sqrt(T - k) on the sum.
    draws = [noised_unclipped_fraction([0.0] * 3, relation="add-remove", clients=4, cap=12,
                                       count_sigma=0.3, rng=rng) for _ in range(20000)]
    assert np.std(draws) * 4 == pytest.approx(0.3 * 3.0, rel=0.03)
    # No report: under add-remove the top-up alone (T clients' worth), not nothing.
    empty = [noised_unclipped_fraction([], relation="add-remove", clients=4, cap=12,
                                       count_sigma=0.3, rng=rng) for _ in range(20000)]
    assert np.std(empty) * 4 == pytest.approx(0.3 * math.sqrt(12), rel=0.03)
    assert default_count_sigma(clients=100, cap=173) == pytest.approx(5 / math.sqrt(173))


# -- cohorts and aggregation -------------------------------------------------------------------

def test_poisson_and_fixed_cohorts():
    poisson = FLConfig(clients=20, population=200, sample_rate=0.1)
    sizes = [len(sample_cohort(poisson, t)) for t in range(1, 201)]
    assert len(set(sizes)) > 5 and abs(np.mean(sizes) - 20) < 1.5
    assert sample_cohort(poisson, 7) == sample_cohort(poisson, 7)
    assert sample_cohort(poisson, 7) != sample_cohort(poisson.replace(seed=1), 7)
    fixed = FLConfig(clients=20, population=200, sampling="fixed")
    assert fixed.rate == 0.1
    for t in (1, 2):
        cohort = sample_cohort(fixed, t)
        assert len(cohort) == 20 == len(set(cohort)) and cohort == sorted(cohort)
    assert sample_cohort(FLConfig(clients=6), 3) == list(range(6))  # no sampling


def test_aggregate_follows_the_contract():
    shape = (200_000,)
    total = {"w": torch.full(shape, 3.0)}
    config = FLConfig(method="cepam-gaussian", clients=10, population=100, sample_rate=0.1,
                      relation="add-remove", sigma=0.5)
    cap = accounting.cohort_cap(clients=10, sample_rate=0.1)
    assert torch.equal(aggregate(config.replace(relation="replace-one"), total, k=3, t=1,
                                 clip=1.0, cap=cap, sigma=0.5)["w"], total["w"] / 3)
    # k >= T: no top-up, divided by the fixed n.
    assert torch.equal(aggregate(config, total, k=cap, t=1, clip=1.0, cap=cap, sigma=0.5)["w"],
                       total["w"] / 10)
    released = aggregate(config, total, k=4, t=1, clip=1.0, cap=cap, sigma=0.5)["w"]
    assert float(released.mean()) == pytest.approx(0.3, abs=2e-3)
    assert float((released * 10).std()) == pytest.approx(0.5 * math.sqrt(cap - 4), rel=0.01)
    # An empty cohort releases the noise alone, T clients' worth over n.
    nothing = {"w": torch.zeros(shape)}
    released = aggregate(config, nothing, k=0, t=2, clip=1.0, cap=cap, sigma=0.5)["w"]
    assert float((released * 10).std()) == pytest.approx(0.5 * math.sqrt(cap), rel=0.01)
    central = FLConfig(method="fl", clients=10, population=100, sample_rate=0.1,
                       central_dp="dp-fedavg", relation="add-remove", noise_multiplier=2.0)
    released = aggregate(central, total, k=4, t=1, clip=0.5, cap=None, sigma=0.0)["w"]
    assert float(released.mean()) == pytest.approx(0.3, abs=2e-3)
    assert float((released * 10).std()) == pytest.approx(2.0 * 0.5, rel=0.01)
    flower = central.replace(central_dp="flower", relation="replace-one")
    released = aggregate(flower, total, k=4, t=1, clip=0.5, cap=None, sigma=0.0)["w"]
    assert float(released.mean()) == pytest.approx(0.75, abs=2e-3)  # the mean of the 4
    assert float(released.std()) == pytest.approx(2.0 * 0.5 / 10, rel=0.01)


@pytest.mark.parametrize("changes", [
    dict(clients=10, population=100, sample_rate=0.5),        # q N != clients
    dict(clients=10, population=5),                            # N < clients
    dict(clients=10, sample_rate=0.5),                         # N = clients, q < 1
    dict(clients=10, population=100, sampling="fixed", sample_rate=0.5),
    dict(clients=10, population=100, sampling="fixed", relation="add-remove",
         method="cepam-gaussian"),
    dict(method="cepam-laplace", relation="add-remove"),
    dict(method="fl", clip_quantile=0.5),
    dict(method="cepam-gaussian", clip_quantile=1.5),
    dict(method="cepam-gaussian", central_dp="dp-fedavg", noise_multiplier=1.0,
         relation="add-remove"),
    dict(method="fl", central_dp="dp-fedavg", noise_multiplier=1.0),  # replace-one
    dict(method="fl", central_dp="flower"),                    # no z
    dict(method="fl", noise_multiplier=1.0),                   # z without central_dp
    dict(sampling="uniform"), dict(relation="add/remove"), dict(server_lr=0.0),
    dict(method="cepam-gaussian", clip_count_sigma=-1.0),
])
def test_config_refuses_inconsistent_sampling_settings(changes):
    with pytest.raises(InvalidArgumentError):
        FLConfig(**changes)


@pytest.mark.parametrize("changes, error", [
    *[(dict(sigma=v), InvalidArgumentError) for v in (-1.0, math.nan, math.inf)],
    (dict(sigma="x"), InvalidTypeError), (dict(clip=math.inf), InvalidArgumentError),
    (dict(b=-1.0), InvalidArgumentError), (dict(alpha=-1.0), InvalidArgumentError),
    (dict(method="cepam-gaussian", lattice="Q"), InvalidArgumentError),
    (dict(method="cepam-gaussian", dim=0), InvalidArgumentError),
    (dict(samples_per_client=0), InvalidArgumentError),
    *[(dict(clients=v), InvalidTypeError) for v in (2.5, True, "a", None)],
    (dict(rounds=1.5), InvalidTypeError), (dict(seed=1.5), InvalidTypeError),
    (dict(lr=math.inf), InvalidArgumentError), (dict(lr="x"), InvalidTypeError),
    (dict(sample_rate=True), InvalidTypeError), (dict(clip_all="x"), InvalidTypeError),
    (dict(delta="1e-5"), InvalidTypeError), (dict(test_size="x"), InvalidTypeError),
    (dict(population="x"), InvalidTypeError), (dict(momentum="x"), InvalidTypeError),
    (dict(method="cepam-gaussian", clip_count_sigma="x"), InvalidTypeError),
])
def test_config_checks_each_value_s_type_and_sign(changes, error):
    """Each was accepted (a run then failed, or ran nonsense) or raised a raw
    TypeError or ValueError; `cepam fl run` checked them itself."""
    with pytest.raises(error):
        FLConfig(**changes)


def test_defaults_are_the_paper_setting_and_keep_their_run_names():
    config = FLConfig(method="cepam-gaussian")
    assert config.paper_setting and not config.samples_clients
    assert config.population_size == 30 and config.rate == 1.0
    assert config.run_name() == "cnn-cepam-gaussian-n1"
    assert not FLConfig(clients=10, population=100, sample_rate=0.1).paper_setting
    assert count_sigma(config) is None  # a fixed clip publishes no count unless asked
    released = config.replace(clipped_fraction_release=True)
    assert count_sigma(released) is not None and not released.paper_setting
    assert count_sigma(config.replace(clip_quantile=0.5)) is not None  # adaptive: always


def test_the_flower_engine_refuses_what_only_the_builtin_engine_runs():
    from cepam.fl.engines import engine

    pytest.importorskip("flwr")
    with pytest.raises(InvalidArgumentError, match="built-in engine only"):
        engine("flower").check(FLConfig(method="cepam-gaussian", clients=10, population=100,
                                        sample_rate=0.1, engine="flower"))


# -- runs on MNIST -----------------------------------------------------------------------------

def _mnist_dir():
    for candidate in (REPO.parent / "shared" / "data" / "mnist", os.environ.get("CEPAM_DATA")):
        if candidate and all((Path(candidate) / f).is_file() for f in FILES.values()):
            return Path(candidate)
    return None


MNIST_DIR = _mnist_dir()
needs_mnist = pytest.mark.skipif(MNIST_DIR is None, reason="MNIST not found")


@pytest.fixture(scope="module")
def data():
    return TensorMNIST(load_mnist(MNIST_DIR))


def sampled(**changes) -> FLConfig:
    """80 clients of 10 samples, q = 0.25 (20 a round: an empty cohort has
    chance 1e-10, well below delta), 4 rounds, an MLP."""
    base = dict(model="mlp", method="cepam-gaussian", clients=20, population=80,
                sample_rate=0.25, samples_per_client=10, train_size=1000, val_size=100,
                test_size=200, rounds=4, sgd_steps=3, batch_size=4, sigma=0.3, seed=0)
    base.update(changes)
    return FLConfig(**base)


@needs_mnist
@pytest.mark.usefixtures("one_torch_thread")
def test_poisson_sampled_run_accounts_the_rounds_run(data, tmp_path):
    config = sampled(relation="add-remove", clipped_fraction_release=True)
    result = run_experiment(config, data, tmp_path)
    rows = result.rows[1:]
    sizes = [r["cohort_size"] for r in rows]
    assert len(set(sizes)) > 1  # the cohort varies from round to round
    doc = json.loads((tmp_path / "rounds.json").read_text())
    assert [len(c) for c in doc["cohorts"][1:]] == sizes
    assert all(set(c) <= set(range(80)) for c in doc["cohorts"])
    cs = count_sigma(config)
    assert cs == pytest.approx(default_count_sigma(
        clients=20, cap=accounting.cohort_cap(clients=20, sample_rate=0.25)))
    eps = [r["client_epsilon"] for r in rows]
    assert math.isfinite(eps[0])
    assert all(a < b for a, b in zip(eps, eps[1:]))  # every round counts, sampled or not
    for t, row in enumerate(rows, start=1):
        assert row["client_epsilon"] == accounting.client_epsilon(
            sigma=0.3, clip=1.0, rounds=t, clients=20, delta=1e-5, threat_model="client",
            sample_rate=0.25, relation="add-remove", sampling="poisson", count_sigma=cs)
        assert row["epsilon"] == row["client_epsilon"]  # outside the paper's setting
        assert epsilon_at(config, delta=1e-5, rounds=t) == row["epsilon"]
        assert math.isfinite(row["noised_clipped_fraction"])
    # Sampling amplifies: the same sigma without it (every client every round) costs more.
    assert eps[-1] < accounting.client_epsilon(
        sigma=0.3, clip=1.0, rounds=4, clients=20, delta=1e-5, threat_model="client",
        count_sigma=cs)


@needs_mnist
@pytest.mark.usefixtures("one_torch_thread")
def test_an_empty_cohort_releases_nothing_under_replace_one_and_the_noise_under_add_remove(data):
    config = sampled(method="cepam-gaussian", clients=1, population=4, samples_per_client=20,
                     rounds=8)
    rows = run_experiment(config, data).rows
    empty = [t for t in range(1, 9) if rows[t]["cohort_size"] == 0]
    assert empty, "this seed draws an empty round"
    for t in empty:
        assert rows[t]["test_loss"] == rows[t - 1]["test_loss"]
        assert rows[t]["bits_per_client"] == 0.0 and math.isnan(rows[t]["train_loss"])
    rows = run_experiment(config.replace(relation="add-remove", clip_quantile=0.5), data).rows
    for t in empty:  # the same cohorts: the model and the clip move by the noise alone
        assert rows[t]["test_loss"] != rows[t - 1]["test_loss"]
        assert t == 8 or rows[t + 1]["clip"] != rows[t]["clip"]  # the clip of the next round
        assert math.isfinite(rows[t]["noised_clipped_fraction"])


@needs_mnist
@pytest.mark.usefixtures("one_torch_thread")
def test_adaptive_clip_run_resumes_exactly(data, tmp_path):
    config = sampled(relation="add-remove", clip_quantile=0.5, clip=5.0, rounds=5)
    whole = run_experiment(config, data)
    clips = [r["clip"] for r in whole.rows[1:]]
    assert clips[0] == 5.0 and len(set(clips)) == 5
    assert clips[-1] < clips[0]  # every update is far below 5: the clip comes down
    run_experiment(config, data, tmp_path, stop_after=2)
    resumed = run_experiment(config, data, tmp_path)
    assert resumed.resumed_from == 2
    for a, b in zip(whole.rows, resumed.rows):
        for key in ("clip", "test_acc", "noised_clipped_fraction", "client_epsilon"):
            assert (a[key] == b[key]) or (math.isnan(a[key]) and math.isnan(b[key])), key


@needs_mnist
@pytest.mark.usefixtures("one_torch_thread")
def test_central_rows_add_the_server_noise(data):
    central = sampled(method="fl", central_dp="dp-fedavg", relation="add-remove",
                      noise_multiplier=1.0, rounds=2)
    rows = run_experiment(central, data).rows
    from cepam.fl.privacy import central_epsilon

    assert rows[2]["client_epsilon"] == central_epsilon(noise_multiplier=1.0, sample_rate=0.25,
                                                        rounds=2, delta=1e-5)
    assert rows[2]["bits_per_coordinate"] == 32.0
    flower = run_experiment(central.replace(central_dp="flower", relation="replace-one"),
                            data).rows
    assert math.isnan(flower[2]["client_epsilon"])  # no claim beyond "the same z"
    assert [r["cohort_size"] for r in flower] == [r["cohort_size"] for r in rows]


@needs_mnist
@pytest.mark.usefixtures("one_torch_thread")
def test_cli_runs_sampling_and_names_the_guarantee(tmp_path, capsys):
    from cepam.cli import main

    code = main(["fl", "run", "--model", "mlp", "--method", "cepam-gaussian", "--lattice",
                 "auto", "--sigma", "0.3", "--clients", "20", "--population", "80",
                 "--sample-rate", "0.25", "--relation", "add-remove", "--clip-quantile", "0.5",
                 "--samples-per-client", "10", "--train-size", "1000", "--val-size", "100",
                 "--test-size", "100", "--rounds", "2", "--sgd-steps", "2",
                 "--out", str(tmp_path), "--data-dir", str(MNIST_DIR), "--no-progress",
                 "--json"])
    assert code == 0
    captured = capsys.readouterr()
    final = json.loads(captured.out)
    assert final["cohort_size"] >= 0 and final["client_epsilon"] > 0
    line = captured.err.strip().splitlines()[0]
    assert line.startswith("mlp-cepam-gaussian-") and "seed 0: client level: (" in line
    assert "add-remove client: one client added or removed" in line
    assert "threat model: an honest-but-curious client" in line
    assert "poisson sampling q = 0.25 of N = 80" in line


def test_central_epsilon_is_dp_accountings_pld_and_its_calibration_reaches_the_target():
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    from cepam.fl.privacy import calibrate_central_noise_multiplier, central_epsilon

    acct = pld_privacy_accountant.PLDAccountant()
    acct.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(2.0)), 20))
    assert central_epsilon(noise_multiplier=2.0, sample_rate=0.1, rounds=20,
                           delta=1e-5) == pytest.approx(acct.get_epsilon(1e-5), rel=1e-9)
    z = calibrate_central_noise_multiplier(target_epsilon=4.0, target_delta=1e-5,
                                           sample_rate=0.1, rounds=5, tolerance=1e-2,
                                           discretization=1e-2)
    eps = central_epsilon(noise_multiplier=z, sample_rate=0.1, rounds=5, delta=1e-5,
                          discretization=1e-2)
    assert 3.8 < eps <= 4.0
    with pytest.raises(InvalidArgumentError):
        central_epsilon(noise_multiplier=0.0, sample_rate=0.1, rounds=1, delta=1e-5)
