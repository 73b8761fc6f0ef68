"""Discrete privacy loss distributions (PLDs) and their composition.

A mechanism's pair of output laws ``(P, Q)`` on neighbours is summarised by
its privacy loss ``L = log(dP/dQ)`` under ``P``; ``delta(eps) = E[(1 -
e^{eps - L})_+] + P(L = +inf)``, and composing mechanisms adds independent
losses (Koskela, Jalko and Honkela 2020; Zhu, Dong and Wang 2022, "Optimal
accounting of differential privacy via characteristic function": composition
of *dominating pairs*, valid under adaptive composition).

:meth:`PrivacyLossDistribution.from_privacy_profile` turns a per-round privacy
profile (an upper bound on ``delta(eps)``, ``eps >= 0``, valid for every
ordered pair of neighbours under a *symmetric* neighbouring relation) into a
PLD whose own profile is at least that bound everywhere:

* the ``eps < 0`` side follows from symmetry, ``delta(-eps) = 1 - e^{-eps}
  + e^{-eps} delta(eps)``, so the round's tradeoff function is symmetric and
  one pair dominates every round whatever its direction (needed for the
  replace-one relation, where the worst pair can change from round to round);
* on the grid ``eps_k = k h``, ``|k| <= M``, the PLD is the *pessimistic
  connect-the-dots* discretisation (Doroshenko, Ghazi, Kamath, Kumar and
  Manurangsi 2022, Algorithm 1): its profile interpolates the grid values
  linearly in ``e^eps``, which lies above any convex profile through them;
  where the supplied values are not convex in ``e^eps`` (the paper's bound)
  their lower convex hull is used, which still dominates the true profile
  (the true profile is a convex minorant of the bound); values are first
  made non-increasing by a running minimum (the true profile is);
* ``delta(eps_M)`` goes to ``+inf`` loss.

Composition uses FFTs; tails of at most ``tail_mass_truncation`` are cut with
their mass sent to ``+inf`` (pessimistic), as in Google's ``dp_accounting``.

>>> from cepam.accounting.analytic_gaussian import gaussian_delta
>>> pld = PrivacyLossDistribution.from_privacy_profile(
...     lambda e: gaussian_delta(e, mu=0.5), discretization=1e-3, epsilon_max=40.0)
>>> round(pld.self_compose(16).get_epsilon_for_delta(1e-5), 3)   # = mu 2.0 Gaussian
9.997
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft

from ..errors import InvalidArgumentError
from . import _validation as _v
from .profile import PrivacyProfile

__all__ = ["PrivacyLossDistribution", "CompositionTooLarge", "MAX_COMPOSED_BINS",
           "profile_grid_deltas", "directed_grid_deltas"]

#: The most grid bins :meth:`PrivacyLossDistribution.self_compose` gives by
#: default (8 bytes each, and a few arrays of that size at once).
MAX_COMPOSED_BINS = 2**27

_HULL_TOL = 1e-13
#: self_compose's tilted FFT (_with_tilted_tail) spans the window and the
#: bins beyond it up to where at most e^_ALIAS_LOG_MASS of the tilted law is
#: left (a circular convolution wraps what lies beyond into the window); it
#: is skipped where that span exceeds _TILT_WINDOW times the window.
_ALIAS_LOG_MASS = -70.0
_TILT_WINDOW = 4.0


class CompositionTooLarge(InvalidArgumentError):
    """A self-composition would need more grid bins than allowed
    (``bins``, against ``limit``): a coarser discretization needs fewer, in
    proportion."""

    def __init__(self, *, bins: int, limit: int) -> None:
        super().__init__(f"composition needs {bins} bins, more than {limit}; increase the "
                         "discretization")
        self.bins = bins
        self.limit = limit


def _ctd_masses_symmetric(d: np.ndarray, h: float) -> np.ndarray | None:
    """Connect-the-dots masses on k = -M..M for the symmetric extension of
    ``d = delta(k h)``, k = 0..M (non-increasing); ``None`` if not convex.

    Written with ``e^{-h}`` so that a coarse grid (large h) cannot overflow.
    """
    m = len(d) - 1
    eh = math.exp(-h)
    one_m = -math.expm1(-h)  # 1 - e^{-h}
    diffs = np.diff(d)  # Delta d_k = d_k - d_{k-1}, k = 1..M  (<= 0)
    pos = np.empty(m)
    if m > 1:
        pos[:-1] = (eh * diffs[1:] - diffs[:-1]) / one_m
    pos[-1] = -diffs[-1] / one_m
    w0 = (1.0 - d[0]) + 2.0 * eh * diffs[0] / one_m
    scale = max(float(np.max(np.abs(diffs))) / one_m, 1e-300)
    if pos.min(initial=0.0) < -_HULL_TOL * scale or w0 < -_HULL_TOL:
        return None
    pos = np.maximum(pos, 0.0)
    neg = pos[::-1] * np.exp(-h * np.arange(m, 0, -1))
    return np.concatenate((neg, [max(w0, 0.0)], pos))


def _ctd_masses(d: np.ndarray, h: float, *, clip: bool = True) -> np.ndarray:
    """Connect-the-dots masses for deltas ``d`` on a contiguous grid (first
    point anchored to delta = 1 at e^eps = 0), as dp_accounting's
    ``create_pmf_pessimistic_connect_dots_fixed_gap``, without overflow;
    negative masses (``d`` not convex in e^eps) kept with ``clip=False``."""
    eh = math.exp(-h)
    one_m = -math.expm1(-h)
    diffs = np.diff(d)
    w = np.empty_like(d)
    w[0] = 1.0 - d[0] + eh * diffs[0] / one_m
    w[1:-1] = (eh * diffs[1:] - diffs[:-1]) / one_m
    w[-1] = -diffs[-1] / one_m
    return np.maximum(w, 0.0) if clip else w


def _lower_hull(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Values at ``x`` of the lower convex hull of the points ``(e^x, d)``
    (``d`` non-increasing).

    Points lying on or above the chord of their neighbours are never hull
    vertices, so they are dropped in vectorised passes until every remaining
    vertex is convex; a piecewise-linear function convex at every vertex is
    convex. Slopes are compared as logs, so ``e^x`` never overflows. Rounding
    can only drop a barely convex vertex, which raises the result (safe).
    """
    keep = np.arange(len(x))
    while keep.size > 2:
        a, b = keep[:-1], keep[1:]
        with np.errstate(divide="ignore"):
            log_slope = np.log(d[a] - d[b]) - (x[b] + np.log(-np.expm1(x[a] - x[b])))
        bad = log_slope[:-1] <= log_slope[1:]  # interior vertex keep[1:-1] not convex
        if not bad.any():
            break
        keep = np.concatenate((keep[:1], keep[1:-1][~bad], keep[-1:]))
    out = d.copy()
    seg = np.searchsorted(keep, np.arange(len(x)), side="right") - 1
    seg = np.clip(seg, 0, keep.size - 2)
    a, b = keep[seg], keep[seg + 1]
    inner = (np.arange(len(x)) > a) & (np.arange(len(x)) < b)
    xa, xb, xs = x[a[inner]], x[b[inner]], x[inner]
    # fraction (e^x - e^xa) / (e^xb - e^xa), written without overflow
    frac = (np.exp(xs - xb) - np.exp(xa - xb)) / (-np.expm1(xa - xb))
    out[inner] = d[a[inner]] - (d[a[inner]] - d[b[inner]]) * frac
    return out


