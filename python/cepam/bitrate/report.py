"""Reports of the bitrate benchmark: CSV, Markdown and the figure.

The rows are those of :func:`cepam.bitrate.benchmark.run_benchmark` (one dict
per source, s/sigma and scheme, bits per coordinate).  matplotlib is imported
only by :func:`plot_rows`.
"""

from __future__ import annotations

import csv
import errno
import io
import math
import os
from collections.abc import Mapping
from typing import Any, Iterable, Sequence

from .._checks import check_items
from ..errors import InvalidArgumentError, InvalidTypeError
from .theory import SOURCES, DESIGN_HIGH_RESOLUTION_GAP, high_resolution_gap, packing_density

__all__ = ["rows_to_csv", "rows_to_markdown", "plot_rows", "rows_from_csv", "write_results",
           "RESULT_FILES", "prepare_output_directory"]

#: The files :func:`write_results` writes, by key (``png`` only with a plot).
RESULT_FILES = {"csv": "bitrate.csv", "md": "bitrate.md", "png": "bitrate.png"}

_CSV_FIELDS = ("source", "s_over_sigma", "scheme", "label", "kind", "lattice", "dim", "coder",
               "bits_per_coordinate", "stderr", "spec", "header_bits", "body_bits", "tag_bits",
               "coordinates", "error_std_over_expected", "seconds", "status", "note")


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.{digits}f}"
    return str(value)


# The keys a row needs for the Markdown report and the figure (each row of
# run_benchmark and of rows_from_csv has them all).
_REPORT_KEYS = ("source", "s_over_sigma", "scheme", "label", "status", "bits_per_coordinate")


def _check_rows(rows: object, keys: Sequence[str] = ()) -> list[Mapping[str, Any]]:
    """``rows`` as a list, each a mapping holding ``keys``.

    Raises:
        InvalidTypeError: ``rows`` is not an iterable, or one of its
            items is not a mapping (a dict).
        InvalidArgumentError: a row lacks one of ``keys``.
    """
    items = check_items("rows", rows, Mapping, what="run_benchmark row")
    for i, row in enumerate(items):
        missing = [key for key in keys if key not in row]
        if missing:
            raise InvalidArgumentError(f"rows[{i}] lacks {', '.join(map(repr, missing))} "
                                       "(a row of run_benchmark has every key of the CSV)")
    return items


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """The rows as CSV text (columns ``_CSV_FIELDS``; floats to 6 decimals).

    Raises:
        InvalidTypeError: ``rows`` is not an iterable of dicts.
    """
    rows = _check_rows(rows)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=_CSV_FIELDS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (_fmt(row.get(k, ""), 6) if isinstance(row.get(k), float)
                             else row.get(k, "")) for k in _CSV_FIELDS})
    return out.getvalue()


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    if row["status"] not in ("ok", "spec"):
        return "n/a" if row["status"] in ("not available", "not computed") else "error"
    text = _fmt(row["bits_per_coordinate"])
    if row["status"] == "spec":
        text += "*"
    return text


