"""Argument checks shared by the public functions (each raises a cepam error)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["check_positive", "check_clip", "check_flag"]


def check_positive(name: str, value: object) -> float:
    """``value`` as a float; raises InvalidTypeError unless it is a real number
    (bools excluded) and InvalidArgumentError unless it is positive and finite."""
    # (a float skips the slower ABC check)
    if type(value) is not float and (isinstance(value, (bool, np.bool_))
                                     or not isinstance(value, numbers.Real)):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = _as_float(name, value)
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidArgumentError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _as_float(name: str, value: numbers.Real) -> float:
    """``float(value)``; raises InvalidArgumentError where it is beyond
    float64 (an int above 1.8e308)."""
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{name} must be a finite number, got an int beyond "
                                   "float64's range") from None


def check_clip(clip: object) -> float:
    """An l2 clipping bound: a positive finite number, or None for no clipping
    (returned as inf)."""
    if clip is None:
        return math.inf
    if type(clip) is not float and (isinstance(clip, (bool, np.bool_))
                                    or not isinstance(clip, numbers.Real)):
        raise InvalidTypeError(f"clip must be a number or None, got {type(clip).__name__}")
    clip = _as_float("clip", clip)
    if not (math.isfinite(clip) and clip > 0.0):
        raise InvalidArgumentError(f"clip must be a positive finite number or None, got {clip}")
    return clip


def check_flag(name: str, value: object) -> bool:
    """``value``, which must be True or False (InvalidTypeError otherwise)."""
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, got {type(value).__name__}")
    return value