def _profile_on_grid(profile: PrivacyProfile, h: float, emax: float) -> tuple[int, np.ndarray]:
    """(M, non-increasing deltas at eps = k h, k = 0..M) with M h >= emax."""
    m = max(1, math.ceil(emax / h - 1e-9))
    if m > 50_000_000:
        raise InvalidArgumentError(
            f"epsilon_max / discretization = {emax / h:.3g} grid points is too many")
    eps = h * np.arange(m + 1)
    return m, _v.bounding_deltas(profile(eps), eps)


def _full_grid_deltas(d: np.ndarray, h: float) -> np.ndarray:
    """Deltas on k = -M..M: symmetric extension of ``d`` (k >= 0), made convex
    in e^eps by the lower hull (a no-op, up to rounding, if it already is)."""
    m = len(d) - 1
    k = np.arange(1, m + 1)
    neg = -np.expm1(-k * h) + np.exp(-k * h) * d[1:]
    full = np.minimum.accumulate(np.concatenate((neg[::-1], d)))
    if _ctd_masses_symmetric(d, h) is None:
        full = _lower_hull(h * np.arange(-m, m + 1), full)
    return full


def directed_grid_deltas(profile: PrivacyProfile, *, discretization: float,
                         epsilon_max: float) -> tuple[int, np.ndarray]:
    """``(M, deltas at eps = k h, k = -M..M)`` of one *direction* of a
    mechanism (its ``eps -> H_{e^eps}(P || Q)`` for every real eps, as
    :mod:`.subsampled_gaussian` gives), made non-increasing and, if needed,
    convex in ``e^eps`` (lower hull): what
    :meth:`PrivacyLossDistribution.from_directed_profile` connects."""
    h = _v.positive("discretization", discretization)
    m = max(1, math.ceil(_v.positive("epsilon_max", epsilon_max) / h - 1e-9))
    if m > 50_000_000:
        raise InvalidArgumentError(
            f"epsilon_max / discretization = {epsilon_max / h:.3g} grid points is too many")
    x = h * np.arange(-m, m + 1)
    d = _v.bounding_deltas(profile(x), x)
    raw = _ctd_masses(d, h, clip=False)
    if raw.min() < -_HULL_TOL * max(float(np.abs(raw).max()), 1e-300):
        d = _lower_hull(x, d)
    return m, d


