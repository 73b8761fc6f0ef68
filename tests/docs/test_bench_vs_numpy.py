"""bench/vs_numpy.py runs end to end (tiny m, one round): every contender,
auto's choice and the checks block.  Its figures are not asserted (no
timing assertions); the full run's are in docs/guide/performance.md."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_vs_numpy_smoke(capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("vs_numpy", ROOT / "bench" / "vs_numpy.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--m", "3000", "--ratios", "0.5", "10", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("cepam Z", "cepam E8", "cepam auto", "numpy", "torch"):
        assert out.count(f"  {name} ") == 2, name
    assert "auto chose Z" in out and "auto chose E8" in out  # rms/sigma 0.5 and 10
    assert "Checks (issue 39):" in out
    assert "E8 encode >= 0.7x Z (m = 3,000, ratio 10)" in out
