"""Model updates as flat vectors, and back.

A model update is one array or tensor, or several: a sequence of them or a
mapping from names to them (a ``state_dict`` difference).  The codec works on
one flat vector, so ``flatten`` records each entry's name, kind (numpy or
torch), dtype and shape, and ``unflatten`` rebuilds the same structure.

Supported dtypes: float32 and float64 (coded as they are), float16 and, for
torch, bfloat16 (coded as float32).  Decoded low-precision entries come back
as float32 unless the caller asks for the input's dtype (``dtype="input"``;
see :mod:`cepam.precision`).  Integer and bool entries of a mapping
(BatchNorm's ``num_batches_tracked``) are not model updates: with
``non_float="skip"`` they are left out, so the decoded mapping lacks them.
torch is imported only when a tensor is seen or a torch result is asked for.

Float *buffers* of a mapping (torch's normalisation statistics: entries whose
last name component is ``running_mean`` or ``running_var``, as BatchNorm,
InstanceNorm and their variants name them) are data statistics, not trained
weights; :data:`BUFFER_CHOICES` says how they are sent (see :func:`flatten`
and the codec's ``buffers=``).

A payload may also carry no structure at all (``BARE``: the number of
coordinates only), when the receiver already knows the names, shapes and
dtypes (a server decoding updates of its own global model): the decoder then
takes them from a template (:func:`structure_of`, :func:`match_template`),
which must match the encoded structure's :func:`digest` (sealed in the payload).

*Tied* entries (one tensor under two names: an embedding shared with the
output layer, which a tied model's ``state_dict`` lists twice) are coded
once, under the first name; the others are recorded as ties
(:attr:`Structure.ties`) and given back as the same object.  Ties are found
by storage, never by value (:func:`find_ties`), and are not written into a
payload: its structure and bytes are those of the update without the
duplicate names, and the decoder learns the ties from its template
(``like=``) or its ``ties=`` argument (:func:`resolve_ties`).
"""

from __future__ import annotations

import functools
import hashlib
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import FormatError, InvalidArgumentError, InvalidTypeError

__all__ = ["Entry", "Structure", "flatten", "describe", "unflatten", "output_dtype", "entry_kind",
           "decoded_dtype",
           "DTYPE_CHOICES", "NON_FLOAT_CHOICES", "BUFFER_CHOICES", "RUNNING_STATISTICS",
           "is_buffer", "bare", "digest", "structure_of", "match_template", "find_ties",
           "check_ties", "resolve_ties", "with_ties", "apply_ties"]

# Payload codes.
KIND_NUMPY, KIND_TORCH = 0, 1
SINGLE, LIST, TUPLE, DICT = 0, 1, 2, 3
BARE = 4  # no structure in the payload: m coordinates only (decode takes a template)
DTYPES = {1: "float32", 2: "float64", 3: "float16", 4: "bfloat16"}
_DTYPE_CODES = {v: k for k, v in DTYPES.items()}
MAX_NDIM = 32
MAX_NAME_BYTES = 1024
#: Output dtypes ``decode`` offers: "auto" (float16/bfloat16 widened to
#: float32, float32 and float64 as encoded), "input" (as encoded), or one
#: dtype for every entry.
DTYPE_CHOICES = ("auto", "input", "float32", "float64")
#: What ``encode`` does with integer and bool entries of a mapping.
NON_FLOAT_CHOICES = ("skip", "error")
#: What ``encode`` does with the float buffers of a mapping (:func:`is_buffer`):
#: "separate" codes them, clipped apart from the weights inside the one clip;
#: "local" leaves them out (each side keeps its own: FedBN); "joint" codes
#: them as weights, under the one clip of the whole update.
BUFFER_CHOICES = ("separate", "local", "joint")
#: The last name components of float buffers: torch's running statistics.
RUNNING_STATISTICS = ("running_mean", "running_var")


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
    #: (name, target) pairs of a mapping: ``name`` is the same tensor as the
    #: entry ``target`` (tied), not coded; never in a payload (see the module doc).
    ties: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def size(self) -> int:
        return sum(e.size for e in self.entries)


