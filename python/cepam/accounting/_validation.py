"""Argument checks shared by the accounting modules (private).

Every check raises :class:`~cepam.errors.InvalidArgumentError` (a
``ValueError``) for a value outside its domain and
:class:`~cepam.errors.InvalidTypeError` (a ``TypeError``) for a value of the
wrong type, with a message that names the argument.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._checks import as_float
from ..errors import InvalidArgumentError, InvalidTypeError

__all__: list[str] = []


def real(name: str, value: object) -> float:
    """Return ``value`` as a float; reject bools, non-numbers, NaN and an int
    beyond float64's range (:func:`~cepam._checks.as_float`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name} must be a real number, got {value!r}")
    out = as_float(name, value)
    if math.isnan(out):
        raise InvalidArgumentError(f"{name} must not be NaN")
    return out


def positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    """A real number > 0 (finite unless ``allow_inf``)."""
    out = real(name, value)
    if not out > 0:
        raise InvalidArgumentError(f"{name} must be > 0, got {out!r}")
    if math.isinf(out) and not allow_inf:
        raise InvalidArgumentError(f"{name} must be finite, got {out!r}")
    return out


def nonnegative(name: str, value: object) -> float:
    """A finite real number >= 0."""
    out = real(name, value)
    if not (out >= 0 and math.isfinite(out)):
        raise InvalidArgumentError(f"{name} must be finite and >= 0, got {out!r}")
    return out


def probability_open(name: str, value: object) -> float:
    """A real number in the open interval (0, 1), e.g. a target delta."""
    out = real(name, value)
    if not 0.0 < out < 1.0:
        raise InvalidArgumentError(f"{name} must lie in the open interval (0, 1), got {out!r}")
    return out


def integer(name: str, value: object, *, minimum: int = 1) -> int:
    """An int (numpy integers accepted) >= ``minimum`` and within float64's
    range: the accounting's formulas take it as a float, so a larger one
    (above about 1.8e308) is refused here rather than overflow there."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
    out = int(value)
    if out < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {out}")
    as_float(name, out)  # InvalidArgumentError beyond float64's range
    return out


def epsilons(name: str, value: object) -> tuple[np.ndarray, bool]:
    """A scalar or array of finite-or-+inf reals >= 0; returns (array, was_scalar)."""
    if isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be a real number or an array of them")
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"{name} must be a real number or an array of them, got {value!r}")
    arr = arr.astype(float)
    if np.any(np.isnan(arr)) or np.any(arr < 0):
        raise InvalidArgumentError(f"{name} must be >= 0 (and not NaN), got {value!r}")
    return arr, arr.ndim == 0


#: How far a privacy profile's delta may rise between two eps (absolute) and
#: still be taken for rounding; the [0, 1] range gets the same slack.
PROFILE_TOLERANCE = 1e-12


def profile_deltas(values: object, epsilon: np.ndarray, *,
                   non_increasing: bool = False) -> np.ndarray:
    """What a privacy profile returned at ``epsilon``, as a float array of
    ``epsilon``'s shape, after checking that it is one: deltas in [0, 1] and,
    with ``non_increasing``, never rising with eps (as a privacy profile
    ``delta(eps)`` never does), each up to :data:`PROFILE_TOLERANCE` of
    rounding.  (cepam's own bounds are not all monotone, e.g. the paper's;
    the accountant takes their running minimum, which is still a bound.  A
    profile a caller writes, :class:`~.events.ProfileEvent`, is held to
    ``non_increasing``: one that rises is a mistake, and its running minimum
    would hide it.)

    Raises:
        InvalidTypeError: ``values`` is not a real number or an array of them
            (None, strings, objects).
        InvalidArgumentError: its shape is not ``epsilon``'s, a value is NaN
            or outside [0, 1], or (``non_increasing``) a delta rises with eps.
    """
    arr = values if type(values) is np.ndarray else np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"the privacy profile must return an array of deltas (real "
                               f"numbers), got {type(values).__name__} of dtype {arr.dtype}")
    d = arr.astype(float, copy=False)
    eps = np.asarray(epsilon, dtype=float)
    if d.shape != eps.shape:
        raise InvalidArgumentError(f"the privacy profile must return one delta per eps, of "
                                   f"shape {eps.shape}, got shape {d.shape}")
    tol = PROFILE_TOLERANCE
    if np.any(np.isnan(d)) or np.any(d < -tol) or np.any(d > 1 + tol):
        raise InvalidArgumentError("the privacy profile must return deltas in [0, 1]")
    if non_increasing and d.size > 1:
        flat, e = d.reshape(-1), eps.reshape(-1)
        if np.any(np.diff(e) < 0):
            order = np.argsort(e, kind="stable")
            flat, e = flat[order], e[order]
        worst = float(np.diff(flat).max())
        if worst > tol:
            raise InvalidArgumentError(
                f"the privacy profile must return deltas that never rise with eps (delta(eps) "
                f"is non-increasing), got a rise of {worst:.3g}")
    return d


def bounding_deltas(values: object, epsilon: np.ndarray) -> np.ndarray:
    """:func:`profile_deltas` of a profile at the rising grid ``epsilon``,
    clipped to [0, 1] and made non-increasing (its running minimum, still a
    bound): the deltas the accountant composes.

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`profile_deltas`.
    """
    return np.minimum.accumulate(np.clip(profile_deltas(values, epsilon), 0.0, 1.0))
