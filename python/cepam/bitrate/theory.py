"""Information theory of the bitrate benchmark: the bound, the lattices'
geometry and the high-resolution gap (the ideal rates are
:mod:`cepam.bitrate.ideal`'s).

Everything is in **bits per coordinate**.  The noise is Gaussian with standard
deviation ``sigma`` (the benchmark uses ``sigma = 1``); rates depend on the
source scale ``s`` only through ``s / sigma``.  Two sources, i.i.d. per
coordinate:

* ``"gaussian"``: ``x ~ N(0, s^2)`` (``s`` is the standard deviation);
* ``"uniform"``: ``x ~ Uniform[-s, s]`` (``s`` is the half-width ``A`` of
  the rates table of docs/design.md (section 4), so ``s / sigma`` is its ``A / sigma``; the standard
  deviation is ``s / sqrt(3)``).

What is computed here:

* :func:`mutual_information`: ``I(X; X + Z)``, ``Z ~ N(0, sigma^2)``, the
  lower bound on any scheme whose decoded error is that noise: closed form for
  the Gaussian source, numerical integration of the output density for the
  uniform one.
* :func:`high_resolution_gap`: the limit of ``ideal - I`` for ``s >> sigma``,
  in closed form from the packing density (the lattices' geometry comes from
  :mod:`cepam.lattices`).

numpy and scipy (imported when a function needs it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._checks import check_positive
from ..errors import InvalidArgumentError, InvalidTypeError
from ..lattices import LATTICE_TABLE

__all__ = [
    "SOURCES",
    "S_OVER_SIGMA",
    "DESIGN_IDEAL_UNIFORM",
    "DESIGN_IDEAL_GAUSSIAN_Z1",
    "DESIGN_MUTUAL_INFORMATION_UNIFORM",
    "mutual_information",
    "packing_density",
    "geometric_entropy",
    "high_resolution_gap",
]

SOURCES = ("gaussian", "uniform")
S_OVER_SIGMA = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
_LOG2E = 1.0 / math.log(2.0)
_H_GAUSS_BITS = 0.5 * math.log2(2.0 * math.pi * math.e)  # h(N(0, 1)) in bits

# docs/design.md, section 4 (Monte Carlo, +-0.03): ideal rate, uniform source, by A/sigma.
DESIGN_IDEAL_UNIFORM: dict[tuple[str, int], dict[float, float]] = {
    ("Z", 1): {0.1: 0.058, 1.0: 0.560, 10.0: 2.911, 100.0: 6.129},
    ("Z", 2): {0.1: 0.50, 1.0: 0.83, 10.0: 3.11, 100.0: 6.33},
    ("A2", 2): {0.1: 0.25, 1.0: 0.66, 10.0: 2.99, 100.0: 6.21},
    ("Z", 3): {0.1: 0.63, 1.0: 0.86, 10.0: 3.07, 100.0: 6.28},
    ("D4", 4): {0.1: 0.40, 1.0: 0.64, 10.0: 2.91, 100.0: 6.13},
    ("E8", 8): {0.1: 0.40, 1.0: 0.55, 10.0: 2.76, 100.0: 5.97},
}
DESIGN_IDEAL_GAUSSIAN_Z1 = {1.0: 0.965, 10.0: 3.853, 100.0: 7.168}
DESIGN_MUTUAL_INFORMATION_UNIFORM = {0.1: 0.002, 1.0: 0.207, 10.0: 2.405, 100.0: 5.610}
DESIGN_SCALAR_SDQ_UNIFORM = {0.1: 0.042, 1.0: 0.416, 10.0: 2.654, 100.0: 5.864}
DESIGN_HIGH_RESOLUTION_GAP = {("Z", 1): 0.521, ("Z", 2): 0.720, ("A2", 2): 0.592,
                            ("Z", 3): 0.675, ("D4", 4): 0.521, ("E8", 8): 0.363}


# ---------------------------------------------------------------------------
# Argument checks


def _check_source(source: object) -> str:
    if not isinstance(source, str):
        raise InvalidTypeError(f"source must be a str, one of {SOURCES}, got {source!r}")
    if source not in SOURCES:
        raise InvalidArgumentError(f"source must be one of {SOURCES}, got {source!r}")
    return source


def _check_lattice_name(lattice: object) -> str:
    """``lattice`` if it is a str (whether the lattice exists, in that
    dimension, :func:`_geometry` says); InvalidTypeError otherwise."""
    if not isinstance(lattice, str):
        raise InvalidTypeError(f"lattice must be a str (a lattice's name), got "
                               f"{type(lattice).__name__}")
    return lattice


def _check_count(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


# ---------------------------------------------------------------------------
# Mutual information


def _uniform_output_entropy_bits(a: float) -> float:
    """h(X + Z) in bits, X ~ U[-a, a], Z ~ N(0, 1), by adaptive quadrature.

    The output density is ``f(y) = (Phi(y + a) - Phi(y - a)) / (2a)``, even in
    y; it is computed as a difference of upper tails for y > 0 (no
    cancellation) and integrated on [0, a + 12] (beyond, f < 1e-33 / a).  In
    the flat middle (|y| < a - 12, where f = 1 / (2a) to 1e-33) the integral
    is analytic.
    """
    from scipy import integrate
    from scipy.special import log_ndtr, ndtr

    def neg_f_log2_f(y: float) -> float:
        # Phi(y + a) - Phi(y - a) = Q(y - a) - Q(y + a), Q the upper tail.
        hi, lo = ndtr(a - y), ndtr(-a - y)
        diff = hi - lo
        if diff <= 0.0:
            return 0.0
        if lo > 0.0 and lo / hi > 1e-3:
            log_diff = math.log(diff)
        else:
            log_diff = float(log_ndtr(a - y)) + math.log1p(-lo / hi)
        f_over = diff / (2.0 * a)
        return -f_over * (log_diff - math.log(2.0 * a)) * _LOG2E

    tail = 12.0
    total = 0.0
    start = 0.0
    if a > tail:
        start = a - tail
        total += start / (2.0 * a) * math.log2(2.0 * a)  # flat part [0, a - 12]
    points = sorted({start, max(start, a - 4.0), a, a + 4.0, a + tail})
    for lo_, hi_ in zip(points[:-1], points[1:]):
        value, _ = integrate.quad(neg_f_log2_f, lo_, hi_, limit=200, epsabs=1e-12, epsrel=1e-10)
        total += value
    return 2.0 * total


def mutual_information(source: str, s_over_sigma: float) -> float:
    """``I(X; X + Z)`` in bits per coordinate, ``Z ~ N(0, sigma^2)``.

    Args:
        source: ``"gaussian"`` (``X ~ N(0, s^2)``: ``0.5 log2(1 + s^2 / sigma^2)``)
            or ``"uniform"`` (``X ~ U[-s, s]``: ``h(X + Z) - h(Z)`` with the
            output density integrated numerically, accurate to 1e-6).
        s_over_sigma: the source scale over the noise standard deviation.

    Returns:
        The mutual information in bits.
    """
    source = _check_source(source)
    ratio = check_positive("s_over_sigma", s_over_sigma)
    if source == "gaussian":
        return 0.5 * math.log2(1.0 + ratio * ratio)
    if ratio < 1e-3:  # I = 0.5 log2(1 + A^2 / 3) + O(A^4): below the quadrature's resolution
        return 0.5 * math.log2(1.0 + ratio * ratio / 3.0)
    return max(0.0, _uniform_output_entropy_bits(ratio) - _H_GAUSS_BITS)


# ---------------------------------------------------------------------------
# Lattice geometry (for the ideal rate; independent of the codec's lattices)


@dataclass(frozen=True)
class _Geometry:
    name: str
    dim: int
    basis: np.ndarray  # columns are basis vectors
    rho: float  # packing radius
    covolume: float
    dual_minimum: float  # length of the shortest non-zero vector of the dual lattice

    @property
    def density(self) -> float:
        n = self.dim
        return _ball_volume(n, self.rho) / self.covolume


def _ball_volume(n: int, radius: float = 1.0) -> float:
    return math.pi ** (n / 2.0) / math.gamma(n / 2.0 + 1.0) * radius ** n


def _geometry(lattice: str, dim: int) -> _Geometry:
    row = LATTICE_TABLE.get(lattice)
    if row is None or dim not in row.dims:
        if lattice == "Z":
            raise InvalidArgumentError(f"dim must be between 1 and 8 for lattice 'Z', got {dim}")
        raise InvalidArgumentError(
            f"unknown lattice {lattice!r} in dimension {dim} (Z^1..Z^8, A2 (2), D4 (4), E8 (8))"
        )
    # The core's basis (rows = basis vectors), as columns.
    basis = np.array(row.bases[dim], dtype=np.float64).reshape(dim, dim).T
    return _Geometry(lattice, dim, basis, row.packing_radius, row.covolume, row.dual_minimum)


def _default_dim(lattice: str) -> int:
    row = LATTICE_TABLE.get(lattice)
    return 1 if row is None else row.dims[0]


def packing_density(lattice: str, dim: int | None = None) -> float:
    """Packing density of the lattice: LRSUQ's acceptance probability per trial.

    Z^n: ``V_n / 2^n``; A2 ``pi / (2 sqrt 3)``; D4 ``pi^2 / 16``; E8 ``pi^4 / 384``.

    Raises:
        InvalidTypeError: ``lattice`` is not a str, or ``dim`` not an int.
        InvalidArgumentError: an unknown lattice, or one not in dimension ``dim``.
    """
    lattice = _check_lattice_name(lattice)
    dim = _default_dim(lattice) if dim is None else _check_count("dim", dim)
    return _geometry(lattice, dim).density


def geometric_entropy(p: float) -> float:
    """Entropy in bits of ``H ~ Geometric(p)`` on {1, 2, ...}: ``h2(p) / p``."""
    p = check_positive("p", p)
    if p > 1.0:
        raise InvalidArgumentError(f"p must be at most 1, got {p}")
    if p == 1.0:
        return 0.0
    return (-(1.0 - p) * math.log2(1.0 - p) - p * math.log2(p)) / p


def high_resolution_gap(lattice: str, dim: int | None = None) -> float:
    """Limit of ``ideal_rate - I(X; X + Z)`` as ``s / sigma -> infinity``, bits/coordinate.

    In high resolution ``H(M | U, V_H) = h(X) - E log2 vol(beta V)``, and the
    cell volume is ``vol(ball of radius r(U)) / p``, so the gap per coordinate is
    ``[H(Geometric(p)) + log2 p + h(Z) - E log2 vol(B_r(U))] / n`` with
    ``r(U) = sigma sqrt(U)``, ``U ~ chi2(n + 2)``: it depends on the lattice
    through its packing density ``p`` only.  (docs/design.md, section 4: Z 0.521, Z^2 0.720,
    A2 0.592, Z^3 0.675, D4 0.521, E8 0.363.)

    Raises:
        InvalidTypeError: ``lattice`` is not a str, or ``dim`` not an int.
        InvalidArgumentError: an unknown lattice, or one not in dimension ``dim``.
    """
    from scipy.special import digamma

    lattice = _check_lattice_name(lattice)
    dim = _default_dim(lattice) if dim is None else _check_count("dim", dim)
    n = dim
    p = packing_density(lattice, n)
    h_geometric_plus_log_p = geometric_entropy(p) + math.log2(p)
    e_log2_u = (float(digamma(n / 2.0 + 1.0)) + math.log(2.0)) * _LOG2E
    e_log2_ball = math.log2(_ball_volume(n)) + 0.5 * n * e_log2_u
    return (h_geometric_plus_log_p + n * _H_GAUSS_BITS - e_log2_ball) / n