def _is_torch_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_integer_leaf(x: Any) -> bool:
    """An integer or bool array, tensor or numpy scalar (not a model update)."""
    if _is_torch_tensor(x):
        return not (x.dtype.is_floating_point or x.dtype.is_complex)
    if isinstance(x, (np.ndarray, np.integer, np.bool_)):
        return np.asarray(x).dtype.kind in "biu"
    return False


def is_buffer(name: str) -> bool:
    """True for an entry named like a normalisation layer's running statistic
    (``"bn1.running_var"``): a float buffer, not a trained weight."""
    return name.rpartition(".")[2] in RUNNING_STATISTICS


def check_buffers(buffers: object) -> str:
    if buffers not in BUFFER_CHOICES:
        raise InvalidArgumentError(f"buffers must be one of {BUFFER_CHOICES}, got {buffers!r}")
    return buffers  # type: ignore[return-value]


def check_non_float(non_float: object) -> str:
    if non_float not in NON_FLOAT_CHOICES:
        raise InvalidArgumentError(
            f"non_float must be one of {NON_FLOAT_CHOICES}, got {non_float!r}")
    return non_float  # type: ignore[return-value]


# --------------------------------------------------------------------------- ties


def _as_state_dict(source: Any) -> Mapping[Any, Any] | None:
    """A torch module's ``state_dict()``, a mapping as it is, else None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(source, torch.nn.Module):
        return source.state_dict()
    return source if isinstance(source, Mapping) else None


def _storage_key(x: Any) -> tuple[Any, ...] | None:
    """What identifies the memory a leaf views: its storage's address (with
    the offset), shape, strides, dtype and device; None for an empty leaf
    or one that holds no memory of its own (a 'meta' tensor), which ties
    nothing."""
    if _is_torch_tensor(x):
        if x.numel() == 0 or x.is_sparse or x.device.type == "meta":
            return None
        try:
            address = x.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
            return None
        if address == 0:
            return None
        return ("torch", str(x.device), address, x.storage_offset(), tuple(x.shape),
                tuple(x.stride()), str(x.dtype))
    if isinstance(x, np.ndarray) and x.size:
        return ("numpy", x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.str)
    return None


def find_ties(source: Any) -> dict[str, str]:
    """The tied entries of a model or a mapping, found by storage: ``{name:
    target}`` for every entry that is the same tensor as an earlier entry
    ``target`` (the same memory: storage address and offset, shape, strides,
    dtype and device), ``target`` the first of its names.  Values are never
    compared: two tensors that merely hold equal values are not tied.

    A tied model's ``state_dict()`` lists a shared tensor under each of its
    names (``{"decoder.weight": "embedding.weight"}`` for a language model
    whose output layer reuses its embedding); a ``state_dict`` *difference*
    computed name by name holds separate tensors, so its ties are found in
    the model instead.

    Args:
        source: a ``torch.nn.Module`` (its ``state_dict()`` is read) or a
            mapping from names to tensors or numpy arrays.  Values of other
            kinds, and empty tensors, tie nothing.

    Returns:
        A dict from each duplicate name to the first name of its tensor, in
        the source's order; empty when nothing is tied.

    Raises:
        InvalidTypeError: ``source`` is neither a module nor a mapping, or
            a key is not a str.
    """
    state = _as_state_dict(source)
    if state is None:
        raise InvalidTypeError("find_ties takes a torch.nn.Module or a mapping from names to "
                               f"tensors, got {type(source).__name__}")
    first: dict[tuple[Any, ...], str] = {}
    ties: dict[str, str] = {}
    for name, value in state.items():
        if not isinstance(name, str):
            raise InvalidTypeError(f"mapping keys must be str, got {type(name).__name__}")
        key = _storage_key(value)
        if key is None:
            continue
        if key in first:
            ties[name] = first[key]
        else:
            first[key] = name
    return ties


#: A checked ``ties=`` argument: (name, name) pairs, each two names of one tensor.
TiePairs = tuple[tuple[str, str], ...]


def check_ties(ties: object) -> TiePairs:
    """The ``ties=`` argument of encode, decode and :class:`~cepam.Codec`,
    checked: None (no ties but those found by storage in the update or the
    template), a ``torch.nn.Module`` or a mapping from names to tensors
    (ties found in it by storage: :func:`find_ties`), or an explicit mapping
    ``{name: target}`` of str to str (``name`` is the same tensor as
    ``target``).

    Raises:
        InvalidTypeError: another kind of argument, or a mapping whose
            values are some str and some not.
        InvalidArgumentError: a name tied to itself.
    """
    if ties is None:
        return ()
    state = _as_state_dict(ties)
    if state is None:
        raise InvalidTypeError("ties must be None, a torch.nn.Module, a state_dict or a mapping "
                               f"{{name: tied-to name}}, got {type(ties).__name__}")
    names = [isinstance(v, str) for v in state.values()]
    if not all(names):
        if any(names):
            raise InvalidTypeError("ties: a mapping of names to names ({'decoder.weight': "
                                   "'embedding.weight'}) or of names to tensors, not both")
        return tuple(find_ties(state).items())
    pairs = []
    for name, target in state.items():
        if not isinstance(name, str):
            raise InvalidTypeError(f"ties: keys must be str, got {type(name).__name__}")
        if name == target:
            raise InvalidArgumentError(f"ties: {name!r} is tied to itself")
        pairs.append((name, target))
    return tuple(pairs)


def resolve_ties(update: Any, ties: TiePairs = ()) -> dict[str, str]:
    """Every tied name of ``update`` (a mapping, or anything else: no ties)
    and of the checked ``ties`` (:func:`check_ties`), mapped to one name of
    its group (the names of one tensor, joined through any chain of ties);
    untied names are absent.  Which name of a group is coded is decided by
    the update's order (:func:`_leaves`: the first present)."""
    if not ties and not isinstance(update, Mapping):
        return {}
    pairs = list(ties)
    if isinstance(update, Mapping):
        pairs += find_ties(update).items()
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)  # a fixed representative: the least name
    return {name: root(name) for name in {n for pair in pairs for n in pair}}


