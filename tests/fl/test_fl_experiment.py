"""cepam.fl: short runs of every method, determinism, resume, results, CLI."""

import argparse
import csv
import json
import math
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import cepam  # noqa: E402
from cepam.cli import main  # noqa: E402
from cepam.fl import cli as flcli  # noqa: E402
from cepam.fl.data import FILES, load_mnist  # noqa: E402
from cepam.fl.experiment import (  # noqa: E402
    COLUMNS,
    TIMING_COLUMNS,
    FLConfig,
    PlateauSchedule,
    TensorMNIST,
    run_experiment,
)
from cepam.fl.privacy import epsilon_at  # noqa: E402
from cepam.fl.results import format_table, load_runs, mean_ci, summarize, t_quantile  # noqa: E402

from helpers.paths import ROOT as REPO


def _mnist_dir():
    for candidate in (REPO.parent / "shared" / "data" / "mnist", os.environ.get("CEPAM_DATA")):
        if candidate and all((Path(candidate) / f).is_file() for f in FILES.values()):
            return Path(candidate)
    return None


MNIST_DIR = _mnist_dir()
try:
    import cepam.accounting  # noqa: F401

    HAS_ACCOUNTANT = True
except ImportError:
    HAS_ACCOUNTANT = False
pytestmark = [
    pytest.mark.skipif(
        MNIST_DIR is None,
        reason="MNIST not found in ../shared/data/mnist beside the repository nor in $CEPAM_DATA",
    ),
    pytest.mark.usefixtures("one_torch_thread"),
]


@pytest.fixture(scope="module")
def data():
    return TensorMNIST(load_mnist(MNIST_DIR))


