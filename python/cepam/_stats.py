"""Small numpy-only statistics for the demo and benchmarks (no scipy needed)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["kolmogorov_smirnov", "normal_cdf", "laplace_cdf"]


def normal_cdf(z: np.ndarray, sigma: float) -> np.ndarray:
    erfc = np.frompyfunc(math.erfc, 1, 1)
    return (0.5 * erfc(-np.asarray(z, dtype=np.float64) / (sigma * math.sqrt(2.0)))).astype(
        np.float64
    )


def laplace_cdf(z: np.ndarray, b: float) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    return np.where(z < 0, 0.5 * np.exp(z / b), 1.0 - 0.5 * np.exp(-z / b))


def kolmogorov_smirnov(samples: np.ndarray, cdf_values_sorted: np.ndarray) -> tuple[float, float]:
    """One-sample KS statistic D and its asymptotic p-value.

    ``cdf_values_sorted`` is the hypothesised CDF at the sorted samples.  The
    p-value uses Stephens' (1970) correction of the Kolmogorov limit law,
    accurate for the sample sizes used here (n >= 100).
    """
    n = len(samples)
    i = np.arange(1, n + 1, dtype=np.float64)
    d = max(float(np.max(i / n - cdf_values_sorted)), float(np.max(cdf_values_sorted - (i - 1) / n)))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    if lam < 0.2:
        return d, 1.0
    p = 2.0 * sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * lam * lam) for k in range(1, 101))
    return d, min(1.0, max(0.0, p))
