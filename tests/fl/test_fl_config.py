"""FLConfig refuses settings that contradict each other or that the run would
not use, before any data is read; `cepam fl run` gives a shared option to the
runs it applies to and refuses one that applies to none.

These tests need no torch (the CLI's ones skip without it: `fl run` asks for
it before it reads its options)."""

from __future__ import annotations

import numpy as np
import pytest

from cepam.errors import InvalidArgumentError, InvalidTypeError
from cepam.fl.config import FLConfig


@pytest.mark.parametrize("changes, message", [
    # a setting the method does not use (it was accepted and silently ignored)
    (dict(method="cepam-gaussian", b=0.01), r"^b = 0\.01 is unused in this run \(method "
                                            r"'cepam-gaussian'\): it applies only to the Laplace"),
    (dict(method="fl-gaussian-sdq", b=0.01), r"^b = 0\.01 is unused"),
    (dict(method="cepam-laplace", sigma=0.01), r"^sigma = 0\.01 is unused .* Gaussian methods"),
    (dict(method="fl-laplace-sdq", sigma=0.01), r"^sigma = 0\.01 is unused"),
    (dict(method="cepam-gaussian", sdq_step=0.1), r"^sdq_step = 0\.1 is unused .* SDQ methods"),
    (dict(method="fl-laplace", sdq_step=0.1), r"^sdq_step = 0\.1 is unused"),
    (dict(method="cepam-gaussian", clip_all=True), r"^clip_all = True is unused .* fl and fl-sdq"),
    (dict(method="fl-gaussian", clip_all=True), r"^clip_all = True is unused"),
    (dict(method="cepam-gaussian", clip_learning_rate=0.5),
     r"^clip_learning_rate = 0\.5 is unused .* adaptive clipping"),
    (dict(method="cepam-gaussian", clip_count_sigma=0.5),
     r"^clip_count_sigma = 0\.5 is unused .* released clipped fraction"),
    (dict(method="fl-laplace", clipped_fraction_release=True),
     r"^clipped_fraction_release = True is unused .* Gaussian methods"),
    (dict(method="fl", clipped_fraction_release=True), r"^clipped_fraction_release = True"),
    (dict(method="fl", dim=2), r"^dim = 2 is unused .* CEPAM methods"),
    (dict(method="fl-sdq", lattice="E8"), r"^lattice = 'E8' is unused .* CEPAM methods"),
    (dict(method="fl", noise_multiplier=1.0), r"^noise_multiplier = 1\.0 is unused .* central_dp"),
    # two at once: both named
    (dict(method="cepam-gaussian", sdq_step=0.1, clip_all=True),
     r"^sdq_step = 0\.1 is unused .*; clip_all = True is unused"),
    # lattice, dimension and noise the codec does not take (the run failed in
    # its first round, or when fl run probed the codec)
    (dict(method="cepam-gaussian", lattice="E8", dim=4), r"lattice 'E8' has dimension 8"),
    (dict(method="cepam-gaussian", lattice="A2", dim=3), r"lattice 'A2' has dimension 2"),
    (dict(method="cepam-gaussian", lattice="auto", dim=2), r"chooses the dimension itself"),
    (dict(method="cepam-laplace", lattice="E8"), r"Gaussian mechanism only, not Laplace"),
    (dict(method="cepam-laplace", dim=5), r"Laplace takes dimension n \(dim\) at most 4"),
    # a split that does not fit (the run failed once the data was read)
    (dict(samples_per_client=2000), r"cannot give 30 clients 2000 samples each from 50000"),
    (dict(clients=10, population=100, sample_rate=0.1, samples_per_client=600),
     r"cannot give 100 clients 600 samples each from 50000"),
    (dict(clients=10, population=60000, sample_rate=10 / 60000),
     r"cannot give 60000 clients 0 samples each from 50000"),
    (dict(alpha=0.5, samples_per_client=100), r"samples_per_client applies to the IID split only"),
    (dict(alpha=0.5, clients=6000), r"cannot give 6000 clients 10 samples each from 50000"),
])
def test_config_refuses_unused_and_contradictory_settings(changes, message):
    with pytest.raises(InvalidArgumentError, match=message):
        FLConfig(**changes)


