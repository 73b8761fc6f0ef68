"""Numbers in README.md and docs/ that a script produces are that script's
output (issue 22): the bitrate tables (``cepam bench bitrate``, shipped as
docs/bitrate/bitrate.csv), the length-leak table (bench/length_study.py) and
the calibrated sigmas (``cepam privacy --target-eps``).  Deterministic
figures only (bits, eps, sigma), recomputed where that takes seconds; the
EXPERIMENTS tables are checked in test_fl_results.py."""

from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path

import pytest

from cepam import bitrate

ROOT = Path(__file__).resolve().parents[1]
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


def test_the_readme_bitrate_table_is_the_shipped_benchmark():
    columns = ["mi", "ideal-Z1", "cepam-Z1-ans", "cepam-Z1-golomb", "cepam-Z2-ans",
               "cepam-E8-ans", "cepam-auto-ans", "sdq", "gaussian+sdq"]
    bits = {(r["s_over_sigma"], r["scheme"]): r["bits_per_coordinate"] for r in shipped_rows()
            if r["source"] == "gaussian"}
    rows = table_rows((ROOT / "README.md").read_text(), "| s/sigma | I(X; X+Z) |")
    assert [r[0] for r in rows] == ["0.01", "0.1", "1", "10", "100"]
    for row in rows:
        ratio = float(row[0])
        assert row[1:] == [f"{bits[(ratio, key)]:.3f}" for key in columns], row


def test_the_bitrate_report_is_the_shipped_benchmarks():
    # docs/bitrate/bitrate.md's tables are rows_to_markdown of bitrate.csv.
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
    # (its source draws and context): the table is the current format's.
    schemes = bitrate.default_schemes()
    keys = [s.key for s in schemes]
    si, gi = bitrate.SOURCES.index(source), list(bitrate.S_OVER_SIGMA).index(ratio)
    m = 200_000
    x = bitrate.sample_source(source, ratio, m, 1000 * si + gi)
    rows_before = (si * len(bitrate.S_OVER_SIGMA) + gi) * len(schemes) + keys.index(key)
    row = bitrate._payload_row(schemes[keys.index(key)], x, 1.0, (gi, 100 * si + rows_before),
                               seed=0)
    shipped = next(r for r in shipped_rows() if r["source"] == source
                   and r["s_over_sigma"] == ratio and r["scheme"] == key)
    assert f"{row['bits_per_coordinate']:.6f}" == f"{shipped['bits_per_coordinate']:.6f}"


def test_the_length_leak_table_synthetic_rows_are_the_studys():
    # bench/length_study.py's synthetic rows (its MNIST rows need training:
    # they are its output as printed, not recomputed here).
    spec = importlib.util.spec_from_file_location("length_study",
                                                  ROOT / "bench" / "length_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    made = study.table(study.synthetic(120))
    privacy = (ROOT / "docs" / "privacy.md").read_text().splitlines()
    assert made[0] in privacy
    for line in made[2:]:
        assert line in privacy, line


@pytest.mark.parametrize("target, threat_model, bound", [(1.0, "client", "tight"),
                                                         (8.0, "aggregate", "paper")])
def test_the_calibrated_sigmas_are_the_calibrations(target, threat_model, bound):
    pytest.importorskip("scipy")
    from cepam.accounting import FLSetting, calibrate_sigma

    setting = FLSetting(clip=1.0, clients=30, local_steps=15, dataset_size=1666,
                        threat_model=threat_model)
    sigma = calibrate_sigma(target_epsilon=target, target_delta=1e-5, rounds=80,
                            setting=setting, bound=bound)
    rows = table_rows((ROOT / "docs" / "privacy.md").read_text(), "| target eps | tight, client")
    row = next(r for r in rows if float(r[0]) == target)
    column = {("client", "tight"): 1, ("client", "paper"): 2, ("aggregate", "tight"): 3,
              ("aggregate", "paper"): 4}[(threat_model, bound)]
    assert row[column] == (f"{sigma:.4f}" if bound == "tight" else f"{sigma:.2f}")
    assert math.isfinite(sigma)


def test_the_readme_mnist_bitrate_table_is_the_shipped_benchmark():
    # README's rows of docs/bitrate/mnist.md (bench/bitrate_mnist.py's output).
    shipped = {r[0]: r[1:] for r in table_rows(
        (ROOT / "docs" / "bitrate" / "mnist.md").read_text(), "| scheme | MLP, round 1 |")}
    names = {"CEPAM auto (E8 here), ans": "CEPAM auto, ans",
             "Gaussian+SDQ (twice the error variance)": "Gaussian+SDQ (error variance 2 sigma^2)"}
    rows = table_rows((ROOT / "README.md").read_text(), "| scheme | MLP, round 1 |")
    assert len(rows) == 5
    for row in rows:
        assert row[1:] == shipped[names.get(row[0], row[0])], row
