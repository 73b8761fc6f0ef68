"""``buffers="separate"``: how the clip is shared between a model's weights
and its running statistics (BatchNorm's ``running_mean`` and
``running_var``, :func:`cepam.structure.is_buffer`) when an update is over
the clip, so that statistics that change far more than the weights cannot
shrink the weights' update (:func:`_clip_buffers_apart`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ._native import core as _core
from .structure import DICT, Structure, is_buffer

__all__ = ["WEIGHT_FLOOR", "_clip_buffers_apart"]


#: buffers="separate": the share of the clip the weights keep, whatever the
#: running statistics' size, up to their own norm (see _clip_buffers_apart).
#: In l2 a small cut frees much: weights kept at 0.95 of the clip leave the
#: statistics sqrt(1 - 0.95^2) = 0.31 of it (more where the weights' norm is
#: below the floor: sqrt(1 - 0.5^2) = 0.87 of it for weights at half the
#: clip).  (The earlier 0.5 halved the weights' step whenever the statistics
#: were large, as they are in a BatchNorm model's first rounds, and the
#: server's model learnt slower than with the parameters alone:
#: docs/EXPERIMENTS.md, "BatchNorm: what to send".)
WEIGHT_FLOOR = 0.95


#: The weights' sum of squares is the whole's less the statistics'; where
#: that difference is below this fraction of the whole (statistics 1,000
#: times the weights' norm or more), rounding dominates it and the weights
#: are summed themselves.
_CANCELLED = 2.0**-20


def _clip_buffers_apart(host: Callable[[], np.ndarray], structure: Structure, clip: float,
                        sumsq: float) -> np.ndarray | None:
    """``buffers="separate"``: one clip for the whole update, as always,
    except that the running statistics (:func:`is_buffer`) of a mapping may
    not push the weights' l2 norm below ``WEIGHT_FLOOR * clip``.

    ``host()`` gives the flattened update in host memory (called only when
    the statistics are clipped apart); ``sumsq`` is the whole update's sum
    of squares; only the statistics (a few values a channel) are summed
    again here, the weights' share is the rest (unless the statistics
    dwarf the weights: _CANCELLED).  Where the update is within the clip,
    or the joint clip leaves the weights at least the floor, None: nothing
    to do (the one clip then applies as always).  Otherwise the weights are
    clipped to ``min(|w|, WEIGHT_FLOOR * clip)`` and the statistics to what the clip
    leaves, ``sqrt(clip^2 - |w'|^2)``, so the whole stays within ``clip``
    (up to rounding, which the one clip then absorbs) and every guarantee
    stated for ``clip`` holds."""
    if structure.container != DICT or sumsq <= clip * clip:
        return None
    groups: tuple[list[slice], list[slice]] = ([], [])
    start = 0
    for entry in structure.entries:
        groups[is_buffer(entry.name)].append(slice(start, start + entry.size))
        start += entry.size
    if not groups[0] or not groups[1]:
        return None
    flat = host()
    buffers_sq = sum(_core.sum_of_squares(flat[part]) for part in groups[1])
    weights_sq = sumsq - buffers_sq
    if weights_sq < sumsq * _CANCELLED:  # the difference is mostly rounding: sum them too
        weights_sq = sum(_core.sum_of_squares(flat[part]) for part in groups[0])
    weights, buffers = math.sqrt(weights_sq), math.sqrt(buffers_sq)
    floor = WEIGHT_FLOOR * clip
    if weights == 0.0 or clip / math.sqrt(sumsq) * weights >= floor:
        return None
    kept = min(weights, floor)
    weight_factor = kept / weights
    buffer_factor = min(1.0, math.sqrt(clip * clip - kept * kept) / buffers)
    flat = flat.copy()  # never the caller's memory
    for group, factor in zip(groups, (weight_factor, buffer_factor)):
        if factor != 1.0:
            for part in group:
                flat[part] *= flat.dtype.type(factor)
    return flat