@pytest.mark.parametrize("changes, error, message", [
    # an int beyond float64 raised OverflowError (the sampling checks' float products)
    (dict(clients=2**1100), InvalidArgumentError, r"^clients must be at most 1000000000000, "),
    (dict(population=2**1100), InvalidArgumentError, r"^population must be at most "),
    (dict(clients=10**12 + 1, population=10**12 + 1), InvalidArgumentError,
     r"^clients must be at most"),
    # an array where a name is expected raised numpy's "truth value of an
    # array is ambiguous" ValueError (`in CENTRAL_DP`)
    (dict(central_dp=np.array([1.0, 2.0])), InvalidTypeError, r"^central_dp must be a str"),
    (dict(central_dp=1), InvalidTypeError, r"^central_dp must be a str"),
    (dict(central_dp="dp-sgd"), InvalidArgumentError, r"^central_dp must be one of"),
    (dict(sampling=np.array(["fixed"])), InvalidTypeError, r"^sampling must be a str"),
])
def test_config_checks_types_and_ranges_first(changes, error, message):
    with pytest.raises(error, match=message):
        FLConfig(**changes)


@pytest.mark.parametrize("changes", [
    dict(),
    dict(method="fl-sdq", sdq_step=0.1), dict(method="fl-gaussian-sdq", sdq_step=0.1, sigma=0.1),
    dict(method="fl-laplace-sdq", sdq_step=0.1, b=0.1), dict(method="fl-sdq", sigma=0.1),
    dict(method="fl", clip_all=True, clip=0.5), dict(method="fl-sdq", clip_all=True),
    dict(method="fl", central_dp="flower", noise_multiplier=1.0, clip=0.5),
    dict(method="cepam-gaussian", clip_quantile=0.5, clip_learning_rate=0.5,
         clip_count_sigma=0.5),
    dict(method="fl-gaussian", clipped_fraction_release=True, clip_count_sigma=0.5),
    dict(method="cepam-gaussian", clip_quantile=0.5, clipped_fraction_release=True),
    dict(method="cepam-gaussian", lattice="E8"), dict(method="cepam-gaussian", lattice="E8", dim=8),
    dict(method="cepam-gaussian", lattice="auto"), dict(method="cepam-laplace", dim=4),
    dict(samples_per_client=5000, clients=10), dict(alpha=0.5, clients=5000),
    # the baselines take a grid's noise scales and clip, unused
    dict(method="fl", sigma=0.3, b=0.2, clip=0.5), dict(method="fl-sdq", sdq_step=0.1, sigma=0.3),
])
def test_config_takes_every_setting_where_it_applies(changes):
    config = FLConfig(**changes)
    unused = set(config.ignored_settings())
    assert unused <= {"sigma", "b", "clip"} and (not unused or config.method in ("fl", "fl-sdq"))
    assert all(not config.uses(name) for name in unused)


def test_unused_settings_tell_no_configurations_apart():
    # fl ignores sigma: its runs at two sigmas are one configuration, as
    # their run name says; fl-sdq's default step follows sigma, so there
    # sigma is a setting of its own.
    assert FLConfig(method="fl", sigma=0.3, clip=0.5).group_key() == FLConfig().group_key()
    assert FLConfig(method="fl", sigma=0.3).run_name() == FLConfig().run_name()
    assert FLConfig(method="fl", sigma=0.3).group_settings()["sigma"] == FLConfig().sigma
    assert FLConfig(method="fl-sdq", sigma=0.3).group_key() != FLConfig(method="fl-sdq").group_key()
    assert FLConfig(method="fl", clip_all=True, clip=0.5).group_key() != \
        FLConfig(method="fl", clip_all=True).group_key()
    assert FLConfig(method="fl-sdq", sdq_step=0.1, sigma=0.3).ignored_settings() == ("sigma",)
    # E8's n = 1 is its own 8: one configuration under two run names
    e8 = FLConfig(method="cepam-gaussian", lattice="E8")
    assert e8.replace(dim=8).group_key() == e8.group_key() != e8.replace(lattice="D4").group_key()
    assert FLConfig(method="cepam-gaussian").uses("sigma") and not FLConfig().uses("dim")
    with pytest.raises(InvalidArgumentError, match="not a setting"):
        FLConfig().uses("local_steps")


def test_runs_saved_with_a_setting_now_refused_read_as_its_default():
    # `fl run --method all --sdq-step 0.1 --clip-all --laplace-b 0.01` gave
    # every method every option: those runs' config.json files still read.
    saved = {**FLConfig(method="cepam-gaussian").to_dict(), "sdq_step": 0.1, "clip_all": True,
             "b": 0.01, "clip_learning_rate": 0.5}
    assert FLConfig.from_dict(saved) == FLConfig(method="cepam-gaussian")
    # what a run uses is kept, and still checked
    kept = {**FLConfig(method="fl-sdq").to_dict(), "sdq_step": 0.1, "clip_all": True}
    assert FLConfig.from_dict(kept) == FLConfig(method="fl-sdq", sdq_step=0.1, clip_all=True)
    with pytest.raises(InvalidArgumentError, match="cannot give"):
        FLConfig.from_dict({**FLConfig().to_dict(), "samples_per_client": 2000})


