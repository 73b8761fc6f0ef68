"""Decoded values are finite in their dtype: checked on encode and decode.

A finite but huge noise scale (``Gaussian(sigma=1e308)``) or a hostile
payload's lattice coordinates can make ``beta (M + V)`` overflow to +-inf,
and infinities fed into an aggregation poison it.  The encoder refuses
settings under which a decoded value could overflow; the decoder refuses a
payload whose decoded values do (:func:`cepam.precision.check_output`: a
payload with a valid tag can still come from a malicious client).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .errors import EncodingError
from .mechanisms import Mechanism
from .precision import largest
from .structure import Entry, Structure, output_dtype

__all__ = ["check_encodable_range"]


def _decoded(entry: Entry) -> str:
    """The dtype an entry decodes to by default (``decode``'s dtype="auto":
    float16 and bfloat16 widen to float32; dtype="input" casts back, and the
    decoder refuses values that overflow then, cepam.precision.check_output)."""
    return output_dtype(entry, dtype="auto", output="auto")


def _segments(flat: np.ndarray, structure: Structure):
    offset = 0
    for entry in structure.entries:
        yield entry, flat[offset : offset + entry.size]
        offset += entry.size


def _smallest_largest(structure: Structure) -> float:
    """The largest finite value of the narrowest dtype the entries decode to
    (one entry of each dtype: what decides their decoded dtypes)."""
    return min(largest(_decoded(e)) for e in {e.dtype: e for e in structure.entries}.values())


def check_encodable_range(flat: Callable[[], np.ndarray], structure: Structure, *,
                          norm: float, factor: float, mechanism: Mechanism) -> None:
    """Refuses an update whose decoded values could overflow their dtype.

    ``flat()`` gives the flattened update (called only when the clipped
    norm does not settle it: a GPU's update is then copied to the host);
    ``norm`` is the update's l2 norm and ``factor`` its clipping factor; the
    bound is the clipped norm (or, when that is too coarse, each entry's
    largest magnitude) plus ``mechanism.noise_bound * scale``
    (:mod:`cepam.mechanisms`: the largest ``|decoded - x|`` per coordinate).

    Raises:
        EncodingError: the noise scale (or the update) is too large.
    """
    bound = mechanism.noise_bound
    noise = bound * mechanism.scale
    smallest = structure.derived("smallest largest", _smallest_largest)
    # The lattice scale beta = radius / rho (rho >= 1/2) must be finite too.
    scale_ok = math.isfinite(2.0 * noise)
    if scale_ok and norm * factor + noise < smallest:
        return
    for entry, segment in _segments(flat(), structure):
        peak = float(np.max(np.abs(segment))) * factor if entry.size else 0.0
        decoded = _decoded(entry)
        if not (scale_ok and peak + noise < largest(decoded)):
            raise EncodingError(
                f"noise scale {mechanism.scale!r} is too large for this update: decoded "
                f"values (up to |x| + {bound:g} x scale) could overflow "
                f"{decoded} to infinity")
