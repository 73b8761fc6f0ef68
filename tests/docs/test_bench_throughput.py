"""bench/throughput.py runs end to end (small m, one round, 1 and 2
threads): its payloads must be the same bytes on each thread count, which
it checks itself (it exits otherwise: encode draws a fresh nonce a call,
so the script must fix one to compare).  Its figures are not asserted (no
timing assertions); a GPU machine's run is in docs/guide/gpu.md."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_throughput_smoke(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("throughput", ROOT / "bench" / "throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # 3 * 2^17 coordinates: three segments, so that 2 threads split the work.
    monkeypatch.setattr(sys, "argv", ["throughput.py", "--m", str(3 << 17), "--threads", "1",
                                      "2", "--repeat", "1", "--lattices", "Z", "E8"])
    bench.main()
    out = capsys.readouterr().out
    assert "Payload bytes identical on every thread count: checked." in out
    for lattice in ("Z", "E8"):
        assert f"{lattice} speed: encode " in out and f"\n| {lattice} | " in out
