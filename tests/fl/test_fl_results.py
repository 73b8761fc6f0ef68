"""Reading, tabulating and plotting finished runs: one convention each.

These tests need no torch: finished runs are read and tabulated without it.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from cepam.cli import main
from cepam.errors import InvalidArgumentError, InvalidTypeError, NotADirectoryPathError
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
    # a file: a path that cannot be read as a directory, exit 1 as a missing
    # one (it was 2, a usage error)
    assert main(["fl", command, str(tmp_path / "file")]) == 1
    assert capsys.readouterr().err == \
        f"cepam fl {command}: error: {tmp_path / 'file'} is not a directory\n"


def test_load_runs_summarize_and_format_table_check_their_arguments(tmp_path):
    """None raised os.fspath's or iteration's TypeError, a list of other
    things an AttributeError."""
    for directory in (None, 1, np.array([1.0, 2.0])):
        with pytest.raises(InvalidTypeError, match="directory must be a path"):
            load_runs(directory)
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryPathError, match="is not a directory"):
        load_runs(tmp_path / "file")
    assert isinstance(NotADirectoryPathError("x"), (InvalidArgumentError, NotADirectoryError))
    for runs, message in ((None, r"^runs must be an iterable of Runs"),
                          ([1], r"^runs\[0\] must be a Run, got int")):
        with pytest.raises(InvalidTypeError, match=message):
            summarize(runs)
    for groups, message in ((1.0, r"^groups must be an iterable of Groups"),
                            (None, r"^groups must be an iterable"),
                            (load_runs(RUNS)[:1], r"^groups\[0\] must be a Group, got Run")):
        with pytest.raises(InvalidTypeError, match=message):
            format_table(groups)
    assert summarize(iter([])) == [] and format_table(()) == "no complete runs found\n"


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



# One-round runs of the fl run repro (MLP, 2 clients, 2 SGD steps, sigma 0.5)
# and the eps their columns hold: record-level replace-one at delta 1e-5 and
# 5e-5, client-level add-remove (outside the paper's setting).
_TINY = FLConfig(model="mlp", method="cepam-gaussian", sigma=0.5, rounds=1, clients=2,
                 train_size=200, val_size=100, test_size=100, sgd_steps=2)
_REPLACE_ONE, _ADD_REMOVE, _DELTA_5E5 = (_TINY, _TINY.replace(relation="add-remove"),
                                         _TINY.replace(delta=5e-5))


def _write_run(root, config: FLConfig, eps: float, *, test_acc: float = 0.11,
               modified: float | None = None) -> None:
    """A finished one-round run of ``config`` under ``root`` (rounds.json),
    its eps column at ``eps``, its file last written at ``modified``."""
    import os

    from cepam.fl.rundir import write_outputs

    rows = [{"round": r, "val_acc": test_acc, "test_acc": test_acc, "bits_per_client": 2540.0,
             "bits_per_coordinate": 0.1, "bits_measured": True, "epsilon": eps * r}
            for r in (0, 1)]
    directory = root / config.run_name() / f"seed{config.seed}"
    directory.mkdir(parents=True)
    write_outputs(directory, config, rows, complete=True)
    if modified is not None:
        os.utime(directory / "rounds.json", (modified, modified))


def _markdown(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a Markdown table."""
    lines = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in text.splitlines() if line.startswith("|")]
    return lines[0], lines[2:]


