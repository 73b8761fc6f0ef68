"""Where the device tests of tests/core/test_cuda.py run: on a CUDA GPU
(``cepam._cuda``, torch tensors in device memory), or on the host
(``cepam._cuda_on_host``: the same .cu files built for the host by
CMakeLists.txt's CEPAM_CUDA_ON_HOST, each block's threads run as fibers;
see tests/native/cuda_on_host/cuda_runtime.h), which reads host arrays
handed to it as CUDA memory.

``Device.put(x)`` gives a numpy array's values as the DLPack capsule of a
CUDA tensor, ``Device.get(capsule)`` a CUDA tensor's capsule (a decoder's
output) as a numpy array.
"""

from __future__ import annotations

import ctypes
import importlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

# dlpack.h: DLTensor is {void* data; DLDevice device; ...}, DLDevice
# {int32 device_type; int32 device_id}; kDLCPU = 1, kDLCUDA = 2.
_DEVICE_TYPE_OFFSET = 8
_CPU, _CUDA = 1, 2

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _relabel(capsule: Any, device_type: int) -> Any:
    """The unconsumed capsule, its tensor's device type set to device_type."""
    tensor = _get_pointer(capsule, b"dltensor")
    ctypes.c_int32.from_address(tensor + _DEVICE_TYPE_OFFSET).value = device_type
    return capsule


class _HostCapsule:
    """A capsule relabelled as host memory, for np.from_dlpack."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_CPU, 0)


@dataclass(frozen=True)
class Device:
    module: Any  # cepam._cuda or cepam._cuda_on_host
    put: Callable[[np.ndarray], Any]
    get: Callable[[Any], np.ndarray]


def as_cuda(x: np.ndarray) -> Any:
    """The DLPack capsule of x's values (a numpy array, kept alive by the
    capsule), labelled as CUDA memory."""
    return labelled_cuda(np.ascontiguousarray(x).__dlpack__())


def labelled_cuda(capsule: Any) -> Any:
    """A host tensor's unconsumed DLPack capsule labelled as CUDA memory
    (the caller's ``out=`` for cepam._cuda_on_host's decoders)."""
    return _relabel(capsule, _CUDA)


def as_host(capsule: Any) -> Any:
    """A capsule of cepam._cuda_on_host's output (labelled CUDA memory)
    labelled as host memory, for torch.from_dlpack or np.from_dlpack."""
    return _relabel(capsule, _CPU)


def on_host() -> Device | None:
    """The host's stand-in for a GPU, or None where cepam was built
    without it."""
    try:
        from cepam import _cuda_on_host
    except ImportError:
        return None
    return Device(_cuda_on_host, put=as_cuda,
                  get=lambda capsule: np.from_dlpack(_HostCapsule(as_host(capsule))).copy())


needs_on_host = pytest.mark.skipif(
    on_host() is None, reason="cepam was built without cepam._cuda_on_host "
    "(pip install -C cmake.define.CEPAM_CUDA_ON_HOST=ON .)")


def experimental(where: str | None = None) -> bool:
    """Whether the CUDA module of ``where`` ("gpu": cepam._cuda, "host":
    cepam._cuda_on_host, None: either) holds the whole-body ANS coder
    (CMakeLists.txt's CEPAM_CUDA_EXPERIMENTAL)."""
    modules = {"gpu": "_cuda", "host": "_cuda_on_host"}
    names = [modules[where]] if where else list(modules.values())
    for name in names:
        try:
            module = importlib.import_module(f"cepam.{name}")
        except ImportError:
            continue
        if getattr(module, "EXPERIMENTAL", False):
            return True
    return False


def on_gpu() -> Device:
    """The first CUDA GPU, through torch (the caller has checked there is one)."""
    import torch

    from cepam import _cuda

    def put(x: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(x)).cuda().__dlpack__(stream=1)

    return Device(_cuda, put=put, get=lambda capsule: torch.from_dlpack(capsule).cpu().numpy())
