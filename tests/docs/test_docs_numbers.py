"""Numbers in README.md and docs/ that a script produces are that script's
output (issue 22): the bitrate tables (``cepam bench bitrate``, shipped as
docs/bitrate/bitrate.csv), the padding table (bench/padding_cost.py), the
length-leak table (bench/length_study.py) and
the calibrated sigmas (``cepam privacy --target-eps``), the EXPERIMENTS
tables (``cepam fl table`` of the shipped runs and summaries; the grid's own
table is checked in tests/fl/test_fl_results.py).  Deterministic figures only (bits,
eps, sigma, accuracy of shipped runs), recomputed where that takes seconds."""

from __future__ import annotations

import json
import math

import pytest

from cepam import bitrate
from cepam.bitrate.benchmark import _payload_row, _row_context
from cepam.fl.config import FLConfig

from helpers.paths import ROOT, load_script

CSV = ROOT / "docs" / "bitrate" / "bitrate.csv"


def shipped_rows() -> list[dict]:
    return bitrate.rows_from_csv(CSV.read_text())


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of the markdown table whose header starts with ``header_start``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


BITRATE_GUIDE = ROOT / "docs" / "guide" / "bitrate.md"


def test_the_bitrate_guide_table_is_the_shipped_benchmark():
    columns = ["mi", "ideal-Z1", "cepam-Z1-ans", "cepam-Z1-golomb", "cepam-Z2-ans",
               "cepam-E8-ans", "cepam-auto-ans", "sdq", "gaussian+sdq"]
    bits = {(r["s_over_sigma"], r["scheme"]): r["bits_per_coordinate"] for r in shipped_rows()
            if r["source"] == "gaussian"}
    rows = table_rows(BITRATE_GUIDE.read_text(), "| s/sigma | I(X; X+Z) |")
    assert [r[0] for r in rows] == ["0.01", "0.1", "1", "10", "100"]
    for row in rows:
        ratio = float(row[0])
        assert row[1:] == [f"{bits[(ratio, key)]:.3f}" for key in columns], row


def test_the_bitrate_report_is_the_shipped_benchmarks():
    # docs/bitrate/bitrate.md's tables are rows_to_markdown of bitrate.csv
    # (whose table of lattice gaps needs scipy, as the benchmark does).
    pytest.importorskip("scipy")
    shipped = (ROOT / "docs" / "bitrate" / "bitrate.md").read_text().splitlines()
    made = bitrate.rows_to_markdown(shipped_rows()).splitlines()
    table = [line for line in made if line.startswith("|")]
    assert len(table) > 40
    missing = [line for line in table if line not in shipped]
    assert not missing, missing[:5]


@pytest.mark.parametrize("source, ratio, key", [("gaussian", 10.0, "cepam-Z1-ans"),
                                                ("gaussian", 0.01, "cepam-auto-ans"),
                                                ("uniform", 100.0, "cepam-E8-ans"),
                                                ("gaussian", 1.0, "cepam-Z1-golomb")])
def test_shipped_payload_bits_are_what_the_encoder_gives_now(source, ratio, key):
    # One cell of bitrate.csv, encoded again exactly as run_benchmark does it
    # (its source draws, context and seed, hence its payload nonce): the
    # table is the current format's.
    schemes = bitrate.default_schemes()
    si, gi = bitrate.SOURCES.index(source), list(bitrate.S_OVER_SIGMA).index(ratio)
    m = 200_000
    x = bitrate.sample_source(source, ratio, m, 1000 * si + gi)
    round_, client, seed = _row_context(schemes, key, si, gi)
    scheme = next(s for s in schemes if s.key == key)
    row = _payload_row(scheme, x, 1.0, (round_, client), seed=seed)
    shipped = next(r for r in shipped_rows() if r["source"] == source
                   and r["s_over_sigma"] == ratio and r["scheme"] == key)
    assert f"{row['bits_per_coordinate']:.6f}" == f"{shipped['bits_per_coordinate']:.6f}"


def bench_module(name: str):
    """bench/NAME.py, imported."""
    return load_script(ROOT / "bench" / f"{name}.py")


