"""Which CUDA device, if any: whether the CUDA path can run (:func:`status`),
whether an array is in CUDA memory (by DLPack), the ``device`` argument of
:func:`cepam.decode`, and the host copies made when the path cannot run.
Part of ``cepam.cuda``, which exports these names."""

from __future__ import annotations

import functools
import warnings
from typing import Any

from ._native import cuda_module
from .errors import DeviceError, InvalidArgumentError

__all__ = ["HostCopyWarning", "status", "is_available", "dlpack_device", "cuda_index_of",
           "is_cuda", "note_host_copy", "parse_device", "to_device"]

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
    does not speak DLPack (or its answer is not such a pair)."""
    probe = getattr(x, "__dlpack_device__", None)
    if probe is None:
        return None
    try:
        kind, index = probe()
        return int(kind), int(index)
    except Exception:  # a broken protocol: not on CUDA (reading the array then fails cleanly)
        return None


def cuda_index_of(x: Any) -> int | None:
    """The CUDA device holding x, an array or tensor (by DLPack, so torch,
    CuPy and JAX arrays all count), or None where x is not in CUDA device
    memory.

    Args:
        x: any object.

    Returns:
        The device index, or None.

    It raises nothing: an object without DLPack is not on CUDA.
    """
    device = dlpack_device(x)
    return device[1] if device is not None and device[0] in _DLPACK_CUDA else None


def is_cuda(x: Any) -> bool:
    """Whether x is an array or tensor in CUDA device memory (by DLPack, so
    torch, CuPy and JAX arrays all count).

    Args:
        x: any object.

    Returns:
        True for an array or tensor in CUDA device memory.

    It raises nothing: an object without DLPack is not on CUDA.
    """
    return cuda_index_of(x) is not None


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
    """The CUDA device index of ``device`` ('cuda', 'cuda:N', a torch.device,
    or None or 'cpu' for the host).

    Args:
        device: ``'cuda'``, ``'cuda:N'``, a torch.device, ``'cpu'`` or None.

    Returns:
        The device index (0 for ``'cuda'``), or None for the host.

    Raises:
        InvalidArgumentError: for anything else.
    """
    if device is None:
        return None
    text = str(device)  # (a torch.device reads as its str)
    if text == "cpu":
        return None
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