def profile_grid_deltas(profile: PrivacyProfile, *, discretization: float,
                        epsilon_max: float) -> tuple[int, np.ndarray]:
    """The deltas :meth:`PrivacyLossDistribution.from_privacy_profile` connects:
    ``(M, deltas at eps = k h for k = -M..M)`` after symmetric extension,
    running minimum and (if needed) lower convex hull. For other PLD
    libraries' connect-the-dots constructors (e.g. dp_accounting's
    ``create_pmf_pessimistic_connect_dots_fixed_gap``)."""
    h = _v.positive("discretization", discretization)
    m, d = _profile_on_grid(profile, h, _v.positive("epsilon_max", epsilon_max))
    return m, _full_grid_deltas(d, h)


def _with_tilted_tail(out: np.ndarray, y: np.ndarray, t: float, log_z: float, *, lo: int,
                      count: int) -> np.ndarray:
    """``out`` (``p^{*count}`` on bins ``lo, lo + 1, ...`` by one FFT) with
    its upper tail taken from ``y``, the same bins of ``q^{*count}`` for the
    exponentially tilted ``q_j = p_j e^{t j} / Z`` (``log_z = log Z``).

    An FFT's rounding error is about ``count`` units in the last place of
    its largest bin, in every bin: bins far in the upper tail (1e-11 of the
    peak after 10^4 rounds), on which small deltas rest, came out 10 % low
    and more (an eps below the true one at delta = 1e-12).  Since
    ``q^{*count}_k = p^{*count}_k e^{t k} / Z^count``, the tilted FFT has its
    largest bins near the upper end of the window (``t``: the Chernoff
    bound's), and undoing the tilt scales its error by ``Z^count e^{-t k}``,
    which falls with ``k``.  Each bin is taken from the pass whose error
    there is the smaller: the tilted one right of the bin where
    ``max(y) Z^count e^{-t k}`` falls below ``max(out)``."""
    top = float(out.max())
    if top <= 0.0 or not y.any():
        return out
    log_scale = count * log_z - t * (lo + np.arange(out.size))  # p^{*count} = y e^{log_scale}
    better = log_scale + math.log(float(y.max())) < math.log(top)
    with np.errstate(divide="ignore", over="ignore"):
        untilted = np.exp(np.log(y) + log_scale)
    return np.where(better, untilted, out)