def test_the_padding_table_synthetic_rows_are_the_benchmarks():
    # bench/padding_cost.py at s/sigma = 10 (both sources, every scheme,
    # unpadded and padded): its lines of docs/bitrate/padding.md.
    cost = bench_module("padding_cost")
    made = cost.table(cost.synthetic_rows(200_000, (10.0,)), "source")
    shipped = (ROOT / "docs" / "bitrate" / "padding.md").read_text().splitlines()
    assert len(made) == 2 + 8
    for line in made:
        assert line in shipped, line


def test_the_length_leak_table_synthetic_rows_are_the_studys():
    # bench/length_study.py's synthetic rows (its MNIST rows need training:
    # they are its output as printed, not recomputed here).
    study = bench_module("length_study")
    made = study.table(study.synthetic(120))
    privacy = (ROOT / "docs" / "privacy.md").read_text().splitlines()
    assert made[0] in privacy
    for line in made[2:]:
        assert line in privacy, line


def test_the_padding_rules_synthetic_table_is_the_benchmarks():
    # bench/pad_rules.py's synthetic updates (its MNIST columns need training:
    # they are its output as printed): every rule's cost and leak, and the
    # default's row among them.
    rules = bench_module("pad_rules")
    made = rules.table(rules.synthetic_rows())
    privacy = (ROOT / "docs" / "privacy.md").read_text().splitlines()
    assert len(made) == 4 + len(rules.RULES)
    for line in made:
        assert line in privacy, line
    assert any(line.startswith("| levels 8 x 2^(1/3) | 3.0 |") for line in made)


@pytest.mark.parametrize("target, threat_model, bound", [(1.0, "client", "tight"),
                                                         (8.0, "aggregate", "paper")])
def test_the_calibrated_sigmas_are_the_calibrations(target, threat_model, bound):
    pytest.importorskip("scipy")
    from cepam.accounting import FLSetting, calibrate_sigma

    setting = FLSetting(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666,
                        threat_model=threat_model)
    sigma = calibrate_sigma(target_epsilon=target, target_delta=1e-5, rounds=80,
                            setting=setting, bound=bound)
    rows = table_rows((ROOT / "docs" / "privacy.md").read_text(), "| target eps | tight, client")
    row = next(r for r in rows if float(r[0]) == target)
    column = {("client", "tight"): 1, ("client", "paper"): 2, ("aggregate", "tight"): 3,
              ("aggregate", "paper"): 4}[(threat_model, bound)]
    assert row[column] == (f"{sigma:.4f}" if bound == "tight" else f"{sigma:.2f}")
    assert math.isfinite(sigma)


def test_the_bitrate_guide_mnist_table_is_the_shipped_benchmark():
    # The guide's rows of docs/bitrate/mnist.md (bench/bitrate_mnist.py's output).
    shipped = {r[0]: r[1:] for r in table_rows(
        (ROOT / "docs" / "bitrate" / "mnist.md").read_text(), "| scheme | MLP, round 1 |")}
    names = {"CEPAM auto, ans (E8 or Z by update, below)": "CEPAM auto, ans",
             "Gaussian+SDQ (twice the error variance)": "Gaussian+SDQ (error variance 2 sigma^2)"}
    rows = table_rows(BITRATE_GUIDE.read_text(), "| scheme | MLP, round 1 |")
    assert len(rows) == 5
    for row in rows:
        assert row[1:] == shipped[names.get(row[0], row[0])], row


