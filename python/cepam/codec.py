"""Encode and decode model updates with LRSUQ.

``decode(encode(x)) == x + z`` where ``z`` has exactly the mechanism's noise
law (i.i.d. Gaussian or Laplace per coordinate), independent of ``x``; the
payload is a short authenticated byte string.  See docs/design.md, sections 1
and 5, and the paper (Ling et al., "CEPAM: Communication-Efficient and Privacy-Adaptable
Mechanism for Federated Learning").

Privacy caveat: the noise protects ``x`` only from parties who do not hold the
secret.  Whoever holds it (the trusted aggregator) can remove most of the
noise.  Keep secrets secret.  Each payload draws a fresh nonce (format
version 8), so no two payloads share their randomness by accident; still,
encode each (round, client, message) context once under a secret, since a
second payload is a second release the accountant does not count
(``state=PATH`` records used contexts on disk: :mod:`cepam.guard`).

A server enforces the noise its accountant assumes by decoding with
expectations (``decode(..., expect_mechanism=..., expect_clip=...,
expect_client=..., expect_round=...)``, or a server-side :class:`Codec`):
an authentic payload encoded with other settings raises
:class:`~cepam.errors.UnexpectedPayloadError`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._native import core as _core
from ._checks import check_clip
from ._finite import check_encodable_range
from ._thread_pool import map_on_threads
from .errors import (
    ContextReuseError,
    FormatError,
    InvalidArgumentError,
    InvalidTypeError,
    PrivacyWarning,
    RateWarning,
)
from .expected import Expected
from .guard import ContextGuard
from .keys import (TAG_BYTES, Context, check_integer, check_nonce, check_secret, new_nonce,
                   stream_key)
from .lattices import LATTICE_CODES, LATTICE_TABLE, LATTICES, check_combination
from .mechanisms import Gaussian, Mechanism, check_mechanism, core_params, mechanism_from_code
from .padding import check_pad, max_payload_bytes, padding_bytes, uses_bound
from .payload import (
    CODER_CODES,
    CODERS,
    SEALED_HEADER_BYTES,
    Header,
    Sealed,
    pack_header,
    parse_header,
    sealed_head,
)
from .cuda import (LatticeStage, check_device_output, decode_on_device, decodes_on_device,
                   parse_device, to_device)
from .precision import check_output
from .sealing import open_payload, seal
from .flatten import describe, flatten, unflatten
from .structure import (
    BARE,
    DICT,
    KIND_NUMPY,
    KIND_TORCH,
    SINGLE,
    Structure,
    check_buffers,
    check_dtype_choice,
    check_non_float,
    decoded_dtype,
    entry_kind as _entry_kind,
    is_buffer,
    output_dtype,
)
from .template import bare, digest, match_template, template_size
from .ties import TiePairs, apply_ties, check_ties, resolve_ties, with_ties
from .threads import resolve_threads

__all__ = ["encode", "decode", "inspect", "update_norm", "Codec", "PayloadInfo", "LATTICE_NAMES"]

LATTICE_NAMES = tuple(LATTICE_CODES)
DEFAULT_MAX_COORDINATES = 1 << 28


# lattice="auto": which lattice, for each mechanism and coder, from the
# statistics of the clipped update's shape (see _AutoRule, _Shape and
# _auto_candidates).
_AUTO = None  # the choice "auto" after validation
# prefer="bits" encodes with both lattices; updates of more than
# 2 * _AUTO_SAMPLE coordinates are decided on a sample: _AUTO_BLOCKS evenly
# spaced runs of _AUTO_SAMPLE // _AUTO_BLOCKS coordinates (so that every part
# of a model is represented), encoded with each candidate; the whole update
# is then encoded once.
_AUTO_SAMPLE, _AUTO_BLOCKS = 1 << 16, 64


def _check_lattice(lattice: object, dim: object, mechanism: Mechanism
                   ) -> tuple[int, int] | None:
    """(lattice code, dim), or None for "auto"."""
    if lattice is None:
        lattice = "auto" if dim is None else "Z"
    if lattice == "auto":
        if dim is not None:
            raise InvalidArgumentError(
                "lattice='auto' chooses the dimension itself: leave dim=None, or name a "
                "lattice ('Z' for Z^dim)"
            )
        return _AUTO
    if not isinstance(lattice, str):
        raise InvalidTypeError(f"lattice must be a str, one of {LATTICE_NAMES}, got {lattice!r}")
    if lattice not in LATTICE_CODES:
        raise InvalidArgumentError(
            f"lattice must be 'auto' or one of {LATTICE_NAMES}, got {lattice!r}")
    dims = LATTICE_TABLE[lattice].dims
    if dim is None:
        dim = dims[0]
    else:
        dim = check_integer("dim", dim)
        if dim not in dims:
            raise InvalidArgumentError(
                f"lattice {lattice!r} has dimension {dims[0]}: dim must be None or {dims[0]}, "
                f"got dim={dim}" if len(dims) == 1 else
                f"dim must be between {dims[0]} and {dims[-1]} for lattice {lattice!r}, "
                f"got {dim}")
    # The rule on mechanisms (A2, D4, E8: Gaussian only; Laplace dim <= 4;
    # SDQ dim 1) is the core's.
    check_combination(mechanism=mechanism.code, lattice=LATTICE_CODES[lattice], n=dim)
    return LATTICE_CODES[lattice], dim


def _check_coder(coder: object) -> int:
    if not isinstance(coder, str):
        raise InvalidTypeError(f"coder must be a str, one of {tuple(CODER_CODES)}, got {coder!r}")
    if coder not in CODER_CODES:
        raise InvalidArgumentError(f"coder must be one of {tuple(CODER_CODES)}, got {coder!r}")
    return CODER_CODES[coder]


def _sum_of_squares(flat: np.ndarray, structure: Structure, threads: int) -> float:
    """The sum of squares the clip is applied to (the core's: the same for
    every thread count).

    Raises:
        InvalidArgumentError: a NaN or Inf, located in ``structure``.
    """
    try:
        return _core.sum_of_squares(flat, threads=threads)
    except InvalidArgumentError:
        raise InvalidArgumentError(_locate_non_finite(flat, structure)) from None


def _locate_non_finite(flat: np.ndarray, structure: Structure) -> str:
    index = int(np.flatnonzero(~np.isfinite(flat))[0])
    for entry in structure.entries:
        if index < entry.size:
            where = np.unravel_index(index, entry.shape) if entry.shape else ()
            name = f"entry {entry.name!r}" if entry.name else "the update"
            return f"{name} contains a non-finite value (NaN or Inf) at index {tuple(map(int, where))}"
        index -= entry.size
    return "the update contains a non-finite value (NaN or Inf)"  # pragma: no cover


@dataclass(frozen=True)
class _AutoRule:
    """What ``lattice="auto"`` chooses among for one mechanism and coder:
    ``low`` (the fast lattice, Z), or ``high`` where the update's shape
    (:class:`_Shape`) predicts it saves enough bits (:func:`_high_saves`).
    ``prefer="bits"`` encodes with both and keeps the shorter, except below
    ``trial_below`` (rms / scale), where ``low`` is always shorter."""

    low: tuple[int, int]  # (lattice code, n)
    high: tuple[int, int]
    trial_below: float


_Z1, _E8 = (LATTICE_CODES["Z"], 1), (LATTICE_CODES["E8"], 8)
_ALWAYS_Z1 = _AutoRule(_Z1, _Z1, math.inf)
# Z with n = 1 against the Voronoi lattices A2, D4, E8 (whole payloads,
# one thread; docs/guide/performance.md, "What auto picks and what it costs"):
# - Gaussian, ANS: E8 saves up to 7 % of Z's bits, at 0.55 to 0.7 times Z's
#   encode speed, where the update is smooth at the noise scale (below);
#   A2 and D4 are never the cheapest.  Below rms / scale = 0.45, Z is shorter
#   on every source measured (E8 12 to 82 % longer).
# - Gaussian, Golomb: Z at every ratio (A2, D4 and E8 cost 3 to 88 % more:
#   Golomb codes each coordinate of a Voronoi lattice's point on its own, and
#   their coordinates are not independent).
# - Laplace and SDQ: Z with n = 1 (the only lattice they take).
# Z^n with n > 1 is not a candidate: with Golomb, Z^8 (Gaussian) and Z^4
# (Laplace) are up to 0.28 bits per coordinate cheaper than Z above a ratio
# of 2 to 6 (by the source), but 9 to 13 times slower to encode.
_AUTO_RULES: dict[tuple[int, int], _AutoRule] = {
    (Gaussian.code, CODER_CODES["ans"]): _AutoRule(_Z1, _E8, trial_below=0.45),
    (Gaussian.code, CODER_CODES["golomb"]): _ALWAYS_Z1,
}

#: prefer= of lattice="auto": "balanced" (E8 only where it is predicted to
#: save at least 3 % of Z's bits), "bits" (the shorter payload, by encoding
#: with both where either may be shorter) or "speed" (always Z).
PREFERENCES = ("balanced", "bits", "speed")

# The statistics of the update's shape are read on a sample of
# _SHAPE_RUNS evenly spaced runs of _SHAPE_RUN coordinates (every part of a
# model represented; the whole update when it is no larger), in the clipped
# update's values over the noise scale.
_SHAPE_RUNS, _SHAPE_RUN = 64, 64


@dataclass(frozen=True)
class _Shape:
    """The statistics ``lattice="auto"`` decides on, in units of the noise
    scale, of the clipped update: ``rms`` over all its coordinates; on a
    sample (:func:`_sample_indices`), the ``median`` magnitude, the share
    ``small`` of magnitudes below 1/8, and the ``kurtosis`` E x^4 / (E x^2)^2
    (3 for a Gaussian, 1.8 for a uniform, 1 for a two-valued update)."""

    m: int
    rms: float
    median: float
    small: float
    kurtosis: float


# The balanced rule (_high_saves): E8 where the median magnitude is within
# [_E8_MEDIAN[0], _E8_MEDIAN[1]] times the scale, under _E8_SMALL of the
# coordinates are near zero, the tails are at least _E8_KURTOSIS's, and
# there are at least _E8_MIN_M coordinates.  Measured (m = 2^17, Gaussian,
# Laplace, Student-t with 2.2 and 3 degrees of freedom, two-scale and
# ten-scale mixtures, uniform, two-valued, and updates with 40 to 90 % exact
# zeros; rms / scale 0.25 to 300): every update this picks E8 for saves
# 3.2 to 7.2 % of Z's bits; where the median is below 0.75 E8 saves at most
# 5.5 % and mostly under 3 % (Gaussian at rms / scale 1: 1.7 %); above a
# median of 14 at most 2.9 % (the savings fall towards E8's high-resolution
# gain, 2 % at rms / scale 300); with 40 % of zeros 3.5 % at best and often
# under 1 %; uniform updates lose up to 15 % with E8 below rms / scale 1.5
# and two-valued ones 16 to 110 %.  Below 1024 coordinates the fixed costs
# decide (E8 0.3 to 4.9 % longer at m = 300).
_E8_MEDIAN = (0.75, 14.0)
_E8_SMALL, _E8_KURTOSIS, _E8_MIN_M = 0.2, 2.4, 1024


def _high_saves(shape: _Shape) -> bool:
    """Whether E8 is predicted to save at least 3 % of Z's bits (ANS)."""
    return (shape.m >= _E8_MIN_M and _E8_MEDIAN[0] <= shape.median <= _E8_MEDIAN[1]
            and shape.small <= _E8_SMALL and shape.kurtosis >= _E8_KURTOSIS)


