"""docs/EXPERIMENTS.md's "BatchNorm: what to send" tables are what
bench/batchnorm_rounds.py renders from its committed result file."""

from __future__ import annotations

import json

import pytest

from helpers.paths import ROOT, load_script


def _bench():
    return load_script(ROOT / "bench" / "batchnorm_rounds.py")


def test_the_experiments_table_is_the_rendered_result_file():
    pytest.importorskip("scipy")
    bench = _bench()
    doc = json.loads((ROOT / "bench" / "results" / "batchnorm_rounds.json").read_text())
    text = (ROOT / "docs" / "EXPERIMENTS.md").read_text()
    block = text.split(bench.START, 1)[1].split(bench.END, 1)[0]
    assert block == "\n" + bench.render(doc)
    # The settings and rows the script runs today, every seed, both sigmas.
    assert doc["settings"] == bench.SETTINGS and doc["seeds"] == list(bench.SEEDS)
    assert doc["sigmas"][0] == bench.SIGMA
    # (The runs' sigma is one step of the calibration's 1e-9 below today's: its
    # eps was then computed 2e-13 below the target, Brent's root on its low
    # side; gaussian_epsilon now steps past the root.)
    assert doc["sigmas"][1] == pytest.approx(bench.calibrated_sigma(bench.SETTINGS), rel=2e-9)
    expected = len(bench.SEEDS) * (2 * len(bench.VARIANTS) - 1)  # "default before": sigma 1e-3
    assert len(doc["runs"]) == expected
    assert all(len(r["accuracy"]) == bench.SETTINGS["rounds"] for r in doc["runs"])


def test_the_cohort_table_is_the_rendered_result_file():
    """The second table (100 of 600 clients a round, add/remove, eps 8): the
    rendered cohort result file, run in today's settings, its accounted eps
    within the target."""
    pytest.importorskip("scipy")
    bench = _bench()
    doc = json.loads(bench.COHORT_OUT.read_text())
    text = (ROOT / "docs" / "EXPERIMENTS.md").read_text()
    block = text.split(bench.COHORT_START, 1)[1].split(bench.COHORT_END, 1)[0]
    assert block == "\n" + bench.render_cohort(doc)
    settings = bench.COHORT_SETTINGS
    assert doc["settings"] == settings and doc["seeds"] == list(bench.SEEDS)
    accounting = bench.cohort_accounting(settings)
    assert doc["sigma"] == pytest.approx(accounting["sigma"], rel=1e-9)
    assert doc["epsilon"] == pytest.approx(accounting["epsilon"], rel=1e-9)
    assert doc["epsilon"] <= bench.COHORT_EPS_TARGET == doc["eps_target"]
    assert doc["cap"] == accounting["cap"]
    assert [r["variant"] for r in doc["runs"]] == [
        v for v in bench.COHORT_VARIANTS for _ in bench.SEEDS]
    for r in doc["runs"]:
        assert len(r["accuracy"]) == len(r["cohort"]) == settings["rounds"]
        assert r["sigma"] == doc["sigma"]
