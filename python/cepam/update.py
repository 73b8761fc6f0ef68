"""Applying a decoded update to a model, in place.

A server that decodes a ``state_dict`` difference adds it into its model.
Written by hand (clone the state, add, ``load_state_dict``) that step has
two traps, which :func:`apply_update` closes:

- *Tied entries* (an embedding shared with the output layer: one tensor under
  two names, :mod:`cepam.ties`). A decoded update names a tie once unless the
  decoder was told of it; a cloned state holds the tied tensor twice, and
  ``load_state_dict`` then writes the stale copy over the updated one. When
  the decoded update names both, an in-place loop adds it twice.
  :func:`apply_update` adds into the model's own tensors, once per tensor
  whatever names the update gives it.
- *Running variances.* BatchNorm's ``running_var`` is coded and noised like
  the weights (``buffers="separate"``, the default). With a privacy-level
  sigma, noise makes some of them negative, and the model then evaluates to
  NaN. :func:`apply_update` keeps every running variance it updates at
  least :data:`RUNNING_VAR_FLOOR`, or at its value before where that was
  smaller (so a small variance a model legitimately has stays; a zero
  update changes nothing): post-processing of the decoded values, no
  privacy cost. (:class:`cepam.flower.CepamStrategy` clamps its aggregate's
  at the floor, and logs it.)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._checks import check_nonnegative, check_real
from .errors import InvalidArgumentError, InvalidTypeError
from .structure import _is_torch_tensor, prefix_hint
from .ties import _as_state_dict, _storage_key

__all__ = ["apply_update", "is_running_variance", "RUNNING_VAR_FLOOR"]

#: The default floor of a running variance after an update: a hundred times
#: BatchNorm's eps (1e-5), so that no noised variance divides by ~0.
RUNNING_VAR_FLOOR = 1e-3
_RUNNING_VAR = "running_var"
_NATIVE_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def is_running_variance(name: str) -> bool:
    """True for an entry named like a normalisation layer's running variance
    (``"bn1.running_var"``)."""
    return name.rpartition(".")[2] == _RUNNING_VAR


def _is_float(x: Any) -> bool:
    if _is_torch_tensor(x):
        return bool(x.dtype.is_floating_point)
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def _same_values(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if _is_torch_tensor(a) and _is_torch_tensor(b) and a.device == b.device:
        return bool(sys.modules["torch"].equal(a, b))  # (on its device: no copy to the host)
    return bool(np.array_equal(_as_numpy(a), _as_numpy(b)))


def _all_finite(x: Any) -> bool:
    if _is_torch_tensor(x):  # (on its device: no copy to the host)
        return bool(sys.modules["torch"].isfinite(x).all())
    return bool(np.isfinite(np.asarray(x)).all())


def _as_numpy(x: Any) -> np.ndarray:
    if _is_torch_tensor(x):
        x = x.detach().cpu()
        return (x.float() if x.dtype == sys.modules["torch"].bfloat16 else x).numpy()
    return np.asarray(x)


def _check_scale(scale: object) -> float:
    value = check_real("scale", scale)
    if not math.isfinite(value):
        raise InvalidArgumentError(f"scale must be finite, got {value!r}")
    return value


def _check_floor(floor: object) -> float | None:
    return None if floor is None else check_nonnegative("running_var_floor", floor)


def _usable(x: Any, what: str, name: str) -> None:
    """Refuses a tensor that holds no values to read or write (on device
    'meta', a lazy module's uninitialized parameter, nested, sparse, an
    inference tensor as the target), or a read-only array as the target."""
    if _is_torch_tensor(x):
        torch = sys.modules["torch"]
        if torch.nn.parameter.is_lazy(x):
            raise InvalidArgumentError(f"{what} entry {name!r} is an uninitialized (lazy) "
                                       "parameter: run a forward pass first")
        if x.is_nested or x.is_sparse or x.is_meta:
            raise InvalidTypeError(f"{what} entry {name!r} must be a dense tensor with values "
                                   "(not nested, sparse or on device 'meta')")
        if what == "target" and x.is_inference():
            raise InvalidArgumentError(f"target entry {name!r} is an inference tensor, which "
                                       "cannot be written outside inference mode")
    elif not isinstance(x, np.ndarray):
        raise InvalidTypeError(f"{what} entry {name!r} must be a tensor or an array, got "
                               f"{type(x).__name__}")
    elif what == "target" and not x.flags.writeable:
        raise InvalidArgumentError(f"target entry {name!r} is a read-only array")


def _updated(dest: Any, value: Any, scale: float, name: str, floor: float | None) -> Any:
    """``dest + scale * value``, computed in the wider of the two dtypes and
    rounded once to ``dest``'s, on its device (a running variance kept at
    least the smaller of ``floor`` and its value before), without writing.

    Raises:
        InvalidArgumentError: the update does not convert to the target's
            kind, or the result overflows its dtype.
    """
    try:
        if _is_torch_tensor(dest):
            torch = sys.modules["torch"]
            if _is_torch_tensor(value):
                src = value
            else:  # (another byte order, or long double: as float64)
                arr = value if value.dtype in _NATIVE_FLOATS else value.astype(np.float64)
                src = torch.from_numpy(np.ascontiguousarray(arr))
            with torch.no_grad():
                src = src.detach().to(device=dest.device)
                wide = torch.promote_types(dest.dtype, src.dtype)
                new = dest.detach().to(wide) + src.to(wide) * scale
                if floor is not None and is_running_variance(name):
                    new = torch.maximum(new, torch.clamp(dest.detach().to(wide), max=floor))
                new = new.to(dest.dtype)
                finite = bool(torch.isfinite(new).all())
        else:
            src = _as_numpy(value)
            wide = np.promote_types(dest.dtype, src.dtype)
            with np.errstate(over="ignore", invalid="ignore"):
                new = dest.astype(wide) + wide.type(scale) * src.astype(wide)
                if floor is not None and is_running_variance(name):
                    new = np.maximum(new, np.minimum(dest.astype(wide), wide.type(floor)))
                new = new.astype(dest.dtype)
            finite = bool(np.isfinite(new).all())
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InvalidArgumentError(f"entry {name!r}: the update cannot be added into the "
                                   f"target's {dest.dtype} ({exc})") from None
    if not finite:
        raise InvalidArgumentError(f"entry {name!r}: the update times scale overflows the "
                                   f"target's {dest.dtype}")
    return new


def _extent(x: Any) -> tuple[str, int, int] | None:
    """The bytes a target entry spans: its device, first and past-the-last
    address (from its shape and strides), or None where it holds no memory
    of its own (:func:`cepam.ties._storage_key`'s None)."""
    if _storage_key(x) is None:
        return None
    if _is_torch_tensor(x):
        size = x.element_size()
        start = x.untyped_storage().data_ptr() + x.storage_offset() * size
        device, steps = str(x.device), [s * size for s in x.stride()]
    else:
        size, start, device = x.itemsize, x.__array_interface__["data"][0], "cpu"
        steps = list(x.strides)
    low = sum((n - 1) * s for n, s in zip(x.shape, steps) if s < 0)
    high = sum((n - 1) * s for n, s in zip(x.shape, steps) if s > 0)
    return device, start + low, start + high + size


def _host_view(x: Any) -> np.ndarray | None:
    """A numpy view of a target entry in host memory (None elsewhere, or for
    an element size numpy's integers lack: its spans then decide)."""
    if not _is_torch_tensor(x):
        return x
    if x.device.type != "cpu":
        return None
    torch = sys.modules["torch"]
    same_size = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(
        x.element_size())  # (an integer view of the same strides: numpy has no bfloat16)
    return None if same_size is None else x.detach().view(same_size).numpy()


def _share_memory(a: Any, b: Any) -> bool:
    """Whether two entries whose spans overlap share a byte: numpy's exact
    test in host memory (interleaved views, a[0::2] and a[1::2], do not);
    elsewhere, overlapping spans count as shared."""
    host_a, host_b = _host_view(a), _host_view(b)
    if host_a is None or host_b is None:
        return True
    return bool(np.shares_memory(host_a, host_b))


def _check_disjoint(entries: list[tuple[str, Any]]) -> None:
    """Refuses target entries (name, tensor) that share memory without
    being one tensor (a tie): two views of one buffer in different shapes,
    which an update would change twice over the bytes they share.

    Raises:
        InvalidArgumentError: naming the two entries.
    """
    spans = sorted((extent, name) for name, dest in entries
                   if (extent := _extent(dest)) is not None)
    values = dict(entries)
    for i, (a, name_a) in enumerate(spans):
        for b, name_b in spans[i + 1:]:
            if b[0] != a[0] or b[1] >= a[2]:
                break  # (sorted by start: no later span reaches into a)
            if _share_memory(values[name_a], values[name_b]):
                raise InvalidArgumentError(
                    f"target entries {name_a!r} and {name_b!r} share memory as views of "
                    "different shapes (not one tied tensor): an update would add into the "
                    "bytes they share twice; update one of them")


def _write(dest: Any, new: Any) -> None:
    if _is_torch_tensor(dest):
        with sys.modules["torch"].no_grad():
            dest.copy_(new)
    else:
        dest[...] = new


def apply_update(target: Any, update: Mapping[str, Any], *, scale: float = 1.0,
                 running_var_floor: float | None = RUNNING_VAR_FLOOR) -> None:
    """Adds ``scale * update`` into ``target``'s entries, in place.

    Each entry of ``update`` is added into the entry of ``target`` of the same
    name, in that entry's dtype and on its device. Tied entries (one tensor
    under two names) are updated once, whichever of their names ``update``
    gives. A running variance (an entry named ``*.running_var``, as
    BatchNorm's) is kept at least ``running_var_floor``, or at its value
    before where that was smaller: noise can make a variance negative, and
    BatchNorm then evaluates to NaN. Entries ``update`` does not name (the
    integer counters that ``decode`` leaves out) keep their values. Every
    new value is computed and checked before any is written: a refused
    update leaves the target as it was.

    Typical server step, after decoding each client's update::

        mean = {k: sum(u[k] for u in updates) / len(updates) for k in updates[0]}
        cepam.apply_update(global_model, mean)

    Args:
        target: a ``torch.nn.Module`` (its parameters and buffers are
            updated) or a mapping from names to torch tensors or numpy
            arrays (updated in place, so its tensors must be the ones to
            change: a ``state_dict()``, not clones of it).
        update: a mapping from names to tensors or arrays, as ``decode``
            gives a ``state_dict`` difference; every name must be one of
            ``target``'s float entries, of the same shape.
        scale: the factor applied to the update (a real number; 1 by
            default).
        running_var_floor: the least value an update leaves a running
            variance (>= 0; a smaller value before the update is kept),
            or None for no floor. Post-processing of decoded values: it
            costs no privacy.

    Raises:
        InvalidTypeError: ``target`` is not a module or a mapping, ``update``
            is not a mapping, an entry is not a dense tensor or an array (a
            nested, sparse or 'meta' tensor), or ``scale`` or
            ``running_var_floor`` is not a number.
        InvalidArgumentError: a name of ``update`` is not in ``target``, an
            entry's shape differs or ``target``'s entry is not a float, an
            update's value is not finite or the result overflows the
            target's dtype, two names of one tied tensor get different
            values, two entries the update names share memory without
            being one tensor (views of one buffer in different shapes), a
            target entry cannot be written (read-only, an inference tensor,
            a lazy parameter), ``scale`` is not finite or
            ``running_var_floor`` is negative or not finite.
    """
    state = _as_state_dict(target)
    if state is None:
        raise InvalidTypeError("apply_update takes a torch.nn.Module or a mapping from names to "
                               f"tensors or arrays, got {type(target).__name__}")
    if not isinstance(update, Mapping):
        raise InvalidTypeError("update must be a mapping from names to tensors or arrays (a "
                               f"decoded state_dict difference), got {type(update).__name__}")
    scale = _check_scale(scale)
    floor = _check_floor(running_var_floor)
    # Every new value is computed (and checked) before anything is written,
    # so that a refused update leaves the target as it was.
    plan: list[tuple[Any, Any]] = []
    first: dict[tuple[Any, ...], tuple[str, Any]] = {}
    for name, value in update.items():
        if not isinstance(name, str):
            raise InvalidTypeError(f"update's keys must be str, got {type(name).__name__}")
        if name not in state:
            raise InvalidArgumentError(f"update entry {name!r} is not an entry of the target"
                                       + prefix_hint(update, state))
        dest = state[name]
        _usable(value, "update", name)
        _usable(dest, "target", name)
        if not _is_float(dest) or not _is_float(value):
            raise InvalidArgumentError(
                f"entry {name!r}: only float entries take an update (the target's is "
                f"{dest.dtype}, the update's {value.dtype})")
        if _shape(dest) != _shape(value):
            raise InvalidArgumentError(f"entry {name!r}: the update's shape {_shape(value)} is "
                                       f"not the target's {_shape(dest)}")
        if not _all_finite(value):
            raise InvalidArgumentError(f"update entry {name!r} holds NaN or Inf")
        key = _storage_key(dest)
        if key is not None and key in first:
            tied, tied_value = first[key]
            if not _same_values(value, tied_value):
                raise InvalidArgumentError(
                    f"entries {tied!r} and {name!r} are one tied tensor of the target, but the "
                    "update gives them different values (an update encoded without its ties "
                    "codes the tensor twice, with two noises: encode with ties=model, or "
                    "ties={name: tied-to name})")
            continue  # (one tensor: updated once)
        if key is not None:
            first[key] = (name, value)
        plan.append((dest, _updated(dest, value, scale, name, floor)))
    _check_disjoint([(name, state[name]) for name, _ in first.values()])
    for dest, new in plan:
        _write(dest, new)