def _costs_more_than_z(lattice: tuple[int, int], coder: int, shape: _Shape) -> str | None:
    """Why a named Voronoi lattice is predicted to give a longer payload than
    Z for an update of this shape (the measurements of :data:`_AUTO_RULES`
    and :func:`_high_saves`), or None."""
    name = LATTICES[lattice[0]]
    if coder == CODER_CODES["golomb"]:
        return "with coder='golomb', A2, D4 and E8 cost 3 to 88 % more bits than Z"
    if name == "A2" and shape.rms < 3.0 or name == "D4" and shape.rms < 2.0:
        return f"{name} costs 3 to 95 % more bits than Z below rms/scale {3 if name == 'A2' else 2}"
    if shape.rms < 0.55:
        return "every lattice costs more bits than Z below rms/scale 0.55 (E8: 2 to 26 % more)"
    if shape.kurtosis < 1.5:
        return "on a two-valued update E8 costs 16 to 110 % more bits than Z"
    if shape.small > 0.45 and shape.rms <= 40.0:
        return (f"{100 * shape.small:.0f} % of the coordinates are below scale/8: E8 costs "
                "up to 58 % more bits than Z")
    return None


def _auto_rule(mechanism: Mechanism, coder: int) -> _AutoRule:
    return _AUTO_RULES.get((mechanism.code, coder), _ALWAYS_Z1)


def _auto_candidates(mechanism: Mechanism, coder: int, prefer: str,
                     shape: Callable[[], _Shape], rms: float) -> list[tuple[int, int]]:
    """The lattices ``lattice="auto"`` encodes with, as (lattice code, n)
    pairs: one, or with ``prefer="bits"`` both of its rule's, whose shorter
    payload is kept (for more than ``2 * _AUTO_SAMPLE`` coordinates, both
    encode a sample, and the update is encoded once, with the lattice whose
    sample came out shorter).  ``rms``: the clipped update's over the scale;
    ``shape()``: its statistics, read only where the choice needs them."""
    rule = _auto_rule(mechanism, coder)
    if rule.low == rule.high or prefer == "speed":
        return [rule.low]
    if prefer == "bits":
        return [rule.low] if rms < rule.trial_below else [rule.low, rule.high]
    return [rule.high] if _high_saves(shape()) else [rule.low]


def _auto_options(mechanism: Mechanism, coder: int, prefer: str) -> list[tuple[int, int]]:
    """Every lattice ``lattice="auto"`` may choose for this mechanism, coder
    and preference."""
    rule = _auto_rule(mechanism, coder)
    return [rule.low] if prefer == "speed" else sorted({rule.low, rule.high})


def _check_prefer(prefer: object, lattice: tuple[int, int] | None) -> str:
    if not isinstance(prefer, str):
        raise InvalidTypeError(f"prefer must be a str, one of {PREFERENCES}, got {prefer!r}")
    if prefer not in PREFERENCES:
        raise InvalidArgumentError(f"prefer must be one of {PREFERENCES}, got {prefer!r}")
    if prefer != "balanced" and lattice is not _AUTO:
        raise InvalidArgumentError(
            f"prefer={prefer!r} chooses among lattices: it needs lattice='auto', not a "
            "named lattice")
    return prefer


@dataclass(frozen=True)
class _Settings:
    """An encoder's checked settings: everything but the update, the
    mechanism, the secret and the context (see :func:`encode`)."""

    lattice: tuple[int, int] | None  # None: "auto"
    prefer: str  # lattice="auto"'s PREFERENCES
    clip: float
    coder: int
    non_float: str
    pad: str | int | None
    structure: bool
    threads: int
    buffers: str
    ties: TiePairs  # besides those found by storage in the update

    @classmethod
    def checked(cls, lattice: tuple[int, int] | None, *, prefer: object, clip: object,
                coder: object, non_float: object, pad: object, structure: object,
                threads: object, buffers: object, ties: TiePairs) -> "_Settings":
        return cls(lattice, _check_prefer(prefer, lattice), check_clip(clip),
                   _check_coder(coder), check_non_float(non_float),
                   check_pad(pad), _check_flag("structure", structure), resolve_threads(threads),
                   check_buffers(buffers), ties)


