"""What a sealed payload's length says about the update: how well the length
predicts the update's l2 norm (equivalently its signal-to-noise ratio
``norm / (sigma sqrt(m))``), without and with padding.

    python bench/length_study.py [--data-dir ../shared/data/mnist] [--quick]

Updates: MNIST MLP and CNN client updates from the FL harness's trainer (30
IID clients of 1,666 samples, 15 local SGD steps, after 0, 5 and 10 rounds
of FedAvg: 90 updates a model, as bench/bitrate_mnist.py makes them), and
synthetic ones (m = 25,818 Gaussian or Student-t (3 dof) coordinates with
norms log-uniform in [0.05, 1]; 120 of each).  Each is coded with
sigma = 0.001, lattice "auto", coder "ans", clip 1 (update k's payload nonce
fixed: cepam.fl.seeds.payload_nonce of round 0, client k).  Per setting:

* R^2: leave-one-out R^2 of a least-squares line predicting log(norm) from
  log(length) (1: the length gives the norm away; 0: nothing);
* error: the median relative error |predicted - true| / true of that
  predictor's norm;
* MI: plug-in mutual information in bits between the length (8 equal-count
  bins, or its exact value when it takes at most 8) and the norm's quartile
  (at most 2 bits), minus its mean over 200 shufflings (the estimator's
  bias at this sample size);
* lengths: the number of distinct payload lengths.

The norm is the one coded: after clipping to 1.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np

import cepam
from cepam.fl.seeds import payload_nonce

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIGMA, CLIP = 1e-3, 1.0
SECRET = bytes(range(32))
PADS = (None, "bucket", "levels", "max")


def _bins(values: np.ndarray, count: int) -> np.ndarray:
    distinct = np.unique(values)
    if len(distinct) <= count:
        return np.searchsorted(distinct, values)
    edges = np.quantile(values, np.linspace(0, 1, count + 1)[1:-1])
    return np.searchsorted(edges, values, side="right")


def _mutual_information(a: np.ndarray, b: np.ndarray) -> float:
    joint = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(joint, (a, b), 1.0)
    joint /= joint.sum()
    pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
    nz = joint > 0
    return float(np.sum(joint[nz] * np.log2(joint[nz] / (pa @ pb)[nz])))


def leakage(lengths: np.ndarray, norms: np.ndarray, seed: int = 0) -> dict[str, float]:
    """R^2, median relative error, debiased MI and distinct lengths (see the doc)."""
    x, y = np.log(lengths.astype(float)), np.log(norms)
    n = len(x)
    pred = np.empty(n)
    for i in range(n):  # leave-one-out least squares
        keep = np.arange(n) != i
        if np.ptp(x[keep]) == 0:
            pred[i] = y[keep].mean()
        else:
            slope, intercept = np.polyfit(x[keep], y[keep], 1)
            pred[i] = intercept + slope * x[i]
    r2 = 1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    error = float(np.median(np.abs(np.exp(pred) - norms) / norms))
    a, b = _bins(lengths, 8), _bins(norms, 4)
    rng = np.random.default_rng(seed)
    shuffled = np.mean([_mutual_information(a, rng.permutation(b)) for _ in range(200)])
    return {"r2": float(r2), "error": error, "mi": _mutual_information(a, b) - float(shuffled),
            "lengths": len(np.unique(lengths))}


def coded(updates: list, norms: np.ndarray, label: str) -> list[dict]:
    rows = []
    for pad in PADS:
        lengths = np.array([len(cepam.encode(u, cepam.Gaussian(sigma=SIGMA), secret=SECRET,
                                             round=0, client=k, clip=CLIP, pad=pad,
                                             nonce=payload_nonce(SECRET, 0, k)))
                            for k, u in enumerate(updates)])
        m = sum(int(np.prod(v.shape)) for v in (updates[0].values() if isinstance(
            updates[0], dict) else [updates[0]]))
        row = {"updates": label, "pad": "none" if pad is None else pad, "n": len(updates),
               "bits": 8 * float(lengths.mean()) / m, **leakage(lengths, norms)}
        rows.append(row)
        print(row, flush=True)
    return rows


def synthetic(count: int) -> list[dict]:
    rng = np.random.default_rng(0)
    m = 25_818
    rows = []
    for source in ("gaussian", "student-t"):
        norms = np.exp(rng.uniform(math.log(0.05), math.log(1.0), count))
        updates = []
        for norm in norms:
            x = rng.normal(size=m) if source == "gaussian" else rng.standard_t(3, size=m)
            updates.append((x * (norm / np.linalg.norm(x))).astype(np.float32))
        rows += coded(updates, norms, f"synthetic {source}, m = {m:,}")
    return rows


def mnist(data_dir: str | None) -> list[dict]:
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import bitrate_mnist as bm  # noqa: E402
    from cepam.fl.data import load_mnist

    torch.set_num_threads(1)
    data = load_mnist(data_dir)
    rows = []
    for model in ("mlp", "cnn"):
        updates = []
        for before in (0, 5, 10):
            updates += bm.client_updates(model, data, before)[0]
        norms = np.array([math.sqrt(sum(float((v.double() ** 2).sum()) for v in u.values()))
                          for u in updates])
        m = sum(v.numel() for v in updates[0].values())
        rows += coded(updates, np.minimum(norms, CLIP),
                      f"MNIST {model.upper()} (m = {m:,}), rounds 1, 6, 11")
    return rows


def table(rows: list[dict]) -> list[str]:
    out = ["| updates | pad | bits/coord | R^2 of log norm | median norm error | MI (bits) | "
           "distinct lengths |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['updates']} ({r['n']}) | {r['pad']} | {r['bits']:.3f} | "
                   f"{r['r2']:.3f} | {100 * r['error']:.1f} % | {r['mi']:.2f} | {r['lengths']} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help="synthetic only, 40 updates")
    args = parser.parse_args()
    rows = synthetic(40 if args.quick else 120)
    if not args.quick:
        rows += mnist(args.data_dir)
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