def test_the_table_states_each_eps_level_relation_and_delta_in_its_own_column(tmp_path, capsys):
    runs = {_REPLACE_ONE: 16.51, _ADD_REMOVE: 6.57, _DELTA_5E5: 14.55}
    for config, eps in runs.items():
        _write_run(tmp_path, config, eps)
    assert main(["fl", "table", str(tmp_path), "--markdown"]) == 0
    header, rows = _markdown(capsys.readouterr().out)
    columns = {"eps (record-level, replace-one, delta = 1e-05)": "16.51",
               "eps (client-level, add-remove, delta = 1e-05)": "6.57",
               "eps (record-level, replace-one, delta = 5e-05)": "14.55"}
    assert [h for h in header if h.startswith("eps")] == sorted(columns, key=header.index)
    assert len(rows) == 3
    for row in rows:  # each run's eps in its own column only
        eps = {h: c for h, c in zip(header, row) if h.startswith("eps") and c}
        assert len(eps) == 1 and eps.popitem() in columns.items()
    # --json states them too, for every group.
    assert main(["fl", "table", str(tmp_path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    got = {(s["epsilon_level"], s["epsilon_relation"], s["epsilon_delta"], s["epsilon"])
           for s in stats}
    assert got == {("record", "replace-one", 1e-5, 16.51), ("client", "add-remove", 1e-5, 6.57),
                   ("record", "replace-one", 5e-5, 14.55)}


def test_laplace_eps_is_stated_as_pure_and_a_rows_eps_is_its_largest():
    from cepam.fl.privacy import EpsilonScope, epsilon_scope

    laplace = FLConfig(method="cepam-laplace")
    assert epsilon_scope(laplace) == EpsilonScope("record", "replace-one", 0.0)
    assert epsilon_scope(laplace).describe() == "record-level, replace-one, pure DP, delta = 0"
    assert epsilon_scope(_ADD_REMOVE, column="client_epsilon", delta=0.01) == \
        EpsilonScope("client", "add-remove", 0.01)
    assert epsilon_scope(_TINY, column="client_epsilon").level == "client"
    with pytest.raises(InvalidArgumentError, match="column"):
        epsilon_scope(_TINY, column="eps")
    # The grid's Laplace rows: the MLP's eps (the larger) for both models.
    text = format_table([g for g in summarize(load_runs(RUNS)) if g.config.method == "fl-laplace"],
                        markdown=True)
    header, (row,) = _markdown(text)
    assert header[-2] == "eps (record-level, replace-one, pure DP, delta = 0)"
    assert row[-2] == "25708391.79" and "the largest" in text


def test_central_dp_fedavg_eps_names_its_threat_model_in_its_own_column(tmp_path, capsys):
    """Central DP-FedAvg's eps is against the released model only: it was
    put in one column with CEPAM's add-remove eps, under the note's
    curious-client view."""
    from cepam.fl.privacy import EpsilonScope, epsilon_scope

    central = _TINY.replace(method="fl", central_dp="dp-fedavg",
                            relation="add-remove", noise_multiplier=2.0)
    scope = epsilon_scope(central)
    assert scope == EpsilonScope("client", "add-remove", 1e-5, "released model")
    assert scope.as_dict()["epsilon_threat_model"] == "released model"
    assert EpsilonScope.from_dict(scope.as_dict()) == scope
    assert "epsilon_threat_model" not in epsilon_scope(_ADD_REMOVE).as_dict()
    _write_run(tmp_path, _ADD_REMOVE, 3.0)
    _write_run(tmp_path, central, 0.5)
    assert main(["fl", "table", str(tmp_path), "--markdown"]) == 0
    text = capsys.readouterr().out
    header, rows = _markdown(text)
    assert {h for h in header if h.startswith("eps")} == {
        "eps (client-level, add-remove, delta = 1e-05)",
        "eps (client-level, add-remove, delta = 1e-05, threat model: released model)"}
    assert "released model only" in text
    for row in rows:
        assert len([c for h, c in zip(header, row) if h.startswith("eps") and c]) == 1


def test_a_delta_sweep_keeps_laplace_eps_in_its_pure_column():
    pytest.importorskip("scipy")  # (eps at another delta: cepam.accounting)
    from cepam.fl.privacy import EpsilonScope

    groups = [g for g in summarize(load_runs(RUNS))
              if g.config.method in ("fl-gaussian", "fl-laplace")]
    header, rows = _markdown(format_table(groups, markdown=True, deltas=[1e-5]))
    pure = header.index("eps (record-level, replace-one, pure DP, delta = 0)")
    laplace = next(row for row in rows if "Laplace" in row[0])
    assert laplace[pure] and not any(
        c for i, (h, c) in enumerate(zip(header, laplace)) if h.startswith("eps") and i != pure)
    assert EpsilonScope("record", "replace-one", 0.0).at(1e-5).pure
    assert EpsilonScope("client", "add-remove", 1e-5).at(1e-6).delta == 1e-6


def test_the_privacy_accuracy_figure_never_joins_eps_of_different_scopes(tmp_path):
    pytest.importorskip("matplotlib")
    from cepam.fl.plots import privacy_accuracy_figure

    # Two noise levels under each relation: one line each, each naming its
    # level and relation; the shared delta on the axis.
    for config, eps in ((_REPLACE_ONE, 16.51), (_ADD_REMOVE, 6.57)):
        _write_run(tmp_path / "mix", config, eps)
        _write_run(tmp_path / "mix", config.replace(sigma=1.0), eps / 3)
    stats = [g.stats() for g in summarize(load_runs(tmp_path / "mix"))]
    (ax,) = privacy_accuracy_figure(stats).axes
    legend = sorted(t.get_text() for t in ax.get_legend().get_texts())
    assert legend == ["CEPAM-Gaussian (n=1), MLP, client-level, add-remove",
                      "CEPAM-Gaussian (n=1), MLP, record-level, replace-one"]
    assert "delta = 1e-05" in ax.get_xlabel()
    xs = sorted(sorted(c.lines[0].get_xdata()) for c in ax.containers)  # the data lines
    assert xs == [pytest.approx([6.57 / 3, 6.57]), pytest.approx([16.51 / 3, 16.51])]
    # Runs at two deltas, or of one noise level: no line has two noise levels.
    _write_run(tmp_path / "deltas", _REPLACE_ONE, 16.51)
    _write_run(tmp_path / "deltas", _DELTA_5E5.replace(sigma=1.0), 4.0)
    _write_run(tmp_path / "one", _REPLACE_ONE, 16.51)
    _write_run(tmp_path / "one", _REPLACE_ONE.replace(clip=2.0), 30.0)
    for name in ("deltas", "one"):
        assert privacy_accuracy_figure([g.stats() for g in summarize(load_runs(tmp_path / name))]
                                       ) is None, name
    # Summaries that do not say what their eps is for are refused.
    old = [{k: v for k, v in s.items() if not k.startswith("epsilon_")} for s in stats]
    with pytest.raises(InvalidArgumentError, match="epsilon_level"):
        privacy_accuracy_figure(old)


def test_the_privacy_accuracy_axis_names_the_curious_client_only_for_its_lines():
    """Central DP-FedAvg's eps holds against the released model only: a
    figure of such lines alone names that threat model, never the curious
    client's view; a figure mixing the two names the curious client for the
    lines that name no other."""
    pytest.importorskip("matplotlib")
    from cepam.fl.plots import privacy_accuracy_figure

    def stat(sigma, eps, threat_model):
        d = dict(method="fl-gaussian", model="cnn", label="FL+Gaussian", sigma=sigma,
                 test_acc=0.9, test_acc_sd=0.01, epsilon=eps, delta=1e-5,
                 epsilon_level="client", epsilon_relation="add-remove", epsilon_delta=1e-5)
        if threat_model is not None:
            d["epsilon_threat_model"] = threat_model
        return d

    released = [stat(0.1, 5.0, "released model"), stat(0.2, 2.0, "released model")]
    (ax,) = privacy_accuracy_figure(released).axes
    assert ax.get_xlabel() == ("privacy budget eps (client-level, add-remove, delta = 1e-05, "
                               "threat model: released model; tight bound)")
    client = [dict(s, label="CEPAM", method="cepam-gaussian") for s in released]
    for s in client:
        del s["epsilon_threat_model"]
    (ax,) = privacy_accuracy_figure(released + client).axes
    assert "curious-client view where a line names no threat model" in ax.get_xlabel()
    assert any("threat model: released model" in t.get_text()
               for t in ax.get_legend().get_texts())


def test_fl_plot_writes_no_privacy_figure_for_one_noise_level(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    _write_run(tmp_path, _REPLACE_ONE, 16.51)
    _write_run(tmp_path, _DELTA_5E5, 14.55)
    assert main(["fl", "plot", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.split() == [str(tmp_path / "convergence.png")]
    assert not (tmp_path / "privacy_accuracy.png").exists()
    assert "no privacy_accuracy.png: no Gaussian method was run at two or more noise" in err


def test_runs_of_one_seed_count_once_the_newest_kept(tmp_path, capsys):
    _write_run(tmp_path / "a", _REPLACE_ONE, 16.51, test_acc=0.2, modified=1_000_000_000)
    _write_run(tmp_path / "b", _REPLACE_ONE, 16.51, test_acc=0.4, modified=1_000_000_100)
    _write_run(tmp_path / "c", _REPLACE_ONE.replace(seed=1), 16.51, test_acc=0.6)
    (group,) = summarize(load_runs(tmp_path))
    assert group.seeds == [0, 1] and len(group.runs) == 2
    assert [r.path.parent.parent.name for r in group.dropped] == ["a"]
    stats = group.stats()
    assert stats["seeds"] == 2 and stats["test_acc"] == pytest.approx(0.5)  # b's 0.4 and c's 0.6
    assert main(["fl", "table", str(tmp_path), "--markdown"]) == 0
    out, err = capsys.readouterr()
    assert _markdown(out)[1][0][-1] == "2"
    assert "1 older run of a seed left out" in out
    old = tmp_path / "a" / _REPLACE_ONE.run_name() / "seed0"
    new = tmp_path / "b" / _REPLACE_ONE.run_name() / "seed0"
    assert err == (f"cepam fl table: note: {old} and {new} are runs of {_REPLACE_ONE.run_name()} "
                   f"seed 0: the newer, {new}, is used\n")


def test_runs_of_one_method_and_scope_that_differ_in_a_setting_are_lines_of_their_own(tmp_path,
                                                                                     capsys):
    """Runs of one method and eps scope at two clips were one line of each
    figure: the privacy-accuracy figure joined their points into one line,
    the convergence figure drew both in one style under one legend entry.
    Each configuration is now a line of its own, its seeds averaged, named
    as the table names its row: by the settings in which the lines differ."""
    pytest.importorskip("matplotlib")
    from cepam.fl.plots import convergence_figure, privacy_accuracy_figure

    for clip, acc in ((1.0, 0.2), (2.0, 0.6)):
        for sigma, eps, drop in ((0.5, 16.51, 0.0), (1.0, 5.5, 0.1)):
            for seed in (0, 1):
                config = _TINY.replace(clip=clip, sigma=sigma, seed=seed)
                _write_run(tmp_path, config, eps, test_acc=acc + 0.2 * seed - drop)
    groups = summarize(load_runs(tmp_path))
    assert len(groups) == 4 and all(g.seeds == [0, 1] for g in groups)
    header, rows = _markdown(format_table(groups, markdown=True))
    labels = [f"CEPAM-Gaussian (n=1), sigma={sigma}, clip={clip}"
              for sigma in ("0.5", "1") for clip in ("1", "2")]
    assert sorted(row[0] for row in rows) == sorted(labels)
    assert all(row[-1] == "2" for row in rows)  # seeds

    (ax,) = convergence_figure(groups).axes
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == \
        sorted(f"{label} (2 seeds)" for label in labels)
    assert len({(line.get_color(), str(line.get_linestyle())) for line in ax.get_lines()
                if len(line.get_xdata()) == 2}) == 4  # the four curves (rounds 0 and 1) apart

    assert main(["fl", "table", str(tmp_path), "--json"]) == 0
    summaries = json.loads(capsys.readouterr().out)  # the figure from fl table --json too
    for stats in ([g.stats() for g in groups], summaries):
        (ax,) = privacy_accuracy_figure(stats).axes
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend == ["CEPAM-Gaussian (n=1), clip=1, MLP", "CEPAM-Gaussian (n=1), clip=2, MLP"]
        curves = [(list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata()))
                  for c in ax.containers]
        # each line: its two noise levels, each the mean of its two seeds (in %)
        assert curves == [(pytest.approx([5.5, 16.51]), pytest.approx([20.0, 30.0])),
                          (pytest.approx([5.5, 16.51]), pytest.approx([60.0, 70.0]))]


def test_runs_that_differ_only_in_a_setting_none_uses_are_seeds_of_one_configuration(tmp_path):
    """fl ignores sigma: its runs at two sigmas (``fl run --method fl
    cepam-gaussian --sigma ...`` gives fl the first) were two groups, and
    the table kept one of them under the one label "FL"; fl-sdq's default
    SDQ step follows sigma, which the table's label left out: one of its
    rows overwrote the other."""
    fl = _TINY.replace(method="fl")
    _write_run(tmp_path / "a", fl.replace(seed=0), math.inf, test_acc=0.2)
    _write_run(tmp_path / "b", fl.replace(sigma=1e-3, seed=1), math.inf, test_acc=0.4)
    (group,) = summarize(load_runs(tmp_path))
    assert group.seeds == [0, 1] and group.stats()["test_acc"] == pytest.approx(0.3)
    for sigma, acc in ((0.01, 0.5), (0.1, 0.7)):
        _write_run(tmp_path / f"sdq{sigma}", _TINY.replace(method="fl-sdq", sigma=sigma),
                   math.inf, test_acc=acc)
    _, rows = _markdown(format_table(summarize(load_runs(tmp_path)), markdown=True))
    assert [(row[0], row[1], row[-1]) for row in rows] == [
        ("FL", "30.00 ± 14.14", "2"), ("FL+SDQ, sigma=0.01", "50.00", "1"),
        ("FL+SDQ, sigma=0.1", "70.00", "1")]


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1000000000"], "argument --seeds: must be a positive integer up to 10000, "
                                "got 1000000000"),
    (["--seed", str(2**63)], f"argument --seed: must be a non-negative integer below 2^63, "
                             f"got {2**63}"),
])
def test_fl_run_refuses_seeds_out_of_range(tmp_path, capsys, argv, message):
    from cepam.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["fl", "run", "--out", str(tmp_path / "o"), *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_last_seed_is_bounded_too(tmp_path, capsys):
    pytest.importorskip("torch")
    with pytest.raises(InvalidArgumentError, match=r"seed must be at most 2\^63 - 1"):
        FLConfig(seed=2**63)
    # Refused before any data is read (the data folder does not exist).
    assert main(["fl", "run", "--out", str(tmp_path / "o"), "--seed", str(2**63 - 1),
                 "--seeds", "2", "--data-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (
        f"cepam fl run: error: --seed {2**63 - 1} --seeds 2 would run seeds up to {2**63}; "
        f"seeds run from 0 to 2^63 - 1 = {2**63 - 1}\n")
    assert not (tmp_path / "o").exists()