def _tie_leaves(items: list[tuple[str, Any]], groups: Mapping[str, str]
                ) -> tuple[list[tuple[str, Any]], tuple[tuple[str, str], ...]]:
    """The items left to code when the later names of each tie group
    (``groups``: :func:`resolve_ties`) are dropped, and the ties (name,
    coded name) they become.

    Raises:
        InvalidArgumentError: two tied names whose values differ in shape or
            dtype (an explicit tie that cannot be one tensor).
    """
    if not groups:
        return items, ()
    kept: dict[str, tuple[str, Any]] = {}
    coded, ties = [], []
    for name, value in items:
        group = groups.get(name)
        if group is None:
            coded.append((name, value))
        elif group not in kept:
            kept[group] = (name, value)
            coded.append((name, value))
        else:
            target, first = kept[group]
            if (tuple(getattr(value, "shape", ())) != tuple(getattr(first, "shape", ()))
                    or str(getattr(value, "dtype", "")) != str(getattr(first, "dtype", ""))):
                raise InvalidArgumentError(
                    f"ties: entry {name!r} is tied to {target!r} but differs from it in shape "
                    "or dtype")
            ties.append((name, target))
    return coded, tuple(ties)


def with_ties(structure: Structure, groups: Mapping[str, str]) -> Structure:
    """``structure`` (a payload's: coded entries only) with the ties of
    ``groups`` (:func:`resolve_ties`) whose group has exactly one coded
    entry: every other name of such a group is given back as that entry.
    Groups coded more than once (an encoder that did not know the tie) stay
    as coded."""
    if structure.container != DICT or not groups:
        return structure
    coded: dict[str, list[str]] = {}
    for entry in structure.entries:
        if entry.name in groups:
            coded.setdefault(groups[entry.name], []).append(entry.name)
    names = {e.name for e in structure.entries}
    ties = tuple((name, coded[group][0]) for name, group in groups.items()
                 if name not in names and len(coded.get(group, ())) == 1)
    return Structure(structure.container, structure.entries, ties)


