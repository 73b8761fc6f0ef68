"""CUDA devices: the optional native module ``cepam._cuda`` and updates held
in GPU memory.

cepam's CUDA module runs the LRSUQ stage (latent radius, dither, trials,
closest lattice point; the reconstruction on decode) on the GPU with the
same per-sub-vector functions as the CPU codec (``csrc/lrsuq/subvector.hpp``),
compiled without fused multiply-add, so it gives the same bytes, and the
clip's norm and the entropy coder's source-model statistics; with the ANS
coder the entropy coding too, though not by default yet (elsewhere it stays
on the CPU).
The module is built where a CUDA compiler and a GPU are found, for that
GPU's architecture, or on request for every architecture (CMake option
``CEPAM_CUDA``, see README), and imports on machines without a driver, where
it reports no device.

Status: experimental.  The kernels are compiled in CI and their arithmetic is
checked bit for bit on the CPU (``tests/core/test_subvector.py``,
``tests/core/test_rans_core.py``); the GPU tests (``tests/core/test_cuda.py``, marker
``cuda``; ``bench/gpu_check.py``) run only on a GPU machine.

What runs on the GPU: for :func:`cepam.encode` of an update whose coded
leaves are all in CUDA memory, the update is flattened on the GPU and not
copied to the host: the clip's sum of squares (format version 5's blocks on
the GPU, their tree on the host: the CPU's bits), the entropy coder's
source-model statistics (the largest magnitude and the per-cell integer
counts, ``csrc/coding/model_stats.hpp``; the host fits the model from them,
the CPU's model bit for bit), the sample ``lattice="auto"`` codes (copied
alone) and the LRSUQ stage.  The stage's results (H, M and the side
information beta, V) come back to the host for the entropy coder.  With
the ANS coder the whole body can also be coded on the GPU, on every
lattice: the stage stays there, each segment's symbols are computed (the
box model's, ``csrc/coding/symbol_core.hpp``, and on A2, D4 and E8 the
point model's, ``csrc/coding/point_table.hpp``: the CPU coder's own
functions) and coded by the rANS kernel, and only the segments' streams
come back
(:meth:`LatticeStage.device_body`); encode does not use it yet, as it was
slower when last timed on Z (:meth:`LatticeStage.codes_body_on_device`).  The update comes to
the host only where the CPU codec's rare paths need it: squares that
overflow or underflow, a NaN or infinite value (the error names it),
running statistics clipped apart (``buffers="separate"``, over the clip;
the clipped update goes back to the GPU), or decoded values near their
dtype's range.  After every such call the host recomputes a few
sub-vectors chosen from the context (:func:`check_stage`; with the body
coded on the GPU only those sub-vectors' stage is copied back for it) and,
then, codes one segment chosen from the context again and compares it
(:func:`check_segment`); it raises :class:`~cepam.errors.DeviceError` if
the GPU disagrees.  For
``decode(..., device="cuda")``: the body is entropy-decoded on the host,
only the trial indices H and lattice points M travel, and the GPU kernel
writes the update into device memory, where it stays.  A body of either
coder can also be decoded on the GPU, every segment at once
(``_cuda.decode_ans_body_resident``, ``csrc/payload/segment_decode.hpp``;
``_cuda.decode_golomb_body_resident``, ``csrc/payload/golomb_segment.hpp``);
decode does not use them yet (:func:`decodes_body_on_device`).

All of this ran on an NVIDIA H100 (CUDA 13.0, torch 2.11): the ``cuda``
tests passed and ``bench/gpu_check.py`` found the CPU's bytes (payloads,
stages, symbols, streams, norms, model statistics, decoded values), except
what came after that run: the host's side of the transfers on several
threads, the symbol kernel a unit of work a thread (on every lattice, the
point model's tables included), the streams gathered on the device, and
the GPU's decoder of whole bodies, checked so far through their host
twins; see
``docs/guide/gpu.md`` for what ran where and how fast.

Without the module or a device, CUDA tensors passed to :func:`cepam.encode`
are copied to the host, with a one-time :class:`HostCopyWarning`, and
``decode(device="cuda")`` decodes on the host and copies the result; nothing
else changes.
"""

