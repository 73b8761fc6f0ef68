"""Argument checks shared by the public functions (each raises a cepam error)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["as_float", "check_real", "check_positive", "check_nonnegative", "check_clip",
           "check_flag", "check_choice", "check_int", "check_items"]


def _scalar(value: object) -> object:
    """A 0-d numpy array or torch tensor of real numbers as its Python
    number (``clip=torch.median(norms)``), anything else as it is."""
    if getattr(value, "ndim", None) == 0 and not isinstance(value, (numbers.Number, np.generic)):
        dtype = str(getattr(value, "dtype", ""))
        if ("float" in dtype or "int" in dtype) and "complex" not in dtype:
            return value.item()  # type: ignore[attr-defined]
    return value


def check_real(name: str, value: object) -> float:
    """``value`` as a float (NaN and infinities pass); a 0-d array or
    tensor of real numbers counts as its number.

    Raises:
        InvalidTypeError: it is not a real number (bools excluded).
        InvalidArgumentError: an int beyond float64's range.
    """
    # (a float skips the slower ABC check)
    if type(value) is not float:
        value = _scalar(value)
    if type(value) is not float and (isinstance(value, (bool, np.bool_))
                                     or not isinstance(value, numbers.Real)):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__}")
    return as_float(name, value)


def check_positive(name: str, value: object) -> float:
    """``value`` as a float; raises InvalidTypeError unless it is a real number
    (bools excluded) and InvalidArgumentError unless it is positive and finite."""
    value = check_real(name, value)
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidArgumentError(f"{name} must be a positive finite number, got {value!r}")
    return value


def check_nonnegative(name: str, value: object) -> float:
    """``value`` as a float; raises InvalidTypeError unless it is a real number
    (bools excluded) and InvalidArgumentError unless it is finite and >= 0."""
    value = check_real(name, value)
    if not (math.isfinite(value) and value >= 0.0):
        raise InvalidArgumentError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def as_float(name: str, value: numbers.Real) -> float:
    """``float(value)``; raises InvalidArgumentError where it is beyond
    float64 (an int above 1.8e308)."""
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{name} must be a finite number, got an int beyond "
                                   "float64's range") from None


def check_clip(clip: object) -> float:
    """An l2 clipping bound: a positive finite number (a 0-d array or
    tensor of one included), or None for no clipping (returned as inf)."""
    if clip is None:
        return math.inf
    if type(clip) is not float:
        clip = _scalar(clip)
    if type(clip) is not float and (isinstance(clip, (bool, np.bool_))
                                    or not isinstance(clip, numbers.Real)):
        raise InvalidTypeError(f"clip must be a number or None, got {type(clip).__name__}")
    clip = as_float("clip", clip)
    if not (math.isfinite(clip) and clip > 0.0):
        raise InvalidArgumentError(f"clip must be a positive finite number or None, got {clip}")
    return clip


def check_flag(name: str, value: object) -> bool:
    """``value``, which must be True or False (InvalidTypeError otherwise)."""
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, got {type(value).__name__}")
    return value


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """``value``, which must be one of the strings ``choices``.

    Raises:
        InvalidTypeError: it is not a str.
        InvalidArgumentError: it is not one of ``choices``.
    """
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be a str, one of {choices}, got "
                               f"{type(value).__name__}")
    if value not in choices:
        raise InvalidArgumentError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int (numpy integers count, bools do not), at least
    ``minimum`` and, unless ``maximum`` is None, at most ``maximum``.

    Raises:
        InvalidTypeError: it is not an integer.
        InvalidArgumentError: it is below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(f"{name} must be at most {maximum}, got {value}")
    return int(value)


def check_items(name: str, items: object, kind: type | tuple[type, ...], *,
                what: str | None = None) -> list:
    """``items`` as a list, each an instance of ``kind``; ``what`` names an
    item in the messages (default: ``kind``'s name).

    Raises:
        InvalidTypeError: ``items`` is not an iterable, or one of its items
            is not a ``kind``.
    """
    what = what or kind.__name__  # type: ignore[union-attr]
    try:
        out = list(items)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidTypeError(f"{name} must be an iterable of {what}s, got "
                               f"{type(items).__name__}") from None
    for i, item in enumerate(out):
        if not isinstance(item, kind):
            raise InvalidTypeError(f"{name}[{i}] must be a {what}, got {type(item).__name__}")
    return out
