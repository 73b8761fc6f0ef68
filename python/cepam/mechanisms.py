"""Noise laws that LRSUQ simulates exactly.

A mechanism names the law of the error ``decode(encode(x)) - x``:

* :class:`Gaussian` -- i.i.d. N(0, sigma^2) per coordinate, via the latent
  ``U ~ chi2(n + 2)`` and l2 balls of radius ``sigma * sqrt(U)``;
* :class:`Laplace` -- i.i.d. Laplace(0, b) per coordinate (density
  ``exp(-|z| / b) / (2 b)``), via ``U ~ Gamma(n + 1, 1)`` and l1 balls of
  radius ``b * U`` (an interval for n = 1, as in the paper).

Both are frozen dataclasses; the scale is in the units of the update.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import ClassVar, Union

import numpy as np

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Gaussian", "Laplace", "Mechanism"]


def _check_scale(name: str, value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise InvalidArgumentError(f"{name} must be a positive finite number, got {value!r}")
    return value


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise N(0, sigma^2) on every coordinate.

    Args:
        sigma: standard deviation of the noise, in the units of the update.

    Raises:
        InvalidArgumentError: if sigma is not positive and finite.
    """

    sigma: float
    code: ClassVar[int] = 1
    name: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _check_scale("sigma", self.sigma))

    @property
    def scale(self) -> float:
        return self.sigma

    @property
    def std(self) -> float:
        """Standard deviation of the noise per coordinate."""
        return self.sigma


@dataclass(frozen=True)
class Laplace:
    """Laplace noise with scale b on every coordinate (variance 2 b^2).

    Args:
        b: scale of the Laplace law, in the units of the update.

    Raises:
        InvalidArgumentError: if b is not positive and finite.
    """

    b: float
    code: ClassVar[int] = 2
    name: ClassVar[str] = "laplace"

    def __post_init__(self) -> None:
        object.__setattr__(self, "b", _check_scale("b", self.b))

    @property
    def scale(self) -> float:
        return self.b

    @property
    def std(self) -> float:
        """Standard deviation of the noise per coordinate."""
        return math.sqrt(2.0) * self.b


Mechanism = Union[Gaussian, Laplace]

_BY_CODE = {Gaussian.code: Gaussian, Laplace.code: Laplace}


def mechanism_from_code(code: int, scale: float) -> Mechanism:
    """Rebuilds a mechanism from its payload code and scale (KeyError if unknown)."""
    return _BY_CODE[code](scale)


def check_mechanism(mechanism: object) -> Mechanism:
    if not isinstance(mechanism, (Gaussian, Laplace)):
        raise InvalidTypeError(
            "mechanism must be cepam.Gaussian(sigma=...) or cepam.Laplace(b=...), "
            f"got {type(mechanism).__name__}"
        )
    return mechanism