from __future__ import annotations

import functools
import hashlib
import math
import warnings
from typing import Any

import numpy as np

from ._native import core as _core
from ._native import cuda_module
from .errors import CepamError, DeviceError, InvalidArgumentError
from .precision import judge_output, overflow_error

__all__ = ["HostCopyWarning", "is_available", "status", "is_cuda", "parse_device",
           "LatticeStage", "SPOT_CHECKS", "spot_indices", "check_stage", "SEGMENT_COORDINATES",
           "segment_to_check", "segment_coordinates", "check_segment", "decodes_on_device",
           "decodes_body_on_device", "decode_on_device",
           "check_device_output"]

# DLPack device types (dlpack.h): kDLCUDA, kDLCUDAManaged.
_DLPACK_CUDA = (2, 13)

_warned_host_copy = False


class HostCopyWarning(UserWarning):
    """A CUDA tensor was copied to host memory to be encoded (no CUDA module
    or no device); the payload is the same, only slower."""


@functools.lru_cache(maxsize=1)
def status() -> tuple[bool, str]:
    """(whether the CUDA path can run, why not: '' when it can), found once
    per process.

    Never raises: a missing module, driver or device is reported, not thrown.

    Returns:
        ``(True, '')``, or ``(False, why)`` with the reason in words.
    """
    module = cuda_module()
    if module is None:
        return False, ("cepam was built without its CUDA module (build from source with "
                       "a CUDA compiler: CUDACXX=/path/to/nvcc pip install . on the GPU "
                       "machine, or add -C cmake.define.CEPAM_CUDA=ON to build it without "
                       "a GPU)")
    count, why = module.device_count()
    if count < 1:
        return False, f"no usable CUDA device: {why}"
    return True, ""


def is_available() -> bool:
    """Whether encode and decode can run their LRSUQ stage on a CUDA device.

    Returns:
        True where the CUDA module is built and a device answers (:func:`status`).
    """
    return status()[0]


def dlpack_device(x: Any) -> tuple[int, int] | None:
    """``x.__dlpack_device__()`` as (device type, device id), or None when x
    does not speak DLPack."""
    probe = getattr(x, "__dlpack_device__", None)
    if probe is None:
        return None
    kind, index = probe()
    return int(kind), int(index)


def is_cuda(x: Any) -> bool:
    """Whether x is an array or tensor in CUDA device memory (by DLPack, so
    torch, CuPy and JAX arrays all count).

    Args:
        x: any object.

    Returns:
        True for an array or tensor in CUDA device memory.

    It raises nothing: an object without DLPack is not on CUDA.
    """
    device = dlpack_device(x)
    return device is not None and device[0] in _DLPACK_CUDA


def note_host_copy() -> None:
    """Warns, once per process, that a CUDA tensor is being copied to the
    host because the CUDA path is not available (with it, the copy feeds the
    entropy coder's source model while the GPU runs LRSUQ: no warning)."""
    global _warned_host_copy
    if _warned_host_copy or is_available():
        return
    _warned_host_copy = True
    warnings.warn(
        f"cepam: copying CUDA tensors to the host to encode them ({status()[1]}); "
        "the payload is the same. This warning is shown once.",
        HostCopyWarning,
        stacklevel=4,
    )


