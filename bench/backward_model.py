"""Prototype: what would a backward-adaptive source model cost?

    python bench/backward_model.py [--m 200000]

The ANS coder sends a source model (the range A and a 12-bit CDF of x; in
format version 3 it is sealed).  A backward-adaptive model would send none:
the decoder would fit it, block by block, on the values it has already
decoded, ``y = x + z`` (private already).  This script measures, for LRSUQ on
Z (n = 1, Gaussian noise sigma = 1; the cell width is ``beta = 2 sigma
sqrt(U)``, ``U ~ chi2(3)``), the ideal cost ``-log2 P(M)`` of the lattice
coordinates under three models of x, in bits per coordinate:

* forward: the true law of x (what a perfectly sent model approaches);
* backward, naive: the law of y fitted on the preceding blocks of 4,096
  (the first block: N(0, clip^2 / m) from public parameters, clip = the
  source's norm): the empirical distribution of y, smoothed by a histogram
  of 256 equal-count bins, linear inside each;
* backward, deconvolved: a Gaussian whose variance is that of y minus
  sigma^2 (floored at sigma^2 / 100), fitted the same way.

Sources: Gaussian and Student-t (3 dof) x with rms s, s/sigma in
{0.1, 1, 3, 10, 100}.  It measures the models' mismatch only; quantization
of a sent model (12-bit knots) and the model's own bits are not counted.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

BLOCK = 4096


def coded_bits(x: np.ndarray, cdf, beta: np.ndarray, v: np.ndarray) -> np.ndarray:
    """-log2 P(M) per coordinate, LRSUQ Z^1: M = round(x / beta - V)."""
    m = np.floor(x / beta - v + 0.5)
    lo, hi = beta * (m + v - 0.5), beta * (m + v + 0.5)
    p = np.maximum(cdf(hi) - cdf(lo), 1e-300)
    return -np.log2(p)


def histogram_cdf(sample: np.ndarray, bins: int = 256):
    edges = np.unique(np.quantile(sample, np.linspace(0, 1, bins + 1)))
    span = edges[-1] - edges[0]
    edges = np.concatenate([[edges[0] - span], edges, [edges[-1] + span]])
    levels = np.concatenate([[0.0], np.linspace(0.001, 0.999, len(edges) - 2), [1.0]])
    return lambda t: np.interp(t, edges, levels)


def run(source: str, ratio: float, m: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    if source == "gaussian":
        x = rng.normal(0.0, ratio, m)
        law = stats.norm(scale=ratio)
    else:
        scale = ratio / np.sqrt(3.0)  # t(3) has variance 3
        x = stats.t(3, scale=scale).rvs(m, random_state=rng)
        law = stats.t(3, scale=scale)
    y = x + rng.normal(0.0, 1.0, m)
    prior = stats.norm(scale=np.sqrt(np.mean(x ** 2)))  # clip^2 / m
    beta = 2.0 * np.sqrt(rng.chisquare(3, m))  # beta = 2 sigma sqrt(U), U ~ chi2(3)
    v = rng.uniform(-0.5, 0.5, m)
    forward = coded_bits(x, law.cdf, beta, v).mean()
    naive, deconvolved = [], []
    for start in range(0, m, BLOCK):
        xb = x[start:start + BLOCK]
        seen = y[:start]
        if start == 0:
            naive_cdf = deconv_cdf = prior.cdf
        else:
            naive_cdf = histogram_cdf(seen)
            var = max(seen.var() - 1.0, 0.01)
            deconv_cdf = stats.norm(loc=seen.mean(), scale=np.sqrt(var)).cdf
        side = beta[start:start + BLOCK], v[start:start + BLOCK]
        naive.append(coded_bits(xb, naive_cdf, *side).sum())
        deconvolved.append(coded_bits(xb, deconv_cdf, *side).sum())
    return {"forward": float(forward), "naive": float(np.sum(naive) / m),
            "deconvolved": float(np.sum(deconvolved) / m)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=200_000)
    args = parser.parse_args()
    print("| source | s/sigma | forward (true law) | backward naive | + | "
          "backward deconvolved | + |")
    print("|---|---|---|---|---|---|---|")
    for source in ("gaussian", "student-t"):
        for ratio in (0.1, 1.0, 3.0, 10.0, 100.0):
            r = run(source, ratio, args.m, seed=int(ratio * 10))
            print(f"| {source} | {ratio:g} | {r['forward']:.4f} | {r['naive']:.4f} | "
                  f"{r['naive'] - r['forward']:+.4f} | {r['deconvolved']:.4f} | "
                  f"{r['deconvolved'] - r['forward']:+.4f} |", flush=True)


if __name__ == "__main__":
    main()
