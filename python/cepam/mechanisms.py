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

All are frozen dataclasses; the scale is in the units of the update.  Each
class carries its own facts as class attributes, read by the rest of the
package instead of tables keyed by code: ``code`` (its payload code, read
from the core's mechanism table), ``name``, ``noise_bound`` (the largest ``|decoded - x|`` per coordinate, in
units of the scale), ``entropy_excess`` and ``pad_slack`` (bits per
coordinate that ``pad="max"`` adds).  :data:`MECHANISM_CLASSES` lists them;
the core's mechanism table (``_core.MECHANISMS``, csrc/lrsuq/latent.hpp) has
a row for each, and the import checks that it has no other.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Union

from ._checks import check_positive
from ._native import core as _core
from .errors import InvalidTypeError

__all__ = ["Gaussian", "Laplace", "SDQ", "Mechanism", "MECHANISM_CLASSES", "MECHANISM_CODES",
           "mechanism_from_code", "check_mechanism", "check_core_table", "core_params"]



def _core_code(name: str) -> int:
    """The payload code of the mechanism ``name`` in the core's mechanism
    table (``_core.MECHANISMS``, names compared case aside): each code is
    written once, in C++.

    Raises:
        ImportError: the core has no such mechanism.
    """
    for row in _core.MECHANISMS:
        if row["name"].lower() == name:
            return int(row["code"])
    raise ImportError(f"the native core has no mechanism {name!r} (csrc/lrsuq/latent.hpp)")


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise N(0, sigma^2) on every coordinate.

    Args:
        sigma: standard deviation of the noise, in the units of the update.

    Raises:
        InvalidArgumentError: if sigma is not positive and finite.
    """

    sigma: float
    name: ClassVar[str] = "gaussian"
    code: ClassVar[int] = _core_code(name)
    #: The error ``decoded - clipped x`` per coordinate is at most, in absolute
    #: value, the accepted trial's
    #: ball radius sigma sqrt(U), U <= 10 * 53 ln 2 = 367.4 (n <= 8: at most
    #: five factors -2 log u, u >= 2^-53): below 19.2 sigma.
    noise_bound: ClassVar[float] = 20.0
    #: h(N(0, v)) - h(noise) in bits per coordinate, noise of variance v.
    entropy_excess: ClassVar[float] = 0.0
    #: Measured coder slack for this noise law, bits per coordinate (padding).
    pad_slack: ClassVar[float] = 0.0

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
    name: ClassVar[str] = "laplace"
    code: ClassVar[int] = _core_code(name)
    #: Ball radius b U with U <= 5 * 53 ln 2 = 183.7 (n <= 4), in units of b.
    noise_bound: ClassVar[float] = 184.0
    #: 0.5 log2(pi / e) bits per coordinate above Gaussian noise of the same variance.
    entropy_excess: ClassVar[float] = 0.5 * math.log2(math.pi / math.e)
    #: The coders fit Laplace-noised coordinates less tightly (measured),
    #: bits per coordinate.
    pad_slack: ClassVar[float] = 0.5

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

    Args:
        step: the quantizer's step Delta (> 0 and finite), in the units of the
            update.

    Raises:
        InvalidArgumentError: if step is not positive and finite.
    """

    step: float
    name: ClassVar[str] = "sdq"
    code: ClassVar[int] = _core_code(name)
    #: The error is at most step / 2.
    noise_bound: ClassVar[float] = 0.5
    #: 0.5 log2(pi e / 6) bits per coordinate above Gaussian noise of the same variance.
    entropy_excess: ClassVar[float] = 0.5 * math.log2(math.pi * math.e / 6.0)
    pad_slack: ClassVar[float] = 0.0

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

#: Every mechanism class, in code order: the one list to extend.
MECHANISM_CLASSES: tuple[type, ...] = (Gaussian, Laplace, SDQ)
#: The payload codes of the mechanisms.
MECHANISM_CODES: tuple[int, ...] = tuple(cls.code for cls in MECHANISM_CLASSES)
_BY_CODE = {cls.code: cls for cls in MECHANISM_CLASSES}


def check_core_table(rows: tuple[dict[str, Any], ...]) -> None:
    """Checks that the core's mechanism table ``rows`` (``_core.MECHANISMS``:
    dicts with ``code`` and ``name``) has one row for each of
    :data:`MECHANISM_CLASSES`, with its code and name (case aside), and no
    other.

    Raises:
        ImportError: they disagree (a mechanism added on one side only).
    """
    core = {row["code"]: row["name"].lower() for row in rows}
    ours = {cls.code: cls.name for cls in MECHANISM_CLASSES}
    if core != ours:
        raise ImportError(f"cepam's mechanism classes {ours} disagree with the native core's "
                          f"mechanism table {core} (csrc/lrsuq/latent.hpp)")


check_core_table(_core.MECHANISMS)


def core_params(mechanism: Mechanism, *, lattice: int, n: int) -> Any:
    """The core's parameters (``_core.Params``) for ``mechanism`` on the
    lattice of payload code ``lattice`` in sub-vector dimension ``n``: the one
    checked value the native entry points take.

    Raises:
        InvalidArgumentError: the core does not take the combination (the
            lattice's dimension, A2/D4/E8 Gaussian only, Laplace n <= 4, SDQ
            n = 1) or the scale is not positive and finite.
    """
    return _params(mechanism.code, mechanism.scale, lattice, n)


@functools.lru_cache(maxsize=64)
def _params(mechanism: int, scale: float, lattice: int, n: int) -> Any:
    # (read-only values: one per combination, kept across calls)
    return _core.Params(mechanism=mechanism, scale=scale, lattice=lattice, n=n)


@functools.lru_cache(maxsize=64)
def mechanism_from_code(code: int, scale: float) -> Mechanism:
    """Rebuilds a mechanism from its payload code and scale (KeyError if
    unknown); the same (frozen) object for the same values, kept across calls."""
    return _BY_CODE[code](scale)


def _spelled(cls: type) -> str:
    """How the public API builds ``cls``, e.g. ``cepam.Gaussian(sigma=...)``."""
    return f"cepam.{cls.__name__}({fields(cls)[0].name}=...)"


def check_mechanism(mechanism: object) -> Mechanism:
    """``mechanism`` if it is one of :data:`MECHANISM_CLASSES`.

    Raises:
        InvalidTypeError: it is not.
    """
    if not isinstance(mechanism, MECHANISM_CLASSES):
        spelled = [_spelled(cls) for cls in MECHANISM_CLASSES]
        raise InvalidTypeError(
            f"mechanism must be {', '.join(spelled[:-1])} or {spelled[-1]}, "
            f"got {type(mechanism).__name__}"
        )
    return mechanism