_UNCLIPPED = ("no clip: the decoded update carries the noise, but no differential-privacy "
              "guarantee follows, since nothing bounds one client's update; pass clip= "
              "(README, 'Choosing sigma and clip')")


#: buffers="separate": the share of the clip the weights keep, whatever the
#: running statistics' size (see _clip_buffers_apart).  In l2 a small cut
#: frees much: the weights keep 0.95 of the clip and the statistics may take
#: sqrt(1 - 0.95^2) = 0.31 of it.  (The earlier 0.5 halved the weights' step
#: whenever the statistics were large, as they are in a BatchNorm model's
#: first rounds, and the server's model learnt slower than with the
#: parameters alone: docs/EXPERIMENTS.md, "BatchNorm: what to send".)
WEIGHT_FLOOR = 0.95


def _clip_buffers_apart(host: Callable[[], np.ndarray], structure: Structure, clip: float,
                        sumsq: float) -> np.ndarray | None:
    """``buffers="separate"``: one clip for the whole update, as always,
    except that the running statistics (:func:`is_buffer`) of a mapping may
    not push the weights' l2 norm below ``WEIGHT_FLOOR * clip``.

    ``host()`` gives the flattened update in host memory (called only when
    the statistics are clipped apart); ``sumsq`` is the whole update's sum
    of squares; only the statistics
    (a few values a channel) are summed again here, the weights' share is
    the rest.  Where the update is within the clip, or the joint clip leaves
    the weights at least the floor, None: nothing to do (the one clip then
    applies as always).  Otherwise the weights are clipped to
    ``min(|w|, WEIGHT_FLOOR * clip)`` and the statistics to what the clip
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
    weights, buffers = math.sqrt(max(0.0, sumsq - buffers_sq)), math.sqrt(buffers_sq)
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


def _gpu_body(gpu: Any, params: Any, *, key: bytes, factor: float, coder: int, threads: int,
              statistics: tuple[float, np.ndarray], m: int,
              dtype: str) -> bytes | _core.CodedBody:
    """The body of an update held on a GPU (``gpu``: its
    :class:`cepam.cuda.LatticeStage`), which the host never reads: where
    :meth:`~cepam.cuda.LatticeStage.codes_body_on_device` says so, coded
    whole on the GPU by the coder's device path (only the ANS streams or
    the Golomb body come back);
    else by the host from the GPU's LRSUQ stage and model statistics (a
    ``_core.CodedBody``, written by the sealing).  The CPU's bytes either
    way."""
    if gpu.codes_body_on_device(params):  # (the coder's row in the table names its kernels)
        return gpu.device_body(params, coder=coder, key=key, factor=factor, statistics=statistics)
    return _core.encode_coded_body(
        np.empty(0, dtype), key=key, params=params, factor=factor, coder=coder, threads=threads,
        lattice_stage=gpu(params, key=key, factor=factor, threads=threads),
        model_statistics=statistics, m=m)


def _sample_indices(m: int, runs: int, run: int) -> np.ndarray:
    """The coordinates (int64) of a sample of an update of m coordinates:
    ``runs`` evenly spaced runs of ``run`` coordinates (m >= runs * run)."""
    starts = (np.arange(runs, dtype=np.int64) * (m - run)) // (runs - 1)
    return (starts[:, None] + np.arange(run, dtype=np.int64)).ravel()


def _auto_sample_indices(m: int) -> np.ndarray:
    """The coordinates (int64) of the sample that ``lattice="auto"`` with
    ``prefer="bits"`` codes with each candidate: evenly spaced runs, about
    ``_AUTO_SAMPLE`` in all, of an update of m coordinates."""
    return _sample_indices(m, _AUTO_BLOCKS, _AUTO_SAMPLE // _AUTO_BLOCKS)


def _shape(take: Callable[[np.ndarray], np.ndarray] | None, whole: Callable[[], np.ndarray],
           m: int, rms: float, factor: float, scale: float) -> _Shape:
    """The :class:`_Shape` of an update of m coordinates whose clipped rms
    over the scale is ``rms``: its sample read by ``take(indices)`` (None:
    from ``whole()``, the flattened update), the whole update when it has
    at most ``_SHAPE_RUNS * _SHAPE_RUN`` coordinates."""
    if m <= _SHAPE_RUNS * _SHAPE_RUN:
        sample = whole() if take is None else take(np.arange(m, dtype=np.int64))
    else:
        indices = _sample_indices(m, _SHAPE_RUNS, _SHAPE_RUN)
        sample = whole()[indices] if take is None else take(indices)
    a = np.abs(np.asarray(sample, dtype=np.float64)) * (factor / scale)
    if a.size == 0:
        return _Shape(m, rms, 0.0, 1.0, 0.0)
    squares = a * a
    mean_square = float(squares.mean())
    relative = squares / mean_square if mean_square > 0.0 else squares  # (no underflow)
    kurtosis = float((relative * relative).mean())
    return _Shape(m, rms, float(np.median(a)), float(np.count_nonzero(a < 0.125)) / a.size,
                  kurtosis)


def _auto_sample_choice(sample: np.ndarray, mechanism: Mechanism, key: bytes,
                        candidates: list[tuple[int, int]], factor: float, coder: int,
                        threads: int) -> tuple[int, int]:
    """The candidate whose body is shortest on ``sample`` (the update's
    coordinates at :func:`_auto_sample_indices`); the first on ties.  The
    sample's bodies are discarded."""

    def size(candidate: tuple[int, int]) -> int:
        code, dim = candidate
        return len(_core.encode(sample, key=key, params=core_params(mechanism, lattice=code, n=dim),
                                factor=factor, coder=coder, threads=1))

    # The sample is about one segment, a thread's work: with threads to
    # spare, the candidates run side by side (the core releases the GIL).
    sizes = map_on_threads(size, candidates, threads)
    return candidates[sizes.index(min(sizes))]


