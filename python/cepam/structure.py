"""The structure of a model update: what rebuilds it from a flat vector.

A model update is one array or tensor, or several: a sequence of them or a
mapping from names to them (a ``state_dict`` difference).  The codec works on
one flat vector (:mod:`cepam.flatten`); a :class:`Structure` records the
container and each :class:`Entry`'s name, kind (numpy or torch), dtype and
shape, and this module holds the payload codes they are written with.

Supported dtypes: float32 and float64 (coded as they are), float16 and, for
torch, bfloat16 (coded as float32).  Decoded low-precision entries come back
as float32 unless the caller asks for the input's dtype (``dtype="input"``:
:data:`DTYPE_CHOICES`, :func:`output_dtype`; see :mod:`cepam.precision`).
Integer and bool entries of a mapping (BatchNorm's ``num_batches_tracked``)
are not model updates: with ``non_float="skip"`` they are left out, so the
decoded mapping lacks them.

Float *buffers* of a mapping (torch's normalisation statistics: entries whose
last name component is ``running_mean`` or ``running_var``, as BatchNorm,
InstanceNorm and their variants name them) are data statistics, not trained
weights; :data:`BUFFER_CHOICES` says how they are sent (see
:func:`cepam.flatten.flatten` and the codec's ``buffers=``).

Tied entries are recorded in :attr:`Structure.ties` (:mod:`cepam.ties`); a
payload may carry no structure at all (``BARE``), and the decoder then takes
it from a template (:mod:`cepam.template`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._checks import check_choice

__all__ = ["Entry", "Structure", "output_dtype", "output_dtypes", "entry_kind", "decoded_of",
           "DTYPE_CHOICES", "NON_FLOAT_CHOICES", "BUFFER_CHOICES", "RUNNING_STATISTICS",
           "is_buffer"]


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
#: What ``decode`` returns: "auto" (as encoded), numpy arrays or torch tensors.
OUTPUT_CHOICES = ("auto", "numpy", "torch")
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
    #: The number of coordinates, the product of the shape, computed once
    #: when built (read on every call).
    size: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        size = 1
        for d in self.shape:
            size *= d
        object.__setattr__(self, "size", size)


@dataclass(frozen=True)
class Structure:
    container: int  # SINGLE, LIST, TUPLE or DICT
    entries: tuple[Entry, ...]
    #: (name, target) pairs of a mapping: ``name`` is the same tensor as the
    #: entry ``target`` (tied), not coded; never in a payload (see :mod:`cepam.ties`).
    ties: tuple[tuple[str, str], ...] = ()
    #: The number of coordinates, summed once when built (read on every call).
    size: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", sum(e.size for e in self.entries))

    def derived(self, name: Hashable, compute: "Callable[[Structure], Any]") -> Any:
        """``compute(self)``, a value that depends on this structure alone
        (its header bytes, a bound from its dtypes), computed on the first
        call with ``name`` (a str, or a tuple of a str and the choices it
        depends on) and kept with the structure: an encoder builds
        one model's structure once and codes it round after round.  Kept
        outside the fields (like ``functools.cached_property``, without its
        lock): equality, hashing and ``repr`` do not see it."""
        memo = self.__dict__.get("_derived")
        if memo is None:
            memo = self.__dict__["_derived"] = {}
        value = memo.get(name)
        if value is None:
            value = memo[name] = compute(self)
        return value


def prefix_hint(ours: Iterable[str], theirs: Iterable[str]) -> str:
    """A hint, for a message, where two sets of entry names differ by one
    leading component on one side (``"module."`` of DataParallel,
    ``"_orig_mod."`` of torch.compile): every name of one side has it, and
    without it they are among the other's names, or hold them all; else
    ""."""
    a = {n for n in ours if isinstance(n, str)}
    b = {n for n in theirs if isinstance(n, str)}
    for prefixed, other in ((a, b), (b, a)):
        if not prefixed or not other:
            continue
        head = next(iter(prefixed)).partition(".")[0] + "."
        stripped = {n[len(head):] for n in prefixed}
        if head != "." and all(n.startswith(head) for n in prefixed) and \
                (stripped <= other or other <= stripped):
            return (f" (the names differ by the prefix {head!r}, which a wrapper such as "
                    "DataParallel or torch.compile adds: strip it on one side)")
    return ""


def _is_torch_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_integer_leaf(x: Any) -> bool:
    """An integer or bool array, tensor or numpy scalar (not a model update)."""
    if type(x) is np.ndarray:  # (the common leaf, first)
        return x.dtype.kind in "biu"
    if _is_torch_tensor(x):
        return not (x.dtype.is_floating_point or x.dtype.is_complex)
    if isinstance(x, (np.ndarray, np.integer, np.bool_)):
        return np.asarray(x).dtype.kind in "biu"
    return False


def is_buffer(name: str) -> bool:
    """True for an entry named like a normalisation layer's running statistic
    (``"bn1.running_var"``): a float buffer, not a trained weight."""
    return name.rpartition(".")[2] in RUNNING_STATISTICS


# The choices of encode's and decode's str options (each raises
# InvalidTypeError for a value that is not a str, an array included, and
# InvalidArgumentError for another str: :func:`cepam._checks.check_choice`).


def check_buffers(buffers: object) -> str:
    """``buffers``, one of :data:`BUFFER_CHOICES`."""
    return check_choice("buffers", buffers, BUFFER_CHOICES)


def check_non_float(non_float: object) -> str:
    """``non_float``, one of :data:`NON_FLOAT_CHOICES`."""
    return check_choice("non_float", non_float, NON_FLOAT_CHOICES)


def check_dtype_choice(dtype: object) -> str:
    """``dtype``, one of :data:`DTYPE_CHOICES`."""
    return check_choice("dtype", dtype, DTYPE_CHOICES)


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


def output_dtypes(structure: Structure, *, dtype: str, output: str) -> tuple[str, ...]:
    """:func:`output_dtype` of each entry, in order (kept with the structure:
    a decoder decodes one model's structure payload after payload)."""
    return structure.derived(("output dtypes", dtype, output), lambda s: tuple(
        output_dtype(e, dtype=dtype, output=output) for e in s.entries))


def decoded_of(outputs: tuple[str, ...]) -> str:
    """The dtype the flat vector is decoded into, from the entries' output
    dtypes ``outputs`` (:func:`output_dtypes`): float64 if an entry is
    returned in float64, else float32."""
    return "float64" if "float64" in outputs else "float32"