def rows_to_markdown(rows: Sequence[dict[str, Any]], *, m: int | None = None,
                     seconds: float | None = None, draws: int | None = None) -> str:
    """Markdown report: one table per source (rows: schemes; columns: s/sigma).

    Raises:
        InvalidTypeError: ``rows`` is not an iterable of dicts.
        InvalidArgumentError: a row lacks a key the report reads (``source``,
            ``s_over_sigma``, ``scheme``, ``label``, ``status``,
            ``bits_per_coordinate``).
    """
    rows = _check_rows(rows, _REPORT_KEYS)
    lines = ["# Bitrate: CEPAM against scalar SDQ and the information limit", ""]
    lines += [
        "Bits per coordinate against s/sigma, Gaussian noise sigma = 1. Measured lines are "
        "whole payloads (`8 * len(payload) / m`: header, body and tag)"
        + (f" for m = {m:,} coordinates" if m else "") + ", one encode each.",
        "",
        "* Gaussian source: x ~ N(0, s^2). Uniform source: x ~ U[-s, s], so s is the "
        "half-width A of the rates table in docs/design.md, section 4 (its A/sigma).",
        "* I(X; X+Z): the lower bound for any scheme whose decoded error is N(0, sigma^2).",
        "* ideal LRSUQ: [H(H) + H(M | U, V_H)] / n with an entropy model that knows the "
        "source law. n = 1: Monte Carlo over (U, V)"
        + (f" ({draws:,} draws)" if draws else "")
        + " with exact sums over M. n > 1, Gaussian source: Monte Carlo over the whole "
        "chain with exact lattice sums for P(M | U, V_H). Values with * are from the "
        "rates table of docs/design.md, section 4 (uniform source, n > 1: not computed "
        "here); n/a: not computed.",
        "* scalar SDQ, same variance: `cepam.SDQ.matching(sigma)`, step sqrt(12) sigma; its "
        "error is uniform, not Gaussian: no privacy.",
        "* Gaussian+SDQ: N(0, sigma^2) from the client's private generator, then SDQ with "
        "step sqrt(12) sigma; decoded error N(0, sigma^2) + U(-step/2, step/2), variance "
        "2 sigma^2.",
        "* CEPAM: `cepam.encode(x, cepam.Gaussian(sigma=1), lattice=..., dim=..., coder=...)`; "
        "ans: rANS with models conditioned on the decoder's side information; golomb: the "
        "paper's Golomb / exp-Golomb codes. n/a: lattice not available in this build.",
        "",
    ]
    grid = sorted({row["s_over_sigma"] for row in rows})
    keys: list[tuple[str, str]] = []
    for row in rows:
        if (row["scheme"], row["label"]) not in keys:
            keys.append((row["scheme"], row["label"]))
    by = {(r["source"], r["s_over_sigma"], r["scheme"]): r for r in rows}
    for source in [s for s in SOURCES if any(r["source"] == s for r in rows)]:
        title = "x ~ N(0, s^2)" if source == "gaussian" else "x ~ U[-s, s]"
        lines += [f"## {source.capitalize()} source ({title})", ""]
        lines.append("| scheme | " + " | ".join(f"s/sigma = {g:g}" for g in grid) + " |")
        lines.append("|---|" + "---|" * len(grid))
        for key, label in keys:
            cells = [_cell(by.get((source, g, key))) for g in grid]
            if all(c == "" for c in cells):
                continue
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
        # The payload against the ideal rate, n = 1.
        ideal = {g: by.get((source, g, "ideal-Z1")) for g in grid}
        parts = []
        for key, label in (("cepam-Z1-ans", "ans"), ("cepam-Z1-golomb", "golomb")):
            cells = []
            for g in grid:
                meas, ref = by.get((source, g, key)), ideal.get(g)
                if meas and ref and meas["status"] == "ok" and ref["status"] == "ok":
                    cells.append(f"{meas['bits_per_coordinate'] - ref['bits_per_coordinate']:+.3f}")
                else:
                    cells.append("")
            parts.append(f"| CEPAM Z (n=1) {label} minus ideal | " + " | ".join(cells) + " |")
        lines += ["| overhead | " + " | ".join(f"s/sigma = {g:g}" for g in grid) + " |",
                  "|---|" + "---|" * len(grid), *parts, ""]
    # Comparisons with the design notes' table.
    spec_lines = []
    for row in rows:
        spec = row.get("spec")
        if isinstance(spec, float) and not math.isnan(spec) and row["status"] == "ok":
            spec_lines.append(
                f"| {row['source']} | {row['s_over_sigma']:g} | {row['label']} | "
                f"{spec:.3f} | {row['bits_per_coordinate']:.3f} | "
                f"{row['bits_per_coordinate'] - spec:+.3f} |")
    if spec_lines:
        lines += ["## Against the rates table of docs/design.md (section 4)", "",
                  "| source | s/sigma | line | table | here | here - table |",
                  "|---|---|---|---|---|---|", *spec_lines, ""]
    # High-resolution gaps.
    lines += ["## High-resolution gap to I(X; X+Z)", "",
              "Closed form (`cepam.bitrate.high_resolution_gap`, from the packing density), "
              "the table's value, and the measured ans payload minus I(X; X+Z) at the largest "
              "s/sigma (Gaussian source).", "",
              "| lattice | p (packing density) | gap, closed form | table | payload - I |",
              "|---|---|---|---|---|"]
    top = max(grid) if grid else None
    for (lat, n), spec_gap in DESIGN_HIGH_RESOLUTION_GAP.items():
        name = "Z" if (lat, n) == ("Z", 1) else (f"Z^{n}" if lat == "Z" else lat)
        key = f"cepam-{lat}{n if lat == 'Z' else ''}-ans"
        meas = by.get(("gaussian", top, key))
        mi = by.get(("gaussian", top, "mi"))
        diff = ""
        if meas and mi and meas["status"] == "ok":
            diff = f"{meas['bits_per_coordinate'] - mi['bits_per_coordinate']:.3f}"
        lines.append(f"| {name} | {packing_density(lat, n):.3f} | "
                     f"{high_resolution_gap(lat, n):.3f} | {spec_gap:.3f} | {diff} |")
    lines.append("")
    if seconds is not None:
        lines += [f"Benchmark run time: {seconds:.0f} s.", ""]
    return "\n".join(lines)


