"""Noise laws that LRSUQ simulates exactly.

A mechanism names the law of the error ``decode(encode(x)) - x``:

* :class:`Gaussian` -- i.i.d. N(0, sigma^2) per coordinate, via the latent
  ``U ~ chi2(n + 2)`` and l2 balls of radius ``sigma * sqrt(U)``;
* :class:`Laplace` -- i.i.d. Laplace(0, b) per coordinate (density
  ``exp(-|z| / b) / (2 b)``), via ``U ~ Gamma(n + 1, 1)`` and l1 balls of
  radius ``b * U`` (an interval for n = 1, as in the paper);
* :class:`SDQ` -- scalar subtractive dithered quantization with step
  ``Delta``: the error is Uniform[-Delta/2, Delta/2), variance Delta^2 / 12.
  A baseline, not a differential-privacy mechanism (docs/design.md, section 7).

Both are frozen dataclasses; the scale is in the units of the update.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Union

from ._checks import check_positive
from .errors import InvalidTypeError

__all__ = ["Gaussian", "Laplace", "SDQ", "Mechanism"]


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
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))

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
        object.__setattr__(self, "b", check_positive("b", self.b))

    @property
    def scale(self) -> float:
        return self.b

    @property
    def std(self) -> float:
        """Standard deviation of the noise per coordinate."""
        return math.sqrt(2.0) * self.b


@dataclass(frozen=True)
class SDQ:
    """Scalar subtractive dithered quantization with step ``step``.

    ``y = step (round(x / step - v) + v)`` with ``v ~ Uniform[-1/2, 1/2)``
    from the shared stream: LRSUQ with a fixed scale.  The error is uniform
    on [-step/2, step/2), independent of x; it gives no differential privacy
    by itself.  Only ``dim=1``.

    Raises:
        InvalidArgumentError: if step is not positive and finite.
    """

    step: float
    code: ClassVar[int] = 3
    name: ClassVar[str] = "sdq"

    def __post_init__(self) -> None:
        object.__setattr__(self, "step", check_positive("step", self.step))

    @property
    def scale(self) -> float:
        return self.step

    @property
    def std(self) -> float:
        """Standard deviation of the quantization error per coordinate."""
        return self.step / math.sqrt(12.0)

    @classmethod
    def matching(cls, std: float) -> "SDQ":
        """The SDQ whose error has standard deviation ``std`` (step = std sqrt(12))."""
        return cls(step=check_positive("std", std) * math.sqrt(12.0))


Mechanism = Union[Gaussian, Laplace, SDQ]

_BY_CODE = {Gaussian.code: Gaussian, Laplace.code: Laplace, SDQ.code: SDQ}


def mechanism_from_code(code: int, scale: float) -> Mechanism:
    """Rebuilds a mechanism from its payload code and scale (KeyError if unknown)."""
    return _BY_CODE[code](scale)


def check_mechanism(mechanism: object) -> Mechanism:
    if not isinstance(mechanism, (Gaussian, Laplace, SDQ)):
        raise InvalidTypeError(
            "mechanism must be cepam.Gaussian(sigma=...), cepam.Laplace(b=...) or "
            "cepam.SDQ(step=...), "
            f"got {type(mechanism).__name__}"
        )
    return mechanism
