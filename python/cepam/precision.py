"""Whether an output dtype can hold a decoded update ``x + z``.

The decoder computes ``x + z`` in float64 and stores it in float32 or
float64.  A narrower output dtype rounds it again, and that rounding is
*added* to the mechanism's noise: in bfloat16 (8 significant bits) an update
of rms 1 is rounded by about 2e-3, twenty times a noise of sigma = 1e-4, and
most coordinates come back equal to ``x`` rounded.  Rounding is
post-processing, so privacy is unaffected, but the error is no longer the
noise law the payload declares.  Values beyond the dtype's range become
infinite.

:func:`check_output` estimates the rounding and refuses overflow.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._native import core as _core
from .errors import DecodingError, InvalidArgumentError, PrecisionWarning

__all__ = ["PRECISION_TOLERANCE", "check_output"]

#: Rounding error (rms) of the output dtype, as a fraction of the noise's
#: standard deviation, above which :func:`check_output` warns.  At 0.1 the
#: error's std grows by at most 0.5%.
PRECISION_TOLERANCE = 0.1


@dataclass(frozen=True)
class _Format:
    eps: float  # spacing of the floats in [1, 2)
    tiny: float  # spacing of the subnormals
    max: float  # largest finite value


_FORMATS = {
    "float16": _Format(2.0**-10, 2.0**-24, 65504.0),
    "bfloat16": _Format(2.0**-7, 2.0**-133, float.fromhex("0x1.fep127")),
    "float32": _Format(2.0**-23, 2.0**-149, float(np.finfo(np.float32).max)),
    "float64": _Format(2.0**-52, 2.0**-1074, float(np.finfo(np.float64).max)),
}


def largest(dtype: str) -> float:
    """The largest finite value of an output dtype."""
    return _FORMATS[dtype].max


def rounding_rms(rms: float, dtype: str) -> float:
    """Estimated rms error of rounding values of rms ``rms`` to ``dtype``
    (uniform rounding error of one spacing, spacing about ``eps |y|``)."""
    f = _FORMATS[dtype]
    return math.hypot(f.eps * rms, f.tiny) / math.sqrt(12.0)


def check_output(values: np.ndarray, dtype: str, *, noise_std: float, where: str,
                 threads: int = 1) -> None:
    """Checks that ``dtype`` can hold ``values`` (one decoded entry, float32 or
    float64, contiguous, before any cast to ``dtype``).

    Args:
        values: the decoded coordinates of one entry.
        dtype: the dtype they are returned in: "float16", "bfloat16",
            "float32" or "float64".
        noise_std: the mechanism's noise standard deviation per coordinate.
        where: the entry's description, for messages.
        threads: native threads for the values' sum of squares.

    Raises:
        DecodingError: a value is infinite or beyond the dtype's range.

    Warns:
        PrecisionWarning: the dtype's rounding error (estimated from the
            values' rms) exceeds :data:`PRECISION_TOLERANCE` of ``noise_std``.
    """
    if dtype not in _FORMATS:
        raise InvalidArgumentError(f"unknown output dtype {dtype!r}")
    if values.size == 0:
        return
    try:
        # float64, raises on NaN and Inf
        sumsq = _core.sum_of_squares(values, False, threads)  # (x, fixed_order, threads)
    except InvalidArgumentError:
        raise overflow_error(values.dtype.name, noise_std=noise_std, where=where) from None
    decoded = "float32" if values.dtype == np.float32 else values.dtype.name  # (.name is slow)
    if dtype == decoded and sumsq < math.inf and \
            rounding_rms(math.sqrt(sumsq / values.size), dtype) <= PRECISION_TOLERANCE * noise_std:
        return  # (judge_output's verdict, in its common case: nothing to say)
    judge_output(sumsq, values.size, decoded, dtype, noise_std=noise_std, where=where,
                 peak=lambda: max(float(values.max()), -float(values.min())),
                 scaled_mean_square=lambda peak: float(
                     np.mean(np.square(values / peak, dtype=np.float64))))


def overflow_error(values_dtype: str, *, noise_std: float, where: str) -> DecodingError:
    """The error for decoded values that are infinite or NaN in ``values_dtype``."""
    hint = "; decode with dtype='float64'" if values_dtype != "float64" else ""
    return DecodingError(f"{where}: the decoded values overflow {values_dtype} (noise std "
                         f"{noise_std:.3g}){hint}")


def judge_output(sumsq: float, size: int, values_dtype: str, dtype: str, *, noise_std: float,
                 where: str, peak: Callable[[], float],
                 scaled_mean_square: Callable[[float], float]) -> None:
    """check_output's verdict from the statistics of ``size`` finite decoded
    values held as ``values_dtype`` (numpy on the host, or a GPU tensor:
    cepam.cuda): their float64 sum of squares ``sumsq`` (inf when the
    squares overflow), and, asked only when needed, their largest magnitude
    ``peak()`` and the mean of their squares divided by peak^2.

    Raises and warns as :func:`check_output`."""
    narrower = _FORMATS[dtype].max < _FORMATS[values_dtype].max
    top = 0.0
    if narrower or not math.isfinite(sumsq):
        top = peak()
        if top > _FORMATS[dtype].max:
            raise DecodingError(
                f"{where}: decoded values up to {top:.3g} overflow {dtype} (largest "
                f"{_FORMATS[dtype].max:.3g}); decode with dtype='auto' or 'float64'")
    if math.isfinite(sumsq):
        rms = math.sqrt(sumsq / size)
    else:  # squares beyond float64 (values above 1e154): scale first
        rms = top * math.sqrt(scaled_mean_square(top))
    # (rms 0: the noise itself rounded to zeros, below the dtype's subnormals)
    error = rounding_rms(rms, dtype)
    if error > PRECISION_TOLERANCE * noise_std:
        wider = "dtype='float64'" if dtype == "float32" else "dtype='auto' (float32)"
        warnings.warn(
            f"{where}: {dtype} rounds values of rms {rms:.3g} by about {error:.3g}, "
            f"{error / noise_std if noise_std > 0 else math.inf:.2g} times the noise std {noise_std:.3g}, so the error "
            f"is no longer the mechanism's noise; decode with {wider}",
            PrecisionWarning, stacklevel=5)
