"""Model updates as flat vectors, and back.

A model update is one array or tensor, or several: a sequence of them or a
mapping from names to them (a ``state_dict`` difference).  The codec works on
one flat vector, so ``flatten`` records each entry's name, kind (numpy or
torch), dtype and shape, and ``unflatten`` rebuilds the same structure.

Supported dtypes: float32 and float64 (coded as they are), float16 and, for
torch, bfloat16 (coded as float32 and cast back).  torch is imported only when
a tensor is seen or a torch result is asked for.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Entry", "Structure", "flatten", "unflatten"]

# Payload codes.
KIND_NUMPY, KIND_TORCH = 0, 1
SINGLE, LIST, TUPLE, DICT = 0, 1, 2, 3
DTYPES = {1: "float32", 2: "float64", 3: "float16", 4: "bfloat16"}
_DTYPE_CODES = {v: k for k, v in DTYPES.items()}
MAX_NDIM = 32
MAX_NAME_BYTES = 1024


@dataclass(frozen=True)
class Entry:
    name: str
    kind: int  # KIND_NUMPY or KIND_TORCH
    dtype: str  # a key of DTYPES' values
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        size = 1
        for d in self.shape:
            size *= d
        return size


@dataclass(frozen=True)
class Structure:
    container: int  # SINGLE, LIST, TUPLE or DICT
    entries: tuple[Entry, ...]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)


def _is_torch_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _leaf_to_numpy(x: Any, where: str) -> tuple[np.ndarray, Entry]:
    """A flat, contiguous float32/float64 view or copy of one leaf."""
    if _is_torch_tensor(x):
        import torch

        if x.is_sparse or x.layout != torch.strided:
            raise InvalidTypeError(f"{where}: sparse tensors are not supported; call .to_dense()")
        name = str(x.dtype).replace("torch.", "")
        if name not in _DTYPE_CODES:
            raise InvalidTypeError(
                f"{where}: dtype {x.dtype} is not supported (float32, float64, float16, bfloat16)"
            )
        t = x.detach()
        if t.device.type == "cuda":
            from .cuda import note_host_copy

            note_host_copy()
        if t.device.type != "cpu":
            t = t.cpu()
        if name in ("float16", "bfloat16"):
            t = t.to(torch.float32)
        arr = t.contiguous().reshape(-1).numpy()
        return arr, Entry("", KIND_TORCH, name, tuple(int(d) for d in x.shape))
    if isinstance(x, np.ndarray) or np.isscalar(x) and isinstance(x, np.floating):
        arr = np.asarray(x)
        name = arr.dtype.name
        if name not in ("float32", "float64", "float16"):
            raise InvalidTypeError(
                f"{where}: dtype {arr.dtype} is not supported (float32, float64, float16); "
                "convert with .astype(np.float32)"
            )
        flat = np.ascontiguousarray(arr).reshape(-1)
        if name == "float16":
            flat = flat.astype(np.float32)
        if flat.dtype.byteorder not in ("=", "|"):
            flat = flat.astype(flat.dtype.newbyteorder("="))
        return flat, Entry("", KIND_NUMPY, name, tuple(int(d) for d in arr.shape))
    if hasattr(x, "__dlpack__"):  # CuPy, JAX, ...: by the DLPack protocol
        return _leaf_to_numpy(_dlpack_to_host(x, where), where)
    raise InvalidTypeError(
        f"{where}: expected a numpy array, a torch tensor or a DLPack array, "
        f"got {type(x).__name__}"
    )


def _dlpack_to_host(x: Any, where: str) -> Any:
    """A numpy array (host memory) or torch tensor (CUDA memory, copied by
    the caller) for a DLPack array."""
    from .cuda import is_cuda

    if not is_cuda(x):
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError) as e:
            raise InvalidTypeError(f"{where}: numpy cannot read this DLPack array: {e}") from None
    try:
        import torch
    except ImportError:
        raise InvalidTypeError(
            f"{where}: a CUDA array other than a torch tensor needs torch to reach the host "
            "(or copy it to a numpy array first)"
        ) from None
    return torch.from_dlpack(x)


def flatten(update: Any) -> tuple[np.ndarray, Structure]:
    """One contiguous 1-D vector (float32 if every entry codes as float32,
    else float64) and the structure to rebuild ``update`` from it.

    Raises:
        InvalidTypeError: for unsupported containers, leaves or dtypes.
        InvalidArgumentError: for empty containers or overlong names.
    """
    if isinstance(update, Mapping):
        if not update:
            raise InvalidArgumentError("the update is an empty mapping")
        container = DICT
        items = []
        for key, value in update.items():
            if not isinstance(key, str):
                raise InvalidTypeError(f"mapping keys must be str, got {type(key).__name__}")
            if len(key.encode("utf-8")) > MAX_NAME_BYTES:
                raise InvalidArgumentError(f"entry name longer than {MAX_NAME_BYTES} bytes")
            items.append((key, value))
    elif isinstance(update, (list, tuple)):
        if not update:
            raise InvalidArgumentError("the update is an empty sequence")
        container = TUPLE if isinstance(update, tuple) else LIST
        items = [("", value) for value in update]
    elif isinstance(update, (str, bytes)) or (
        isinstance(update, Sequence) and not isinstance(update, np.ndarray)
    ):
        raise InvalidTypeError(f"unsupported update type {type(update).__name__}")
    else:
        container = SINGLE
        items = [("", update)]

    arrays, entries = [], []
    for i, (name, value) in enumerate(items):
        where = f"entry {name!r}" if container == DICT else f"entry {i}" if container else "x"
        arr, entry = _leaf_to_numpy(value, where)
        if len(entry.shape) > MAX_NDIM:
            raise InvalidArgumentError(f"{where}: more than {MAX_NDIM} dimensions")
        arrays.append(arr)
        entries.append(Entry(name, entry.kind, entry.dtype, entry.shape))

    if len(arrays) == 1:
        flat = arrays[0]
    else:
        common = np.float32 if all(a.dtype == np.float32 for a in arrays) else np.float64
        flat = np.concatenate([a.astype(common, copy=False) for a in arrays])
    return flat, Structure(container, tuple(entries))


def coded_dtype(structure: Structure) -> str:
    """The dtype the flat vector is decoded into: float32 if it suffices."""
    wide = any(e.dtype == "float64" for e in structure.entries)
    return "float64" if wide else "float32"


def _leaf_from_numpy(arr: np.ndarray, entry: Entry, output: str) -> Any:
    kind = entry.kind if output == "auto" else (KIND_TORCH if output == "torch" else KIND_NUMPY)
    if kind == KIND_TORCH:
        try:
            import torch
        except ImportError:
            raise InvalidArgumentError(
                "the payload holds torch tensors but torch is not installed; "
                "pass output='numpy'"
            ) from None
        t = torch.from_numpy(np.ascontiguousarray(arr).reshape(entry.shape))
        return t.to(getattr(torch, entry.dtype))
    if entry.dtype == "bfloat16":
        return arr.astype(np.float32, copy=False).reshape(entry.shape)  # numpy has no bfloat16
    return arr.astype(entry.dtype, copy=False).reshape(entry.shape)


def unflatten(flat: np.ndarray, structure: Structure, *, output: str = "auto") -> Any:
    """Rebuilds the update ``flatten`` described, from a decoded flat vector.

    output: "auto" (numpy or torch per entry, as encoded), "numpy" or "torch".
    """
    if output not in ("auto", "numpy", "torch"):
        raise InvalidArgumentError("output must be 'auto', 'numpy' or 'torch'")
    leaves, offset = [], 0
    for entry in structure.entries:
        leaves.append(_leaf_from_numpy(flat[offset : offset + entry.size], entry, output))
        offset += entry.size
    if structure.container == SINGLE:
        return leaves[0]
    if structure.container == DICT:
        return {e.name: leaf for e, leaf in zip(structure.entries, leaves)}
    return tuple(leaves) if structure.container == TUPLE else leaves