# One look per scheme, on Okabe and Ito's colour-blind-safe palette: bounds
# and ideal rates in black, the baselines in blues, CEPAM's lattices in warm
# colours and greens, told apart by marker and line style as well.
_STYLE = {
    "mi": dict(color="#000000", linestyle="--", marker=None, linewidth=1.6),
    "ideal-Z1": dict(color="#D55E00", linestyle=":", marker=None, linewidth=1.6),
    "ideal-sdq": dict(color="#000000", linestyle=":", marker=None, linewidth=1.6),
    "sdq": dict(color="#56B4E9", linestyle="-", marker="s"),
    "gaussian+sdq": dict(color="#0072B2", linestyle="-", marker="D"),
    "cepam-Z1-ans": dict(color="#D55E00", linestyle="-", marker="o"),
    "cepam-Z1-golomb": dict(color="#D55E00", linestyle="--", marker="o", markerfacecolor="white"),
    "cepam-Z2-ans": dict(color="#E69F00", linestyle="-", marker="^"),
    "cepam-Z3-ans": dict(color="#E69F00", linestyle="-.", marker="v", markerfacecolor="white"),
    "cepam-A2-ans": dict(color="#009E73", linestyle="-", marker="h"),
    "cepam-D4-ans": dict(color="#009E73", linestyle="--", marker="p", markerfacecolor="white"),
    "cepam-E8-ans": dict(color="#CC79A7", linestyle="-", marker="*", markersize=7),
    "cepam-auto-ans": dict(color="#000000", linestyle="-", marker="x"),
}
_NUMERIC_FIELDS = ("s_over_sigma", "bits_per_coordinate", "stderr", "spec", "header_bits",
                   "body_bits", "tag_bits", "coordinates", "error_std_over_expected", "seconds")


def rows_from_csv(text: str) -> list[dict[str, Any]]:
    """The rows :func:`rows_to_csv` wrote (numbers as floats, empty cells as
    NaN), for example to redraw the plot from a ``bitrate.csv``.

    Raises:
        InvalidTypeError: ``text`` is not a str.
        InvalidArgumentError: a numeric cell is not a number.
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be str (the CSV's contents), got {type(text).__name__}")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        for key in _NUMERIC_FIELDS:
            if key in row:
                try:
                    row[key] = float(row[key]) if row[key] != "" else math.nan
                except (TypeError, ValueError):
                    raise InvalidArgumentError(f"{key} = {row[key]!r} is not a number") from None
        rows.append(row)
    return rows


# The panels of the plot, one row each (both sources side by side): what
# is compared, what is drawn ("bits": bits per coordinate; "gap": bits per
# coordinate above I(X; X+Z)) and which schemes (at most five a panel, so
# that every line can be told apart).
_PANELS = (
    ("CEPAM against the bound and Gaussian+SDQ", "bits",
     ("mi", "cepam-auto-ans", "cepam-Z1-ans", "cepam-Z1-golomb", "gaussian+sdq")),
    ("Z^n: n = 1 is the cheapest", "gap",
     ("ideal-Z1", "cepam-Z1-ans", "cepam-Z2-ans", "cepam-Z3-ans")),
    ("Voronoi lattices and auto", "gap",
     ("cepam-Z1-ans", "cepam-A2-ans", "cepam-D4-ans", "cepam-E8-ans", "cepam-auto-ans")),
    ("coders and scalar baselines", "gap",
     ("cepam-Z1-ans", "cepam-Z1-golomb", "ideal-sdq", "sdq", "gaussian+sdq")),
)


def plot_rows(rows: Sequence[dict[str, Any]], path: str) -> None:
    """The figure at ``path`` (PNG, PDF or SVG by its suffix), small
    multiples: one column per source, one row per comparison
    (``_PANELS``: the payloads against I(X; X+Z) and Gaussian+SDQ in bits per
    coordinate, then Z^n, the Voronoi lattices, and the coders and scalar
    baselines as bits per coordinate above I(X; X+Z)), at most five series a
    panel, each row's legend beside it; x is s/sigma (log).

    Raises:
        InvalidTypeError: ``rows`` is not an iterable of dicts.
        InvalidArgumentError: a row lacks a key the figure reads (those of
            :func:`rows_to_markdown`).
    """
    rows = _check_rows(rows, _REPORT_KEYS)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = [s for s in SOURCES if any(r["source"] == s for r in rows)]
    rc = {"font.size": 10, "axes.titlesize": 10.5, "legend.fontsize": 9}
    with plt.rc_context(rc):
        fig, axes = plt.subplots(len(_PANELS), len(sources), squeeze=False, sharex=True,
                                 layout="constrained",
                                 figsize=(3.9 * len(sources) + 3.3, 2.75 * len(_PANELS) + 0.6))
        for col, source in enumerate(sources):
            mine = [r for r in rows if r["source"] == source and r["status"] == "ok"
                    and math.isfinite(r["bits_per_coordinate"])]
            mi = {r["s_over_sigma"]: r["bits_per_coordinate"] for r in mine if r["scheme"] == "mi"}
            name = "Gaussian source, x ~ N(0, s²)" if source == "gaussian" else \
                "uniform source, x ~ U[-s, s]"
            for row, (title, kind, keys) in enumerate(_PANELS):
                ax = axes[row][col]
                for key in keys:
                    pts = sorted((r["s_over_sigma"], r["bits_per_coordinate"], r["label"])
                                 for r in mine if r["scheme"] == key)
                    if kind == "gap":
                        pts = [(x, y - mi[x], lab) for x, y, lab in pts if x in mi]
                    if pts:
                        ax.plot([q[0] for q in pts], [q[1] for q in pts], label=pts[0][2],
                                **{"markersize": 5, "linewidth": 1.3, **_STYLE[key]})
                ax.set_title(f"{name}\n{title}" if row == 0 else title)
                ax.set_xscale("log")
                ax.grid(True, which="major", alpha=0.3)
                ax.set_ylim(bottom=0)
                if col == 0:
                    ax.set_ylabel("bits per coordinate" if kind == "bits" else
                                  "bits per coordinate\nabove I(X; X+Z)")
                if col == len(sources) - 1:
                    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
            axes[-1][col].set_xlabel("s / sigma")
        fig.suptitle("CEPAM bitrate, Gaussian noise sigma = 1 (whole payloads)")
        fig.savefig(path, dpi=150)
        plt.close(fig)


def _result_paths(out_dir: str, plot: bool = True) -> dict[str, str]:
    """The paths :func:`write_results` writes in ``out_dir``, by key."""
    return {key: os.path.join(out_dir, name) for key, name in RESULT_FILES.items()
            if plot or key != "png"}


def _refuse_existing(out_dir: str) -> None:
    """Raises FileExistsError, naming it, for the first result file
    (:data:`RESULT_FILES`, the PNG too: a run without one must not leave an
    older run's figure beside its tables) already in ``out_dir``."""
    for path in _result_paths(out_dir).values():
        if os.path.lexists(path):
            raise FileExistsError(
                errno.EEXIST, "results of an earlier run are there (cepam bench bitrate never "
                "overwrites results: give a new --out, or --overwrite to replace them)", path)


def prepare_output_directory(out_dir: str, *, overwrite: bool = False) -> None:
    """Makes sure, before a run, that :func:`write_results` can write into
    ``out_dir``: creates it (and its parents) if missing, and checks that it
    is a directory this user may write and, unless ``overwrite``, that it
    holds none of the result files (:data:`RESULT_FILES`).

    Raises:
        InvalidArgumentError: ``out_dir`` is empty.
        OSError: it cannot be created (FileNotFoundError,
            PermissionError, ...); it is not a directory
            (NotADirectoryError); it cannot be written (PermissionError);
            it holds results and not ``overwrite`` (FileExistsError).  Each
            names the path.
    """
    if not isinstance(out_dir, str) or not out_dir:
        raise InvalidArgumentError(f"the output directory must be a non-empty path, got "
                                   f"{out_dir!r}")
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory (the output directory)",
                                 out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:  # (named as given, not the parent that failed)
        raise OSError(exc.errno, f"cannot create the output directory: {exc.strerror}",
                      out_dir) from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "this user may not write in it", out_dir)
    if not overwrite:
        _refuse_existing(out_dir)


def write_results(rows: Sequence[dict[str, Any]], out_dir: str, *, m: int | None = None,
                  seconds: float | None = None, draws: int | None = None,
                  plot: bool = True, overwrite: bool = True) -> dict[str, str]:
    """Writes ``bitrate.csv``, ``bitrate.md`` and (``plot``) ``bitrate.png`` into
    ``out_dir`` (created if missing); returns their paths by key (``csv``,
    ``md``, ``png``).

    Raises:
        InvalidTypeError, InvalidArgumentError: ``rows`` is not an iterable
            of rows (those of :func:`rows_to_markdown`; checked before
            anything is written).
        FileExistsError: one of those files is there already and not
            ``overwrite`` (nothing is written then).
        OSError: a file cannot be written.
    """
    rows = _check_rows(rows, _REPORT_KEYS)
    os.makedirs(out_dir, exist_ok=True)
    if not overwrite:
        _refuse_existing(out_dir)
    paths = _result_paths(out_dir, plot)
    mode = "w" if overwrite else "x"
    with open(paths["csv"], mode, encoding="utf-8") as f:
        f.write(rows_to_csv(rows))
    with open(paths["md"], mode, encoding="utf-8") as f:
        f.write(rows_to_markdown(rows, m=m, seconds=seconds, draws=draws))
    if plot:
        plot_rows(rows, paths["png"])
    return paths
