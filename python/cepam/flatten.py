"""Model updates as flat vectors, and back.

The codec works on one flat vector, so :func:`flatten` records each entry's
name, kind (numpy or torch), dtype and shape (a
:class:`~cepam.structure.Structure`), and :func:`unflatten` rebuilds the
same structure; :func:`describe` says what :func:`flatten` would give
without reading a value.  Float16 and bfloat16 entries are coded as float32;
a mapping's integer and bool entries (``non_float=``) and running statistics
(``buffers=``) may be left out, and of its tied names only the first is
coded (:mod:`cepam.ties`).  torch is imported only when a tensor is seen or
a torch result is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._checks import check_choice
from .errors import InvalidArgumentError, InvalidTypeError
from .structure import (
    OUTPUT_CHOICES,
    _DTYPE_CODES,
    DICT,
    KIND_NUMPY,
    KIND_TORCH,
    LIST,
    MAX_NAME_BYTES,
    MAX_NDIM,
    SINGLE,
    TUPLE,
    Entry,
    Structure,
    _is_integer_leaf,
    _is_torch_tensor,
    _kind,
    check_buffers,
    check_dtype_choice,
    check_non_float,
    is_buffer,
    output_dtypes,
)
from .ties import _tie_leaves, apply_ties

__all__ = ["flatten", "describe", "unflatten"]


_FLOAT_NAMES = {np.dtype(name): name for name in ("float32", "float64", "float16")}
#: The numpy dtypes of the output dtypes numpy has (a dtype, not its name:
#: astype would parse the name on every call).
_NUMPY_DTYPES = {name: dtype for dtype, name in _FLOAT_NAMES.items()}


def _leaf_entry(x: Any, where: str, name: str = "") -> Entry | None:
    """The entry (``name``, kind, dtype, shape) of a numpy or torch leaf,
    checked, without reading its values; None for another kind of leaf (a
    DLPack array: its values are read to know it).

    Raises:
        InvalidTypeError: a sparse or nested tensor, a masked array or an
            unsupported dtype.
        InvalidArgumentError: an uninitialized (lazy) parameter.
    """
    if _is_torch_tensor(x):
        import torch

        if torch.nn.parameter.is_lazy(x):
            raise InvalidArgumentError(f"{where}: an uninitialized (lazy) parameter holds no "
                                       "values; run a forward pass through the model first")
        if x.is_nested:
            raise InvalidTypeError(f"{where}: nested tensors are not supported; pass each "
                                   "component as an entry of its own")
        if x.is_sparse or x.layout != torch.strided:
            raise InvalidTypeError(f"{where}: sparse tensors are not supported; call .to_dense()")
        dtype = str(x.dtype).replace("torch.", "")
        if dtype not in _DTYPE_CODES:
            hint = (" (a mapping's integer and bool entries, as a state_dict's counters, are "
                    "left out with non_float='skip', encode's default; a sequence's or a "
                    "single tensor's are refused)"
                    if _is_integer_leaf(x) else "")
            raise InvalidTypeError(
                f"{where}: dtype {x.dtype} is not supported (float32, float64, float16, "
                f"bfloat16){hint}"
            )
        return Entry(name, KIND_TORCH, dtype, tuple(int(d) for d in x.shape))
    if isinstance(x, np.ndarray) or np.isscalar(x) and isinstance(x, np.floating):
        if type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
            raise InvalidTypeError(f"{where}: a masked array, whose mask would be ignored; pass "
                                   "x.filled(value) or the values to send")
        arr = np.asarray(x)
        dtype = _FLOAT_NAMES.get(arr.dtype) or arr.dtype.name  # (a dict: dtype.name is slow)
        if dtype not in ("float32", "float64", "float16"):
            raise InvalidTypeError(
                f"{where}: dtype {arr.dtype} is not supported (float32, float64, float16); "
                "convert with .astype(np.float32)"
            )
        return Entry(name, KIND_NUMPY, dtype, arr.shape)  # (a numpy shape: a tuple of ints)
    return None


def _unsupported_leaf(x: Any, where: str) -> InvalidTypeError:
    return InvalidTypeError(f"{where}: expected a numpy array, a torch tensor or a DLPack "
                            f"array, got {type(x).__name__}")


def _leaf_to_numpy(x: Any, where: str, name: str = "") -> tuple[np.ndarray, Entry]:
    """A flat, contiguous float32/float64 view or copy of one leaf, and its
    entry (named ``name``)."""
    entry = _leaf_entry(x, where, name)
    if entry is None:
        if hasattr(x, "__dlpack__"):  # CuPy, JAX, ...: by the DLPack protocol
            return _leaf_to_numpy(_dlpack_to_host(x, where), where, name)
        raise _unsupported_leaf(x, where)
    if entry.kind == KIND_TORCH:
        import torch

        t = x.detach()
        if t.device.type == "meta":
            raise InvalidArgumentError(f"{where}: a tensor on device 'meta' holds no values; "
                                       "materialise it (for example load its weights) first")
        if t.device.type == "cuda":
            from .cuda import note_host_copy

            note_host_copy()
        if t.device.type != "cpu":
            t = t.cpu()
        if entry.dtype in ("float16", "bfloat16"):
            t = t.to(torch.float32)
        # (resolve_neg: a view with torch's negative bit, such as x.conj().imag)
        return t.contiguous().reshape(-1).resolve_neg().numpy(), entry
    flat = np.ascontiguousarray(np.asarray(x)).reshape(-1)
    if entry.dtype == "float16":
        flat = flat.astype(np.float32)
    if flat.dtype.byteorder not in ("=", "|"):
        flat = flat.astype(flat.dtype.newbyteorder("="))
    return flat, entry


def _dlpack_to_host(x: Any, where: str) -> Any:
    """A numpy array (host memory) or torch tensor (CUDA memory, copied by
    the caller) for a DLPack array."""
    from .cuda import is_cuda

    if not is_cuda(x):
        try:
            return np.from_dlpack(x)
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            raise InvalidTypeError(f"{where}: numpy cannot read this DLPack array: {e}") from None
    try:
        import torch
    except ImportError:
        raise InvalidTypeError(
            f"{where}: a CUDA array other than a torch tensor needs torch to reach the host "
            "(or copy it to a numpy array first)"
        ) from None
    try:
        return torch.from_dlpack(x)
    except (AssertionError, TypeError, ValueError, RuntimeError, BufferError) as e:
        # (AssertionError: a torch built without CUDA)
        raise InvalidTypeError(
            f"{where}: torch cannot read this CUDA array ({e}); copy it to a numpy array "
            "first") from None


def _utf8(name: str) -> bytes:
    """An entry name as the payload holds it (UTF-8).

    Raises:
        InvalidArgumentError: the name has no UTF-8 form (a lone surrogate).
    """
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"entry name {name!r} has no UTF-8 form (a lone surrogate)"
                                   ) from None


def _leaves(update: Any, non_float: str, buffers: str = "joint",
            ties: Mapping[str, str] | None = None
            ) -> tuple[int, list[tuple[str, Any, str]], tuple[tuple[str, str], ...]]:
    """The container code, the coded leaves of ``update`` (name, leaf,
    where) in coding order, and the ties of a mapping (see :func:`flatten`)."""
    skip = check_non_float(non_float) == "skip"
    local = check_buffers(buffers) == "local"
    tied: tuple[tuple[str, str], ...] = ()
    if isinstance(update, Mapping):
        if not update:
            raise InvalidArgumentError("the update is an empty mapping")
        container = DICT
        items = []
        for key, value in update.items():
            if not isinstance(key, str):
                raise InvalidTypeError(f"mapping keys must be str, got {type(key).__name__}")
            if len(_utf8(key)) > MAX_NAME_BYTES:
                raise InvalidArgumentError(f"entry name longer than {MAX_NAME_BYTES} bytes")
            if skip and _is_integer_leaf(value) or local and is_buffer(key):
                continue
            items.append((key, value))
        if not items:
            raise InvalidArgumentError(
                "the update has no floating-point entry: integer and bool entries are "
                "left out (non_float='skip')" + (", and so are running statistics "
                                                 "(buffers='local')" if local else ""))
        items, tied = _tie_leaves(items, ties or {})
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

    where = [f"entry {name!r}" if container == DICT else f"entry {i}" if container else "x"
             for i, (name, _) in enumerate(items)]
    return container, [(name, value, w) for (name, value), w in zip(items, where)], tied


#: The structures of single numpy arrays flatten has built, by dtype and
#: shape (at most _SINGLES_MAX): the same object for every update of one
#: shape, with what is derived from it (its header bytes).
_SINGLES: dict[tuple[str, tuple[int, ...]], Structure] = {}
_SINGLES_MAX = 64


def _single(name: str, shape: tuple[int, ...]) -> Structure:
    """The structure of one numpy array of dtype ``name`` and ``shape``."""
    key = (name, shape)
    structure = _SINGLES.get(key)
    if structure is None:
        if len(_SINGLES) >= _SINGLES_MAX:
            _SINGLES.clear()
        structure = _SINGLES[key] = Structure(SINGLE, (Entry("", KIND_NUMPY, name, shape),))
    return structure


def flatten(update: Any, *, non_float: str = "error", buffers: str = "joint",
            ties: Mapping[str, str] | None = None) -> tuple[np.ndarray, Structure]:
    """One contiguous 1-D vector (float32 if every entry codes as float32,
    else float64) and the structure to rebuild ``update`` from it.

    Args:
        update: an array or tensor, or a mapping, list or tuple of them.
        non_float: "skip" leaves integer and bool entries of a *mapping* out
            (they are not in the structure, so ``unflatten`` does not
            rebuild them); "error" refuses them.  In a list, tuple or alone
            they are always refused, since leaving them out would shift
            positions.
        buffers: one of :data:`~cepam.structure.BUFFER_CHOICES`; "local"
            leaves a mapping's running statistics
            (:func:`~cepam.structure.is_buffer`) out, the others keep them.
        ties: the tie groups of a mapping (:func:`~cepam.ties.resolve_ties`):
            of each group's names present, the first is coded, the others
            are recorded in :attr:`~cepam.structure.Structure.ties` (their
            values are not read).  None: every entry is coded.

    Raises:
        InvalidTypeError: for unsupported containers, leaves or dtypes, or
            a ``non_float`` or ``buffers`` that is not a str.
        InvalidArgumentError: for empty containers (or a mapping with no
            floating-point entry left), overlong names, an unknown
            ``non_float`` or ``buffers``, tied entries of different shapes
            or dtypes.
    """
    if type(update) is np.ndarray and update.ndim <= MAX_NDIM and update.flags.c_contiguous:
        # One contiguous float32 or float64 array (the common small update):
        # what the general path gives, without its per-leaf steps.
        name = _FLOAT_NAMES.get(update.dtype)
        if name is not None and name != "float16":
            check_non_float(non_float)
            check_buffers(buffers)
            return update.reshape(-1), _single(name, update.shape)
    container, leaves, tied = _leaves(update, non_float, buffers, ties)
    arrays, entries = [], []
    for name, value, where in leaves:
        arr, entry = _leaf_to_numpy(value, where, name)
        arrays.append(arr)
        entries.append(_named(entry, name, where))

    if len(arrays) == 1:
        flat = arrays[0]
    else:
        common = np.float32 if all(a.dtype == np.float32 for a in arrays) else np.float64
        flat = np.concatenate([a.astype(common, copy=False) for a in arrays])
    return flat, Structure(container, tuple(entries), tied)


def describe(update: Any, *, non_float: str = "error", buffers: str = "joint",
             ties: Mapping[str, str] | None = None) -> tuple[list[Any], Structure, str]:
    """What :func:`flatten` would give, without reading or copying a value:
    the coded leaves of ``update`` in coding order (arrays and tensors as
    given, the CUDA arrays of other DLPack libraries wrapped by torch
    without a copy), the structure, and the dtype of flatten's vector
    ("float32", or "float64" when an entry is float64).

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`flatten`.
    """
    container, leaves, tied = _leaves(update, non_float, buffers, ties)
    values, entries = [], []
    for name, value, where in leaves:
        entry = _leaf_entry(value, where, name)
        if entry is None and hasattr(value, "__dlpack__"):
            value = _dlpack_to_host(value, where)  # no copy: numpy or torch views
            entry = _leaf_entry(value, where, name)
        if entry is None:
            raise _unsupported_leaf(value, where)
        values.append(value)
        entries.append(_named(entry, name, where))
    dtype = "float64" if any(e.dtype == "float64" for e in entries) else "float32"
    return values, Structure(container, tuple(entries), tied), dtype


def _named(entry: Entry, name: str, where: str) -> Entry:
    """``entry`` named ``name`` (itself if it is already), its rank checked."""
    if len(entry.shape) > MAX_NDIM:
        raise InvalidArgumentError(f"{where}: more than {MAX_NDIM} dimensions")
    return entry if entry.name == name else Entry(name, entry.kind, entry.dtype, entry.shape)


def _leaf_from_numpy(arr: np.ndarray, entry: Entry, output: str, name: str) -> Any:
    """One entry's decoded values ``arr`` as returned: its shape, in the
    output dtype ``name`` (:func:`~cepam.structure.output_dtype`)."""
    if _kind(entry, output) == KIND_TORCH:
        try:
            import torch
        except ImportError:
            raise InvalidArgumentError(
                "the payload holds torch tensors but torch is not installed; "
                "pass output='numpy'"
            ) from None
        # arr: numpy, or a torch tensor on a GPU (decode(device="cuda"): cepam.cuda)
        t = arr if isinstance(arr, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(arr))
        t, target = t.reshape(entry.shape), getattr(torch, name)
        return t if t.dtype == target else t.to(target)
    target = _NUMPY_DTYPES[name]
    return (arr if arr.dtype == target else arr.astype(target)).reshape(entry.shape)


def unflatten(flat: np.ndarray, structure: Structure, *, output: str = "auto",
              dtype: str = "input") -> Any:
    """Rebuilds the update ``flatten`` described, from a decoded flat vector
    (numpy, or a torch tensor on a GPU when every leaf is returned as torch);
    tied names (:attr:`~cepam.structure.Structure.ties`) are the same object
    as their entry.

    output: "auto" (numpy or torch per entry, as encoded), "numpy" or "torch".
    dtype: one of :data:`~cepam.structure.DTYPE_CHOICES` (see
    :func:`~cepam.structure.output_dtype`).
    """
    check_choice("output", output, OUTPUT_CHOICES)
    dtype = check_dtype_choice(dtype)
    return rebuild(flat, structure, output=output,
                   names=output_dtypes(structure, dtype=dtype, output=output))


def rebuild(flat: np.ndarray, structure: Structure, *, output: str,
            names: tuple[str, ...]) -> Any:
    """:func:`unflatten` with checked choices: ``output`` and each entry's
    output dtype ``names`` (:func:`~cepam.structure.output_dtypes`, which the
    decoder has computed already)."""
    if structure.container == SINGLE:  # (one entry: no list)
        entry = structure.entries[0]
        return _leaf_from_numpy(flat[: entry.size], entry, output, names[0])
    leaves, offset = [], 0
    for entry, name in zip(structure.entries, names):
        leaves.append(_leaf_from_numpy(flat[offset : offset + entry.size], entry, output, name))
        offset += entry.size
    if structure.container == DICT:
        return apply_ties({e.name: leaf for e, leaf in zip(structure.entries, leaves)},
                          structure)
    return tuple(leaves) if structure.container == TUPLE else leaves