def _encode(x: Any, mechanism: Mechanism, secret: bytes, context: Context,
            settings: _Settings, nonce: bytes) -> bytes:
    lattice, clip, coder, pad = settings.lattice, settings.clip, settings.coder, settings.pad
    threads = settings.threads
    # An update in CUDA memory is flattened on its GPU and stays there: its
    # norm, the source model's statistics and LRSUQ run on the GPU, to the
    # CPU's bytes (cepam.cuda); `host` copies it to the host where it must.
    gpu = None
    ties = resolve_ties(x, settings.ties)  # a tied tensor is coded once
    if LatticeStage.usable():
        gpu = LatticeStage.of(*describe(x, non_float=settings.non_float, buffers=settings.buffers,
                                        ties=ties))
    if gpu is None:
        flat, structure = flatten(x, non_float=settings.non_float, buffers=settings.buffers,
                                  ties=ties)
        m, dtype, host = flat.size, flat.dtype, lambda: flat
        sumsq = _sum_of_squares(flat, structure, threads)
    else:
        structure, m, dtype, host = gpu.structure, gpu.size, np.dtype(gpu.dtype), gpu.host
        try:  # also rejects NaN and Inf
            sumsq = gpu.sum_of_squares(threads=threads)
        except InvalidArgumentError:
            raise InvalidArgumentError(_locate_non_finite(host(), structure)) from None
    if settings.buffers == "separate" and math.isfinite(clip):
        clipped = _clip_buffers_apart(host, structure, clip, sumsq)
        if clipped is not None:
            sumsq = _core.sum_of_squares(clipped, threads=threads)
            if gpu is None:
                flat = clipped
            else:
                gpu = gpu.upload(clipped)  # the values coded
            host = lambda: clipped  # noqa: E731
    norm = math.sqrt(sumsq)
    factor = clip / norm if norm > clip else 1.0
    check_encodable_range(host, structure, norm=norm, factor=factor, mechanism=mechanism)
    rms = min(norm, clip) / math.sqrt(m) / mechanism.scale if m else 0.0
    shape = functools.cache(lambda: _shape(
        None if gpu is None else gpu.take, host, m, rms, factor, mechanism.scale))
    if lattice is _AUTO:
        candidates = _auto_candidates(mechanism, coder, settings.prefer, shape, rms)
    else:
        candidates = [lattice]
        if lattice[0] != LATTICE_CODES["Z"] and m >= _E8_MIN_M:
            why = _costs_more_than_z(lattice, coder, shape())
            if why is not None:
                # encode (or Codec.encode) -> _guarded_encode -> _encode
                warnings.warn(
                    f"lattice={LATTICES[lattice[0]]!r} is predicted to send more bits than "
                    f"lattice='Z' for this update (rms/scale {rms:.3g}): {why}, and it encodes "
                    "more slowly than Z; pass lattice='Z' or 'auto'", RateWarning, stacklevel=4)
    key = stream_key(secret, context, nonce)  # the GPU path codes with it too
    if len(candidates) > 1 and m > 2 * _AUTO_SAMPLE:
        indices = _auto_sample_indices(m)
        sample = flat[indices] if gpu is None else gpu.take(indices)
        candidates = [_auto_sample_choice(sample, mechanism, key, candidates, factor, coder,
                                          threads)]
    statistics = None if gpu is None else gpu.model_statistics(factor=factor)
    bodies = []
    for code, dim in candidates:
        params = core_params(mechanism, lattice=code, n=dim)
        if gpu is None:  # (its parts written by the sealing, straight into the payload)
            body = _core.encode_coded_body(flat, key=key, params=params, factor=factor,
                                           coder=coder, threads=threads)
        else:
            body = _gpu_body(gpu, params, key=key, factor=factor, coder=coder, threads=threads,
                             statistics=statistics, m=m, dtype=dtype)
        bodies.append((body, code, dim))
    # One payload is sent; the discarded candidate is never seen by anyone.
    body, code, dim = min(bodies, key=lambda b: len(b[0]))
    sealed_digest = b""
    if not settings.structure:  # the header says m only; the sealed digest binds the rest
        sealed_digest, structure = digest(structure), bare(structure.size)
    header = Header(mechanism.code, mechanism.scale, coder, clip, context, structure,
                    nonce=nonce)
    head = pack_header(header)
    fixed = len(head) + SEALED_HEADER_BYTES + len(sealed_digest) + TAG_BYTES
    max_bytes = None
    if uses_bound(pad):  # over every lattice the setting may choose, not the data's choice
        options = (_auto_options(mechanism, coder, settings.prefer) if lattice is _AUTO
                   else [lattice])
        max_bytes = max_payload_bytes(mechanism, clip=clip, m=m, coder=coder,
                                      lattices=options, fixed_bytes=fixed)
    padding = padding_bytes(pad, fixed + len(body), max_bytes=max_bytes)
    del bodies  # (memory: the discarded candidate's body)
    return seal(header, sealed_head(code, dim, padding, digest=sealed_digest), body=body,
                padding=padding, secret=secret, threads=threads, head=head)


def _resolve_nonce(nonce: object) -> bytes:
    """A fresh nonce (:func:`cepam.keys.new_nonce`) for None, else ``nonce`` checked."""
    return new_nonce() if nonce is None else check_nonce(nonce)


def _guarded_encode(guard: ContextGuard | None, x: Any, mechanism: Mechanism, secret: bytes,
                    context: Context, settings: _Settings, nonce: bytes) -> bytes:
    """:func:`_encode` with ``context`` claimed in ``guard`` first (and the
    claim withdrawn if encoding fails: no payload was produced)."""
    if guard is not None:
        guard.claim(secret, context)
    try:
        return _encode(x, mechanism, secret, context, settings, nonce)
    except BaseException:
        if guard is not None:
            guard.release(secret, context)
        raise


def _check_state(state: object) -> ContextGuard | None:
    return None if state is None else ContextGuard(state)  # type: ignore[arg-type]


