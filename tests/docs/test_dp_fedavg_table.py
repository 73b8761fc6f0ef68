"""docs/EXPERIMENTS.md's DP-FedAvg tables are what bench/dp_fedavg.py renders
from its committed result file, and the script runs end to end (a tiny
configuration on synthetic data)."""

from __future__ import annotations

import json

import pytest

from helpers.paths import ROOT, load_script


def _bench():
    return load_script(ROOT / "bench" / "dp_fedavg.py")


def test_the_experiments_table_is_the_rendered_result_file():
    bench = _bench()
    doc = json.loads((ROOT / "bench" / "results" / "dp_fedavg.json").read_text())
    text = (ROOT / "docs" / "EXPERIMENTS.md").read_text()
    block = text.split(bench.START, 1)[1].split(bench.END, 1)[0]
    assert block == "\n" + bench.render(doc)
    # Every row at every eps, with every seed.
    assert doc["seeds"] == [0, 1, 2] and doc["epsilons"] == [1.0, 4.0, 8.0]
    assert len(doc["runs"]) == 3 * (1 + 4 * 3)
    assert doc["settings"]["population"] == 1000 and doc["settings"]["sample_rate"] == 0.1
    # cepam's runs are accounted at (no more than) their target.
    for run in doc["runs"]:
        if run["row"].startswith("cepam") or run["row"] == "central DP-FedAvg":
            assert run["epsilon"] <= run["epsilon_target"] * (1 + 1e-9)


@pytest.mark.usefixtures("one_torch_thread")
def test_the_benchmark_script_runs_a_tiny_configuration(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("dp_accounting")
    bench = _bench()
    out, md = tmp_path / "r.json", tmp_path / "doc.md"
    md.write_text(f"before\n{bench.START}\nold\n{bench.END}\nafter\n")
    assert bench.main(["--tiny", "--out", str(out), "--doc", str(md)]) == 0
    doc = json.loads(out.read_text())
    assert {r["row"] for r in doc["runs"]} == set(bench.ROWS)
    assert all(r["mean_cohort"] > 0 for r in doc["runs"])
    cepam = [r for r in doc["runs"] if r["row"].startswith("cepam")]
    assert all(r["bits_per_coordinate"] < 32 for r in cepam)
    text = md.read_text()
    assert text == f"before\n{bench.START}\n{bench.render(doc)}{bench.END}\nafter\n"
