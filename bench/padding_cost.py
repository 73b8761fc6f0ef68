"""Bits per coordinate of sealed payloads, unpadded against the shipped
bitrate tables, and the cost of length hiding.

    python bench/padding_cost.py [--data-dir ../shared/data/mnist] [--quick]

Synthetic sources: the bitrate benchmark's own draws, contexts and payload
nonces (docs/bitrate/bitrate.csv, m = 200,000, sigma = 1), so that "unpadded" is
the same encoding as the shipped table (their difference, 0, checks it); MNIST: the
updates, contexts and nonces of bench/bitrate_mnist.py (docs/bitrate/mnist.md:
the same encodings, so their difference is the table's rounding to 3 decimals).  pad="max" and pad="levels" need
a clip: synthetic rows use the source's expected norm ``s sqrt(m)`` (Gaussian)
or ``s sqrt(m / 3)`` (uniform), MNIST the benchmark's clip 1.  Writes
docs/bitrate/padding.md.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import sys

import numpy as np

import cepam
from cepam import bitrate, padding
from cepam.bitrate.benchmark import _SECRET, _nonce, _row_context

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCHEMES = {  # bench key -> encode kwargs
    "cepam-Z1-ans": dict(lattice="Z", dim=1, coder="ans"),
    "cepam-Z1-golomb": dict(lattice="Z", dim=1, coder="golomb"),
    "cepam-E8-ans": dict(lattice="E8", dim=None, coder="ans"),
    "cepam-auto-ans": dict(lattice="auto", dim=None, coder="ans"),
}
MNIST_LABELS = {"cepam-Z1-ans": "CEPAM Z (n=1), ans", "cepam-Z1-golomb": "CEPAM Z (n=1), golomb",
                "cepam-E8-ans": "CEPAM E8, ans", "cepam-auto-ans": "CEPAM auto, ans"}
PADS = (None, "bucket", "levels", "max")


def committed_synthetic() -> dict[tuple[str, float, str], float]:
    with open(ROOT / "docs" / "bitrate" / "bitrate.csv") as f:
        return {(r["source"], float(r["s_over_sigma"]), r["scheme"]):
                float(r["bits_per_coordinate"]) for r in csv.DictReader(f)
                if r["bits_per_coordinate"]}


def synthetic_rows(m: int, grid) -> list[dict]:
    committed = committed_synthetic()
    schemes = bitrate.default_schemes()
    rows = []
    for si, source in enumerate(bitrate.SOURCES):
        for gi, ratio in enumerate(bitrate.S_OVER_SIGMA):
            if ratio not in grid:
                continue
            x = bitrate.sample_source(source, ratio, m, 1000 * si + gi)
            norm = ratio * math.sqrt(m if source == "gaussian" else m / 3.0)
            for key, kwargs in SCHEMES.items():
                # The benchmark's context and payload nonce.
                round_, client, seed = _row_context(schemes, key, si, gi)
                bits = {}
                for pad in PADS:
                    payload = cepam.encode(x, cepam.Gaussian(sigma=1.0), secret=_SECRET,
                                           round=round_, client=client, pad=pad,
                                           nonce=_nonce(seed, round_, client),
                                           clip=norm if padding.uses_bound(pad) else None,
                                           **kwargs)
                    bits[pad] = 8 * len(payload) / m
                rows.append(dict(source=source, ratio=ratio, scheme=key,
                                 v2=committed[(source, ratio, key)], **{str(p): b for p, b in
                                                                        bits.items()}))
                print(rows[-1], flush=True)
    return rows


def committed_mnist() -> tuple[list[str], dict[str, list[float]]]:
    lines = (ROOT / "docs" / "bitrate" / "mnist.md").read_text().splitlines()
    table = [l for l in lines if l.startswith("|")]
    columns = [c.strip() for c in table[0].strip("|").split("|")][1:]
    values = {}
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        values[cells[0]] = [float(c) for c in cells[1:]]
    return columns, values


def mnist_rows(data_dir: str | None) -> list[dict]:
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import bitrate_mnist as bm  # noqa: E402
    from cepam.fl.data import load_mnist
    from cepam.fl.seeds import payload_nonce

    torch.set_num_threads(1)
    data = load_mnist(data_dir)
    columns, committed = committed_mnist()
    rows = []
    secret = bytes(range(32))
    for model in ("mlp", "cnn"):
        for before in (0, 10):
            label = f"{model.upper()}, round {before + 1}"
            updates, _ = bm.client_updates(model, data, before)
            m = sum(v.numel() for v in updates[0].values())
            for key, kwargs in SCHEMES.items():
                kwargs = {k: v for k, v in kwargs.items() if v is not None}
                if kwargs.get("lattice") == "auto":
                    kwargs = {k: v for k, v in kwargs.items() if k != "lattice"}
                bits = {}
                for pad in PADS:
                    lengths = [len(cepam.encode(u, cepam.Gaussian(sigma=bm.SIGMA), secret=secret,
                                                round=0, client=k, clip=bm.CLIP, pad=pad,
                                                nonce=payload_nonce(secret, 0, k), **kwargs))
                               for k, u in enumerate(updates)]
                    bits[str(pad)] = 8 * float(np.mean(lengths)) / m
                v2 = committed[MNIST_LABELS[key]][columns.index(label)]
                rows.append(dict(source=label, scheme=key, v2=v2, **bits))
                print(rows[-1], flush=True)
    return rows


def table(rows: list[dict], first: str) -> list[str]:
    out = [f"| {first} | scheme | shipped table | unpadded | unpadded - table | pad='bucket' | "
           "pad='levels' | pad='max' |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        where = r["source"] if "ratio" not in r else f"{r['source']}, s/sigma = {r['ratio']:g}"
        out.append(f"| {where} | {r['scheme']} | {r['v2']:.3f} | {r['None']:.3f} | "
                   f"{r['None'] - r['v2']:+.4f} | "
                   f"{r['bucket']:.3f} (+{r['bucket'] - r['None']:.3f}) | "
                   f"{r['levels']:.3f} (+{r['levels'] - r['None']:.3f}) | "
                   f"{r['max']:.3f} (+{r['max'] - r['None']:.3f}) |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help="s/sigma 1 and 10 only, no MNIST")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bitrate" / "padding.md"))
    args = parser.parse_args()
    grid = (1.0, 10.0) if args.quick else bitrate.S_OVER_SIGMA
    synthetic = synthetic_rows(200_000, grid)
    mnist = [] if args.quick else mnist_rows(args.data_dir)
    intro = " ".join(__doc__.split("\n\n")[0].split())
    lines = ["# Sealed payloads and length hiding: bits per coordinate", "", intro, "",
             " ".join(__doc__.split("\n\n")[2].split()), "", "## Synthetic sources", "",
             *table(synthetic, "source"), ""]
    if mnist:
        lines += ["## MNIST updates (mean over 30 clients)", "", *table(mnist, "update"), ""]
    pathlib.Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
