"""CUDA devices: the optional native module ``cepam._cuda`` and updates held
in GPU memory.

cepam's CUDA module runs the LRSUQ stage (latent radius, dither, trials,
closest lattice point; the reconstruction on decode) on the GPU with the
same per-sub-vector functions as the CPU codec (``csrc/lrsuq/subvector.hpp``),
compiled without fused multiply-add, so it gives the same bytes, and the
clip's norm and the entropy coder's source-model statistics; with the
Golomb coder, from 10^6 coordinates, the entropy coding too (elsewhere it
stays on the CPU).
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
information beta, V) come back to the host for the entropy coder.  The
whole body can also be coded on the GPU, on every lattice
(:meth:`LatticeStage.device_body`): with the Golomb coder each unit's
codes are counted and written at their bit offsets by the CPU coder's code
(``csrc/coding/golomb_core.hpp``), which encode does from
:data:`DEVICE_BODY_MIN_COORDINATES` (10^6) coordinates, where it was 1.2
to 2.9 times faster on an H200 (:meth:`LatticeStage.codes_body_on_device`);
with the ANS coder, built only with the CMake option
``CEPAM_CUDA_EXPERIMENTAL`` and not used by encode, the stage stays there,
each segment's symbols are computed (the box model's,
``csrc/coding/symbol_core.hpp``, and on A2, D4 and E8 the point model's,
``csrc/coding/point_table.hpp``: the CPU coder's own functions) and coded
by the rANS kernel, and only the segments' streams come back.  The update comes to
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
``decode(..., device="cuda")`` of an update of at least
:data:`DEVICE_DECODE_MIN_COORDINATES` coordinates: the body is
entropy-decoded on the host, only the trial indices H and lattice points M
travel, and the GPU kernel writes the update into device memory, where it
stays; a smaller update is decoded on the host and copied, which was faster
on an H200.  A body of either
coder can also be decoded on the GPU, every segment at once
(``_cuda.decode_ans_body_resident``, ``csrc/payload/segment_decode.hpp``;
``_cuda.decode_golomb_body_resident``, ``csrc/payload/golomb_segment.hpp``);
decode uses the Golomb one for bodies of 2^24 coordinates or more, the ANS
one never (:func:`decodes_body_on_device`).

All of this ran on an NVIDIA H200 (2026-11-30, two runs; CUDA 13.0, torch
2.11): the ``cuda`` tests passed and ``bench/gpu_check.py`` found the CPU's
bytes (payloads, stages, symbols, streams, norms, model statistics,
decoded values, the whole-body coders and decoders too); see
``docs/guide/gpu.md`` for what ran where and how fast.

Without the module or a device, CUDA tensors passed to :func:`cepam.encode`
are copied to the host, with a one-time :class:`HostCopyWarning`, and
``decode(device="cuda")`` decodes on the host and copies the result; nothing
else changes.
"""

from __future__ import annotations

from typing import Any

from ._checks import check_int
from ._native import core as _core
from ._native import cuda_module
from .cuda_checks import (SEGMENT_COORDINATES, SPOT_CHECKS, check_device_output, check_segment,
                          check_stage, segment_coordinates, segment_to_check, spot_indices)
# note_host_copy and to_device: for cepam.flatten and cepam.codec, not public
from .cuda_device import (HostCopyWarning, is_available, is_cuda, note_host_copy,
                          parse_device, status, to_device)
from .cuda_stage import DEVICE_BODY_MIN_COORDINATES, LatticeStage, body_on_device, coder_row
# the error this module's and LatticeStage's docstrings name (the API pages look it up here)
from .errors import DeviceError, InvalidArgumentError

__all__ = ["HostCopyWarning", "is_available", "status", "is_cuda", "parse_device",
           "LatticeStage", "SPOT_CHECKS", "spot_indices", "check_stage", "SEGMENT_COORDINATES",
           "segment_to_check", "segment_coordinates", "check_segment", "decodes_on_device",
           "DEVICE_DECODE_MIN_COORDINATES", "DEVICE_BODY_MIN_COORDINATES",
           "decodes_body_on_device", "decode_on_device",
           "check_device_output"]


# --- decode(device="cuda") -----------------------------------------------------

#: Updates of fewer coordinates than this are decoded on the host and
#: copied to the GPU by ``decode(device="cuda")``, even where the GPU's
#: decode path is available (:func:`decodes_on_device`).  That path
#: entropy-decodes the body on the host anyway (the symbols and their side
#: information: about as much host work as a whole CPU decode) and adds
#: 9 to 24 ms a call at 10^6 and 10^7 coordinates: on an H200 with 16 host
#: threads the host's decode and a copy was 2.2 to 4 times faster at 10^6,
#: 1.2 to 2 times at 10^7, and 0.97 to 1.18 times at 10^8 (two runs,
#: docs/guide/gpu.md).  Above, the GPU's path stays: with ``out=`` it
#: writes the caller's tensor without host memory for the values.
DEVICE_DECODE_MIN_COORDINATES = 1 << 24


