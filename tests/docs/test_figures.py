"""The shipped figures can be redrawn from the shipped data."""

from __future__ import annotations

import math

import pytest

from cepam import bitrate

from helpers.paths import ROOT


def test_bitrate_rows_read_back_from_the_shipped_csv():
    text = (ROOT / "docs" / "bitrate" / "bitrate.csv").read_text()
    rows = bitrate.rows_from_csv(text)
    assert len(rows) == len(text.splitlines()) - 1
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(math.isfinite(r["bits_per_coordinate"]) for r in ok)
    mi = {(r["source"], r["s_over_sigma"]): r["bits_per_coordinate"] for r in ok
          if r["scheme"] == "mi"}
    # Every payload costs more than the bound it is plotted against.
    assert all(r["bits_per_coordinate"] > mi[(r["source"], r["s_over_sigma"])]
               for r in ok if r["kind"] in ("cepam", "sdq", "gaussian+sdq"))


def test_rows_from_csv_refuses_what_is_not_a_bitrate_csv():
    import cepam

    with pytest.raises(cepam.InvalidTypeError):
        bitrate.rows_from_csv(b"source,s_over_sigma\n")
    with pytest.raises(cepam.InvalidArgumentError, match="s_over_sigma"):
        bitrate.rows_from_csv("source,s_over_sigma\ngaussian,ten\n")


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF"),
                                           (".svg", b"<?xml")])
def test_bitrate_figure_redrawn_in_each_format(tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    rows = bitrate.rows_from_csv((ROOT / "docs" / "bitrate" / "bitrate.csv").read_text())
    path = tmp_path / f"bitrate{suffix}"
    bitrate.plot_rows(rows, str(path))
    assert path.read_bytes().startswith(magic)


def test_privacy_accuracy_figure_redrawn_from_the_shipped_summary():
    pytest.importorskip("matplotlib")
    import json

    from cepam.fl.plots import privacy_accuracy_figure

    stats = json.loads((ROOT / "docs" / "experiments" / "sweep" / "table.json").read_text())
    fig = privacy_accuracy_figure(stats, deltas=(0.01, 0.015))
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [f"{m}, CNN, delta = {d}" for m in ("CEPAM-Gaussian (n=1)", "FL+Gaussian+SDQ")
                      for d in ("0.01", "0.015")]
    assert ax.get_xscale() == "log"
    # What the lines share (level, relation) on the axis; the delta in the legend.
    assert ax.get_xlabel() == ("privacy budget eps (record-level, replace-one; tight bound, "
                               "curious-client view)")
    # Accuracies (fractions in the summary) are drawn in percent.
    ys = [y for line in ax.get_lines() for y in line.get_ydata()]
    assert 90 < max(ys) < 100 and min(ys) > 1  # percent, error bars included