# -- cepam fl run ------------------------------------------------------------------------------

def _settings(argv):
    """The configurations `cepam fl run ARGV` would run."""
    from cepam.cli import build_parser
    from cepam.fl import cli as flcli

    return flcli._settings(build_parser().parse_args(["fl", "run", "--out", "o", *argv]))


def test_fl_run_gives_a_shared_option_to_the_runs_it_applies_to():
    configs = _settings(["--method", "all", "--clip-all", "--sdq-step", "0.1", "--laplace-b",
                         "0.01", "--dim", "2"])
    by_method = {c.method: c for c in configs}
    assert len(configs) == len(by_method) == 8
    for method, c in by_method.items():
        assert c.clip_all == (method in ("fl", "fl-sdq")), method
        assert (c.sdq_step == 0.1) == method.endswith("sdq"), method
        assert (c.b == 0.01) == (method in ("fl", "fl-sdq") or "laplace" in method), method
        assert c.dim == (2 if method.startswith("cepam") else 1), method


def test_fl_run_sweeps_sigma_over_every_method_that_uses_it():
    """fl-sdq's default SDQ step follows sigma (sqrt(12) sigma): each sigma
    is a run of its own, as for the Gaussian methods; with --sdq-step its
    one run takes none.  The baselines and the Laplace methods run once."""
    configs = _settings(["--method", "all", "--sigma", "0.01", "0.02"])
    sigmas = {}
    for c in configs:
        sigmas.setdefault(c.method, []).append(c.sigma)
    assert {m: sorted(v) for m, v in sigmas.items() if len(v) > 1} == {
        m: [0.01, 0.02] for m in ("fl-sdq", "fl-gaussian", "fl-gaussian-sdq", "cepam-gaussian")}
    assert len(configs) == 4 * 2 + 4
    stepped = _settings(["--method", "fl-sdq", "fl-gaussian", "--sigma", "0.01", "0.02",
                         "--sdq-step", "0.1"])
    assert [(c.method, c.sigma, c.sdq_step) for c in stepped] == [
        ("fl-sdq", 0.01, 0.1), ("fl-gaussian", 0.01, None), ("fl-gaussian", 0.02, None)]
    assert not stepped[0].uses("sigma")  # (given as the grid's first value, unused)


@pytest.mark.parametrize("argv, message", [
    (["--method", "cepam-gaussian", "--laplace-b", "0.01"],
     "b = 0.01 is unused in every run (method 'cepam-gaussian'): it applies only to the Laplace "
     "methods (cepam-laplace, fl-laplace, fl-laplace-sdq); leave it at its default (0.001)"),
    (["--method", "cepam-gaussian", "fl-gaussian", "--clip-all"],
     "clip_all = True is unused in every run (methods 'cepam-gaussian', 'fl-gaussian'): it "
     "applies only to fl and fl-sdq (the private methods always clip); leave it at its default "
     "(False)"),
    (["--method", "cepam-gaussian", "--clip-learning-rate", "0.5"],
     "clip_learning_rate = 0.5 is unused in every run (method 'cepam-gaussian'): it applies only "
     "to adaptive clipping (clip_quantile); leave it at its default (0.2)"),
    (["--method", "fl", "--lattice", "E8"],
     "lattice = 'E8' is unused in every run (method 'fl'): it applies only to the CEPAM methods; "
     "leave it at its default ('Z')"),
    (["--method", "fl", "--clip", "0.5"],
     "clip = 0.5 is unused in every run (method 'fl'): it applies only to the private methods, "
     "and fl and fl-sdq with clip_all or central_dp; leave it at its default (1.0)"),
    (["--method", "fl", "fl-sdq", "--laplace-b", "0.5"],
     "b = 0.5 is unused in every run (methods 'fl', 'fl-sdq'): it applies only to the Laplace "
     "methods (cepam-laplace, fl-laplace, fl-laplace-sdq); leave it at its default (0.001)"),
    (["--method", "cepam-gaussian", "--samples-per-client", "2000"],
     "cannot give 30 clients 2000 samples each from 50000 samples"),
])
def test_fl_run_refuses_an_option_no_run_uses_before_it_reads_data(tmp_path, capsys, argv,
                                                                   message):
    from cepam.cli import main

    pytest.importorskip("torch")  # (fl run names its missing extras first)
    pytest.importorskip("scipy")
    out = tmp_path / "o"
    assert main(["fl", "run", *argv, "--out", str(out), "--data-dir",
                 str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"cepam fl run: error: {message}\n"
    assert not out.exists()