def encode(
    x: Any,
    mechanism: Mechanism,
    *,
    secret: bytes,
    round: int,
    client: int,
    message: int = 0,
    dim: int | None = None,
    lattice: str | None = None,
    prefer: str = "balanced",
    clip: float | None = None,
    coder: str = "ans",
    non_float: str = "skip",
    state: str | os.PathLike[str] | None = None,
    pad: str | int | None = None,
    structure: bool = True,
    threads: int | None = None,
    buffers: str = "separate",
    ties: Any = None,
    nonce: bytes | None = None,
) -> bytes:
    """Encodes a model update into a private, compressed payload.

    Args:
        x: the update: a numpy array or torch tensor (float32, float64,
            float16, or torch bfloat16), or a dict (e.g. a state_dict
            difference) or list/tuple of them, coded as one vector.
            Integer and bool entries of a dict are handled by ``non_float``.
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``:
            the law of the error the server will see, per coordinate
            (``cepam.SDQ(step=...)``: the uniform-error baseline).
        secret: the 32 bytes shared with the server (``cepam.new_secret()``).
        round, client, message: the context, integers in [0, 2^64); each
            context must be used for one message only under a secret: a
            second payload of a round is a second release that the
            accountant does not count (its noise is independent of the
            first's, by the nonce).
        dim: sub-vector dimension n: 1 to 8 for "Z" (at most 4 for Laplace),
            default 1; the lattice's own dimension for "A2" (2), "D4" (4) and
            "E8" (8), which is the default (None).
        lattice: "auto" (the default when dim is None) picks the lattice
            from statistics of the clipped update (no trial encodes, unless
            ``prefer="bits"``): with "ans", Z with n = 1, or E8 where it is
            predicted to save at least 3 % of Z's bits (its encode runs at
            0.55 to 0.7 times Z's; the rule: ``_high_saves``); with
            "golomb", and for Laplace and SDQ, Z with n = 1.
            Otherwise (the default when dim is given: "Z") "Z" (the integer lattice Z^n), or the Voronoi
            lattices "A2" (hexagonal), "D4" or "E8", whose cells are rounder,
            so that fewer bits code the same noise at high signal-to-noise
            ratio (E8 the fewest), at the cost of more trials per sub-vector
            (1.10, 1.62 and 3.94 on average).  A2, D4 and E8 take the
            Gaussian mechanism only; naming one where it is predicted to
            cost more bits than Z warns (:class:`~cepam.errors.RateWarning`).
        prefer: what ``lattice="auto"`` weighs: "balanced" (the default: E8
            only where it is predicted to save at least 3 % of the bits),
            "bits" (the shorter payload: where E8 may be shorter, the update,
            or for more than 131,072 coordinates a 65,536-coordinate sample,
            is encoded with both Z and E8, the shorter kept; up to twice the
            encode time) or "speed" (always Z with n = 1, the fastest).
            Another choice than "balanced" with a named lattice is an error.
        clip: l2 norm bound for the whole update (all entries together), in
            the update's units, or None for no clipping (a
            :class:`~cepam.errors.PrivacyWarning`: no privacy guarantee
            follows without one).
        coder: the body coder: "ans" (rANS with models conditioned on the
            decoder's side information; the shortest payloads) or "golomb"
            (Golomb-coded H and exp-Golomb-coded M, the paper's choice).
        non_float: what to do with integer and bool entries of a dict
            (BatchNorm's ``num_batches_tracked``), which are counters, not
            model updates: "skip" (the default) leaves them out of the
            payload, never noised, so :func:`decode` returns the dict
            without them; "error" refuses them (InvalidTypeError).  In a
            list, tuple or alone they are always refused.
        state: a file in which to record the context (see
            :mod:`cepam.guard`): encoding a context already recorded there
            under this secret raises ContextReuseError, whichever process
            or codec recorded it.  None (the default): not recorded.
        pad: length hiding (:mod:`cepam.padding`): None (no padding),
            "bucket" (total length rounded up to a quarter-octave bucket,
            at most 19 % more), "max" (a size fixed by the public settings:
            mechanism, clip, coder, lattice, structure; needs a clip),
            "levels" (the smallest of 8 lengths fixed by the same settings,
            a third of an octave apart up to "max"'s: the length tells at
            most 3 bits; at most 26 % more above the lowest; needs a clip)
            or a size in bytes.  Padding is zero bytes inside the encrypted
            part.
        structure: True (the default) writes the entries' names, kinds,
            dtypes and shapes into the header, so that :func:`decode`
            rebuilds ``x``'s structure by itself; False writes the number of
            coordinates only (a bare payload, shorter by the entries less
            an 8-byte structure digest: 240 bytes, 0.30 bits per
            coordinate, for the 6,422-parameter MNIST CNN's state_dict), and
            the decoder must pass ``like=`` a template of the update.
        threads: native threads to use, 1 to ``cepam.threads.MAX_THREADS``;
            None (the default): the ``CEPAM_THREADS`` environment variable
            if set, else the cores this process may run on.  The payload
            is the same bytes for every count (for a given ``nonce``).
        buffers: what to do with a dict's float buffers, the running
            statistics of normalisation layers (entries named
            ``*.running_mean`` and ``*.running_var``, as BatchNorm's are):
            "separate" (the default) codes them, clipped apart from the
            weights: where one joint clip would leave the weights less than
            0.95 of the clip (``WEIGHT_FLOOR``), the weights are clipped to
            ``min(|w|, 0.95 clip)`` and the statistics to what the clip
            leaves (0.31 of the clip, more where the weights' update is
            smaller), so the whole update stays within
            ``clip`` (the guarantee is unchanged) and the statistics, whose
            changes can be 10 to 100 times the weights', cannot shrink the
            weights' update; "local" leaves them out of the payload (each
            side keeps its own, as FedBN does; :func:`decode` returns the dict
            without them); "joint" codes them as weights, under the one clip.
            Without a clip the choices "separate" and "joint" are the same.
        ties: tied entries of a dict (one tensor under several names, as a
            language model's embedding shared with its output layer) are
            coded once, under the first name, and counted once in the clip;
            the payload is the one of the dict without the other names (the
            same bytes), and :func:`decode` gives them back as the same
            tensor when it knows the ties (its ``like=`` or ``ties=``).
            Entries of ``x`` that share storage (the same memory, offset,
            shape, strides and dtype: a tied model's ``state_dict()``) are
            always tied; ``ties`` adds those ``x`` has lost (a
            ``state_dict`` difference computed name by name): the model
            (a ``torch.nn.Module``) or its ``state_dict``, whose ties are
            found by storage (:func:`cepam.find_ties`), or a
            mapping ``{name: tied-to name}``.  Values are never compared:
            of a tied name's entry only the shape and dtype are read.
            None (the default): the ties found in ``x`` only.
        nonce: None (the default): a fresh 16-byte nonce from the operating
            system's secure random source, written in the payload's header
            and mixed into its keys, so that no two payloads share their
            dithers, latent scales or sealing keystream, whatever the
            context.  16 bytes: this nonce, for deterministic payloads
            (golden files, reproducible experiments); the caller then
            answers for never passing one twice with the same secret and
            context (the noises of two such payloads are dependent).

    Returns:
        The payload bytes: a public header (format version, mechanism and
        scale, coder, clip, context, nonce, structure), the sealed (encrypted)
        lattice choice and body, and an authentication tag.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad arguments, NaN or Inf in
            x, tied entries of different shapes or dtypes.
        EncodingError: x is too large relative to the noise scale, decoded
            values could overflow their dtype, or the payload exceeds the
            padded size (``pad="max"``, ``"levels"`` or a size).
        ContextReuseError: ``state`` records this context as used.

    Warns:
        PrivacyWarning: ``clip`` is None.
        RateWarning: a named lattice (A2, D4, E8) is predicted to cost more
            bits than Z for this update.
    """
    mechanism = check_mechanism(mechanism)
    choice = _check_lattice(lattice, dim, mechanism)
    secret, context = check_secret(secret), Context(round, client, message)
    settings = _Settings.checked(choice, prefer=prefer, clip=clip, coder=coder,
                                 non_float=non_float, pad=pad, structure=structure,
                                 threads=threads, buffers=buffers, ties=check_ties(ties))
    nonce = _resolve_nonce(nonce)
    if clip is None:
        warnings.warn(_UNCLIPPED, PrivacyWarning, stacklevel=2)
    return _guarded_encode(_check_state(state), x, mechanism, secret, context, settings, nonce)


def update_norm(update: Any, *, buffers: str = "separate", ties: Any = None,
                threads: int | None = None) -> float:
    """The l2 norm of an update exactly as :func:`encode` measures it
    against its ``clip``: over the entries it codes, in the same sum.

    Size the clip from this norm, measured on real updates with the same
    ``buffers`` and ``ties`` as the encoder's (README, "Choosing sigma and
    clip"): integer and bool entries of a dict are left out (as
    ``non_float="skip"`` leaves them), so are the running statistics with
    ``buffers="local"``, and a tied tensor counts once.  With "separate"
    (and "joint") the statistics are in the norm: the clip bounds the whole
    update, and "separate" only decides, when the update is over the clip,
    how the clip is shared (the weights keep at least 0.95 of it; see
    :func:`encode`).  The norm is in the update's own units and is the same
    for every thread count.

    Args:
        update: as ``x`` of :func:`encode`: an array or tensor, or a dict
            (a ``state_dict`` difference), list or tuple of them.
        buffers: as for :func:`encode`: "separate" (the default), "local"
            or "joint".
        ties: as for :func:`encode` (entries of ``update`` that share
            storage are tied in any case).
        threads: native threads, as for :func:`encode`.

    Returns:
        The norm, a float >= 0.

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`encode` (an
            unsupported update, NaN or Inf in it, a bad ``buffers``,
            ``ties`` or ``threads``).
    """
    groups = resolve_ties(update, check_ties(ties))
    flat, structure = flatten(update, non_float="skip", buffers=check_buffers(buffers),
                              ties=groups)
    return math.sqrt(_sum_of_squares(flat, structure, resolve_threads(threads)))


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, got {type(value).__name__}")
    return value


def _entry_name(structure: Structure, index: int) -> str:
    entry = structure.entries[index]
    if entry.name:
        return f"entry {entry.name!r}"
    return f"entry {index}" if len(structure.entries) > 1 else "the update"