def _untied_in(structure: Structure, groups: Mapping[str, str]) -> dict[str, str]:
    """``groups`` without the groups a payload's ``structure`` codes more
    than once (its encoder did not tie them)."""
    count: dict[str, int] = {}
    for entry in structure.entries:
        if entry.name in groups:
            count[groups[entry.name]] = count.get(groups[entry.name], 0) + 1
    return {n: g for n, g in groups.items() if count.get(g, 0) <= 1}


_FLOAT_NAMES = {np.dtype(name): name for name in ("float32", "float64", "float16")}


def _leaf_entry(x: Any, where: str) -> Entry | None:
    """The entry (kind, dtype, shape; no name) of a numpy or torch leaf,
    checked, without reading its values; None for another kind of leaf (a
    DLPack array: its values are read to know it).

    Raises:
        InvalidTypeError: a sparse tensor or an unsupported dtype.
    """
    if _is_torch_tensor(x):
        import torch

        if x.is_sparse or x.layout != torch.strided:
            raise InvalidTypeError(f"{where}: sparse tensors are not supported; call .to_dense()")
        name = str(x.dtype).replace("torch.", "")
        if name not in _DTYPE_CODES:
            hint = (" (integer and bool entries of a state_dict are left out with "
                    "non_float='skip')" if _is_integer_leaf(x) else "")
            raise InvalidTypeError(
                f"{where}: dtype {x.dtype} is not supported (float32, float64, float16, "
                f"bfloat16){hint}"
            )
        return Entry("", KIND_TORCH, name, tuple(int(d) for d in x.shape))
    if isinstance(x, np.ndarray) or np.isscalar(x) and isinstance(x, np.floating):
        arr = np.asarray(x)
        name = _FLOAT_NAMES.get(arr.dtype) or arr.dtype.name  # (a dict: dtype.name is slow)
        if name not in ("float32", "float64", "float16"):
            raise InvalidTypeError(
                f"{where}: dtype {arr.dtype} is not supported (float32, float64, float16); "
                "convert with .astype(np.float32)"
            )
        return Entry("", KIND_NUMPY, name, tuple(int(d) for d in arr.shape))
    return None


def _unsupported_leaf(x: Any, where: str) -> InvalidTypeError:
    return InvalidTypeError(f"{where}: expected a numpy array, a torch tensor or a DLPack "
                            f"array, got {type(x).__name__}")


