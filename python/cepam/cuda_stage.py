"""The GPU's part of encoding an update held in CUDA memory
(:class:`LatticeStage`): the update flattened on its GPU, the clip's sum of
squares, the source model's statistics, the LRSUQ stage and, on request,
the body coded on the device, each checked by the host
(``cepam.cuda_checks``).  Part of ``cepam.cuda``, which exports
:class:`LatticeStage`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._native import core as _core
from ._native import cuda_module
from .cuda_checks import (check_segment, check_stage, segment_coordinates, segment_to_check,
                          spot_indices)
from .cuda_device import is_available, is_cuda

__all__ = ["LatticeStage", "SQUARES_FLOOR", "DEVICE_BODY_MIN_COORDINATES", "body_on_device",
           "coder_row"]

#: From how many coordinates the body of an update is coded whole on a GPU
#: by :func:`cepam.encode` of an update held there
#: (:meth:`LatticeStage.device_body`; ``"encode"``) and decoded whole there
#: by ``decode(device="cuda")`` (``"decode"``), by body coder (its name in
#: the core's coder table, ``_core.CODERS``); a coder or direction not
#: named here never is.  On an H200 with 16 host threads (docs/guide/gpu.md,
#: three runs) the whole-body Golomb coder encoded a CUDA tensor 1.22 to 1.26
#: times as fast as the default path (the stage on the GPU, the body coded
#: on the host) at 10^6 coordinates, 1.5 to 1.9 times at 10^7 and 2.5 to
#: 2.9 times at 10^8, and its decoder decoded 2.5 to 2.8 times as fast as
#: the decode kernel's path at 10^8 (that path's range, from
#: ``cepam.cuda.DEVICE_DECODE_MIN_COORDINATES``; below, the host's decode
#: and a copy was faster up to 10^7 coordinates, 1.2 to 5.6 times, and the
#: Golomb decoder 1.34 times faster at 1.6 x 10^7, in a later run).  The whole-body ANS coder
#: (built only with CEPAM_CUDA_EXPERIMENTAL) encoded faster only at 10^8 on
#: Z and D4 (1.1 to 1.6 times), 0.4 to 0.8 times below, and decoded slower
#: at every size.
DEVICE_BODY_MIN_COORDINATES: dict[str, dict[str, int]] = {
    "golomb": {"encode": 1_000_000, "decode": 1 << 24}}


def body_on_device(coder: int, m: int, *, direction: str) -> bool:
    """Whether a body of coder ``coder`` (its code) of ``m`` coordinates is
    coded (``direction`` "encode") or decoded ("decode") whole on the GPU:
    :data:`DEVICE_BODY_MIN_COORDINATES`.  The caller checks its arguments."""
    minimum = DEVICE_BODY_MIN_COORDINATES.get(coder_row(coder)["name"], {}).get(direction)
    return minimum is not None and m >= minimum


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

        # (A copy: the indices may be a read-only array, which torch cannot share.)
        where = torch.tensor(np.asarray(indices, np.int64), device=self._flat.device)
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

    def codes_body_on_device(self, *, coder: int) -> bool:
        """Whether :func:`cepam.encode` codes this update's body whole on
        the GPU (:meth:`device_body`) rather than on the host from the GPU's
        stage, for body coder ``coder`` (its code): where the update has at
        least :data:`DEVICE_BODY_MIN_COORDINATES`'s coordinates for that
        coder's encode (Golomb from 10^6; never ANS, whose whole-body coder is
        experimental).  Both paths give the CPU's bytes."""
        return body_on_device(coder, self.size, direction="encode")

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
        row = coder_row(coder)
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


def coder_row(code: int) -> dict:
    """The row of body coder ``code`` in the core's coder table
    (``_core.CODERS``: its name, the file of its CPU code, the ``_cuda``
    functions that code and decode a whole body on a GPU, whether that
    encoder takes the source model's statistics); read here, not from
    cepam.payload, which imports what imports this module."""
    return next(row for row in _core.CODERS if row["code"] == code)