def _is_torch(value: Any) -> bool:
    """Whether value is a torch tensor (torch imported only if it already is)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _output_buffer(out: Any, structure: Structure, *, dtype: str, output: str,
                   decoded: str) -> np.ndarray:
    """The 1-D numpy view of ``out`` (decode's ``out=``) the core decodes
    into, checked: a numpy array or CPU torch tensor, C-contiguous and
    writable, of the dtype every entry is returned in (``decoded``: the
    decoded vector's), shaped like a single-array payload's entry or, for a
    list, tuple or dict, 1-D of all the payload's coordinates.

    Raises:
        InvalidTypeError: out is not a numpy array or torch tensor.
        InvalidArgumentError: its dtype, shape, layout, device or kind does
            not fit, it is read-only (or a tensor that requires grad), or
            the entries decode to several dtypes.
    """
    single = structure.container in (SINGLE, BARE)
    if _is_torch(out):
        kind, name = "a torch tensor", str(out.dtype).removeprefix("torch.")
        shape, contiguous, writable = tuple(out.shape), out.is_contiguous(), not out.requires_grad
        if out.device.type != "cpu":
            raise InvalidArgumentError(f"out must be in host memory, got a tensor on "
                                       f"{out.device} (device= decoding takes no out=)")
    elif isinstance(out, np.ndarray):
        kind, name = "a numpy array", out.dtype.name
        shape, contiguous, writable = out.shape, out.flags.c_contiguous, out.flags.writeable
    else:
        raise InvalidTypeError(f"out must be a numpy array or a torch tensor, got "
                               f"{type(out).__name__}")
    dtypes = {output_dtype(e, dtype=dtype, output=output) for e in structure.entries}
    if dtypes != {decoded}:
        raise InvalidArgumentError(
            f"out= needs every entry decoded in one dtype; with dtype={dtype!r} they decode "
            f"to {sorted(dtypes)} (pass dtype='float32' or 'float64')")
    if name != decoded:
        raise InvalidArgumentError(f"out has dtype {name}; the payload decodes to {decoded} "
                                   f"(dtype={dtype!r})")
    expected = structure.entries[0].shape if single else (structure.size,)
    if shape != expected:
        what = "its entry's shape" if single else "1-D, all its coordinates"
        raise InvalidArgumentError(f"out has shape {shape}; the payload needs {expected} "
                                   f"({what})")
    if not contiguous:
        raise InvalidArgumentError("out must be C-contiguous")
    if not writable:
        raise InvalidArgumentError("out must be writable" + (
            " (a tensor that requires grad is not: pass a detached one)" if _is_torch(out)
            else ""))
    if single:
        returned = _entry_kind(structure.entries[0], output)
        if returned != (KIND_TORCH if _is_torch(out) else KIND_NUMPY):
            raise InvalidArgumentError(
                f"out is {kind} but the payload decodes to a "
                f"{'torch tensor' if returned == KIND_TORCH else 'numpy array'}: pass "
                f"output= to match, or the other kind of out")
    return (out.numpy() if _is_torch(out) else out).reshape(-1)


def _decode(payload: object, secret: bytes, output: str, dtype: str, max_coordinates: object,
            expected: Expected, like: Any, threads: object, device: object,
            buffers: object, ties: TiePairs, out: Any = None) -> Any:
    if output not in ("auto", "numpy", "torch"):
        raise InvalidArgumentError("output must be 'auto', 'numpy' or 'torch'")
    cuda_index = parse_device(device)
    if cuda_index is not None:
        if out is not None:
            raise InvalidArgumentError("out= decodes into host memory: it cannot be combined "
                                       "with device=")
        if output == "numpy":
            raise InvalidArgumentError("device='cuda' returns torch tensors: output='numpy' "
                                       "cannot be")
        output = "torch"
    dtype = check_dtype_choice(dtype)
    buffers = check_buffers(buffers)
    if max_coordinates is None:  # the template's size, else the bare default
        limit = DEFAULT_MAX_COORDINATES if like is None else template_size(like, buffers=buffers)
        what = "max_coordinates" if like is None else "the template's size (like=)"
    else:
        limit = check_integer("max_coordinates", max_coordinates)
        what = "max_coordinates"
        if limit < 0:
            raise InvalidArgumentError(f"max_coordinates must be non-negative, got {limit}")
    threads = resolve_threads(threads)
    header, sealed = open_payload(payload, secret, threads=threads)  # the tag, then parsing
    expected.enforce(header)  # after the tag: the settings are the sender's own
    structure = header.structure
    # A template checks a structured payload first (its header's entries,
    # parsed already: the error names the first that differs, and nothing
    # is decoded); a bare payload, which carries only a digest, by its size.
    if like is not None and structure.container != BARE:
        structure = match_template(structure, like, sealed_digest=sealed.digest,
                                   buffers=buffers, ties=ties)
    if header.m > limit:
        raise FormatError(f"payload declares {header.m} coordinates, more than "
                          f"{what} {limit}: refused before decoding")
    if like is not None and structure.container == BARE:
        structure = match_template(structure, like, sealed_digest=sealed.digest,
                                   buffers=buffers, ties=ties)
    elif like is None and structure.container == BARE:
        raise InvalidArgumentError("the payload carries no structure (encoded with "
                                   "structure=False): pass like=, a template of the update")
    else:
        structure = with_ties(structure, resolve_ties(None, ties))
    mechanism = mechanism_from_code(header.mechanism, header.scale)
    kw = dict(m=header.m, key=stream_key(secret, header.context, header.nonce),
              params=core_params(mechanism, lattice=sealed.lattice, n=sealed.n),
              coder=header.coder, dtype=decoded_dtype(structure, dtype=dtype, output=output),
              threads=threads)
    # device="cuda" with the CUDA path: the GPU kernel decodes into device
    # memory, where the result stays (cepam.cuda); else the host decodes.
    on_gpu = cuda_index is not None and decodes_on_device()
    if out is not None:  # the core writes the values straight into the caller's memory
        kw["out"] = _output_buffer(out, structure, dtype=dtype, output=output,
                                   decoded=kw["dtype"])
    flat = decode_on_device(sealed.body, index=cuda_index, **kw) if on_gpu \
        else _core.decode(sealed.body, **kw)
    # (the host's sums run on the call's threads)
    check = check_device_output if on_gpu else functools.partial(check_output, threads=threads)
    start = 0
    for i, entry in enumerate(structure.entries):
        check(flat[start : start + entry.size], output_dtype(entry, dtype=dtype, output=output),
              noise_std=mechanism.std, where=_entry_name(structure, i))
        start += entry.size
    # (tied last, so that a move to the GPU keeps them one object)
    result = unflatten(flat, Structure(structure.container, structure.entries), output=output,
                       dtype=dtype)
    if cuda_index is not None and not on_gpu:
        result = to_device(result, cuda_index)
    if out is not None and structure.container in (SINGLE, BARE):
        return out  # (its values written in place; a structure's entries are views of it)
    return apply_ties(result, structure, like)


def decode(payload: bytes, *, secret: bytes, output: str = "auto", dtype: str = "auto",
           max_coordinates: int | None = None, like: Any = None,
           expect_mechanism: Mechanism | None = None, expect_clip: float | None = None,
           expect_client: int | None = None, expect_round: int | None = None,
           threads: int | None = None, device: Any = None, buffers: str = "separate",
           ties: Any = None, out: Any = None) -> Any:
    """Decodes a payload into the noisy update ``x + z``.

    Args:
        payload: bytes from :func:`encode`.
        secret: the secret the payload was encoded with.
        output: "auto" (the same types as encoded: numpy arrays or torch CPU
            tensors), "numpy" or "torch".
        dtype: the output dtypes.  "auto" (the default): float32 and
            float64 entries as encoded, float16 and bfloat16 entries as
            float32, because rounding ``x + z`` back to 11 or 8 significant
            bits would add rounding error to the noise (see
            :mod:`cepam.precision`).  "input": every entry in its encoded
            dtype (numpy has no bfloat16: float32).  "float32" or
            "float64": every entry in that dtype.
        max_coordinates: the largest update accepted.  None (the
            default): the size of ``like`` when given (its float entries,
            none tied), else 2^28 (a bare ``decode`` without ``like``
            accepts an authentic payload of up to 2^28 coordinates: 1 GiB
            of float32 output, 2 GiB of float64).  The decoder allocates
            the output before it has read the body, so a server without a
            template should pass the size of its model: a payload that
            claims more coordinates is refused after its tag verifies and
            before anything is allocated or decoded.  So is one that claims
            more than its body can carry (the bomb rule: at most 1024
            coordinates a body bit, so a 1 KB payload costs at most about
            64 MiB; see docs/format.md).
        like: a template of the update (an array or tensor, a list/tuple of
            them, a mapping such as a ``state_dict``, or a
            ``torch.nn.Module``: its ``state_dict()``) whose container,
            names, dtypes and shapes the result takes, and whose tied
            entries (found by storage) come back tied.  Required for a
            payload encoded with ``structure=False``, and then it must be the
            structure the payload was encoded from: the same names, order,
            dtypes and shapes (a digest of it is sealed in the payload); for a
            payload with a structure, optional, and the two must agree.  Only
            its structure is read (its values are not); integer and bool
            entries of a mapping are left out, as :func:`encode` leaves them
            out, and so are running statistics if ``buffers="local"``.
        expect_mechanism: if given, the payload's mechanism *and* noise
            scale must equal it (``cepam.Gaussian(sigma=...)``, ...).
        expect_clip: if given, the payload's clip must equal it (a payload
            encoded without a clip is refused too).
        expect_client: if given, the payload's client id must equal it.
        expect_round: if given, the payload's round must equal it.
            The expectations are how a server enforces what its accountant
            assumes: they are checked after the tag verifies (so the
            payload's settings are those its sender chose) and before the
            body is decoded.  None (the default) checks nothing.
        threads: native threads to use, as for :func:`encode` (the same
            values for every count).
        buffers: the encoder's choice (see :func:`encode`); it matters only
            for ``like``: with "local" the template's running statistics are
            left out, as the encoder left them out.
        ties: as for :func:`encode` (a model, a ``state_dict`` or a mapping
            ``{name: tied-to name}``), besides the ties of ``like``: a
            payload does not carry its ties (it holds a tied tensor once,
            under its first name), so the decoder names them, and each tied
            name comes back as the *same* object as its coded entry.  A tie
            whose names the payload codes apart (an encoder that did not
            know it) is not imposed.
        out: memory to decode into, kept by the caller from round to round
            (no fresh output is allocated: the native decoder writes the
            values straight into it).  For a single array or tensor, one
            like the result: a numpy array (or a CPU torch tensor, where
            the result is a tensor) of the entry's shape, which is
            returned.  For a list, tuple or dict, a 1-D array or tensor of
            all the payload's coordinates (``inspect(payload).coordinates``),
            in the payload's order; the result's entries are then views of
            it (reshaped slices), so they change when ``out`` is decoded into
            again.  ``out`` must be C-contiguous, writable (a tensor must
            not require grad) and of the dtype the entries decode to (with
            ``dtype="auto"``, float32 unless an entry is float64), every
            entry in that one dtype.  Host memory only (not with
            ``device=``).  Checked before anything is written; a payload
            found malformed while its body is decoded may leave ``out``
            partly written.

    Returns:
        The same structure as the encoded update (array/tensor, list,
        tuple or dict), or the template's, with the same shapes, in the
        dtypes ``dtype`` gives.  Integer and bool entries that
        :func:`encode` left out (``non_float="skip"``) are absent; so are
        tied names unless ``like`` or ``ties`` names the ties.

    Raises:
        AuthenticationError: wrong secret or altered payload (checked
            before anything but the magic, version and length is read).
        UnexpectedPayloadError: the payload's mechanism, scale, clip, client
            or round differs from an expectation (its ``field``,
            ``expected`` and ``actual`` say which).
        FormatError: malformed payload, more than max_coordinates (or the
            size of ``like``), more
            coordinates than the body can carry, or a payload that does not
            fit ``like``.
        DecodingError: (a FormatError) decoded values overflow the output
            dtype (for example float32 with a noise scale near 1e38).
        InvalidArgumentError: a payload without structure and no ``like``;
            an ``out`` of another dtype or shape, not C-contiguous,
            read-only, with ``device=``, or for entries of several dtypes.
        InvalidTypeError: ``out`` is not a numpy array or torch tensor.

    Warns:
        PrecisionWarning: an output dtype rounds the values by more than a
            tenth of the noise's standard deviation.
    """
    secret = check_secret(secret)
    expected = Expected.checked(mechanism=expect_mechanism, clip=expect_clip,
                                client=expect_client, round=expect_round)
    return _decode(payload, secret, output, dtype, max_coordinates, expected, like, threads,
                   device, buffers, check_ties(ties), out)


@dataclass(frozen=True)
class PayloadInfo:
    """What a payload says about itself.

    Without the secret only the public header is readable: ``lattice``,
    ``dim``, ``body_bits`` and ``padding_bits`` are None and ``sealed`` is
    True (the body, its source model and the lattice choice are encrypted).
    With the secret (``inspect(payload, secret=...)``) the tag is verified and
    the sealed section opened.  Sizes are in bits; ``body_bits`` splits the
    body into the coder's parts (Golomb: its parameter, the segments'
    headers (each its order and section lengths), H, M, padding; ANS:
    source model, the segments' lengths and model bytes, rANS streams);
    ``sealed_bits`` counts the whole encrypted section (its header, body and
    padding); ``bits_per_coordinate`` counts the whole payload.

    Attributes:
        version: the payload format's version.
        mechanism: the mechanism and its scale (:class:`cepam.Gaussian`, ...).
        coder: the body's coder, ``"ans"`` or ``"golomb"``.
        clip: the l2 clip the update was encoded under, or None.
        round: the context's round (:class:`cepam.Context`).
        client: the context's client.
        message: the context's message id.
        coordinates: the number of coordinates coded.
        structure: the entries' names, dtypes and shapes (only the number
            of coordinates for a bare payload).
        header_bits: the public header's size.
        sealed_bits: the sealed section's size.
        tag_bits: the tag's size.
        total_bits: the whole payload's size.
        sealed: whether the sealed section was left unread (no secret).
        lattice: the lattice's name (with the secret).
        dim: the lattice's dimension (with the secret).
        body_bits: the body's parts by name (with the secret).
        padding_bits: the padding (with the secret).
    """

    version: int
    mechanism: Mechanism
    coder: str
    clip: float | None
    round: int
    client: int
    message: int
    coordinates: int
    structure: Structure
    header_bits: int
    sealed_bits: int
    tag_bits: int
    total_bits: int
    sealed: bool
    lattice: str | None = None
    dim: int | None = None
    body_bits: dict[str, int] | None = None
    padding_bits: int | None = None
    nonce: bytes = b""  # the payload's nonce (public; format version 8)

    @property
    def has_structure(self) -> bool:
        """False for a payload encoded with ``structure=False`` (decode needs ``like=``)."""
        return self.structure.container != BARE

    @property
    def bits_per_coordinate(self) -> float:
        return self.total_bits / self.coordinates if self.coordinates else math.inf

    def as_dict(self) -> dict[str, Any]:
        bits: dict[str, Any] = {"header": self.header_bits, "sealed": self.sealed_bits}
        if self.body_bits is not None:
            bits.update({f"body.{part}": b for part, b in self.body_bits.items()})
            bits["padding"] = self.padding_bits
        bits.update({"tag": self.tag_bits, "total": self.total_bits})
        out: dict[str, Any] = {
            "version": self.version,
            "mechanism": self.mechanism.name,
            "scale": self.mechanism.scale,
            "coder": self.coder,
            "clip": self.clip,
            "round": self.round,
            "client": self.client,
            "message": self.message,
            "nonce": self.nonce.hex(),
            "coordinates": self.coordinates,
            "has_structure": self.has_structure,
            "entries": [] if not self.has_structure else [
                {"name": e.name, "dtype": e.dtype, "shape": list(e.shape),
                 "kind": "torch" if e.kind else "numpy"}
                for e in self.structure.entries
            ],
        }
        if self.sealed:
            out["sealed"] = ("lattice, dim and body are encrypted; "
                             "inspect with the secret to read them")
        else:
            out.update({"lattice": self.lattice, "dim": self.dim})
        out["bits"] = bits
        out["bits_per_coordinate"] = self.bits_per_coordinate
        return out


def inspect(payload: bytes, *, secret: bytes | None = None) -> PayloadInfo:
    """Reads a payload's public header; with ``secret``, also its sealed part.

    Without the secret the tag cannot be checked and nothing sealed is read.
    With it the tag is verified first, then the sealed section is decrypted
    and its body's parts are range-checked as :func:`decode` checks them.

    Args:
        payload: the payload's bytes (bytes, bytearray or memoryview).
        secret: the 32-byte secret the payload was sealed with, or None to
            read the public header alone.

    Returns:
        A :class:`PayloadInfo`.

    Raises:
        InvalidTypeError: payload is not bytes.
        AuthenticationError: (with a secret) the tag does not verify.
        FormatError: malformed payload.
    """
    if secret is None:
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
        payload = bytes(payload)
        header, offset = parse_header(payload)
        opened: Sealed | None = None
    else:
        header, opened = open_payload(payload, check_secret(secret))
        payload = bytes(payload)  # type: ignore[arg-type]
        offset = len(pack_header(header))
    details: dict[str, Any] = {}
    if opened is not None:
        parts = _core.body_parts(opened.body, coder=header.coder, lattice=opened.lattice,
                                 m=header.m, n=opened.n)
        details = dict(lattice=LATTICES[opened.lattice], dim=opened.n, body_bits=dict(parts),
                       padding_bits=8 * opened.padding)
    return PayloadInfo(
        version=payload[4],
        mechanism=mechanism_from_code(header.mechanism, header.scale),
        coder=CODERS[header.coder],
        clip=None if math.isinf(header.clip) else header.clip,
        round=header.context.round,
        client=header.context.client,
        message=header.context.message,
        nonce=header.nonce,
        coordinates=header.m,
        structure=header.structure,
        header_bits=8 * offset,
        sealed_bits=8 * (len(payload) - offset - TAG_BYTES),
        tag_bits=8 * TAG_BYTES,
        total_bits=8 * len(payload),
        sealed=opened is None,
        **details,
    )


class Codec:
    """The codec settings of one client (or of the server for one client).

    A client encodes each round's update with :meth:`encode`; the codec
    refuses to encode twice under the same (round, message), since a reused
    context is a second release of the round that the accountant does not
    count (the payload nonce keeps the two noises independent).  That record
    is in memory, for this object only; ``state=PATH`` keeps it in a file
    shared by every codec and process that names it (:mod:`cepam.guard`).

    The server decodes with :meth:`decode`, which enforces the codec's
    settings: a payload whose mechanism or noise scale, client, or clip
    (when the codec has one) differs raises
    :class:`~cepam.errors.UnexpectedPayloadError`, so a malicious or
    misconfigured client cannot send less noise than the server's
    accountant assumes.  (:func:`decode` with the secret checks only what
    it is told to expect.)

    Args:
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``.
        secret: 32 bytes shared by this client and the server.
        client: the client id, an integer in [0, 2^64).
        dim, lattice, prefer, coder, non_float, pad, structure, buffers, ties: as
            for :func:`encode` (the decoder reads the lattice and coder from
            the payload; ``ties`` also names the ties :meth:`decode` gives
            back; a module's ties are read once, here).
        clip: as for :func:`encode`; on a server, the clip its accountant
            assumes (None: payloads with any clip are accepted, except none
            at all unless ``allow_unclipped``).  A codec that encodes without
            a clip warns once (:class:`~cepam.errors.PrivacyWarning`).
        allow_unclipped: whether :meth:`decode` accepts payloads encoded
            without a clip (default False: they carry no privacy guarantee,
            so a server refuses them with
            :class:`~cepam.errors.UnexpectedPayloadError`).
        threads: native threads for encode and decode, as for
            :func:`encode` (None: resolved at each call).
        state: a file recording the contexts encoded under this secret
            (:mod:`cepam.guard`), or None (in memory only).

    A codec holds its secret: it is never shown by ``repr`` and a codec
    cannot be pickled or copied (pickling would write the secret wherever
    the bytes go); create one in each process from the secret instead.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings.
    """

    def __init__(self, mechanism: Mechanism, *, secret: bytes, client: int = 0,
                 dim: int | None = None, lattice: str | None = None,
                 prefer: str = "balanced",
                 clip: float | None = None, coder: str = "ans", non_float: str = "skip",
                 pad: str | int | None = None, structure: bool = True,
                 threads: int | None = None,
                 state: str | os.PathLike[str] | None = None,
                 buffers: str = "separate", allow_unclipped: bool = False,
                 ties: Any = None) -> None:
        self.mechanism = check_mechanism(mechanism)
        self._choice = _check_lattice(lattice, dim, self.mechanism)
        if self._choice is _AUTO:
            self.lattice, self.dim = "auto", None
        else:
            self.lattice, self.dim = LATTICES[self._choice[0]], self._choice[1]
        self.prefer = _check_prefer(prefer, self._choice)
        self.clip = None if clip is None else check_clip(clip)
        self.coder = coder
        self._coder = _check_coder(coder)
        self.non_float = check_non_float(non_float)
        self.pad = check_pad(pad)
        self.structure = _check_flag("structure", structure)
        self.buffers = check_buffers(buffers)
        self.ties = check_ties(ties)
        self.allow_unclipped = _check_flag("allow_unclipped", allow_unclipped)
        self._warned = False
        if threads is not None:
            resolve_threads(threads)  # checked now, so that a bad count fails early
        self.threads = threads
        self._secret = check_secret(secret)
        self.client = Context(0, client).client
        self._used: set[tuple[int, int]] = set()
        self._guard = _check_state(state)

    def __repr__(self) -> str:
        return (f"Codec({self.mechanism!r}, client={self.client}, dim={self.dim}, "
                f"lattice={self.lattice!r}, clip={self.clip}, coder={self.coder!r}, "
                f"pad={self.pad!r})")

    def __reduce_ex__(self, protocol: object) -> Any:
        raise InvalidTypeError(
            "a cepam.Codec holds its secret and cannot be pickled or copied: create a "
            "Codec in each process from the secret instead")

    def encode(self, x: Any, *, round: int, message: int = 0,
               nonce: bytes | None = None) -> bytes:
        """Encodes x under context (round, self.client, message), with a
        fresh payload nonce unless ``nonce`` (16 bytes) is given (see
        :func:`encode`).

        Raises:
            ContextReuseError: this codec (or, with ``state``, anyone
                recording in the same file) already encoded that context.
            CepamError: and the errors of :func:`encode`.
        """
        context = Context(round, self.client, message)
        key = (context.round, context.message)
        if key in self._used:
            raise ContextReuseError(
                f"round {context.round}, message {context.message} was already encoded by "
                f"client {self.client}: a second payload of a round is a release the "
                f"accountant does not count"
            )
        settings = _Settings.checked(self._choice, prefer=self.prefer, clip=self.clip,
                                     coder=self.coder,
                                     non_float=self.non_float, pad=self.pad,
                                     structure=self.structure, threads=self.threads,
                                     buffers=self.buffers, ties=self.ties)
        nonce = _resolve_nonce(nonce)
        if self.clip is None and not self._warned:
            self._warned = True
            warnings.warn(_UNCLIPPED, PrivacyWarning, stacklevel=2)
        payload = _guarded_encode(self._guard, x, self.mechanism, self._secret, context,
                                  settings, nonce)
        self._used.add(key)
        return payload

    def decode(self, payload: bytes, *, round: int | None = None, output: str = "auto",
               dtype: str = "auto", max_coordinates: int | None = None,
               like: Any = None, device: Any = None, out: Any = None) -> Any:
        """Decodes a payload encoded under this codec's secret, enforcing the
        codec's mechanism and scale, client and clip (if set; a payload
        without a clip is refused unless ``allow_unclipped``), and ``round``
        if given (see :func:`decode` for the other arguments; ``out``: the
        caller's memory to decode into, as for :func:`decode`).

        Raises:
            UnexpectedPayloadError: the payload's settings differ.
            CepamError: and the errors of :func:`decode`.
        """
        expected = Expected.checked(mechanism=self.mechanism, clip=self.clip,
                                    client=self.client, round=round,
                                    clipped=not self.allow_unclipped)
        return _decode(payload, self._secret, output, dtype, max_coordinates, expected, like,
                       self.threads, device, self.buffers, self.ties, out)