@pytest.mark.parametrize("name, header", [
    ("sweep/table.json", "| Method | sigma | eps (record-level, replace-one, delta = 0.01) | "
                         "eps (record-level, replace-one, delta = 0.015) |"),
    ("noniid.json", "| Method | CNN test acc (%, mean ± sd) | CNN bits/coord | "
                    "eps (record-level, replace-one, delta = 1e-05) |"),
])
def test_experiments_tables_are_their_summaries(name, header):
    # The sweep's and the non-IID runs' per-round files are not shipped: their
    # tables in EXPERIMENTS.md are checked against the summaries that are
    # (cepam fl table --json), cell by cell; the standard deviation is the
    # CI half-width's (sd = ci95 * sqrt(seeds) / t).  The eps headers name
    # the summaries' level, relation and delta.
    from cepam.fl.privacy import EpsilonScope
    from cepam.fl.results import t_quantile

    stats = json.loads((ROOT / "docs" / "experiments" / name).read_text())
    rows = table_rows((ROOT / "docs" / "EXPERIMENTS.md").read_text(), header)
    assert len(rows) == len(stats)
    scopes = {EpsilonScope.from_dict(st) for st in stats}
    assert len(scopes) == 1
    (scope,) = scopes
    for delta in ("0.01", "0.015") if "sweep" in name else (str(scope.delta),):
        at = EpsilonScope(scope.level, scope.relation, float(delta))
        assert f"eps ({at.describe()})" in header
    for row, st in zip(rows, stats):
        n = st["seeds"]
        assert math.isclose(st["test_acc_sd"], st["test_acc_ci95"] * math.sqrt(n)
                            / t_quantile(n - 1), rel_tol=1e-12)
        accuracy = f"{100 * st['test_acc']:.2f} ± {100 * st['test_acc_sd']:.2f}"
        bits = f"{st['bits_per_coordinate']:.2f}" + ("" if st["bits_measured"] else "*")
        if "epsilon_at_delta" in st:
            eps = [f"{st['epsilon_at_delta'][d]:.2f}" for d in ("0.01", "0.015")]
            assert row == [st["label"], f"{st['sigma']:g}", *eps, accuracy, bits, str(n)]
        else:
            assert row == [st["label"], accuracy, bits, f"{st['epsilon']:.2f}", str(n)]


@pytest.mark.parametrize("sigma", [0.207, 0.1375])
def test_the_sweeps_eps_are_the_accountants(sigma):
    # eps of the sweep's table, recomputed (80 rounds, the paper's setting).
    pytest.importorskip("scipy")
    from cepam.fl.privacy import epsilon_at

    stats = json.loads((ROOT / "docs" / "experiments" / "sweep" / "table.json").read_text())
    st = next(s for s in stats if s["sigma"] == sigma and s["method"] == "cepam-gaussian")
    config = FLConfig(model="cnn", method="cepam-gaussian", sigma=sigma, delta=0.01, rounds=80)
    for delta in ("0.01", "0.015"):
        assert math.isclose(epsilon_at(config, delta=float(delta), rounds=80),
                            st["epsilon_at_delta"][delta], rel_tol=1e-9)


def test_the_engine_comparison_table_is_its_per_round_files():
    # EXPERIMENTS.md's built-in-against-Flower table (accuracy and bits: mean
    # and 95% CI over 3 seeds) and its seed-by-seed figures, from the shipped
    # per-round files (the wall times are not recomputed).
    from cepam.fl.results import mean_ci, read_rounds_csv

    text = (ROOT / "docs" / "EXPERIMENTS.md").read_text()
    rows = {r[0]: r for r in table_rows(text, "| engine | test accuracy, round 20 (%)")}
    accuracy, bits = {}, {}
    for engine, name in (("builtin", "built-in"), ("flower", "Flower (simulation, Ray)")):
        runs = [read_rounds_csv(ROOT / "docs" / "experiments" / "flower" / f"{engine}-seed{k}.csv")
                for k in range(3)]
        assert all(run[-1]["round"] == 20 for run in runs)
        accuracy[engine] = [100 * run[-1]["test_acc"] for run in runs]
        bits[engine] = [sum(r["bits_per_coordinate"] for r in run[1:]) / 20 for run in runs]
        cells = ["{:.2f} ± {:.2f}".format(*mean_ci(accuracy[engine])),
                 "{:.2f} ± {:.2f}".format(*mean_ci(bits[engine]))]
        assert rows[name][1:3] == cells
    seed_by_seed = ", ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(accuracy["builtin"],
                                                                  accuracy["flower"]))
    assert seed_by_seed in " ".join(text.split())
    shorter = ", ".join(f"{a - b:.3f}" for a, b in zip(bits["builtin"], bits["flower"]))
    assert f"({shorter})" in " ".join(text.split())
