"""The encode pipeline: the update flattened (on its GPU where it lives
there), its norm measured and clipped (the running statistics apart with
``buffers="separate"``: :mod:`cepam.statistics_clip`), the lattice chosen
(:mod:`cepam.auto`), the body coded and the payload sealed and padded
(:func:`_encode`).  :func:`cepam.encode` and :class:`cepam.Codec` check
their arguments into one :class:`_Settings` and call
:func:`_guarded_encode`."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._checks import check_clip, check_flag
from ._finite import check_encodable_range
from ._native import core as _core
from .auto import (_AUTO, _AUTO_SAMPLE, _E8_MIN_M, _Shape, _auto_candidates, _bound_options,
                   _auto_sample_choice, _auto_sample_indices, _check_prefer, _costs_more_than_z,
                   _shape)
from .cuda import LatticeStage
from .errors import EncodingError, InvalidArgumentError, InvalidTypeError, RateWarning
from .guard import ContextGuard
from .keys import Context, SecretKeys, check_nonce, new_nonce
from .lattices import LATTICE_CODES, LATTICES
from .mechanisms import Mechanism, core_params
from .padding import check_pad, fixed_bytes, max_payload_bytes, padding_bytes, uses_bound
from .payload import CODER_CODES, Header, from_fields, pack_header, sealed_head
from .sealing import seal
from .statistics_clip import _clip_buffers_apart
from .flatten import describe, flatten
from .structure import Structure, check_buffers, check_non_float
from .template import bare, digest
from .ties import TiePairs, resolve_ties
from .threads import resolve_threads

__all__ = ["_Settings", "_UNCLIPPED", "_update_norm", "_norm_pass", "_resolve_nonce",
           "_guarded_encode", "_check_state"]

#: Finite float64 values whose squares overflow (an l2 norm above about
#: 1.3e154) are measured and clipped in units of 2^k, the power of two that
#: brings their largest magnitude into [2^480, 2^481): there the sum of
#: squares of up to 2^62 coordinates is finite and the norm is above any clip
#: below 2^480.  Dividing by 2^k is exact (coordinates below 2^(k - 1022),
#: under 2^-541 of the largest, lose bits or become 0).
_OVERFLOW_PEAK_EXPONENT = 481


def _check_coder(coder: object) -> int:
    if not isinstance(coder, str):
        raise InvalidTypeError(f"coder must be a str, one of {tuple(CODER_CODES)}, got {coder!r}")
    if coder not in CODER_CODES:
        raise InvalidArgumentError(f"coder must be one of {tuple(CODER_CODES)}, got {coder!r}")
    return CODER_CODES[coder]


def _update_norm(flat: np.ndarray, structure: Structure, threads: int) -> float:
    """The l2 norm the clip is applied to, from the core's sum of squares
    (the same for every thread count); where the squares overflow float64,
    in the units of :func:`_in_norm_units` (inf only for a norm beyond
    float64).

    Raises:
        InvalidArgumentError: a NaN or Inf, located in ``structure``.
    """
    sumsq, peak = _norm_pass(flat, structure, threads)
    if math.isfinite(sumsq):
        return math.sqrt(sumsq)
    _, unit, sumsq = _in_norm_units(flat, peak, threads)
    return math.sqrt(sumsq) * unit


def _in_norm_units(flat: np.ndarray, peak: float, threads: int
                   ) -> tuple[np.ndarray, float, float]:
    """``(flat / 2^k, 2^k, its sum of squares)``: the values measured in the
    power of two of _OVERFLOW_PEAK_EXPONENT, where their squares overflow
    float64; ``peak`` is their largest magnitude (negative: not known)."""
    if peak < 0.0:
        peak = float(np.max(np.abs(flat)))
    unit = math.ldexp(1.0, max(0, math.frexp(peak)[1] - _OVERFLOW_PEAK_EXPONENT))
    scaled = flat / unit  # (exact: a power of two)
    return scaled, unit, _core.sum_of_squares_and_peak(scaled, threads)[0]


def _clip_overflowing(flat: np.ndarray, structure: Structure, *, peak: float, clip: float,
                      buffers: str, threads: int) -> np.ndarray:
    """``flat`` (finite values whose sum of squares overflows float64)
    clipped to ``clip`` as :func:`_encode` clips, running statistics apart
    with ``buffers="separate"``, in the units of :func:`_in_norm_units`
    (``peak`` as there): a new array of norm ``clip`` (up to rounding,
    which the one clip then absorbs).

    Raises:
        EncodingError: ``clip`` is at least 2^480, so the update's norm
            (above 1.3e154) may be within it and its values too large to code.
    """
    scaled, unit, sumsq = _in_norm_units(flat, peak, threads)
    if clip / unit >= math.sqrt(sumsq):
        raise EncodingError(f"the update's l2 norm is beyond float64's squares (above 1.3e154) "
                            f"and clip={clip:g} does not bring it below: pass a smaller clip")
    if buffers == "separate":
        apart = _clip_buffers_apart(lambda: scaled, structure, clip / unit, sumsq)
        if apart is not None:
            scaled = apart
            sumsq = _core.sum_of_squares_and_peak(scaled, threads)[0]
    scaled *= scaled.dtype.type(clip / unit / math.sqrt(sumsq))
    scaled *= scaled.dtype.type(unit)
    return scaled


def _norm_pass(flat: np.ndarray, structure: Structure, threads: int) -> tuple[float, float]:
    """``_sum_of_squares`` and, from the same pass over ``flat``, its
    largest magnitude (exact), which the encoder's source model takes
    instead of a pass of its own.

    Raises:
        InvalidArgumentError: a NaN or Inf, located in ``structure``.
    """
    try:
        return _core.sum_of_squares_and_peak(flat, threads)
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
    threads: int | None  # None: the default, read at each call (at_call)
    buffers: str
    ties: TiePairs  # besides those found by storage in the update
    #: at_call's settings of a thread count (threads None only; not compared).
    _resolved: dict[int, "_Settings"] = field(default_factory=dict, init=False, repr=False,
                                              compare=False)

    @classmethod
    def checked(cls, lattice: tuple[int, int] | None, *, prefer: object, clip: object,
                coder: object, non_float: object, pad: object, structure: object,
                threads: object, buffers: object, ties: TiePairs) -> "_Settings":
        """The settings, each checked (``lattice``: :func:`cepam.auto._check_lattice`'s
        choice, ``ties``: :func:`cepam.structure.check_ties`'s); ``threads``
        None stays None, for :meth:`at_call` to resolve.  Arguments of plain
        immutable types (str, int, float, bool, None) take the settings
        checked before from :data:`_CHECKED` (``lattice`` and ``ties``, checked
        already, are tuples of ints and strs)."""
        args = (prefer, clip, coder, non_float, pad, structure, threads, buffers)
        types = tuple(map(type, args))  # (in the key: 1, 1.0 and True are equal)
        plain = _PLAIN_TYPES.get(types)
        if plain is None:
            plain = _PLAIN_TYPES[types] = all(t in _PLAIN for t in types)
        if plain:
            key = (lattice, ties, args, types)
            known = _CHECKED.get(key)
            if known is not None:
                return known
        settings = cls(lattice, _check_prefer(prefer, lattice), check_clip(clip),
                       _check_coder(coder), check_non_float(non_float),
                       check_pad(pad), check_flag("structure", structure),
                       None if threads is None else resolve_threads(threads),
                       check_buffers(buffers), ties)
        if plain:
            if len(_CHECKED) >= _CHECKED_MAX:
                _CHECKED.clear()
            _CHECKED[key] = settings
        return settings

    def at_call(self) -> "_Settings":
        """These settings for one encode: ``threads`` None resolved now
        (``CEPAM_THREADS``, else the cores: :func:`cepam.threads.resolve_threads`);
        the settings of each count are built once (:attr:`_resolved`)."""
        if self.threads is not None:
            return self
        threads = resolve_threads(None)
        resolved = self._resolved.get(threads)
        if resolved is None:
            resolved = self._resolved[threads] = replace(self, threads=threads)
        return resolved


#: Settings checked before (by _Settings.checked): at most _CHECKED_MAX, by
#: their arguments; a program encodes with one or a few.
_CHECKED: dict[tuple[object, ...], _Settings] = {}
_CHECKED_MAX = 32
#: The types an argument of a cached check may have (exactly: no subclass,
#: nothing mutable or holding something else, as a tuple may), and which
#: tuples of argument types are of them alone.
_PLAIN = frozenset({str, int, float, bool, type(None)})
_PLAIN_TYPES: dict[tuple[type, ...], bool] = {}


_UNCLIPPED = ("no clip: the decoded update carries the noise, but no differential-privacy "
              "guarantee follows, since nothing bounds one client's update; pass clip= "
              "(README, 'Choosing sigma and clip')")


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
    if gpu.codes_body_on_device(coder=coder):  # (the coder's row in the table names its kernels)
        return gpu.device_body(params, coder=coder, key=key, factor=factor, statistics=statistics)
    return _core.encode_coded_body(
        np.empty(0, dtype), key=key, params=params, factor=factor, coder=coder, threads=threads,
        lattice_stage=gpu(params, key=key, factor=factor, threads=threads),
        model_statistics=statistics, m=m)


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
        sumsq, peak = _norm_pass(flat, structure, threads)
    else:
        structure, m, dtype, host = gpu.structure, gpu.size, np.dtype(gpu.dtype), gpu.host
        peak = -1.0  # (the GPU's model statistics have their own)
        try:  # also rejects NaN and Inf
            sumsq = gpu.sum_of_squares(threads=threads)
        except InvalidArgumentError:
            raise InvalidArgumentError(_locate_non_finite(host(), structure)) from None
    clipped = None
    if math.isinf(sumsq) and math.isfinite(clip):  # finite values, squares beyond float64
        clipped = _clip_overflowing(host(), structure, peak=peak, clip=clip,
                                    buffers=settings.buffers, threads=threads)
    elif settings.buffers == "separate" and math.isfinite(clip):
        clipped = _clip_buffers_apart(host, structure, clip, sumsq)
    if clipped is not None:
        sumsq, peak = _core.sum_of_squares_and_peak(clipped, threads)
        if gpu is None:
            flat = clipped
        else:
            gpu = gpu.upload(clipped)  # the values coded
        host = lambda: clipped  # noqa: E731
    norm = math.sqrt(sumsq)
    factor = clip / norm if norm > clip else 1.0
    check_encodable_range(host, structure, norm=norm, factor=factor, mechanism=mechanism)
    rms = min(norm, clip) / math.sqrt(m) / mechanism.scale if m else 0.0

    def shape() -> _Shape:  # the update's statistics, computed where the choice reads them (once)
        return _shape(None if gpu is None else gpu.take, host, m, rms, factor, mechanism.scale)

    if lattice is _AUTO:
        candidates = _auto_candidates(mechanism, coder, settings.prefer, shape, rms, m)
    else:
        candidates = [lattice]
        if lattice[0] != LATTICE_CODES["Z"] and m >= _E8_MIN_M:
            why = _costs_more_than_z(lattice, coder, shape())
            if why is not None:
                # encode (or Codec.encode) -> _guarded_encode -> _encode
                warnings.warn(
                    f"lattice={LATTICES[lattice[0]]!r} is predicted to send more bits than "
                    f"lattice='Z' for this update: {why}, and it encodes "
                    "more slowly than Z; pass lattice='Z' or 'auto'", RateWarning, stacklevel=4)
    keys = SecretKeys(secret)
    key = keys.stream(context, nonce)  # the GPU path codes with it too
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
            # (by position: x, key, params, factor, coder, threads, lattice_stage,
            # model_statistics, m, peak: the source model's largest magnitude)
            body = _core.encode_coded_body(
                flat, key, params, factor, coder, threads, None, None, -1, peak)
        else:
            body = _gpu_body(gpu, params, key=key, factor=factor, coder=coder, threads=threads,
                             statistics=statistics, m=m, dtype=dtype)
        bodies.append((body, code, dim))
    # One payload is sent; the discarded candidate is never seen by anyone.
    body, code, dim = bodies[0] if len(bodies) == 1 else min(bodies, key=lambda b: len(b[0]))
    sealed_digest = b""
    if not settings.structure:  # the header says m only; the sealed digest binds the rest
        sealed_digest, structure = digest(structure), bare(structure.size)
    header = from_fields(Header, (mechanism.code, mechanism.scale, coder, clip, context,
                                  structure, nonce))
    head = pack_header(header)
    fixed = fixed_bytes(len(head), bare=bool(sealed_digest))
    max_bytes = None
    if uses_bound(pad):  # over every lattice the setting may choose, not the data's choice
        max_bytes = max_payload_bytes(
            mechanism, clip=clip, m=m, coder=coder, fixed_bytes=fixed,
            lattices=_bound_options(lattice, mechanism, coder, settings.prefer))
    padding = padding_bytes(pad, fixed + len(body), max_bytes=max_bytes)
    del bodies  # (memory: the discarded candidate's body)
    return seal(header, sealed_head(code, dim, padding, digest=sealed_digest), body=body,
                padding=padding, secret=keys, threads=threads, head=head)


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