def parse_device(device: object) -> int | None:
    """The CUDA device index of ``device`` ('cuda', 'cuda:N', a torch.device
    or None for the host).

    Args:
        device: ``'cuda'``, ``'cuda:N'``, a torch.device, or None.

    Returns:
        The device index (0 for ``'cuda'``), or None for the host.

    Raises:
        InvalidArgumentError: for anything else.
    """
    if device is None or device == "cpu":
        return None
    text = str(device)
    if text == "cuda":
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise InvalidArgumentError(f"device must be None, 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def to_device(result: Any, index: int) -> Any:
    """Moves a decoded update (torch tensors, or a container of them) to CUDA
    device ``index``.

    Raises:
        InvalidArgumentError: when the result holds numpy arrays (ask for
            output='torch' or 'auto' with torch tensors).
        DeviceError: when torch has no usable CUDA device.
    """
    try:
        import torch
    except ImportError:
        raise InvalidArgumentError(
            "device='cuda' returns torch tensors: install torch (pip install torch==2.13.0 "
            "for the CPU build used in this project's CI, or a CUDA build)"
        ) from None
    if not torch.cuda.is_available():
        raise DeviceError(f"device='cuda': torch sees no CUDA device ({status()[1]})")
    target = torch.device("cuda", index)

    def move(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            raise InvalidArgumentError(
                "device='cuda' needs torch outputs: pass output='torch'"
            )
        return leaf.to(target)

    if isinstance(result, dict):
        return {name: move(leaf) for name, leaf in result.items()}
    if isinstance(result, (list, tuple)):
        return type(result)(move(leaf) for leaf in result)
    return move(result)


class LatticeStage:
    """An update held in CUDA memory, flattened on its GPU, and the GPU's
    parts of encoding it: the clip's sum of squares
    (:meth:`~cepam.cuda.LatticeStage.sum_of_squares`), the entropy coder's
    source-model statistics (:meth:`~cepam.cuda.LatticeStage.model_statistics`)
    and the LRSUQ stage (calling it).

    ``stage(params, key=..., factor=..., threads=...)`` (``params``: the
    core's ``_core.Params``; ``threads``: host threads that receive the
    stage) returns ``(H, M, beta, V)`` (host arrays) for
    ``_core.encode(..., lattice_stage=..., model_statistics=...)``, which
    codes them into the bytes the CPU would produce without reading the
    update.  :meth:`of` gives None when the update is not all on a CUDA
    device or the CUDA path is not available.  :meth:`host` and
    :meth:`take` copy all or some of the update to the host, for what the
    encoder does rarely (a non-finite value, running statistics clipped
    apart, a closer bound on the decoded values) or on a sample.

    Args:
        flat: the update flattened on its GPU: a contiguous 1-D tensor of the
            coded dtype (:meth:`of` builds it).
        structure: the update's structure (:class:`cepam.structure.Structure`).

    Building one raises nothing (:meth:`of` checks the update); the stage's
    calls raise :class:`cepam.errors.DeviceError` on a CUDA failure.
    """

    def __init__(self, flat: Any, structure: Any = None) -> None:
        self._flat = flat  # a contiguous 1-D tensor, the coded dtype
        self.structure = structure  # the update's cepam.structure.Structure
        self.timings: list[dict[str, float]] = []

    @staticmethod
    def usable() -> bool:
        """Whether the CUDA path can run (:func:`is_available`): worth
        describing an update for :meth:`of`."""
        return is_available()

    @classmethod
    def of(cls, leaves: list[Any], structure: Any, dtype: str) -> "LatticeStage | None":
        """The stage of an update described by :func:`cepam.flatten.describe`
        (its coded leaves, structure and coded dtype), flattened on the GPU as
        :func:`cepam.flatten.flatten` flattens it on the host; None unless
        the stage takes these leaves (:meth:`_takes`) and torch is installed."""
        if not cls._takes(leaves):
            return None
        try:
            import torch
        except ImportError:
            return None
        target = getattr(torch, dtype)
        flat = torch.cat([t.detach().reshape(-1).to(target) for t in leaves]).contiguous()
        return cls(flat, structure)

    @staticmethod
    def _takes(leaves: list[Any]) -> bool:
        """Whether the stage takes an update of these leaves: every one in
        CUDA memory, and the CUDA path available."""
        return is_available() and all(is_cuda(t) for t in leaves)

    @property
    def size(self) -> int:
        """The update's number of coordinates, m."""
        return int(self._flat.numel())

    @property
    def dtype(self) -> str:
        """The coded dtype, "float32" or "float64"."""
        return str(self._flat.dtype).removeprefix("torch.")

    def host(self) -> np.ndarray:
        """The whole update copied to host memory (1-D, the coded dtype)."""
        return self._flat.cpu().numpy()

    def take(self, indices: np.ndarray) -> np.ndarray:
        """The coordinates at ``indices`` (int64 array), copied to the host."""
        import torch

        where = torch.as_tensor(np.asarray(indices, np.int64), device=self._flat.device)
        return self._flat[where].cpu().numpy()

    def model_statistics(self, *, factor: float) -> tuple[float, np.ndarray]:
        """(range, counts[1024] uint64): the entropy coder's source-model
        statistics of the update times ``factor`` (csrc/coding/model_stats.hpp),
        from which the host fits the CPU's model without the update
        (``_core.encode(..., model_statistics=...)``).

        Raises:
            DeviceError: a CUDA failure.
        """
        capsule, stream = self._capsule()
        rng, counts, timing = cuda_module().model_statistics(capsule, factor=factor,
                                                             stream=stream)
        self.timings.append({"model_" + k: v for k, v in timing.items()})
        return rng, counts

    def upload(self, values: np.ndarray) -> "LatticeStage":
        """The stage of ``values`` (host memory, the coded dtype) on this
        stage's device: for an update the host changed (``buffers="separate"``
        clips weights and running statistics apart, on the host)."""
        import torch

        return type(self)(torch.from_numpy(np.ascontiguousarray(values)).to(self._flat.device),
                          self.structure)

    def sum_of_squares(self, *, threads: int) -> float:
        """The clip's sum of squares of the update (float64), the CPU's
        ``_core.sum_of_squares`` bit for bit: format version 5's blocks and
        tree summed on the GPU (:meth:`_first_pass`) when the total is finite
        and above ``SQUARES_FLOOR``, as the CPU's first pass is; otherwise
        (squares that overflow or underflow, a NaN or an infinity: rare) the
        CPU's computation on a host copy of the update, with its rescaled
        second pass (``threads`` threads).

        Raises:
            InvalidArgumentError: a coordinate is NaN or infinite (the CPU's
                message, naming the first such flat index).
            DeviceError: a CUDA failure.
        """
        total, _ = self._first_pass()
        if math.isfinite(total) and total > SQUARES_FLOOR:
            return total
        return float(_core.sum_of_squares(self.host(), threads=threads))

    def _capsule(self) -> tuple[Any, int]:
        """(DLPack capsule of the update, the stream its kernels run on):
        torch's current stream on the update's device (0: the legacy default
        stream; the capsule then asks for stream 1, which DLPack says
        means the same)."""
        import torch

        stream = torch.cuda.current_stream(self._flat.device).cuda_stream
        return self._flat.__dlpack__(stream=stream or 1), stream

    def _first_pass(self) -> tuple[float, float]:
        """(total, largest magnitude): the first pass of the sum of squares
        on the GPU (``_cuda.sum_of_squares``; its host twin is
        ``_core.testing.sum_of_squares_blocks``)."""
        capsule, stream = self._capsule()
        total, maxabs, timing = cuda_module().sum_of_squares(capsule, stream=stream)
        self.timings.append({"squares_" + k: v for k, v in timing.items()})
        return total, maxabs

    def _lattice(self, params: Any, *, key: bytes, factor: float,
                 threads: int) -> tuple[Any, Any, Any, Any]:
        """(H, M, beta, V) of every sub-vector, host arrays, from the GPU's
        kernel (``_cuda.encode_lattice``, the host's side on ``threads``
        threads; its host twin is ``_core.testing.encode_subvectors``)."""
        capsule, stream = self._capsule()
        H, M, beta, V, timing = cuda_module().encode_lattice(
            capsule, key=key, params=params, factor=factor, stream=stream, threads=threads)
        self.timings.append(timing)
        return H, M, beta, V

    def __call__(self, params: Any, *, key: bytes, factor: float,
                 threads: int = 1) -> tuple[Any, Any, Any, Any]:
        H, M, beta, V = self._lattice(params, key=key, factor=factor, threads=threads)
        m = int(self._flat.numel())
        indices = spot_indices(key, len(H))
        check_stage((H, M, beta, V), self._pieces(indices, params.n), indices, m=m, key=key,
                    params=params, factor=factor)
        return H, M, beta, V

    def codes_body_on_device(self, params: Any) -> bool:
        """Whether :func:`cepam.encode` codes this update's body on the
        GPU (:meth:`device_body`) rather than on the host
        from the GPU's stage (``params``: the core's ``_core.Params``).

        Always False: the whole-body coders are experimental, built only
        with the CMake option ``CEPAM_CUDA_EXPERIMENTAL`` (their timings
        and memory are in docs/guide/gpu.md); both paths give the CPU's
        bytes."""
        return False

    def device_body(self, params: Any, *, coder: int, key: bytes, factor: float,
                    statistics: tuple[float, np.ndarray]) -> bytes:
        """The body of the update by body coder ``coder`` (its code), coded
        on the GPU from the LRSUQ stage by the ``_cuda`` function its row of
        the core's coder table names (``_core.CODERS``' ``device_encode``:
        ``encode_ans_body_resident``, the box model's symbols and, on A2, D4
        and E8, the point model's, each segment taking the shorter stream as
        on the CPU, only the streams coming back, the source model fitted on
        the host from ``statistics`` (:meth:`model_statistics`);
        ``encode_golomb_body_resident``, every segment's codes counted and
        written at their bit offsets by the code the CPU's coder runs,
        ``csrc/coding/golomb_core.hpp``, only the body coming back): the
        CPU's body bytes.  Checked on the host: the stage of the
        spot-checked sub-vectors (copied back alone, :func:`check_stage`)
        and one whole segment chosen from the key, coded again by the CPU's
        segment encoder from its coordinates and compared with the GPU's
        (:func:`check_segment`).

        Raises:
            DeviceError: the GPU's results differ from the host's, or a CUDA
                failure.
            EncodingError: a sub-vector cannot be encoded (the CPU's error).
        """
        row = _coder_row(coder)
        return self._checked_body(
            lambda spot: self._device_body(row, params, key=key, factor=factor,
                                           statistics=statistics, spot=spot),
            params, key=key, factor=factor, coder=coder)

    def _checked_body(self, code: Any, params: Any, *, key: bytes, factor: float,
                      coder: int) -> bytes:
        """code(spot) -> (body, stage of the sub-vectors spot), from the GPU,
        checked: the spot-checked sub-vectors' stage (:func:`check_stage`)
        and one whole segment chosen from the key, coded again by the host
        from its coordinates (:func:`check_segment`)."""
        n = int(params.n)
        m = self.size
        N = -(-m // n)
        indices = spot_indices(key, N)
        body, spot = code(indices)
        check_stage(spot, self._pieces(indices, n), indices, m=m, key=key, params=params,
                    factor=factor, aligned=True)
        segment = segment_to_check(key, m=m, n=n)
        first, last = segment_coordinates(segment, m=m, n=n)
        check_segment(body, self._flat[first:last].cpu().numpy(), segment, m=m, key=key,
                      params=params, factor=factor, coder=coder)
        return body

    def _device_body(self, row: dict, params: Any, *, key: bytes, factor: float,
                     statistics: tuple[float, np.ndarray],
                     spot: np.ndarray) -> tuple[bytes, tuple[Any, Any, Any, Any]]:
        """(body, (H, M, beta, V) of sub-vectors ``spot``) from the GPU's
        kernels: the ``_cuda`` function ``row["device_encode"]`` (the coder's
        row of ``_core.CODERS``; its host twins are
        ``_core.testing.ans_body_by_streams(..., shared_symbols=True)`` and
        ``_core.testing.golomb_body_by_units``), given ``statistics`` where
        the row says it takes the source model's."""
        capsule, stream = self._capsule()
        model = {"statistics": statistics} if row["device_encode_takes_model"] else {}
        body, stage, timing = getattr(cuda_module(), row["device_encode"])(
            capsule, key=key, params=params, factor=factor, spot=np.asarray(spot, np.uint64),
            stream=stream, **model)
        self.timings.append(timing)
        return body, stage

    def _pieces(self, indices: np.ndarray, n: int) -> np.ndarray:
        """The coordinates of sub-vectors ``indices`` (n each, zeros past the
        update's end), copied to the host: len(indices) n values."""
        import torch

        flat = self._flat
        m = int(flat.numel())
        if len(indices) == 0:
            return np.zeros(0, dtype=str(flat.dtype).removeprefix("torch."))
        rows = torch.as_tensor(indices.astype(np.int64), device=flat.device)
        cols = rows[:, None] * n + torch.arange(n, device=flat.device)
        values = flat[cols.clamp(max=m - 1)]
        values = torch.where(cols < m, values, torch.zeros((), dtype=flat.dtype,
                                                            device=flat.device))
        return values.reshape(-1).cpu().numpy()


SQUARES_FLOOR = 2.0 ** -900
"""A first pass of the sum of squares at or below this (or not finite) asks
for the rescaled second pass (``csrc/lrsuq/norm.cpp``'s test, the same
constant)."""


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


def _coder_row(code: int) -> dict:
    """The row of body coder ``code`` in the core's coder table
    (``_core.CODERS``: its name, the file of its CPU code, the ``_cuda``
    functions that code and decode a whole body on a GPU, whether that
    encoder takes the source model's statistics); read here, not from
    cepam.payload, which imports what imports this module."""
    return next(row for row in _core.CODERS if row["code"] == code)


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


# --- decode(device="cuda") -----------------------------------------------------

def decodes_on_device() -> bool:
    """Whether ``decode(device="cuda")`` runs the GPU kernel: the CUDA path
    is available and torch (which holds the result) sees a CUDA device.

    Returns:
        True where ``decode(device="cuda")`` decodes on the GPU.
    """
    if not is_available():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def decodes_body_on_device() -> bool:
    """Whether ``decode(device="cuda")`` decodes a body entirely on the GPU
    (every segment at once, a block of threads a segment: an ANS body by
    ``_cuda.decode_ans_body_resident`` with the code of
    ``csrc/payload/segment_decode.hpp``, the point model's tables included;
    a Golomb body by ``_cuda.decode_golomb_body_resident`` with the code of
    ``csrc/payload/golomb_segment.hpp``) rather than entropy-decoding it on
    the host and running the decode kernel.

    Always False: the whole-body decoders are experimental, built only
    with the CMake option ``CEPAM_CUDA_EXPERIMENTAL`` (docs/guide/gpu.md
    says where they have run); they give the CPU decoder's values and
    errors.

    Returns:
        False (see above).
    """
    return False


def decode_on_device(body: bytes, *, m: int, key: bytes, params: Any, coder: int, dtype: str,
                     threads: int, index: int) -> Any:
    """The m decoded coordinates of a payload body as a 1-D torch tensor of
    ``dtype`` ("float32" or "float64") on CUDA device ``index``: the body
    entropy-decoded on the host (``threads`` threads, straight into the
    arrays that travel), the trial indices and lattice points packed
    (``threads`` threads) and copied to the device, and the LRSUQ
    reconstruction run by the GPU kernel (the CPU codec's values, bit for
    bit).  With :func:`decodes_body_on_device`, the body is decoded whole
    on the GPU instead (either coder, ``coder`` its code).

    Args:
        body: the payload's body (opened).
        m: the update's coordinates.
        key: the LRSUQ stream key.
        params: the core's ``_core.Params``.
        coder: the coder's code.
        dtype: ``"float32"`` or ``"float64"``.
        threads: host threads.
        index: the CUDA device.

    Returns:
        A 1-D torch tensor of m values on the device.

    Raises:
        FormatError: the body is malformed (the CPU decoder's error).
        DeviceError: a CUDA failure.
    """
    import torch

    stream = torch.cuda.current_stream(index).cuda_stream
    if decodes_body_on_device():
        whole = getattr(cuda_module(), _coder_row(coder)["device_decode"])
        capsule, _ = whole(body, m=m, key=key, params=params, dtype=dtype, device=index,
                           stream=stream)
        return torch.from_dlpack(capsule)
    H, M = _core.decode_symbols(body, m=m, key=key, params=params, coder=coder, threads=threads)
    capsule, _ = cuda_module().decode_lattice(H, M, m=m, key=key, params=params, dtype=dtype,
                                              device=index, stream=stream, threads=threads)
    return torch.from_dlpack(capsule)


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