def _leaf_to_numpy(x: Any, where: str) -> tuple[np.ndarray, Entry]:
    """A flat, contiguous float32/float64 view or copy of one leaf."""
    entry = _leaf_entry(x, where)
    if entry is None:
        if hasattr(x, "__dlpack__"):  # CuPy, JAX, ...: by the DLPack protocol
            return _leaf_to_numpy(_dlpack_to_host(x, where), where)
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
        return t.contiguous().reshape(-1).numpy(), entry
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
            if len(key.encode("utf-8")) > MAX_NAME_BYTES:
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
        buffers: one of :data:`BUFFER_CHOICES`; "local" leaves a mapping's
            running statistics (:func:`is_buffer`) out, the others keep them.
        ties: the tie groups of a mapping (:func:`resolve_ties`): of each
            group's names present, the first is coded, the others are
            recorded in :attr:`Structure.ties` (their values are not read).
            None: every entry is coded.

    Raises:
        InvalidTypeError: for unsupported containers, leaves or dtypes.
        InvalidArgumentError: for empty containers (or a mapping with no
            floating-point entry left), overlong names, a bad ``non_float``,
            tied entries of different shapes or dtypes.
    """
    if type(update) is np.ndarray and update.ndim <= MAX_NDIM and update.flags.c_contiguous:
        # One contiguous float32 or float64 array (the common small update):
        # what the general path gives, without its per-leaf steps.
        name = _FLOAT_NAMES.get(update.dtype)
        if name is not None and name != "float16":
            check_non_float(non_float)
            check_buffers(buffers)
            return (update.reshape(-1),
                    Structure(SINGLE, (Entry("", KIND_NUMPY, name, update.shape),)))
    container, leaves, tied = _leaves(update, non_float, buffers, ties)
    arrays, entries = [], []
    for name, value, where in leaves:
        arr, entry = _leaf_to_numpy(value, where)
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
        entry = _leaf_entry(value, where)
        if entry is None and hasattr(value, "__dlpack__"):
            value = _dlpack_to_host(value, where)  # no copy: numpy or torch views
            entry = _leaf_entry(value, where)
        if entry is None:
            raise _unsupported_leaf(value, where)
        values.append(value)
        entries.append(_named(entry, name, where))
    dtype = "float64" if any(e.dtype == "float64" for e in entries) else "float32"
    return values, Structure(container, tuple(entries), tied), dtype


def _named(entry: Entry, name: str, where: str) -> Entry:
    if len(entry.shape) > MAX_NDIM:
        raise InvalidArgumentError(f"{where}: more than {MAX_NDIM} dimensions")
    return Entry(name, entry.kind, entry.dtype, entry.shape)


def check_dtype_choice(dtype: object) -> str:
    if dtype not in DTYPE_CHOICES:
        raise InvalidArgumentError(f"dtype must be one of {DTYPE_CHOICES}, got {dtype!r}")
    return dtype  # type: ignore[return-value]


def _kind(entry: Entry, output: str) -> int:
    return entry.kind if output == "auto" else (KIND_TORCH if output == "torch" else KIND_NUMPY)


def entry_kind(entry: Entry, output: str) -> int:
    """What one entry is returned as under ``output`` ("auto", "numpy",
    "torch"): KIND_NUMPY or KIND_TORCH."""
    return _kind(entry, output)


def output_dtype(entry: Entry, *, dtype: str, output: str) -> str:
    """The dtype one entry is returned in under the ``dtype`` choice
    (:data:`DTYPE_CHOICES`) and ``output`` ("auto", "numpy", "torch");
    numpy has no bfloat16, so a numpy bfloat16 entry is float32."""
    if dtype == "input":
        name = entry.dtype
    elif dtype == "auto":
        name = "float64" if entry.dtype == "float64" else "float32"
    else:
        name = dtype
    if name == "bfloat16" and _kind(entry, output) == KIND_NUMPY:
        return "float32"
    return name


def decoded_dtype(structure: Structure, *, dtype: str = "auto", output: str = "auto") -> str:
    """The dtype the flat vector is decoded into: float64 if an entry is
    returned in float64, else float32."""
    wide = any(output_dtype(e, dtype=dtype, output=output) == "float64"
               for e in structure.entries)
    return "float64" if wide else "float32"


def _leaf_from_numpy(arr: np.ndarray, entry: Entry, output: str, dtype: str) -> Any:
    name = output_dtype(entry, dtype=dtype, output=output)
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
        return t.reshape(entry.shape).to(getattr(torch, name))
    return arr.astype(name, copy=False).reshape(entry.shape)


def unflatten(flat: np.ndarray, structure: Structure, *, output: str = "auto",
              dtype: str = "input") -> Any:
    """Rebuilds the update ``flatten`` described, from a decoded flat vector
    (numpy, or a torch tensor on a GPU when every leaf is returned as torch);
    tied names (:attr:`Structure.ties`) are the same object as their entry.

    output: "auto" (numpy or torch per entry, as encoded), "numpy" or "torch".
    dtype: one of :data:`DTYPE_CHOICES` (see :func:`output_dtype`).
    """
    if output not in ("auto", "numpy", "torch"):
        raise InvalidArgumentError("output must be 'auto', 'numpy' or 'torch'")
    dtype = check_dtype_choice(dtype)
    leaves, offset = [], 0
    for entry in structure.entries:
        leaves.append(_leaf_from_numpy(flat[offset : offset + entry.size], entry, output,
                                       dtype))
        offset += entry.size
    if structure.container == SINGLE:
        return leaves[0]
    if structure.container == DICT:
        return apply_ties({e.name: leaf for e, leaf in zip(structure.entries, leaves)},
                          structure)
    return tuple(leaves) if structure.container == TUPLE else leaves


def apply_ties(result: Any, structure: Structure, like: Any = None) -> Any:
    """A decoded mapping with each tied name of ``structure`` given back as
    the same object as its coded entry; in the order of the template
    ``like`` (a mapping or a module) if given, else the tied names last."""
    if not structure.ties or not isinstance(result, dict):
        return result
    for name, target in structure.ties:
        result[name] = result[target]
    state = _as_state_dict(like)
    if state is None:
        return result
    ordered = {name: result[name] for name in state if name in result}
    ordered.update((name, value) for name, value in result.items() if name not in ordered)
    return ordered


# --------------------------------------------------------------------------- bare payloads


def bare(m: int) -> Structure:
    """The structure of a payload that carries none: ``m`` coordinates as one
    float32 vector until a template (:func:`match_template`) shapes them."""
    return Structure(BARE, (Entry("", KIND_NUMPY, "float32", (int(m),)),))


def digest(structure: Structure) -> bytes:
    """8 bytes that identify a structure's container, and its entries' names,
    order, dtypes and shapes (not whether they are numpy or torch): the first
    bytes of a SHA-256 of their canonical encoding.  A bare payload carries
    its update's digest, sealed, so that a template of another structure is
    refused."""
    h = hashlib.sha256(b"cepam/structure/v1")
    h.update(struct.pack("<BI", structure.container, len(structure.entries)))
    for e in structure.entries:
        name = e.name.encode("utf-8")
        h.update(struct.pack("<H", len(name)) + name)
        h.update(struct.pack(f"<BB{len(e.shape)}Q", _DTYPE_CODES[e.dtype], len(e.shape),
                             *e.shape))
    return h.digest()[:8]


def structure_of(like: Any, *, buffers: str = "joint",
                 ties: Mapping[str, str] | None = None) -> Structure:
    """The structure (container, names, kinds, dtypes, shapes) of a template:
    an array or tensor, a list/tuple of them or a mapping from names to them
    (a ``state_dict``, or ``{name: array.numpy()}`` of a Flower ArrayRecord).

    Only the leaves' dtypes and shapes are read, not their values (a DLPack
    array other than numpy or torch is read to know it).  Integer and bool
    entries of a mapping are left out, and so are its running statistics
    with ``buffers="local"``, as the encoder leaves them out; of tied names
    (``ties``: as for :func:`flatten`) the first is an entry, the others ties.

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`flatten`.
    """
    container, leaves, tied = _leaves(like, "skip", buffers, ties)
    entries = []
    for name, value, where in leaves:
        entry = _leaf_entry(value, where)
        if entry is None:
            entry = _leaf_to_numpy(value, where)[1]
        entries.append(_named(entry, name, where))
    return Structure(container, tuple(entries), tied)


def template_size(like: Any, *, buffers: str = "joint") -> int:
    """The most coordinates a payload that fits the template ``like`` (as
    :func:`match_template` reads it: a ``torch.nn.Module``'s ``state_dict()``,
    integer and bool entries left out, running statistics too with
    ``buffers="local"``) can hold: every entry coded, none tied.

    Raises:
        InvalidTypeError, InvalidArgumentError: ``like`` is not a template.
    """
    state = _as_state_dict(like)
    return structure_of(like if state is None else state, buffers=buffers).size


def match_template(structure: Structure, like: Any, *, sealed_digest: bytes = b"",
                   buffers: str = "joint", ties: TiePairs = ()) -> Structure:
    """The structure a payload's coordinates are decoded into, given the
    caller's template ``like`` (or a ``torch.nn.Module``: its ``state_dict()``).

    A bare payload takes the template's structure, which must be the one the
    payload was encoded from: the same :func:`digest` as ``sealed_digest``
    (the payload's), so the same container, names, order, dtypes and shapes.
    A payload with a structure must agree with the template in container,
    names, dtypes and shapes (numpy or torch may differ: ``output`` decides
    that).  ``buffers``: as the encoder's (see :func:`structure_of`).
    Ties (found by storage in ``like``, and the checked ``ties``) are the
    template's: the result gives each tied name back as its coded entry,
    except where the payload codes a group more than once (its encoder did
    not tie it).

    Raises:
        FormatError: the payload does not fit the template.
        InvalidTypeError, InvalidArgumentError: ``like`` is not a template.
    """
    state = _as_state_dict(like)  # a module's state_dict; a mapping as it is
    like = like if state is None else state
    groups = resolve_ties(like, ties)
    template = structure_of(like, buffers=buffers, ties=_untied_in(structure, groups))
    if structure.container == BARE:
        if template.size != structure.size or digest(template) != sealed_digest:
            raise FormatError(_bare_mismatch(structure.size, template, like, sealed_digest,
                                              buffers, _untied_in(structure, groups)))
        return template
    if structure.container != template.container:
        raise FormatError(f"the payload's structure does not match the template: the payload "
                          f"is a {_CONTAINER_NAMES[structure.container]}, the template a "
                          f"{_CONTAINER_NAMES[template.container]}")
    ours = [(e.name, e.dtype, e.shape) for e in structure.entries]
    theirs = [(e.name, e.dtype, e.shape) for e in template.entries]
    if ours != theirs:
        raise FormatError(_first_difference(ours, theirs))
    return Structure(structure.container, structure.entries, template.ties)


_CONTAINER_NAMES = {SINGLE: "single array", LIST: "list", TUPLE: "tuple", DICT: "mapping"}


def _first_difference(ours: list[tuple[str, str, tuple[int, ...]]],
                      theirs: list[tuple[str, str, tuple[int, ...]]]) -> str:
    """The message naming the first entry (name, dtype, shape) where a
    payload's structure and a template's differ."""
    at = next(i for i in range(max(len(ours), len(theirs)))
              if i >= len(ours) or i >= len(theirs) or ours[i] != theirs[i])

    def entry(entries: list[tuple[str, str, tuple[int, ...]]]) -> str:
        if at >= len(entries):
            return f"no entry there (it has {len(entries)})"
        name, dtype, shape = entries[at]
        return f"{name!r} {dtype} of shape {shape}"

    return (f"the payload's structure does not match the template at entry {at}: the payload "
            f"has {entry(ours)}, the template {entry(theirs)}")


def _bare_mismatch(size: int, template: Structure, like: Any, sealed_digest: bytes,
                   buffers: str, ties: Mapping[str, str]) -> str:
    """The message for a template that is not a bare payload's structure (of
    ``size`` coordinates): the sizes where they differ; the encoder's
    ``buffers=`` choice where the template has the payload's structure under
    another; else what may differ (a bare payload carries only its
    structure's digest, so no entry can be named)."""
    head = "the template is not the structure this bare payload was encoded from"
    for other in BUFFER_CHOICES:
        try:
            fits = other != buffers and digest(structure_of(like, buffers=other,
                                                            ties=ties)) == sealed_digest
        except (InvalidArgumentError, InvalidTypeError):
            fits = False
        if fits:
            return (f"{head}: the template has the payload's structure with buffers={other!r}, "
                    f"not {buffers!r} (pass the encoder's buffers= choice)")
    if size != template.size:
        sizes = f"the payload has {size} coordinates, the template {template.size}"
    else:
        sizes = (f"both have {size} coordinates, but the payload carries only its structure's "
                 "digest, so the differing entry cannot be named")
    return (f"{head} ({sizes}): its entries' names, order, dtypes or shapes differ, or running "
            "statistics are in one and not the other (pass the encoder's buffers= choice), or "
            "an entry is tied in one and not the other (ties=)")
