"""The ``lattice="auto"`` policy: which lattice an update is encoded with.

For each mechanism and coder a rule (:class:`_AutoRule`) names the fast
lattice (Z with n = 1) and the one that may code fewer bits (E8, with ANS);
statistics of the clipped update's shape (:class:`_Shape`, read on a sample)
decide between them (:func:`_high_saves`), or with ``prefer="bits"`` both
encode (a sample of a large update: :func:`_auto_sample_choice`) and the
shorter is kept.  :func:`_check_lattice` and :func:`_check_prefer` check
the ``lattice``, ``dim`` and ``prefer`` arguments; :func:`_costs_more_than_z`
says why a named Voronoi lattice is predicted to cost more bits than Z.
The measurements behind the rules: docs/guide/performance.md, "What auto
picks and what it costs".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._native import core as _core
from ._thread_pool import map_on_threads
from .errors import InvalidArgumentError, InvalidTypeError
from .keys import check_integer
from .lattices import LATTICE_CODES, LATTICE_NAMES, LATTICE_TABLE, LATTICES, check_combination
from .mechanisms import Gaussian, Mechanism, core_params
from .payload import CODER_CODES

__all__ = ["PREFERENCES", "_AUTO", "_AUTO_SAMPLE", "_E8_MIN_M", "_Z1", "_E8", "_AutoRule",
           "_Shape", "_check_lattice", "_check_prefer", "_high_saves", "_costs_more_than_z",
           "_auto_candidates", "_auto_options", "_bound_options", "_auto_sample_indices", "_shape",
           "_auto_sample_choice"]


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
    if not isinstance(lattice, str):
        raise InvalidTypeError(f"lattice must be a str, 'auto' or one of {LATTICE_NAMES}, got "
                               f"{type(lattice).__name__}")
    if lattice == "auto":
        if dim is not None:
            raise InvalidArgumentError(
                "lattice='auto' chooses the dimension itself: leave dim=None, or name a "
                "lattice ('Z' for Z^dim)"
            )
        return _AUTO
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
# - Gaussian, ANS: E8 saves up to 7 % of Z's bits, at 0.3 to 0.55 times Z's
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
    and :func:`_high_saves`), or None.  The reason names the rule that
    fired, never the update's own statistics: they are not protected by the
    mechanism, and the reason ends up in a log line."""
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
        return ("over 45 % of the coordinates are below scale/8: E8 costs up to 58 % more "
                "bits than Z")
    return None


def _auto_rule(mechanism: Mechanism, coder: int) -> _AutoRule:
    return _AUTO_RULES.get((mechanism.code, coder), _ALWAYS_Z1)


def _auto_candidates(mechanism: Mechanism, coder: int, prefer: str,
                     shape: Callable[[], _Shape], rms: float, m: int) -> list[tuple[int, int]]:
    """The lattices ``lattice="auto"`` encodes with, as (lattice code, n)
    pairs: one, or with ``prefer="bits"`` both of its rule's, whose shorter
    payload is kept (for more than ``2 * _AUTO_SAMPLE`` coordinates, both
    encode a sample, and the update is encoded once, with the lattice whose
    sample came out shorter).  ``rms``: the clipped update's over the scale;
    ``m``: its coordinates; ``shape()``: its statistics, read only where the
    choice needs them (not below ``_E8_MIN_M`` coordinates, where the
    balanced rule keeps Z whatever they are)."""
    rule = _auto_rule(mechanism, coder)
    if rule.low == rule.high or prefer == "speed":
        return [rule.low]
    if prefer == "bits":
        return [rule.low] if rms < rule.trial_below else [rule.low, rule.high]
    return [rule.high] if m >= _E8_MIN_M and _high_saves(shape()) else [rule.low]


def _auto_options(mechanism: Mechanism, coder: int, prefer: str) -> list[tuple[int, int]]:
    """Every lattice ``lattice="auto"`` may choose for this mechanism, coder
    and preference."""
    rule = _auto_rule(mechanism, coder)
    return [rule.low] if prefer == "speed" else sorted({rule.low, rule.high})


def _bound_options(choice: tuple[int, int] | None, mechanism: Mechanism, coder: int,
                   prefer: str) -> list[tuple[int, int]]:
    """The lattices whose payloads ``pad="max"`` and ``"levels"`` bound for
    the lattice ``choice`` (:func:`_check_lattice`'s: None for "auto"):
    every one "auto" may choose (:func:`_auto_options`), else ``choice``
    (cepam.padding.max_payload_bytes's ``lattices``)."""
    return _auto_options(mechanism, coder, prefer) if choice is _AUTO else [choice]


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
        indices = _shape_indices(m)
        sample = whole()[indices] if take is None else take(indices)
    # (In place on one float64 copy: at m = 10^5 the statistics are a few
    # percent of an encode, and numpy's temporaries had doubled them.)
    a = np.abs(np.asarray(sample), dtype=np.float64)
    if a.size == 0:
        return _Shape(m, rms, 0.0, 1.0, 0.0)
    a *= factor / scale
    small = float(np.count_nonzero(a < 0.125)) / a.size
    # (Over the noise scale beyond 1e154 the squares overflow: such an update
    # is refused by the encoder, which says why, so numpy's warnings would
    # only add noise before that message.)
    with np.errstate(over="ignore", invalid="ignore"):
        squares = a * a
        mean_square = float(squares.mean())
        if mean_square > 0.0:  # (relative to it: no underflow)
            squares /= mean_square
        squares *= squares  # (numpy's pairwise sums, not BLAS's: the same bits everywhere)
        kurtosis = float(squares.mean())
    half = a.size // 2
    if a.size % 2:
        a.partition(half)
        median = float(a[half])
    else:
        a.partition((half - 1, half))
        median = float(a[half - 1] + a[half]) / 2.0
    return _Shape(m, rms, median, small, kurtosis)


@functools.lru_cache(maxsize=16)
def _shape_indices(m: int) -> np.ndarray:
    """The sample :func:`_shape` reads of an update of m coordinates (cached:
    an FL client encodes the same model size round after round)."""
    indices = _sample_indices(m, _SHAPE_RUNS, _SHAPE_RUN)
    indices.flags.writeable = False
    return indices


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
