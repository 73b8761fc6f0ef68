"""Reading, tabulating and plotting finished runs: one convention each.

These tests need no torch: finished runs are read and tabulated without it.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from cepam.cli import main
from cepam.errors import InvalidArgumentError
from cepam.fl.cli import EPS_WARNING, privacy_report
from cepam.fl.config import METHODS, MODEL_PARAMETERS, FLConfig
from cepam.fl.results import format_table, load_runs, summarize

from helpers.paths import ROOT

RUNS = ROOT / "docs" / "experiments" / "runs"


def test_the_shipped_runs_can_be_re_tabled(capsys):
    runs = load_runs(RUNS)
    assert len(runs) == len(list(RUNS.glob("*.csv"))) == 66
    assert main(["fl", "table", str(RUNS), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    shipped = json.loads((ROOT / "docs" / "experiments" / "table.json").read_text())
    assert stats == shipped  # docs/experiments/table.json is this command's output
    # EXPERIMENTS.md's table of the grid, header, rows and note.
    text = format_table(summarize(runs), markdown=True)
    experiments = (ROOT / "docs" / "EXPERIMENTS.md").read_text()
    for line in text.splitlines():
        assert line in experiments.splitlines(), line


def test_the_table_shows_the_standard_deviation_over_seeds(tmp_path):
    # Two seeds 20 points apart: mean ± sd (14.14), not the 95% t interval
    # of the mean (± 127, wider than the percent scale).
    for seed, acc in ((0, 0.5), (1, 0.7)):
        rows = (RUNS / "cnn-fl-seed0.csv").read_text().splitlines()
        header = rows[0].split(",")
        last = rows[-1].split(",")
        last[header.index("test_acc")] = str(acc)
        (tmp_path / f"cnn-fl-seed{seed}.csv").write_text("\n".join(rows[:-1] + [",".join(last)])
                                                        + "\n")
    text = format_table(summarize(load_runs(tmp_path)), markdown=True)
    assert "| FL | 60.00 ± 14.14 |" in text
    assert "(%, mean ± sd)" in text.splitlines()[0] and "standard deviation" in text


def test_other_csv_files_are_skipped_and_unreadable_runs_refused(tmp_path):
    (tmp_path / "notes-seed1.csv").write_text("a,b\n1,2\n")
    (tmp_path / "cnn-fl-seed0.csv").write_text((RUNS / "cnn-fl-seed0.csv").read_text())
    runs = load_runs(tmp_path)
    assert len(runs) == 1 and runs[0].config == FLConfig(method="fl", rounds=80)
    hashed = FLConfig(clients=3).run_name()
    (tmp_path / f"{hashed}-seed0.csv").write_text((RUNS / "cnn-fl-seed0.csv").read_text())
    with pytest.raises(InvalidArgumentError, match="config.json"):
        load_runs(tmp_path)


def test_accuracies_are_fractions_in_every_json():
    for path in (ROOT / "docs" / "experiments").rglob("*.json"):
        if path.name == "batchnorm.json":  # examples/pytorch_batchnorm.py's runs
            results = json.loads(path.read_text())["results"]
            assert all(0.0 <= a <= 1.0 for r in results for a in r["accuracy"])
            continue
        for s in json.loads(path.read_text()):  # cepam fl table --json
            for key in ("test_acc", "val_acc"):
                assert 0.0 <= s[key] <= 1.0, (path, key, s[key])
                assert 0.0 <= s[f"{key}_ci95"] <= 1.0
                assert 0.0 <= s[f"{key}_sd"] <= 1.0


def test_run_names_read_back():
    configs = [FLConfig(), FLConfig(model="mlp", method="cepam-gaussian", dim=3),
               FLConfig(method="cepam-gaussian", lattice="E8", sigma=1e-5, alpha=0.5),
               FLConfig(method="cepam-gaussian", lattice="auto"),
               FLConfig(method="fl-laplace-sdq", b=0.25), FLConfig(method="cepam-laplace", b=2e-7)]
    for config in configs:
        assert FLConfig.from_run_name(config.run_name()) == config
    hashed = FLConfig(clients=3).run_name()
    with pytest.raises(InvalidArgumentError, match="config.json"):
        FLConfig.from_run_name(hashed)
    for bad in ("cnn", "resnet-fl", "cnn-flx", "cnn-fl-n2"):
        with pytest.raises(InvalidArgumentError):
            FLConfig.from_run_name(bad)


def test_model_parameter_counts_match_the_networks():
    pytest.importorskip("torch")
    from cepam.fl.models import build_model, parameter_count

    assert {m: parameter_count(build_model(m, 0)) for m in MODEL_PARAMETERS} == MODEL_PARAMETERS


@pytest.mark.parametrize("command", ["table", "plot"])
def test_table_and_plot_agree_on_an_empty_or_missing_directory(tmp_path, capsys, command):
    if command == "plot":
        pytest.importorskip("matplotlib")  # without it, plot names the extra first
    assert main(["fl", command, str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"cepam fl {command}: error: no complete runs under {tmp_path}\n"
    assert main(["fl", command, str(tmp_path / "missing")]) == 1  # a missing path: exit 1
    assert capsys.readouterr().err == \
        f"cepam fl {command}: error: {tmp_path / 'missing'} does not exist\n"
    (tmp_path / "file").write_text("")
    assert main(["fl", command, str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err == \
        f"cepam fl {command}: error: {tmp_path / 'file'} is not a directory\n"


def _final(eps: float, rounds: int = 80) -> dict:
    return {"round": rounds, "epsilon": eps}


def test_fl_run_reports_both_levels_and_warns_when_eps_is_large():
    pytest.importorskip("scipy")
    from cepam.accounting import client_epsilon

    gaussian = FLConfig(method="cepam-gaussian")
    client = client_epsilon(sigma=1e-3, clip=1.0, rounds=80, clients=30, delta=1e-5)
    lines = privacy_report(gaussian, _final(4.2e5))
    # The client level first, valid for any loop; each names relation, level and threat model.
    assert lines[0] == (f"cnn-cepam-gaussian-n1 seed 0: client level: ({client:.4g}, 1e-05)-DP "
                        "after 80 rounds (replace-one client: one client's whole data replaced; "
                        "threat model: an honest-but-curious client; any local training loop; "
                        "sigma = 0.001)")
    assert lines[1].startswith("cnn-cepam-gaussian-n1 seed 0: record level: (4.2e+05, 1e-05)-DP "
                               "after 80 rounds (replace-one record: one training example of one "
                               "client replaced; threat model: an honest-but-curious client; "
                               "tight bound); it holds only for the paper's loop: ")
    assert lines[1].endswith("nothing carried across rounds (this run's loop: 15 steps x batch "
                             "1 = 15 samples a round)")
    assert lines[2].startswith(f"warning: eps = 4.2e+05 > {EPS_WARNING:g} at record level")
    assert "not meaningfully private (raise --sigma" in lines[2] and len(lines) == 3
    # A record-level eps below the threshold still warns about the client level.
    lines = privacy_report(gaussian, _final(2.0))
    assert len(lines) == 3 and "record level: (2, 1e-05)-DP" in lines[1]
    assert lines[2].startswith(f"warning: client-level eps = {client:.4g} > {EPS_WARNING:g}")
    # Both small: no warning.
    quiet = FLConfig(method="cepam-gaussian", sigma=20.0)
    assert len(privacy_report(quiet, _final(0.1))) == 2
    laplace = privacy_report(FLConfig(method="fl-laplace"), _final(2.6e7))
    assert "client level: " in laplace[0] and "-DP (pure)" in laplace[0]
    assert "record level: 2.6e+07-DP (pure)" in laplace[1] and "--laplace-b" in laplace[2]
    assert privacy_report(FLConfig(method="fl"), _final(math.inf)) == []
    assert privacy_report(FLConfig(method="fl-sdq"), _final(math.inf)) == []
    assert "eps not available" in privacy_report(gaussian, _final(math.nan))[0]
    # Every private method gets a report.
    private = [m for m in METHODS if m not in ("fl", "fl-sdq")]
    assert all(privacy_report(FLConfig(method=m), _final(1.0)) for m in private)


def test_plot_writes_every_format_asked(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "fig"
    assert main(["fl", "plot", str(RUNS), "--out", str(out), "--format", "png", "pdf",
                 "svg"]) == 0
    written = capsys.readouterr().out.split()
    assert written == [str(out / f"convergence.{f}") for f in ("png", "pdf", "svg")]
    assert (out / "convergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "convergence.pdf").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in (out / "convergence.svg").read_bytes()[:2000]


def test_convergence_figure_has_round_ticks_and_seed_counts(tmp_path):
    pytest.importorskip("matplotlib")
    from cepam.fl.plots import convergence_figure

    one_seed = [r for r in load_runs(RUNS) if r.config.seed == 0]
    short = []
    for r in one_seed:  # the first 3 rounds of each run: few rounds, fractional default ticks
        r.rows = r.rows[:4]
        short.append(r)
    fig = convergence_figure(summarize(short))
    labels = [t.get_text() for ax in fig.axes for t in
              (ax.get_legend().get_texts() if ax.get_legend() else [])]
    assert labels and all(re.search(r"\(1 seed\)$", t) for t in labels), labels
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks

