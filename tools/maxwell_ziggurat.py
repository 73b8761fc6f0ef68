"""Writes csrc/random/maxwell_table.hpp: the tables of the ziggurat that
draws the Gaussian Z^1 latent radius (format version 10, docs/format.md,
Random streams).

The radius R of a uniform point of [-R, R] whose law is N(0, 1) has the
Maxwell density (chi, three degrees of freedom), proportional to
f(x) = x^2 exp(-x^2 / 2) on x >= 0, unimodal with its mode at sqrt(2).  The
ziggurat splits the region under f into 1024 layers of equal area v:

- layers i = 1 .. 1023: the rectangles [L_i, R_i] x [y_i, y_(i+1)], where
  [L_i, R_i] is the level set {f >= y_i}, and y_1024 = f(sqrt 2) = 2 / e;
- layer 0 (the base): the region under min(f, y_1): the rectangle
  [L_1, R_1] x [0, y_1], the left piece under f on [0, L_1] and the tail
  under f beyond R_1.

The level set is L = sqrt(-2 W_0(-y / 2)), R = sqrt(-2 W_-1(-y / 2))
(Lambert's W), the areas come from erf, and y_1 is solved (bisection, then regula
falsi, 40 digits) so that the recursion y_(i+1) = y_i + v / (R_i - L_i), v = the base
layer's area, ends at 2 / e.  Each layer's row in the table:

- start, width: where a layer's abscissa starts and how wide it is (layer 0:
  start L_1, width v / y_1, the base's area over its height);
- lo, hi: the fast acceptance interval, [L_(i+1), R_(i+1)] (layer 0:
  [L_1, R_1]), rounded inwards so that it lies inside the level set;
- y, dy: the layer's bottom y_i and height y_(i+1) - y_i (layer 0: 0, y_1).

and the scalars of the base's slow path: y_1, L_1, the probability of the
left piece given a base draw outside its rectangle, and the tail's
w0 = R_1^2 / 2, c = 1 / (2 w0) and 1 / (1 - c).

    python tools/maxwell_ziggurat.py > csrc/random/maxwell_table.hpp
    python tools/maxwell_ziggurat.py --check   # the shipped header is this output

Needs mpmath (installed with torch's sympy)."""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

LAYERS = 1024
HEADER = pathlib.Path(__file__).resolve().parents[1] / "csrc" / "random" / "maxwell_table.hpp"


def tables() -> dict:
    import mpmath as mp

    mp.mp.dps = 40
    fmax = 2 / mp.e
    total = mp.sqrt(mp.pi / 2)  # the area under f(x) = x^2 exp(-x^2 / 2)

    def level(y):
        return (mp.sqrt(-2 * mp.re(mp.lambertw(-y / 2, 0))),
                mp.sqrt(-2 * mp.re(mp.lambertw(-y / 2, -1))))

    def left_area(a):
        return total * mp.erf(a / mp.sqrt(2)) - a * mp.exp(-a * a / 2)

    def tail_area(b):
        return b * mp.exp(-b * b / 2) + total * mp.erfc(b / mp.sqrt(2))

    def run(y1):
        """The levels from y_1, and the overshoot of y_LAYERS over 2 / e (None
        where the recursion passes the mode before the last layer)."""
        a, b = level(y1)
        v = y1 * (b - a) + left_area(a) + tail_area(b)
        ys = [y1]
        for _ in range(1, LAYERS):
            if ys[-1] >= fmax:
                return v, ys, None
            a, b = level(ys[-1])
            ys.append(ys[-1] + v / (b - a))
        return v, ys, ys[-1] - fmax

    # Bisection until both ends of the bracket end below the mode (the
    # overshoot is then continuous and increasing in y_1), then regula falsi
    # (Illinois) to the root.
    lo_y, hi_y = mp.mpf("1e-6"), mp.mpf("0.1")
    f_lo, f_hi = run(lo_y)[2], None
    while f_hi is None or f_hi > 0.01:
        mid = (lo_y + hi_y) / 2
        over = run(mid)[2]
        if over is None or over > 0:
            hi_y, f_hi = mid, over
        else:
            lo_y, f_lo = mid, over
    side = 0
    for _ in range(100):
        mid = hi_y - f_hi * (hi_y - lo_y) / (f_hi - f_lo)
        over = run(mid)[2]
        if abs(over) < mp.mpf("1e-32"):
            lo_y = mid
            break
        if over > 0:
            hi_y, f_hi = mid, over
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
        else:
            lo_y, f_lo = mid, over
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
    y1 = lo_y
    v, ys, over = run(y1)
    assert over is not None and abs(over) < mp.mpf("1e-30"), over
    ys[-1] = fmax  # (y_LAYERS: the mode, to the bisection's precision)
    levels = [level(y) for y in ys[:-1]] + [(mp.sqrt(2), mp.sqrt(2))]  # [L_i, R_i], i = 1 .. LAYERS
    L1, R1 = levels[0]
    rows = []
    for i in range(LAYERS):
        if i == 0:
            rows.append(dict(start=L1, width=v / y1, lo=L1, hi=R1, y=mp.mpf(0), dy=y1))
        else:
            (a, b), (na, nb) = levels[i - 1], levels[i]
            rows.append(dict(start=a, width=b - a, lo=na, hi=nb, y=ys[i - 1], dy=ys[i] - ys[i - 1]))
    w0 = R1 * R1 / 2
    c = 1 / (2 * w0)
    left, tail = left_area(L1), tail_area(R1)
    fast = sum((r["hi"] - r["lo"]) * r["dy"] for r in rows[1:]) + y1 * (R1 - L1)
    return dict(rows=rows, y1=y1, L1=L1, left=left / (left + tail), w0=w0, c=c,
                inv_lambda=1 / (1 - c), v=v, fast=fast / (LAYERS * v), tail_mass=tail / total)


