"""bench/call_cost.py runs end to end (few calls, one round): one array and
a dict of entries, with decode(out=).  Its figures are not asserted (no
timing assertions); the full run's are in README and the performance guide."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def call_cost(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("call_cost", ROOT / "bench" / "call_cost.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_call_cost_smoke(call_cost, capsys):
    call_cost.main(["--m", "10", "300", "--calls", "3", "--rounds", "1", "--clip", "1", "--out"])
    call_cost.main(["--m", "300", "--entries", "30", "--calls", "3", "--rounds", "1", "--out"])
    out = capsys.readouterr().out
    assert out.count("m = 10 float32, ") == 1 and out.count("m = 300 float32, ") == 1
    assert out.count("m = 300 float32 in 30 entries, ") == 1
    for row in ("encode", "decode", "encode dflt", "decode dflt", "Codec enc", "Codec dec",
                "decode out="):
        assert out.count(f"\n{row:>12} ") == 3, row


def test_call_cost_entries_split_the_coordinates(call_cost):
    x = call_cost.update(10, 3, 1e-3)
    assert [v.size for v in x.values()] == [3, 3, 4]
    assert call_cost.update(10, 1, 1e-3).shape == (10,)
    with pytest.raises(SystemExit):
        call_cost.main(["--m", "10", "--entries", "11"])


def test_call_cost_against_another_build(call_cost, capsys):
    """--against: alternating child processes of each build (here the same
    package twice), each row's best and the ratio."""
    import cepam

    package_root = str(Path(cepam.__file__).resolve().parents[1])
    call_cost.main(["--m", "10", "--calls", "3", "--rounds", "1", "--clip", "1", "--pairs", "1",
                    "--against", package_root])
    out = capsys.readouterr().out
    assert "best CPU us per call over 1 alternating pairs of processes" in out
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [" ".join(r[:-3]) for r in rows] == ["encode", "decode", "encode dflt",
                                                "decode dflt", "Codec enc", "Codec dec"]
    for r in rows:
        this, against, ratio = map(float, r[-3:])
        assert this > 0 and against > 0 and abs(ratio - this / against) < 1e-3 * ratio + 1e-3
    with pytest.raises(SystemExit):
        call_cost.main(["--profile", "--against", package_root])
