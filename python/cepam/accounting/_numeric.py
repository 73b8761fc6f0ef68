"""Numerically stable scalar/array helpers for the accountants (private).

All functions work elementwise on numpy arrays, never overflow for arguments up
to the float range that matters here (eps up to 1e9), and never return NaN for
finite, in-domain input.
"""

from __future__ import annotations

import numpy as np

__all__: list[str] = []

# Above this, expm1(x) is e^x to double precision and e^-x is negligible.
_BIG = 30.0


def log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x >= 0 (-inf at x = 0), without overflow."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        small = np.log(np.expm1(np.minimum(x, _BIG)))
        large = x + np.log1p(-np.exp(-np.maximum(x, _BIG)))
    return np.where(x < _BIG, small, large)


def amplified_epsilon(eps_tilde: np.ndarray, p: float) -> np.ndarray:
    """log(1 + p (e^eps_tilde - 1)): the amplified epsilon (Balle et al. 2018).

    ``eps_tilde`` >= 0 is the base mechanism's epsilon, ``p`` in (0, 1] the
    probability that the protected record takes part.
    """
    et = np.asarray(eps_tilde, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        small = np.log1p(p * np.expm1(np.minimum(et, _BIG)))
        large = np.logaddexp(np.log1p(-p), np.log(p) + et)
    return np.where(et < _BIG, small, large)


def base_epsilon(eps: np.ndarray, p: float) -> np.ndarray:
    """Inverse of :func:`amplified_epsilon`: eps_tilde = log(1 + (e^eps - 1)/p)."""
    e = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        small = np.log1p(np.expm1(np.minimum(e, _BIG)) / p)
        large = e - np.log(p) + np.log1p(-(1.0 - p) * np.exp(-np.maximum(e, _BIG)))
    return np.where(e < _BIG, small, large)