def rounded(x, direction: int = 0) -> float:
    """x as a double: to nearest, or the nearest double above (direction
    1) or below (-1) it."""
    import mpmath as mp

    d = float(x)
    if direction > 0 and mp.mpf(d) < x:
        d = math.nextafter(d, math.inf)
    if direction < 0 and mp.mpf(d) > x:
        d = math.nextafter(d, -math.inf)
    return d


def header() -> str:
    t = tables()
    cols = {"start": 0, "width": 0, "lo": 1, "hi": -1, "y": 0, "dy": 0}
    out = [
        "// Generated by tools/maxwell_ziggurat.py: do not edit (run it to regenerate).",
        f"// The ziggurat of the Maxwell radius (random/maxwell.hpp): {LAYERS} layers of",
        f"// equal area v = {float(t['v']):.17g} under f(x) = x^2 exp(-x^2 / 2)"
        f" (whose area is sqrt(pi / 2)),",
        f"// {100 * float(t['fast']):.3f} % of draws accepted by the fast test; the tail"
        f" beyond R_1 holds {float(t['tail_mass']):.3g}",
        "// of the mass.  Each row: start, width, lo, hi, y, dy"
        " (the generator says what they are).",
        "#pragma once",
        "",
        f"#define CEPAM_MAXWELL_LAYERS {LAYERS}",
        "",
        f"// CEPAM_MAXWELL_ROW(start, width, lo, hi, y, dy) for layers 0 .. {LAYERS - 1}.",
        "#define CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_ROW) \\",
    ]
    for i, r in enumerate(t["rows"]):
        # (layer 0's start rounded up as its lo is, so that its x >= lo)
        vals = ", ".join(rounded(r[k], 1 if (i, k) == (0, "start") else d).hex()
                         for k, d in cols.items())
        out.append(f"  CEPAM_MAXWELL_ROW({vals}) \\")
    out.append("")
    out.append("namespace cepam::maxwell {")
    for name, key in [("kBaseHeight", "y1"), ("kLeftEdge", "L1"), ("kLeftShare", "left"),
                      ("kTailStart", "w0"), ("kTailRate", "c"), ("kTailScale", "inv_lambda")]:
        out.append(f"inline constexpr double {name} = {rounded(t[key]).hex()};")
    out.append("}  // namespace cepam::maxwell")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless the shipped header is this script's output")
    args = parser.parse_args(argv)
    text = header()
    if args.check:
        if HEADER.read_text() != text:
            print(f"{HEADER} differs from tools/maxwell_ziggurat.py's output", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
