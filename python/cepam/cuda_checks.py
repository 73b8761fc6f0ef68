"""The host's checks of what a GPU computed: a few sub-vectors of the
LRSUQ stage recomputed (:func:`check_stage`), one segment of a body coded
on the device coded again (:func:`check_segment`), and the range of values
decoded on the device (:func:`check_device_output`).  Part of
``cepam.cuda``, which exports these names."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ._native import core as _core
from .errors import CepamError, DeviceError, InvalidArgumentError
from .precision import judge_output, overflow_error

__all__ = ["SPOT_CHECKS", "spot_indices", "check_stage", "SEGMENT_COORDINATES",
           "segment_to_check", "segment_coordinates", "check_segment", "check_device_output"]


# --- the host's spot-check of a GPU's LRSUQ stage ------------------------------

SPOT_CHECKS = 16
"""Sub-vectors the host recomputes after every GPU encode (a few
microseconds each), to catch a GPU that computes wrong results."""


def spot_indices(key: bytes, N: int, *, count: int = SPOT_CHECKS) -> np.ndarray:
    """The sub-vectors (of N) to spot-check for the LRSUQ stream ``key``:
    the first, the last (padded when n does not divide m) and ``count - 2``
    drawn from a SHAKE-256 hash of the key, so each call checks others;
    sorted and distinct (uint64), all N of them when N <= count.

    Args:
        key: the LRSUQ stream key (32 bytes).
        N: the number of sub-vectors.
        count: how many to check (>= 2).

    Returns:
        The sub-vectors' indices, uint64, sorted and distinct.

    Raises:
        InvalidArgumentError: for a count below 2.
    """
    if count < 2:
        raise InvalidArgumentError(f"count must be at least 2, got {count}")
    if N <= count:
        return np.arange(N, dtype=np.uint64)
    digest = hashlib.shake_256(b"cepam/spot-check/v1" + key).digest(8 * (count - 2))
    drawn = np.frombuffer(digest, dtype="<u8") % np.uint64(N)
    return np.unique(np.concatenate([np.array([0, N - 1], np.uint64), drawn]))


def check_stage(stage: tuple[Any, Any, Any, Any], pieces: np.ndarray, indices: np.ndarray, *,
                m: int, key: bytes, params: Any, factor: float, aligned: bool = False) -> None:
    """Checks a device's LRSUQ stage (H[N], M[N n], beta[N], V[N n], host
    arrays) at sub-vectors ``indices`` against the host's computation of
    them (``_core.encode_subvectors_at``, the CPU codec's arithmetic, bit
    for bit); ``pieces``: those sub-vectors' coordinates (len(indices) n
    values, float32 or float64 as encoded, zeros past coordinate m).  With
    ``aligned``, ``stage`` holds only those sub-vectors, in the order of
    ``indices`` (what the GPU copies back when it keeps the stage).

    Args:
        stage: the device's ``(H, M, beta, V)``, host arrays.
        pieces: the checked sub-vectors' coordinates.
        indices: the checked sub-vectors (:func:`spot_indices`).
        m: the update's coordinates.
        key: the LRSUQ stream key.
        params: the core's ``_core.Params``.
        factor: the clip's scale factor.
        aligned: whether ``stage`` holds only the checked sub-vectors.

    Raises:
        DeviceError: a value differs, or the host cannot encode a sub-vector
            the device encoded; the message names the first such sub-vector.
    """
    H, M, beta, V = stage
    n = int(params.n)
    where = f"sub-vector {{}} of {len(H)} ({m} coordinates, n = {n})"
    try:
        h, mm, b, v = _core.encode_subvectors_at(pieces, np.asarray(indices, np.uint64), m=m,
                                                 key=key, params=params, factor=factor)
    except CepamError as e:
        raise DeviceError(f"the GPU encoded a sub-vector the host refuses ({e}): its "
                          "results cannot be trusted") from e
    M2, V2 = np.asarray(M).reshape(-1, n), np.asarray(V).reshape(-1, n)
    mm, v = mm.reshape(-1, n), v.reshape(-1, n)
    for i, at in enumerate(np.asarray(indices, np.int64)):
        j = i if aligned else at
        differ = [name for name, same in (
            ("H", int(H[j]) == int(h[i])), ("M", np.array_equal(M2[j], mm[i])),
            ("beta", np.asarray(beta[j : j + 1]).tobytes() == b[i : i + 1].tobytes()),
            ("V", V2[j].tobytes() == v[i].tobytes())) if not same]
        if differ:
            # Which fields, not their values: M and H come from the private update.
            raise DeviceError(
                f"the GPU's LRSUQ stage differs from the host's at {where.format(at)} "
                f"({', '.join(differ)}); its results cannot be trusted "
                "(python bench/gpu_check.py compares the two paths)")


SEGMENT_COORDINATES: int = _core.SEGMENT_COORDINATES
"""Coordinates in a segment of a payload body (at most: 2^17 // n sub-vectors;
``csrc/payload/segments.hpp``'s kSegmentCoordinates)."""


def segment_to_check(key: bytes, *, m: int, n: int) -> int:
    """The segment of a body (either coder) of m coordinates in dimension n
    that the host codes again after a GPU coded the body (:func:`check_segment`):
    drawn from a SHAKE-256 hash of the LRSUQ stream ``key``, so each call
    checks another; 0 for an empty update.

    Args:
        key: the LRSUQ stream key.
        m: the update's coordinates.
        n: the lattice's dimension.

    Returns:
        The segment's index (0 for an empty update).

    Raises:
        InvalidArgumentError, InvalidTypeError: m or n out of range.
    """
    N = -(-m // n)
    per = SEGMENT_COORDINATES // n
    segments = -(-N // per)
    if segments <= 1:
        return 0
    digest = hashlib.shake_256(b"cepam/segment-check/v1" + key).digest(8)
    return int.from_bytes(digest, "little") % segments


def segment_coordinates(segment: int, *, m: int, n: int) -> tuple[int, int]:
    """[first, last): the coordinates of ``segment``'s sub-vectors.

    Args:
        segment: the segment's index.
        m: the update's coordinates.
        n: the lattice's dimension.

    Returns:
        ``(first, last)``, coordinates.

    Raises:
        InvalidArgumentError, InvalidTypeError: m, n or the segment out of
            range.
    """
    per = SEGMENT_COORDINATES // n
    return segment * per * n, min(m, (segment + 1) * per * n)


def check_segment(body: bytes, values: np.ndarray, segment: int, *, m: int, key: bytes,
                  params: Any, factor: float, coder: int) -> None:
    """Checks segment ``segment`` of a body a device coded (``coder``: the
    coder's code) against the CPU's coding of it from its coordinates
    (``values``, :func:`segment_coordinates`; ``_core.segment_matches``):
    with the ANS coder the body's own source model, the same model byte and
    stream bytes; with the Golomb coder the body's parameter, the same
    segment header (its order and section lengths) and sections; so the
    same decoded values.  Nothing to
    check for an empty update.

    Args:
        body: the body the device coded.
        values: the segment's coordinates (:func:`segment_coordinates`).
        segment: the segment's index (:func:`segment_to_check`).
        m: the update's coordinates.
        key: the LRSUQ stream key.
        params: the core's ``_core.Params``.
        factor: the clip's scale factor.
        coder: the coder's code.

    Raises:
        DeviceError: the streams differ, or the host cannot encode the
            segment the device encoded.
    """
    if m == 0:
        return
    try:
        same = _core.segment_matches(body, np.ascontiguousarray(values), segment=segment, m=m,
                                     key=key, params=params, factor=factor, coder=coder)
    except CepamError as e:
        raise DeviceError(f"the host cannot check segment {segment} of the GPU's body ({e}): "
                          "its results cannot be trusted") from e
    if not same:
        raise DeviceError(
            f"segment {segment} of the GPU's entropy-coded body differs from the host's coding "
            f"of it ({m} coordinates, n = {int(params.n)}); its results cannot be trusted "
            "(python bench/gpu_check.py compares the two paths)")


# --- the range of values decoded on a GPU -------------------------------------

def check_device_output(values: Any, dtype: str, *, noise_std: float, where: str) -> None:
    """:func:`cepam.precision.check_output` for decoded values held in a
    torch tensor on a GPU (their statistics computed there).

    Args:
        values: the decoded values, a torch tensor on a GPU.
        dtype: the output dtype's name.
        noise_std: the noise's standard deviation, in the update's units.
        where: what the values are, for the messages.

    Raises:
        DecodingError: a value is infinite or beyond the dtype's range.
    """
    import torch

    if values.numel() == 0:
        return
    name = str(values.dtype).removeprefix("torch.")
    if not bool(torch.isfinite(values).all()):
        raise overflow_error(name, noise_std=noise_std, where=where)
    sumsq = float(torch.sum(torch.square(values.to(torch.float64))))
    judge_output(sumsq, values.numel(), name, dtype, noise_std=noise_std, where=where,
                 peak=lambda: float(values.abs().max()),
                 scaled_mean_square=lambda peak: float(
                     torch.mean(torch.square(values.to(torch.float64) / peak))))
