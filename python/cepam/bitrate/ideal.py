"""The ideal rates of the bitrate benchmark: LRSUQ and scalar SDQ with an
ideal entropy coder that knows the source law (bits per coordinate; the
setting and the sources of :mod:`cepam.bitrate.theory`).

* :func:`ideal_rate`: ``[H(H) + H(M | U, V_H)] / n`` (docs/design.md,
  section 4).  On Z^1 (``H = 1`` always) a Monte Carlo over the latent and
  the dither with exact sums over ``M``; on other lattices (Gaussian source)
  a Monte Carlo over the whole chain with exact lattice sums for the law of
  ``M``.
* :func:`ideal_sdq_rate`: scalar SDQ with step ``sqrt(12) sigma``.
* :func:`spec_ideal_rate`: the values the design notes tabulate.

numpy and scipy (imported when a function needs it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import check_positive
from ..errors import InvalidArgumentError
from .theory import (
    _LOG2E,
    DESIGN_IDEAL_GAUSSIAN_Z1,
    DESIGN_IDEAL_UNIFORM,
    _ball_volume,
    _check_count,
    _check_lattice_name,
    _check_source,
    _default_dim,
    _geometry,
    _Geometry,
    geometric_entropy,
)

__all__ = ["ideal_rate", "ideal_sdq_rate", "spec_ideal_rate"]


def _entropy_bits(p: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0.0, -p * np.log2(np.where(p > 0.0, p, 1.0)), 0.0)
    return terms.sum(axis=axis)


def _ideal_z1_uniform(a: float, beta: np.ndarray, v: np.ndarray) -> np.ndarray:
    """H(M | U, V) in bits per draw, X ~ U[-a, a], cells [beta (m + v - 1/2), beta (m + v + 1/2)).

    Exact: all interior cells have probability beta / (2a); the two end cells
    the part of them inside [-a, a].
    """
    lo_cell = np.floor(-a / beta - v + 0.5)
    hi_cell = np.floor(a / beta - v + 0.5)
    p_lo = np.clip((beta * (lo_cell + v + 0.5) + a) / (2.0 * a), 0.0, 1.0)
    p_hi = np.clip((a - beta * (hi_cell + v - 0.5)) / (2.0 * a), 0.0, 1.0)
    interior = np.maximum(hi_cell - lo_cell - 1.0, 0.0)
    q = beta / (2.0 * a)
    with np.errstate(divide="ignore", invalid="ignore"):
        ends = _entropy_bits(np.stack([p_lo, p_hi]), axis=0)
        middle = np.where(interior > 0, -interior * q * np.log2(q), 0.0)
    return np.where(hi_cell > lo_cell, ends + middle, 0.0)


def _ideal_z1_gaussian(s: float, beta: np.ndarray, v: np.ndarray,
                       max_cells: int = 1024) -> np.ndarray:
    """H(M | U, V) in bits per draw, X ~ N(0, s^2), exact sums over the cells.

    Cells covering [-9.5 s, 9.5 s] (the rest holds < 1e-20 of the mass).  A draw
    that needs more than ``max_cells`` cells (cell width under ~s/50) uses the
    high-resolution expansion ``h(X) - log2(beta) + beta^2 / (24 s^2 ln 2)``
    (Fisher-information correction), exact there to ~1e-6 bits.
    """
    from scipy.special import ndtr

    out = np.empty(beta.shape)
    t = 9.5
    lo_cell = np.floor(-t * s / beta - v + 0.5)
    hi_cell = np.floor(t * s / beta - v + 0.5)
    cells = (hi_cell - lo_cell + 1.0).astype(np.int64)
    fine = cells > max_cells
    h_x = 0.5 * math.log2(2.0 * math.pi * math.e * s * s)
    out[fine] = h_x - np.log2(beta[fine]) + (beta[fine] / s) ** 2 / 24.0 * _LOG2E
    idx = np.flatnonzero(~fine)
    # Batches of draws (sorted by cell count) with a bounded total number of cells.
    order = idx[np.argsort(cells[idx], kind="stable")]
    budget = 1 << 21
    start = 0
    while start < order.size:
        end = start + 1
        while end < order.size and (end - start + 1) * int(cells[order[end]]) <= budget:
            end += 1
        block = order[start:end]
        width = int(cells[block].max())
        k = np.arange(width + 1, dtype=np.float64)[None, :]
        edges = beta[block, None] * (lo_cell[block, None] + k + v[block, None] - 0.5) / s
        # Cell probabilities as differences of the CDF left of 0 and of the upper
        # tail right of it (no cancellation in either tail).
        lower, upper = ndtr(edges), ndtr(-edges)
        probs = np.where(edges[:, 1:] <= 0.0, lower[:, 1:] - lower[:, :-1],
                         upper[:, :-1] - upper[:, 1:])
        out[block] = _entropy_bits(np.maximum(probs, 0.0), axis=1)
        start = end
    return out


def _latent_draws(n: int, draws: int, seed: int) -> tuple[np.random.Generator, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng, rng.chisquare(n + 2, size=draws)


def _e_log2_chi2(k: int) -> float:
    """E log2 U for U ~ chi2(k)."""
    from scipy.special import digamma

    return (float(digamma(k / 2.0)) + math.log(2.0)) * _LOG2E


def _control_variate_mean(values: np.ndarray, control: np.ndarray,
                          control_mean: float) -> tuple[float, float]:
    """Mean of ``values`` with a control variate of known mean, and its standard error.

    ``mean(values) - b (mean(control) - control_mean)``, ``b`` the least-squares
    slope: unbiased up to O(1/draws); the standard error is that of the
    residuals.
    """
    c = control - control.mean()
    var_c = float(np.dot(c, c))
    slope = float(np.dot(values - values.mean(), c)) / var_c if var_c > 0.0 else 0.0
    estimate = float(values.mean() - slope * (control.mean() - control_mean))
    residual = values - slope * control
    return estimate, float(residual.std(ddof=2) / math.sqrt(values.size))


def _ideal_rate_z1(source: str, ratio: float, draws: int, seed: int) -> tuple[float, float]:
    rng, u = _latent_draws(1, draws, seed)
    v = rng.uniform(-0.5, 0.5, size=draws)
    beta = 2.0 * np.sqrt(u)  # sigma = 1: r = sqrt(U), rho = 1/2
    if source == "uniform":
        h = _ideal_z1_uniform(ratio, beta, v)
    else:
        h = _ideal_z1_gaussian(ratio, beta, v)
    # Control variate: -log2(beta), the high-resolution dependence on U (known mean).
    return _control_variate_mean(h, -np.log2(beta), -1.0 - 0.5 * _e_log2_chi2(3))


_MAX_ENUMERATION = 1_000_000


def _lattice_points(basis: np.ndarray, radius: float) -> np.ndarray:
    """All points ``basis @ m`` with norm <= radius, rows sorted by norm.

    Raises:
        InvalidArgumentError: the enumeration box would hold more than
            ``_MAX_ENUMERATION`` candidates (the ideal rate is then not computed).
    """
    inv = np.linalg.inv(basis)
    bounds = np.ceil(radius * np.linalg.norm(inv, axis=1)).astype(int)
    if float(np.prod(2.0 * bounds + 1.0)) > _MAX_ENUMERATION:
        raise InvalidArgumentError(
            f"lattice sums too large to enumerate (radius {radius:.2f} in dimension "
            f"{basis.shape[0]}): the ideal rate is not computed at this s/sigma"
        )
    axes = [np.arange(-b, b + 1, dtype=np.float64) for b in bounds]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, basis.shape[0])
    points = grid @ basis.T
    norms = np.linalg.norm(points, axis=1)
    keep = norms <= radius
    points, norms = points[keep], norms[keep]
    order = np.argsort(norms, kind="stable")
    return points[order]


def _log_ball_probability(n: int, x: np.ndarray, nc: np.ndarray) -> np.ndarray:
    """Log of the N(0, I_n) mass of a ball: ``log chndtr(x, n, nc)``.

    ``x`` is the ball's squared radius, ``nc`` the squared distance of its
    centre from the origin (both in units of the source scale).  Small balls use the
    second-order expansion ``f(c) vol(B) (1 + x (nc - n) / (2 (n + 2)))``,
    exact to O(x^2 nc^2).
    """
    from scipy.special import chndtr

    x = np.broadcast_to(np.asarray(x, dtype=np.float64), np.shape(nc))
    nc = np.asarray(nc, dtype=np.float64)
    out = np.empty(nc.shape)
    small = x * np.maximum(nc, 1.0) < 1e-6
    xs, ncs = x[small], nc[small]
    out[small] = (-0.5 * n * math.log(2.0 * math.pi) - 0.5 * ncs
                  + math.log(_ball_volume(n)) + 0.5 * n * np.log(xs)
                  + np.log1p(xs * (ncs - n) / (2.0 * (n + 2.0))))
    big = ~small
    with np.errstate(divide="ignore"):
        out[big] = np.log(chndtr(x[big], n, nc[big]))
    bad = ~np.isfinite(out)
    if np.any(bad):  # chndtr underflow: far tail, where the expansion is the better value
        xs, ncs = x[bad], nc[bad]
        out[bad] = (-0.5 * n * math.log(2.0 * math.pi) - 0.5 * ncs
                    + math.log(_ball_volume(n)) + 0.5 * n * np.log(xs))
    return out


def _ideal_rate_sampled(geometry: _Geometry, ratio: float, draws: int,
                        seed: int) -> tuple[float, float]:
    """Monte Carlo of [H(H) + H(M | U, V_H)] / n for a Gaussian source N(0, s^2 I_n).

    Given ``U`` (so ``r`` and ``beta = r / rho``), the accepted trial has
    ``P(M = m, V_H in dv) = g(beta (G m + v)) dv / (p covol)`` with
    ``g(c) = P(|X - c| <= r)`` (a non-central chi-square CDF), so
    ``P(M = m | U, V_H = v) = g(beta (G m + v)) / S(v)``,
    ``S(v) = sum_m g(beta (G m + v))``, and ``H`` is Geometric(p),
    independent of the rest.  Each draw samples ``(X, U, Y = X + uniform
    ball)`` (``Y = beta (G M + V_H)``: the decoder's output) and scores
    ``-log2 g(Y) + log2 S(V_H)``.  ``S`` is an exact lattice sum: direct over
    the lattice points within the source's reach when ``s / beta`` is small,
    by Poisson summation over the dual lattice otherwise (the terms decay as
    ``exp(-2 pi^2 (s / beta)^2 |k|^2)``; cut at 1e-18).
    """
    from scipy.special import chdtri, jv

    n, basis, rho = geometry.dim, geometry.basis, geometry.rho
    p = geometry.density
    rng, u = _latent_draws(n, draws, seed)
    s = ratio
    r = np.sqrt(u)  # sigma = 1
    beta = r / rho
    a = s / beta  # source scale in lattice units
    x = rng.normal(0.0, s, size=(draws, n))
    direction = rng.normal(size=(draws, n))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    z = direction * (r * rng.uniform(size=draws) ** (1.0 / n))[:, None]
    y = x + z
    # The decoder's (M, V): y / beta = G m + v, v in the centred parallelepiped.
    inv = np.linalg.inv(basis)
    w = y / beta[:, None]
    m = np.round(w @ inv.T)
    v = w - m @ basis.T

    log_g = _log_ball_probability(n, (r / s) ** 2, np.sum(y * y, axis=1) / (s * s))

    log_s = np.full(draws, math.log(p))
    a_direct = 0.35
    eps = 1e-18
    t_n = math.sqrt(float(chdtri(n, eps)))  # P(|N(0, I_n)| > t_n) = 1e-18
    v_max = 0.5 * float(np.linalg.norm(basis, axis=0).sum())
    dual = np.linalg.inv(basis).T
    k_reach = math.sqrt(-math.log(eps) / (2.0 * math.pi ** 2))  # exp(-2 pi^2 t^2) = eps
    lambda_dual = geometry.dual_minimum

    direct = a <= a_direct
    if np.any(direct):
        points = _lattice_points(basis, rho + t_n * a_direct + v_max)
        point_norms = np.linalg.norm(points, axis=1)
        for i in np.flatnonzero(direct):
            reach = rho + t_n * a[i]
            count = int(np.searchsorted(point_norms, reach + np.linalg.norm(v[i]), side="right"))
            c = points[:count] + v[i]
            nc = np.sum(c * c, axis=1) / (a[i] * a[i])
            terms = _log_ball_probability(n, (rho / a[i]) ** 2, nc)
            top = terms.max()
            log_s[i] = top + math.log(np.exp(terms - top).sum())

    poisson = (~direct) & (a * lambda_dual < k_reach)
    if np.any(poisson):
        kpoints = _lattice_points(dual, k_reach / a_direct)
        k_norms = np.linalg.norm(kpoints, axis=1)
        arg = 2.0 * math.pi * rho * k_norms
        with np.errstate(divide="ignore", invalid="ignore"):
            ball_ft = math.gamma(n / 2.0 + 1.0) * (0.5 * arg) ** (-n / 2.0) * jv(n / 2.0, arg)
        ball_ft[k_norms == 0.0] = 1.0
        for i in np.flatnonzero(poisson):
            count = int(np.searchsorted(k_norms, k_reach / a[i], side="right"))
            k = kpoints[:count]
            decay = np.exp(-2.0 * math.pi ** 2 * a[i] ** 2 * k_norms[:count] ** 2)
            series = ball_ft[:count] * decay
            ratio_s = float(np.sum(series * np.cos(2.0 * math.pi * (k @ v[i]))))
            log_s[i] = math.log(p) + math.log(max(ratio_s, 1e-300))

    per_draw = (log_s - log_g) * _LOG2E
    # Control variate: -log2 f_X(X) - log2 vol(B_r(U)), the high-resolution value,
    # mean h(X) - E log2 vol(B_r(U)).
    log2_fx = (-0.5 * n * math.log2(2.0 * math.pi * s * s)
               - 0.5 * np.sum(x * x, axis=1) / (s * s) * _LOG2E)
    log2_ball = math.log2(_ball_volume(n)) + n * np.log2(r)
    control = -log2_fx - log2_ball
    control_mean = (0.5 * n * math.log2(2.0 * math.pi * math.e * s * s)
                    - math.log2(_ball_volume(n)) - 0.5 * n * _e_log2_chi2(n + 2))
    mean, err = _control_variate_mean(per_draw, control, control_mean)
    return float((geometric_entropy(p) + mean) / n), err / n


def ideal_rate(source: str, s_over_sigma: float, *, lattice: str = "Z", dim: int | None = None,
               draws: int = 20000, seed: int = 0, return_error: bool = False) -> Any:
    """Rate of LRSUQ with an ideal entropy coder, bits per coordinate (Gaussian noise).

    ``[H(H) + H(M | U, V_H)] / n`` with the entropy model that knows the true
    source law (docs/design.md, section 4).

    * Z^1, either source: ``H = 1`` and, with ``beta = 2 sigma sqrt(U)``,
      ``P(M = m | U, V) = F_X(beta (m + V + 1/2)) - F_X(beta (m + V - 1/2))``;
      Monte Carlo over ``U ~ chi2(3)``, ``V ~ U[-1/2, 1/2)`` (``draws`` draws,
      numpy generator ``seed``) with exact sums over ``m``.  Standard error
      about 0.006 bits at 20000 draws.
    * Other lattices, Gaussian source: a Monte Carlo over the whole chain
      (``X``, ``U``, ``V_H``, ``M``) with exact lattice sums for the law of
      ``M`` (see :func:`_ideal_rate_sampled`), with a control variate;
      standard error under 0.004 bits at 20000 draws.  Where the lattice sums
      are too large to enumerate (E8 below s/sigma ~ 10) it raises
      InvalidArgumentError.
    * Other lattices, uniform source: not computed here (the ball probability
      of a cube has no usable closed form); use :func:`spec_ideal_rate`.

    Args:
        source: ``"gaussian"`` or ``"uniform"`` (``s`` = half-width).
        s_over_sigma: source scale over noise standard deviation.
        lattice, dim: ``"Z"`` with dim n, ``"A2"`` (2), ``"D4"`` (4), ``"E8"`` (8).
        draws, seed: Monte Carlo size and seed (deterministic).
        return_error: also return the Monte Carlo standard error.

    Returns:
        The rate in bits per coordinate, or ``(rate, standard_error)``.

    Raises:
        InvalidArgumentError: a case that is not computed (see above), an
            unknown source or lattice, a non-positive ``s_over_sigma``, too
            few ``draws`` or a negative ``seed``.
        InvalidTypeError: a ``source`` or ``lattice`` that is not a str, or
            a ``dim``, ``draws`` or ``seed`` that is not an int.
    """
    source = _check_source(source)
    ratio = check_positive("s_over_sigma", s_over_sigma)
    lattice = _check_lattice_name(lattice)
    dim = _default_dim(lattice) if dim is None else _check_count("dim", dim)
    geometry = _geometry(lattice, dim)
    draws = _check_count("draws", draws, 2)
    seed = _check_count("seed", seed, 0)
    if lattice == "Z" and dim == 1:
        rate, err = _ideal_rate_z1(source, ratio, draws, seed)
    elif source == "gaussian":
        rate, err = _ideal_rate_sampled(geometry, ratio, draws, seed)
    else:
        raise InvalidArgumentError(
            f"the ideal rate of {lattice}{'' if lattice != 'Z' else '^' + str(dim)} for a "
            "uniform source is not computed here (n = 1 only); see spec_ideal_rate for "
            "the design notes' values"
        )
    return (rate, err) if return_error else rate


def ideal_sdq_rate(source: str, s_over_sigma: float, *, points: int = 20000) -> float:
    """Rate of scalar SDQ with step ``sqrt(12) sigma`` and an ideal entropy coder, bits.

    ``H(M | V)`` with the true source law, ``M = round(x / Delta - V)``: the
    same sums as the Z^1 ideal rate with a fixed cell width ``Delta``,
    integrated over ``V ~ U[-1/2, 1/2)`` by the midpoint rule on ``points``
    points.  (The "scalar SDQ, same variance" column of docs/design.md, section 4.)
    """
    source = _check_source(source)
    ratio = check_positive("s_over_sigma", s_over_sigma)
    points = _check_count("points", points)
    v = (np.arange(points) + 0.5) / points - 0.5
    beta = np.full(points, math.sqrt(12.0))
    if source == "uniform":
        h = _ideal_z1_uniform(ratio, beta, v)
    else:
        h = _ideal_z1_gaussian(ratio, beta, v)
    return float(h.mean())


def spec_ideal_rate(source: str, s_over_sigma: float, lattice: str = "Z",
                    dim: int | None = None) -> float | None:
    """The ideal rate tabulated in docs/design.md, section 4 (Monte Carlo, +-0.03), or None if it gives none.

    Raises:
        InvalidTypeError: a ``source`` or ``lattice`` that is not a str, an
            ``s_over_sigma`` that is not a number or a ``dim`` that is not an int.
        InvalidArgumentError: an unknown source, or a non-positive
            ``s_over_sigma`` or ``dim``.
    """
    source = _check_source(source)
    ratio = check_positive("s_over_sigma", s_over_sigma)
    lattice = _check_lattice_name(lattice)
    dim = _default_dim(lattice) if dim is None else _check_count("dim", dim)
    if source == "gaussian":
        if (lattice, dim) != ("Z", 1):
            return None
        return DESIGN_IDEAL_GAUSSIAN_Z1.get(ratio)
    return DESIGN_IDEAL_UNIFORM.get((lattice, dim), {}).get(ratio)