def small(**changes) -> FLConfig:
    """3 clients of 100 samples, 2 rounds, small validation and test sets."""
    base = dict(model="cnn", method="fl", clients=3, samples_per_client=100, train_size=1000,
                val_size=200, test_size=200, rounds=2, sgd_steps=15, seed=0)
    base.update(changes)
    return FLConfig(**base)


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def _same_rows(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(_strip(a), _strip(b)):
        for k in ra:
            va, vb = ra[k], rb[k]
            if isinstance(va, float) and math.isnan(va):
                assert isinstance(vb, float) and math.isnan(vb), k
            else:
                assert va == vb, (k, va, vb)


@pytest.mark.parametrize("method,dim", [
    ("fl", 1), ("fl-sdq", 1), ("fl-gaussian", 1), ("fl-gaussian-sdq", 1), ("fl-laplace", 1),
    ("fl-laplace-sdq", 1), ("cepam-gaussian", 1), ("cepam-gaussian", 2), ("cepam-gaussian", 3),
    ("cepam-laplace", 1),
])
def test_short_run_of_every_method(data, tmp_path, method, dim):
    """Every method end to end, through real payloads where it sends them."""
    model = "mlp" if dim == 3 else "cnn"
    config = small(method=method, dim=dim, model=model)
    result = run_experiment(config, data, tmp_path / "run")
    rows = result.rows
    assert [r["round"] for r in rows] == [0, 1, 2] and result.complete
    for r in rows[1:]:
        assert 0.0 <= r["val_acc"] <= 1.0 and 0.0 <= r["test_acc"] <= 1.0
        assert math.isfinite(r["train_loss"]) and math.isfinite(r["val_loss"])
        m = 6422 if model == "cnn" else 25818
        if method in ("fl", "fl-gaussian", "fl-laplace"):
            assert r["bits_per_client"] == 32 * m and r["bits_measured"] is False
        else:
            assert r["bits_measured"] is True
            assert 0 < r["bits_per_client"] < 32 * m
            assert r["bits_per_coordinate"] == pytest.approx(r["bits_per_client"] / m)
        assert r["update_norm"] > 0 and 0.0 <= r["clipped_fraction"] <= 1.0
        if method in ("fl", "fl-sdq"):
            assert r["epsilon"] == math.inf
        elif HAS_ACCOUNTANT:
            assert r["epsilon"] > 0
    if HAS_ACCOUNTANT and method not in ("fl", "fl-sdq"):
        assert rows[2]["epsilon"] >= rows[1]["epsilon"]
    # Recomputed from the configuration alone at the run's delta: the run's column.
    assert epsilon_at(config, delta=config.delta, rounds=2) == pytest.approx(rows[2]["epsilon"],
                                                                     nan_ok=True)
    # The global model moved, and the files are there and agree.
    assert rows[-1]["val_loss"] < rows[0]["val_loss"]
    doc = json.loads((tmp_path / "run" / "rounds.json").read_text())
    assert doc["complete"] and doc["config"] == config.to_dict() and len(doc["rows"]) == 3
    with open(tmp_path / "run" / "rounds.csv") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == COLUMNS and len(table) == 3
    assert float(table[2]["test_acc"]) == rows[2]["test_acc"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["method"] == method


def test_cepam_bits_are_the_payload_sizes(data, monkeypatch):
    """bits_per_client is the mean over clients of 8 * len(payload), and every
    payload really is decoded by the server."""
    sizes, decoded = {}, []
    encode, decode = cepam.encode, cepam.decode

    def recording_encode(*args, **kwargs):
        payload = encode(*args, **kwargs)
        sizes.setdefault(kwargs["round"], []).append(len(payload))
        return payload

    def recording_decode(payload, **kwargs):
        decoded.append(payload)
        return decode(payload, **kwargs)

    monkeypatch.setattr(cepam, "encode", recording_encode)
    monkeypatch.setattr(cepam, "decode", recording_decode)
    result = run_experiment(small(method="cepam-gaussian", rounds=2), data)
    for row in result.rows[1:]:
        lengths = sizes[row["round"]]
        assert len(lengths) == 3
        assert row["bits_per_client"] == pytest.approx(8 * sum(lengths) / 3)
    assert len(decoded) == 6
    assert 3.0 < result.rows[1]["bits_per_coordinate"] < 8.0


def test_identical_seeds_give_identical_runs(data):
    config = small(method="cepam-gaussian", model="mlp")
    a, b = run_experiment(config, data), run_experiment(config, data)
    _same_rows(a.rows, b.rows)
    assert all(torch.equal(a.params[n], b.params[n]) for n in a.params)
    c = run_experiment(config.replace(seed=1), data)
    assert not all(torch.equal(a.params[n], c.params[n]) for n in a.params)


def test_interrupted_then_resumed_run_equals_an_uninterrupted_one(data, tmp_path):
    config = small(method="fl-gaussian", rounds=4, lr_patience=1)
    whole = run_experiment(config, data, tmp_path / "whole")
    part = run_experiment(config, data, tmp_path / "resumed", stop_after=2)
    assert not part.complete and len(part.rows) == 3
    doc = json.loads((tmp_path / "resumed" / "rounds.json").read_text())
    assert doc["complete"] is False
    resumed = run_experiment(config, data, tmp_path / "resumed")
    assert resumed.resumed_from == 2 and resumed.complete
    _same_rows(whole.rows, resumed.rows)
    assert all(torch.equal(whole.params[n], resumed.params[n]) for n in whole.params)
    # Finished runs are not run again; more rounds continue the same run.
    again = run_experiment(config, data, tmp_path / "resumed")
    assert again.resumed_from == 4 and len(again.rows) == 5
    longer = run_experiment(config.replace(rounds=5), data, tmp_path / "resumed")
    assert longer.resumed_from == 4 and len(longer.rows) == 6


def test_resume_refuses_another_configuration(data, tmp_path):
    run_experiment(small(rounds=1), data, tmp_path / "run")
    with pytest.raises(cepam.InvalidArgumentError, match="another configuration"):
        run_experiment(small(rounds=1, method="fl-gaussian"), data, tmp_path / "run")


def test_non_iid_split_and_batches(data):
    config = small(alpha=0.3, samples_per_client=None, batch_size=4, sgd_steps=3,
                   method="cepam-gaussian", dim=2)
    result = run_experiment(config, data)
    assert len(result.rows) == 3 and math.isfinite(result.rows[-1]["val_loss"])


def test_plateau_schedule_halves_after_patience_rounds_without_gain():
    s = PlateauSchedule(0.01, patience=3, factor=0.5)
    for acc in (0.5, 0.6, 0.6, 0.55):
        s.step(acc)
    assert s.lr == 0.01 and s.bad_rounds == 2  # two rounds without a gain: not yet
    s.step(0.6)  # equal is no gain: the third round without one
    assert s.lr == 0.005 and s.bad_rounds == 0
    for acc in (0.59, 0.58):
        s.step(acc)
    assert s.lr == 0.005
    s.step(0.61)
    assert s.best == 0.61
    t = PlateauSchedule(1.0, 3, 0.5)
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict()


def test_config_validation():
    with pytest.raises(cepam.InvalidArgumentError):
        FLConfig(method="fl", dim=2)
    with pytest.raises(cepam.InvalidArgumentError):
        FLConfig(model="vgg")
    with pytest.raises(cepam.InvalidArgumentError):
        FLConfig(train_size=55000, val_size=10000)
    d = FLConfig().to_dict()
    assert FLConfig.from_dict(d) == FLConfig()
    # The paper's setup is the default.
    c = FLConfig()
    assert (c.clients, c.sgd_steps, c.batch_size, c.momentum, c.lr, c.lr_patience,
            c.lr_factor, c.rounds, c.train_size, c.val_size, c.clip) == \
        (30, 15, 1, 0.9, 0.01, 10, 0.5, 80, 50000, 10000, 1.0)
    assert FLConfig(method="cepam-gaussian", dim=2).run_name() == "cnn-cepam-gaussian-n2"
    assert FLConfig(method="fl-gaussian", sigma=0.05).run_name() == "cnn-fl-gaussian-sigma0.05"
    assert FLConfig(clients=10).run_name().startswith("cnn-fl-")
    assert FLConfig(rounds=5).run_name() == "cnn-fl"  # resumable with more rounds


def test_runs_saved_before_the_sgd_steps_rename_read_and_resume_in_place():
    # sgd_steps was local_steps, the name cepam.accounting used for samples per
    # round: old config.json / rounds.json / state.pt files hold the old key,
    # and the run's directory (a hash of its settings) keeps its name.
    old = {**FLConfig().to_dict(), "batch_size": 4}
    old["local_steps"] = old.pop("sgd_steps") + 5
    config = FLConfig.from_dict(old)
    assert (config.sgd_steps, config.batch_size, config.samples_per_round) == (20, 4, 80)
    assert "local_steps" not in config.to_dict()
    # the name the run had when FLConfig(local_steps=20, batch_size=4) made it
    assert config.run_name() == "cnn-fl-658d462e"
    with pytest.raises(cepam.InvalidArgumentError, match="both"):
        FLConfig.from_dict({**old, "sgd_steps": 20})


def test_mean_ci():
    assert t_quantile(9) == 2.262
    m, ci = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and ci == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert math.isnan(mean_ci([1.0])[1])


# --------------------------------------------------------------------------------- CLI


def cli(argv):
    parser = argparse.ArgumentParser(prog="cepam")
    sub = parser.add_subparsers(dest="command")
    flcli.register(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except cepam.CepamError as exc:
        print(f"error: {exc}")
        return 2


def test_fl_run_with_lattice_auto(tmp_path, capsys):
    # It crashed in round 1 (the codec refuses a dim with lattice "auto").
    assert main(["fl", "run", "--lattice", "auto", "--rounds", "1", "--clients", "2",
                 "--samples-per-client", "20", "--train-size", "200", "--val-size", "20",
                 "--test-size", "20", "--sgd-steps", "2", "--out", str(tmp_path),
                 "--data-dir", str(MNIST_DIR), "--threads", "1", "--no-progress",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["label"] == "CEPAM-Gaussian (auto)" and summary["complete"]
    assert 0 < summary["bits_per_coordinate"] < 32


def test_fl_run_refuses_the_old_local_steps_flag(tmp_path, capsys):
    assert main(["fl", "run", "--local-steps", "5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cepam fl run: error: local_steps (--local-steps) no longer exists")
    assert "--sgd-steps" in err and "--samples-per-round" in err
    assert not any(tmp_path.iterdir())  # refused before anything ran


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """Tiny runs made through the CLI: 2 models x (fl, cepam n=1, cepam n=2) x 2 seeds."""
    out = tmp_path_factory.mktemp("cli") / "results"
    common = ["--clients", "3", "--samples-per-client", "60", "--train-size", "1000",
              "--val-size", "100", "--test-size", "100", "--rounds", "2", "--sgd-steps", "5",
              "--out", str(out), "--data-dir", str(MNIST_DIR), "--no-progress", "--json",
              "--threads", "1"]
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli(["fl", "run", "--model", "mlp", "cnn", "--method", "fl", "cepam-gaussian",
                    "--dim", "1", "2", "--seeds", "2", *common])
    assert code == 0
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    return out, common, lines


def test_cli_run(cli_results, capsys):
    out, common, lines = cli_results
    assert len(lines) == 2 * 3 * 2  # models x (fl, cepam n=1, cepam n=2) x seeds
    assert {x["seed"] for x in lines} == {0, 1} and all(x["complete"] for x in lines)
    # Each eps names its level, relation and delta (the paper's setting: the
    # epsilon column is record-level).
    for x in lines:
        assert (x["epsilon_level"], x["epsilon_relation"], x["epsilon_delta"]) == \
            ("record", "replace-one", 1e-5)
        assert (x["client_epsilon_level"], x["client_epsilon_relation"],
                x["client_epsilon_delta"]) == ("client", "replace-one", 1e-5)
    assert len(load_runs(out)) == 12
    groups = summarize(load_runs(out))
    assert len(groups) == 6 and all(len(g.runs) == 2 for g in groups)
    # Running the same command again does no new work and gives the same results.
    assert cli(["fl", "run", "--model", "mlp", "--method", "fl", "--seeds", "1", *common]) == 0
    again = json.loads(capsys.readouterr().out)
    first = next(x for x in lines if x["run"] == again["run"] and x["seed"] == 0)
    assert again["test_acc"] == first["test_acc"]


def test_cli_table(cli_results, capsys):
    out = cli_results[0]
    assert cli(["fl", "table", str(out)]) == 0
    text = capsys.readouterr().out
    assert "CEPAM-Gaussian (n=2)" in text and "MLP test acc (%, mean ± sd)" in text and "±" in text
    assert cli(["fl", "table", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert {s["label"] for s in stats} == {"FL", "CEPAM-Gaussian (n=1)", "CEPAM-Gaussian (n=2)"}
    assert all(s["seeds"] == 2 for s in stats)
    fl = next(s for s in stats if s["label"] == "FL" and s["model"] == "cnn")
    runs = [r for r in load_runs(out) if r.config.method == "fl" and r.config.model == "cnn"]
    # Accuracies are fractions in JSON, as in the runs' files.
    assert fl["test_acc"] == pytest.approx(0.5 * sum(r.rows[-1]["test_acc"] for r in runs))
    assert cli(["fl", "table", str(out), "--markdown", "--at", "best-val"]) == 0
    assert capsys.readouterr().out.startswith("| Method |")


def test_cli_plot(cli_results, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert cli(["fl", "plot", str(cli_results[0]), "--out", str(tmp_path / "fig")]) == 0
    png = tmp_path / "fig" / "convergence.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A privacy-accuracy sweep made through the CLI: CEPAM-Gaussian at two
    sigmas, 2 rounds of 3 clients of 100 samples, delta 0.01."""
    out = tmp_path_factory.mktemp("sweep") / "sweep"
    assert cli(["fl", "run", "--model", "cnn", "--method", "cepam-gaussian", "--sigma", "0.05",
                "0.5", "--clients", "3", "--samples-per-client", "100", "--train-size", "500",
                "--val-size", "50", "--test-size", "50", "--rounds", "2", "--sgd-steps", "5",
                "--delta", "0.01", "--out", str(out), "--data-dir", str(MNIST_DIR),
                "--no-progress", "--threads", "1"]) == 0
    return out


def test_cli_privacy_accuracy_figure(sweep, capsys):
    pytest.importorskip("matplotlib")
    capsys.readouterr()
    assert cli(["fl", "plot", str(sweep)]) == 0
    written = capsys.readouterr().out.split()
    assert str(sweep / "privacy_accuracy.png") in written
    text = format_table(summarize(load_runs(sweep)))
    assert "sigma=0.05" in text and "eps (delta" not in text


@pytest.mark.skipif(not HAS_ACCOUNTANT, reason="cepam.accounting not installed")
def test_cli_table_recomputes_eps_at_each_delta(sweep, capsys):
    from cepam.accounting import FLSetting, epsilon_after_rounds

    setting = FLSetting(clip=1.0, clients=3, samples_per_round=5, dataset_size=100)
    expected = {(sigma, delta): epsilon_after_rounds(sigma=sigma, delta=delta, rounds=2,
                                                     setting=setting)
                for sigma in (0.05, 0.5) for delta in (0.01, 0.015)}
    capsys.readouterr()
    assert cli(["fl", "table", str(sweep), "--delta", "0.01", "0.015", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert sorted(s["sigma"] for s in stats) == [0.05, 0.5]
    for s in stats:
        got = s["epsilon_at_delta"]
        assert got == {"0.01": pytest.approx(expected[(s["sigma"], 0.01)]),
                       "0.015": pytest.approx(expected[(s["sigma"], 0.015)])}
        assert got["0.015"] < got["0.01"]  # a larger delta buys a smaller eps
        assert got["0.01"] == pytest.approx(s["epsilon"])  # the runs' own delta: their column
    # Less noise, more eps, at every delta.
    low, high = sorted(stats, key=lambda s: s["sigma"])
    assert all(low["epsilon_at_delta"][d] > high["epsilon_at_delta"][d] for d in ("0.01", "0.015"))

    assert cli(["fl", "table", str(sweep), "--delta", "0.01", "0.015", "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| Method | sigma | eps (record-level, replace-one, delta = 0.01) "
                        "| eps (record-level, replace-one, delta = 0.015) "
                        "| CNN test acc (%, mean ± sd) | CNN bits/coord | seeds |")
    rows = [line.split(" | ") for line in lines[2:4]]
    for sigma, row in zip((0.05, 0.5), rows):
        assert row[0] == "| CEPAM-Gaussian (n=1)" and row[1] == f"{sigma:g}"  # sigma apart
        assert row[2:4] == [f"{expected[(sigma, d)]:.2f}" for d in (0.01, 0.015)]
        assert row[-1] == "1 |"  # seeds
    assert "curious-client view" in lines[-1]


@pytest.mark.skipif(not HAS_ACCOUNTANT, reason="cepam.accounting not installed")
def test_cli_plot_at_several_deltas(sweep, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert cli(["fl", "plot", str(sweep), "--delta", "0.01", "0.015",
                "--out", str(tmp_path / "fig")]) == 0
    assert str(tmp_path / "fig" / "privacy_accuracy.png") in capsys.readouterr().out.split()
    png = tmp_path / "fig" / "privacy_accuracy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("command", ["table", "plot"])
@pytest.mark.parametrize("delta", ["0", "1", "1.5", "-0.01", "nan", "x"])
def test_cli_refuses_a_delta_outside_the_unit_interval(tmp_path, capsys, command, delta):
    with pytest.raises(SystemExit) as exc:
        cli(["fl", command, str(tmp_path), "--delta", "0.01", delta])
    assert exc.value.code == 2
    assert f"argument --delta: must be in the open interval (0, 1), got {delta}" in \
        capsys.readouterr().err


def test_epsilon_at_refuses_bad_arguments():
    config = small(method="cepam-gaussian", sigma=0.5)
    for delta in (0.0, 1.0, -0.5, math.nan):
        with pytest.raises(cepam.InvalidArgumentError, match="delta must be in"):
            epsilon_at(config, delta=delta, rounds=2)
    with pytest.raises(cepam.InvalidArgumentError, match="non-IID"):
        epsilon_at(config.replace(alpha=0.3, samples_per_client=None), delta=0.01, rounds=2)
    assert epsilon_at(small(method="fl"), delta=0.01, rounds=2) == math.inf
    if HAS_ACCOUNTANT:  # pure DP: the same eps at every delta, linear in the rounds
        laplace = small(method="fl-laplace", b=0.5)
        eps = epsilon_at(laplace, delta=0.01, rounds=2)
        assert 0 < eps == epsilon_at(laplace, delta=0.5, rounds=2)
        assert eps == pytest.approx(2 * epsilon_at(laplace, delta=0.01, rounds=1))


def test_cli_reports_missing_data(tmp_path, capsys):
    assert cli(["fl", "run", "--out", str(tmp_path / "o"), "--data-dir", str(tmp_path / "none"),
                "--rounds", "1"]) == 2
    assert "train-images-idx3-ubyte.gz" in capsys.readouterr().out


def test_cli_refuses_bad_settings_before_running(tmp_path, capsys):
    assert cli(["fl", "run", "--method", "cepam-laplace", "--dim", "6", "--out",
                str(tmp_path / "o"), "--data-dir", str(MNIST_DIR)]) == 2
    assert not (tmp_path / "o").exists()


def test_cli_module_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys, cepam.fl.cli; "
            "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parallel_transport_is_deterministic(data):
    """With two torch threads clients are encoded in a thread pool; the result
    must not depend on which thread finishes first."""
    config = small(method="cepam-gaussian", model="mlp", clients=4, samples_per_client=50)
    torch.set_num_threads(2)
    a, b = run_experiment(config, data), run_experiment(config, data)
    _same_rows(a.rows, b.rows)
    assert all(torch.equal(a.params[n], b.params[n]) for n in a.params)
