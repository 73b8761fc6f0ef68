"""CUDA devices: the optional native module ``cepam._cuda`` and updates held
in GPU memory.

cepam's CUDA module runs the LRSUQ stage (latent radius, dither, trials,
closest lattice point; the reconstruction on decode) on the GPU with the
same per-sub-vector functions as the CPU codec (``csrc/lrsuq/subvector.hpp``),
compiled without fused multiply-add, so it gives the same bytes.  Entropy
coding stays on the CPU.  The module is built when a CUDA compiler is found
(CMake option ``CEPAM_CUDA``, see README) and imports on machines without a
driver, where it reports no device.

Status: experimental.  The kernels are compiled in CI and their arithmetic is
checked bit for bit on the CPU (``tests/test_subvector.py``); the GPU tests
(``tests/test_cuda.py``, marker ``cuda``) have not yet run on a GPU.

Without the module or a device, CUDA tensors passed to :func:`cepam.encode`
are copied to the host, with a one-time :class:`HostCopyWarning`; nothing else
changes.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from ._native import cuda_module
from .errors import DeviceError, InvalidArgumentError

__all__ = ["HostCopyWarning", "is_available", "status", "is_cuda", "parse_device",
           "LatticeStage"]

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
    """
    module = cuda_module()
    if module is None:
        return False, ("cepam was built without its CUDA module (build from source with "
                       "a CUDA compiler: CUDACXX=/path/to/nvcc pip install .)")
    count, why = module.device_count()
    if count < 1:
        return False, f"no usable CUDA device: {why}"
    return True, ""


def is_available() -> bool:
    """Whether encode and decode can run their LRSUQ stage on a CUDA device."""
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
    torch, CuPy and JAX arrays all count)."""
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


def _cuda_leaves(update: Any, names: list[str]) -> list[Any] | None:
    """The CUDA torch tensors of ``update`` in coding order (``names``: the
    coded entries of a mapping), or None unless every one is a CUDA tensor."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(update, dict):
        leaves = [update[name] for name in names]
    elif isinstance(update, (list, tuple)):
        leaves = list(update)
    else:
        leaves = [update]
    if all(isinstance(t, torch.Tensor) and t.is_cuda for t in leaves):
        return leaves
    return None


class LatticeStage:
    """The LRSUQ stage of an update held in CUDA memory, run on its GPU.

    ``stage(params, key=..., factor=...)`` (``params``: the core's
    ``_core.Params``) returns ``(H, M, beta, V)`` (host arrays) for
    ``_core.encode(..., lattice_stage=...)``, which codes them into the bytes the CPU would
    produce.  :meth:`of` gives None when the update is not all on a CUDA
    device or the CUDA path is not available.
    """

    def __init__(self, flat: Any) -> None:
        self._flat = flat  # a contiguous 1-D CUDA tensor, the coded dtype
        self.timings: list[dict[str, float]] = []

    @classmethod
    def of(cls, update: Any, *, names: list[str], dtype: str) -> "LatticeStage | None":
        """The stage for ``update`` flattened as the codec flattens it
        (``names``: the coded entries of a mapping; ``dtype``: the coded
        float dtype), or None."""
        if not is_available():
            return None
        leaves = _cuda_leaves(update, names)
        if leaves is None:
            return None
        import torch

        target = getattr(torch, dtype)
        flat = torch.cat([t.detach().reshape(-1).to(target) for t in leaves]).contiguous()
        return cls(flat)

    def __call__(self, params: Any, *, key: bytes,
                 factor: float) -> tuple[Any, Any, Any, Any]:
        import torch

        _cuda = cuda_module()

        stream = torch.cuda.current_stream(self._flat.device).cuda_stream
        capsule = self._flat.__dlpack__(stream=stream or 1)
        H, M, beta, V, timing = _cuda.encode_lattice(
            capsule, key=key, params=params, factor=factor, stream=stream)
        self.timings.append(timing)
        return H, M, beta, V