class PrivacyLossDistribution:
    """A privacy loss distribution on the grid ``h * Z`` plus mass at ``+inf``.

    Construct with :meth:`from_privacy_profile` or :meth:`identity`; combine
    with :meth:`compose` / :meth:`self_compose`; query with
    :meth:`get_delta_for_epsilon` / :meth:`get_epsilon_for_delta`. Immutable.

    Attributes:
        discretization: grid step ``h`` (nats).
        lower_index: the first bin's loss is ``lower_index * h``.
        probs: masses of consecutive bins (read-only array).
        infinity_mass: mass of loss ``+inf``.

    Raises:
        InvalidArgumentError: ``discretization`` not positive and finite, or
            ``probs`` not a non-empty 1-d array of finite masses >= 0.
        InvalidTypeError: ``discretization`` not a number.
    """

    __slots__ = ("discretization", "lower_index", "probs", "infinity_mass")

    def __init__(self, *, discretization: float, lower_index: int, probs: np.ndarray,
                 infinity_mass: float) -> None:
        self.discretization = _v.positive("discretization", discretization)
        self.lower_index = int(lower_index)
        arr = np.array(probs, dtype=float)
        if arr.ndim != 1 or arr.size == 0 or np.any(~np.isfinite(arr)) or np.any(arr < 0):
            raise InvalidArgumentError("probs must be a non-empty 1-d array of finite masses >= 0")
        arr.setflags(write=False)
        self.probs = arr
        self.infinity_mass = float(min(max(infinity_mass, 0.0), 1.0))

    def __repr__(self) -> str:
        return (f"PrivacyLossDistribution(h={self.discretization:g}, losses "
                f"[{self.lower_index * self.discretization:g}, "
                f"{(self.lower_index + self.probs.size - 1) * self.discretization:g}], "
                f"infinity_mass={self.infinity_mass:.3g})")

    # ------------------------------------------------------------------ build
    @classmethod
    def identity(cls, *, discretization: float) -> "PrivacyLossDistribution":
        """The PLD of a mechanism that reveals nothing (loss 0 surely)."""
        return cls(discretization=discretization, lower_index=0, probs=np.ones(1),
                   infinity_mass=0.0)

    @classmethod
    def from_privacy_profile(cls, profile: PrivacyProfile, *, discretization: float,
                             epsilon_max: float) -> "PrivacyLossDistribution":
        """Pessimistic PLD of a symmetric mechanism with the given profile.

        Args:
            profile: vectorised ``eps -> delta`` upper bound for ``eps >= 0``,
                valid for every ordered pair of neighbours of a symmetric
                relation (see the module docstring).
            discretization: grid step ``h`` > 0.
            epsilon_max: largest grid loss (rounded up to a multiple of h);
                ``delta(epsilon_max)`` becomes the mass at ``+inf``.

        Raises:
            InvalidArgumentError: non-positive arguments, or a profile that
                returns values outside [0, 1] or NaN.
        """
        h = _v.positive("discretization", discretization)
        m, d = _profile_on_grid(profile, h, _v.positive("epsilon_max", epsilon_max))
        w = _ctd_masses_symmetric(d, h)
        if w is None:  # not convex in e^eps: use the lower convex hull of the full profile
            full = _full_grid_deltas(d, h)
            w = _ctd_masses(full, h)
            inf_mass = float(full[-1])
        else:
            inf_mass = float(d[-1])
        nz = np.flatnonzero(w)
        lo, hi = (int(nz[0]), int(nz[-1])) if nz.size else (m, m)
        return cls(discretization=h, lower_index=lo - m, probs=w[lo : hi + 1],
                   infinity_mass=inf_mass)

    @classmethod
    def from_directed_profile(cls, profile: PrivacyProfile, *, discretization: float,
                              epsilon_max: float) -> "PrivacyLossDistribution":
        """Pessimistic PLD of one direction ``(P, Q)`` of a mechanism.

        For relations whose two directions differ (add/remove), each
        direction is composed on its own and the larger delta counts
        (:class:`~cepam.accounting.PLDAccountant` does this).

        Args:
            profile: vectorised ``eps -> H_{e^eps}(P || Q)`` for every real eps
                (an upper bound on it; values in [0, 1]).
            discretization: grid step ``h`` > 0.
            epsilon_max: the grid spans losses ``[-epsilon_max, epsilon_max]``
                (rounded up to a multiple of h); lower losses are raised to the
                grid's lowest (pessimistic), ``delta(epsilon_max)`` becomes the
                mass at ``+inf``.

        Raises:
            InvalidArgumentError: non-positive arguments, or a profile that
                returns values outside [0, 1] or NaN.
        """
        h = _v.positive("discretization", discretization)
        m, d = directed_grid_deltas(profile, discretization=h, epsilon_max=epsilon_max)
        w = _ctd_masses(d, h)
        nz = np.flatnonzero(w)
        lo, hi = (int(nz[0]), int(nz[-1])) if nz.size else (m, m)
        return cls(discretization=h, lower_index=lo - m, probs=w[lo : hi + 1],
                   infinity_mass=float(d[-1]))

    # ---------------------------------------------------------------- compose
    def _check(self, other: "PrivacyLossDistribution") -> None:
        if not isinstance(other, PrivacyLossDistribution):
            from ..errors import InvalidTypeError

            raise InvalidTypeError("can only compose with another PrivacyLossDistribution")
        if not math.isclose(self.discretization, other.discretization, rel_tol=1e-12):
            raise InvalidArgumentError(
                f"discretizations differ ({self.discretization} vs {other.discretization})")

    def compose(self, other: "PrivacyLossDistribution", *,
                tail_mass_truncation: float = 1e-15) -> "PrivacyLossDistribution":
        """PLD of running both mechanisms (losses add).

        Tails of mass up to ``tail_mass_truncation / 2`` on each side are cut:
        the left one is moved to the lowest kept loss, the right one to +inf.

        Raises:
            InvalidArgumentError, InvalidTypeError: different grids, bad tol.
        """
        self._check(other)
        tol = _v.nonnegative("tail_mass_truncation", tail_mass_truncation)
        n = self.probs.size + other.probs.size - 1
        size = fft.next_fast_len(n, real=True)
        probs = fft.irfft(fft.rfft(self.probs, size) * fft.rfft(other.probs, size), size)[:n]
        probs = np.maximum(probs, 0.0)
        inf_mass = self.infinity_mass + other.infinity_mass - self.infinity_mass * other.infinity_mass
        csum = np.cumsum(probs)
        left = int(np.searchsorted(csum, tol / 2, side="right"))
        rsum = np.cumsum(probs[::-1])
        right = n - int(np.searchsorted(rsum, tol / 2, side="right"))
        left = min(left, n - 1)
        right = max(right, left + 1)
        kept = probs[left:right].copy()
        kept[0] += probs[:left].sum()
        inf_mass += probs[right:].sum()
        return PrivacyLossDistribution(discretization=self.discretization,
                                       lower_index=self.lower_index + other.lower_index + left,
                                       probs=kept, infinity_mass=inf_mass)

    def self_compose(self, count: int, *, tail_mass_truncation: float = 1e-15,
                     max_bins: int = MAX_COMPOSED_BINS) -> "PrivacyLossDistribution":
        """PLD of ``count`` independent runs (one FFT; the output window is
        chosen by Chernoff bounds so that at most ``tail_mass_truncation`` is
        left outside; that much is added to the mass at +inf).

        Args:
            count: the number of runs (>= 1).
            tail_mass_truncation: the mass the window may leave out (> 0).
            max_bins: the most grid bins the result may have (>= 1), which
                bounds the memory: about five arrays of that many float64
                values at once.

        Raises:
            CompositionTooLarge: the window needs more than ``max_bins`` bins.
            InvalidArgumentError: count < 1, bad tol or max_bins.
        """
        count = _v.integer("count", count)
        tol = _v.positive("tail_mass_truncation", tail_mass_truncation)
        max_bins = _v.integer("max_bins", max_bins)
        if count == 1:
            return self
        probs = self.probs
        size_in = probs.size
        lo, hi = 0, (size_in - 1) * count
        tilt = None  # _with_tilted_tail's (t, log Z, top bin of its FFT's span)
        total = probs.sum()
        if total > 0:
            idx = np.arange(size_in)
            with np.errstate(divide="ignore"):
                logp = np.log(probs)
            log_mgf = {}  # j -> log sum_i p_i e^{i j / size_in}
            for j in range(-20, 41):
                v = idx * (j / size_in) + logp
                top = float(np.max(v))
                log_mgf[j] = top + math.log(float(np.sum(np.exp(v - top))))
            best = None
            for j in (*range(-20, 0), *range(1, 21)):
                bound = (count * log_mgf[j] + math.log(2.0 / tol)) / (j / size_in)
                if not math.isfinite(bound):
                    continue
                if j > 0:
                    if bound < hi:
                        hi, best = math.ceil(bound), j
                else:
                    lo = max(lo, math.floor(bound))
            if best is not None:
                # The tilted law's own Chernoff bound: its FFT spans up to the
                # bin beyond which at most e^_ALIAS_LOG_MASS of it lies, so
                # that nothing wraps into the window.
                top_t = min((count * (log_mgf[best + j] - log_mgf[best]) - _ALIAS_LOG_MASS)
                            / (j / size_in) for j in range(1, 21))
                if math.isfinite(top_t) and top_t - lo < _TILT_WINDOW * (hi - lo + 1):
                    tilt = (best / size_in, log_mgf[best], math.ceil(top_t))
        # A law of little finite mass (most of it at +inf) can put both bounds
        # outside the support, or cross them: the window then holds the whole
        # support's part between them, at least one bin (a wider window only
        # leaves out less).
        hi = min(max(hi, 0), (size_in - 1) * count)
        lo = max(0, min(lo, hi))
        n_out = hi - lo + 1
        if n_out > max_bins:
            raise CompositionTooLarge(bins=n_out, limit=max_bins)

        def power(p: np.ndarray, top: int) -> np.ndarray:  # p^{*count}, bins lo .. lo + n_out
            size = fft.next_fast_len(max(top - lo + 1, size_in), real=True)
            return np.roll(fft.irfft(fft.rfft(p, size) ** count, size), -lo)[:n_out]

        out = np.maximum(power(probs, hi), 0.0)
        if tilt is not None and n_out > 1:
            t, log_z, top_t = tilt
            y = np.maximum(power(np.exp(idx * t + logp - log_z), top_t), 0.0)
            out = _with_tilted_tail(out, y, t, log_z, lo=lo, count=count)
        inf_mass = min(1.0, tol - math.expm1(count * math.log1p(-min(self.infinity_mass, 1.0)))
                       if self.infinity_mass < 1 else 1.0)
        return PrivacyLossDistribution(discretization=self.discretization,
                                       lower_index=self.lower_index * count + lo,
                                       probs=out, infinity_mass=inf_mass)

    # ------------------------------------------------------------------ query
    @property
    def losses(self) -> np.ndarray:
        """The grid losses of :attr:`probs` (nats)."""
        return (self.lower_index + np.arange(self.probs.size)) * self.discretization

    def get_delta_for_epsilon(self, epsilon: float | np.ndarray) -> float | np.ndarray:
        """``delta(eps) = P(L = inf) + sum_{l > eps} P(L = l) (1 - e^{eps - l})``.

        Raises:
            InvalidArgumentError: eps < 0 or NaN.
        """
        eps, scalar = _v.epsilons("epsilon", epsilon)
        losses = self.losses
        flat = eps.reshape(-1)
        out = np.empty(flat.shape)
        for i, e in enumerate(flat):
            sel = losses > e
            out[i] = self.infinity_mass + float(np.dot(-np.expm1(e - losses[sel]), self.probs[sel]))
        out = np.clip(out, 0.0, 1.0).reshape(eps.shape)
        return float(out) if scalar else out

    def get_epsilon_for_delta(self, delta: float) -> float:
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta``; ``math.inf`` when
        the mass at +inf alone exceeds ``delta``.

        Raises:
            InvalidArgumentError: delta outside (0, 1).
        """
        delta = _v.probability_open("delta", delta)
        if self.infinity_mass > delta:
            return math.inf
        losses = self.losses
        sel = losses > 0
        ls, ps = losses[sel], self.probs[sel]
        if ls.size == 0:
            return 0.0
        # Suffix sums over bins j..end: U_j = inf + sum p, logV_j = log sum p e^{-l}.
        upper = self.infinity_mass + np.cumsum(ps[::-1])[::-1]
        with np.errstate(divide="ignore"):
            terms = np.log(ps) - ls
        log_v = np.logaddexp.accumulate(terms[::-1])[::-1]
        # delta at eps = l_{j-1} (losses strictly above it are bins j..end)
        prev = np.concatenate(([0.0], ls[:-1]))
        d_at_prev = upper - np.exp(prev + log_v)
        ok = np.flatnonzero(d_at_prev <= delta)
        j = int(ok[0]) if ok.size else ls.size  # first left end with delta <= target
        if j == 0:
            return 0.0
        # eps in (l_{j-1}, l_j]: losses above eps are bins j..end of the j-1 suffix
        num = upper[j - 1] - delta
        if num <= 0:
            return float(prev[j - 1])
        eps = math.log(num) - float(log_v[j - 1])
        return float(min(max(eps, prev[j - 1]), ls[j - 1]))