def decodes_on_device(*, m: int | None = None, coder: int | None = None) -> bool:
    """Whether ``decode(device="cuda")`` decodes on the GPU: the CUDA path
    is available, torch (which holds the result) sees a CUDA device, and
    the update has at least :data:`DEVICE_DECODE_MIN_COORDINATES`
    coordinates or its body is decoded whole on the GPU
    (:func:`decodes_body_on_device`, given ``coder``).  Elsewhere it
    decodes on the host and copies the values to the GPU (into ``out=``
    where given).

    Args:
        m: the update's coordinates; None asks only whether the GPU path
            is available.
        coder: the payload's body coder (its code: 1 Golomb, 2 ANS), or
            None (no whole-body decoder considered).

    Returns:
        True where ``decode(device="cuda")`` decodes on the GPU.

    Raises:
        InvalidTypeError: m or coder is not an integer (or None).
        InvalidArgumentError: m is negative, or coder is no coder's code.
    """
    if m is not None:
        m = check_int("m", m, minimum=0)
    whole = coder is not None and m is not None and decodes_body_on_device(coder=coder, m=m)
    if not is_available():
        return False
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    return m is None or m >= DEVICE_DECODE_MIN_COORDINATES or whole


def decodes_body_on_device(*, coder: int, m: int) -> bool:
    """Whether ``decode(device="cuda")``, where it decodes on the GPU,
    decodes a body of coder ``coder`` and ``m`` coordinates entirely there
    (every segment at once, a block of threads a segment) rather than
    entropy-decoding it on the host and running the decode kernel: a
    Golomb body (``_cuda.decode_golomb_body_resident``, the code of
    ``csrc/payload/golomb_segment.hpp``) from
    :data:`DEVICE_BODY_MIN_COORDINATES`'s ``"decode"`` (2^24 coordinates,
    where the GPU decodes anyway), an ANS body never.

    On an H200 the Golomb decoder was 2.5 to 2.8 times faster than the
    decode kernel's path at 10^8 coordinates, and compute-sanitizer's
    memcheck found no error in its tests, the corrupted bodies included.
    Below 2^24 the host's decode and a copy was faster (up to 10^7
    coordinates: 1.2 to 5.6 times); at 1.6 x 10^7 the Golomb decoder was
    1.34 times faster.  The ANS decoder (``_cuda.decode_ans_body_resident``, built only with the
    CMake option ``CEPAM_CUDA_EXPERIMENTAL``) was slower at every size.
    Both give the CPU decoder's values and errors (docs/guide/gpu.md).

    Args:
        coder: the body coder's code (1 Golomb, 2 ANS).
        m: the update's coordinates.

    Returns:
        True where the body is decoded whole on the GPU.

    Raises:
        InvalidTypeError: coder or m is not an integer.
        InvalidArgumentError: coder is no coder's code, or m is negative.
    """
    coder = check_int("coder", coder, minimum=0)
    codes = sorted(row["code"] for row in _core.CODERS)
    if coder not in codes:
        raise InvalidArgumentError(f"coder must be a body coder's code, {codes}; got {coder}")
    return body_on_device(coder, check_int("m", m, minimum=0), direction="decode")


def decode_on_device(body: bytes, *, m: int, key: bytes, params: Any, coder: int, dtype: str,
                     threads: int, index: int, out: Any = None) -> Any:
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
        out: None, or the caller's 1-D contiguous torch tensor of m values
            of ``dtype`` on device ``index`` (checked by the caller; the
            native decoder checks its device, dtype and size again), which
            the values are decoded into: no device memory is allocated for
            them.

    Returns:
        A 1-D torch tensor of m values on the device: ``out`` where given.

    Raises:
        FormatError: the body is malformed (the CPU decoder's error).
        DeviceError: a CUDA failure.
    """
    import torch

    stream = torch.cuda.current_stream(index).cuda_stream
    into = None if out is None else torch.utils.dlpack.to_dlpack(out)
    if decodes_body_on_device(coder=coder, m=m):
        whole = getattr(cuda_module(), coder_row(coder)["device_decode"])
        capsule, _ = whole(body, m=m, key=key, params=params, dtype=dtype, device=index,
                           stream=stream, out=into)
    else:
        H, M = _core.decode_symbols(body, m=m, key=key, params=params, coder=coder,
                                    threads=threads)
        capsule, _ = cuda_module().decode_lattice(H, M, m=m, key=key, params=params, dtype=dtype,
                                                  device=index, stream=stream, threads=threads,
                                                  out=into)
    return out if out is not None else torch.from_dlpack(capsule)
