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
    """Return ``value`` as a float; reject bools, non-numbers and NaN."""
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
    """An int (numpy integers accepted) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
    out = int(value)
    if out < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {out}")
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
