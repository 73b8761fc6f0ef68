"""How much room pad="max" leaves: max_payload_bytes against real payloads
of updates at the clip norm, for every coder, lattice and mechanism.

    python bench/pad_max_margin.py [--seed 0]

Sources (scaled to the clip norm): Gaussian, uniform, Laplace, Student-t
(1 and 2 dof), sparse (1 % non-zero), constant and two-valued; m in
{2,000, 25,818, 200,000}; rms / noise std in {0.01, 0.3, 1, 3, 10, 100,
1000}.  Prints, per setting, the two smallest margins in bits per
coordinate *without* the bound's fixed slack (``padding._SLACK_BYTES``), and
the smallest overall: a negative margin at large m means the bound's
per-coordinate slack is too small (re-measure after any change to a body
coder).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import cepam
from cepam import padding
from cepam.auto import _auto_options
from cepam.lattices import LATTICE_CODES, LATTICE_DIMS
from cepam.payload import CODER_CODES, SEALED_HEADER_BYTES

SETTINGS = [("ans", "auto", None), ("ans", "Z", 1), ("ans", "Z", 2), ("ans", "Z", 4),
            ("ans", "Z", 8), ("ans", "A2", None), ("ans", "D4", None), ("ans", "E8", None),
            ("golomb", "Z", 1), ("golomb", "Z", 2), ("golomb", "Z", 3), ("golomb", "Z", 8),
            ("golomb", "A2", None), ("golomb", "D4", None), ("golomb", "E8", None)]


def sources(rng: np.random.Generator, m: int) -> dict[str, np.ndarray]:
    return {"gaussian": rng.normal(size=m), "uniform": rng.uniform(-1, 1, m),
            "laplace": rng.laplace(size=m), "t2": rng.standard_t(2, m),
            "t1": rng.standard_cauchy(m),
            "sparse": np.where(rng.random(m) < 0.01, rng.normal(size=m), 0.0),
            "constant": np.ones(m), "two-valued": np.sign(rng.normal(size=m))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    mechanisms = [cepam.Gaussian(sigma=1.0), cepam.Laplace(b=1 / math.sqrt(2)),
                  cepam.SDQ(step=math.sqrt(12))]
    worst: dict[tuple, list] = {}
    for m in (2000, 25_818, 200_000):
        for ratio in (0.01, 0.3, 1, 3, 10, 100, 1000):
            clip = ratio * math.sqrt(m)  # every mechanism has noise std 1
            for name, x in sources(rng, m).items():
                x = x * (clip / np.linalg.norm(x))
                for coder, lattice, dim in SETTINGS:
                    for mech in mechanisms:
                        if mech.code != 1 and (lattice != "Z" or (mech.code == 3 and dim != 1)
                                               or (mech.code == 2 and dim > 4)):
                            continue
                        payload = cepam.encode(x, mech, secret=bytes(32), round=0, client=0,
                                               clip=clip, coder=coder, lattice=lattice, dim=dim)
                        info = cepam.inspect(payload)
                        fixed = info.header_bits // 8 + SEALED_HEADER_BYTES + 16
                        code = CODER_CODES[coder]
                        options = (_auto_options(mech, code, "balanced") if lattice == "auto" else
                                   [(LATTICE_CODES[lattice], dim or LATTICE_DIMS[lattice])])
                        bound = padding.max_payload_bytes(
                            mech, clip=clip, m=m, coder=code,
                            lattices=options, fixed_bytes=fixed)
                        margin = 8 * (bound - padding._SLACK_BYTES - len(payload)) / m
                        worst.setdefault((coder, lattice, dim, mech.name), []).append(
                            (margin, m, ratio, name))
    for key, rows in worst.items():
        rows.sort()
        print(key, [(round(a, 3), m, r, n) for a, m, r, n in rows[:2]])
    print("smallest margin (bits/coord, without the fixed slack):",
          min(min(rows) for rows in worst.values()))


if __name__ == "__main__":
    main()
