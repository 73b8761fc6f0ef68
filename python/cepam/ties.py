"""Tied entries: one tensor under two names.

*Tied* entries (one tensor under two names: an embedding shared with the
output layer, which a tied model's ``state_dict`` lists twice) are coded
once, under the first name; the others are recorded as ties
(:attr:`~cepam.structure.Structure.ties`) and given back as the same object.
Ties are found by storage, never by value (:func:`find_ties`), and are not
written into a payload: its structure and bytes are those of the update
without the duplicate names, and the decoder learns the ties from its
template (``like=``) or its ``ties=`` argument (:func:`resolve_ties`).

:func:`cepam.flatten.flatten` drops the later names of each tie group
(:func:`_tie_leaves`); :func:`with_ties` and :func:`apply_ties` give them
back after decoding.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, InvalidTypeError
from .structure import DICT, Structure, _is_torch_tensor

__all__ = ["find_ties", "check_ties", "resolve_ties", "with_ties", "apply_ties"]


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
        try:  # (a lazy parameter raises ValueError; a nested tensor has no shape)
            if x.numel() == 0 or x.is_sparse or x.is_meta:
                return None
            address = x.untyped_storage().data_ptr()
            if address == 0:
                return None
            return ("torch", str(x.device), address, x.storage_offset(), tuple(x.shape),
                    tuple(x.stride()), str(x.dtype))
        except (ValueError, RuntimeError, NotImplementedError):  # (or no storage: a subclass)
            return None
    if isinstance(x, np.ndarray) and x.size:
        return ("numpy", x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.str)
    return None


def _is_meta(x: Any) -> bool:
    """A torch tensor on device 'meta' (no memory: a template's)."""
    if not _is_torch_tensor(x):
        return False
    try:
        return bool(x.is_meta)
    except ValueError:  # (a lazy parameter)
        return False


def has_meta(state: Mapping[Any, Any]) -> bool:
    """Whether a state_dict holds a tensor on device 'meta' (whose ties
    only its module's objects tell: :func:`find_ties` of the module)."""
    return any(_is_meta(v) for v in state.values())


def _module_objects(source: Any) -> dict[str, Any]:
    """A torch module's parameters and buffers by name, every name of a
    shared one included (its tensors by object: a model built on device
    'meta', as a template, holds no storage to tell its ties by); empty for
    anything else."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(source, torch.nn.Module):
        return {}
    objects = dict(source.named_parameters(remove_duplicate=False))
    objects.update(source.named_buffers(remove_duplicate=False))
    return objects


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
    return ties_in(state, source)


def ties_in(state: Mapping[Any, Any], source: Any) -> dict[str, str]:
    """:func:`find_ties` of ``source`` whose state (its ``state_dict()``, or
    itself for a mapping) the caller has built already."""
    first: dict[tuple[Any, ...], str] = {}
    ties: dict[str, str] = {}
    objects: dict[str, Any] | None = None  # (a module's, read at its first 'meta' tensor)
    for name, value in state.items():
        if not isinstance(name, str):
            raise InvalidTypeError(f"mapping keys must be str, got {type(name).__name__}")
        key = _storage_key(value)
        if key is None and _is_meta(value):  # a module's 'meta' tensor: by its object
            objects = _module_objects(source) if objects is None else objects
            key = ("object", id(objects[name])) if name in objects else None
        if key is None:
            continue
        if key in first:
            ties[name] = first[key]
        else:
            first[key] = name
    return ties


#: A checked ``ties=`` argument: (name, name) pairs, each two names of one tensor.
TiePairs = tuple[tuple[str, str], ...]


class NamedTies(tuple):  # type: ignore[type-arg]
    """The pairs of an explicit ``ties={name: target}`` (:func:`check_ties`):
    each name is the user's own, so one that is no entry of the update is
    a mistake (:func:`resolve_ties`), not a tie of a model's that the
    update leaves out."""


def check_ties(ties: object) -> TiePairs:
    """The ``ties=`` argument of encode, decode and :class:`~cepam.Codec`,
    checked: None (no ties but those found by storage in the update or the
    template), a ``torch.nn.Module`` or a mapping from names to tensors
    (ties found in it by storage: :func:`find_ties`), or an explicit mapping
    ``{name: target}`` of str to str (``name`` is the same tensor as
    ``target``).

    Raises:
        InvalidTypeError: another kind of argument, or a mapping whose
            values are some str and some not, or neither str nor arrays
            (numpy arrays, tensors).
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
        # (a module's own state_dict may hold a layer's _extra_state)
        odd = None if state is not ties else next(
            (v for v in state.values() if not (isinstance(v, np.ndarray) or _is_torch_tensor(v))),
            None)
        if odd is not None:
            raise InvalidTypeError(f"ties: a mapping of names to names or of names to tensors "
                                   f"(a state_dict), got a value of type {type(odd).__name__}")
        return tuple(ties_in(state, ties).items())  # (a module's own: its 'meta' ties too)
    pairs = []
    for name, target in state.items():
        if not isinstance(name, str):
            raise InvalidTypeError(f"ties: keys must be str, got {type(name).__name__}")
        if name == target:
            raise InvalidArgumentError(f"ties: {name!r} is tied to itself")
        pairs.append((name, target))
    return NamedTies(pairs)


def resolve_ties(update: Any, ties: TiePairs = ()) -> dict[str, str]:
    """Every tied name of ``update`` (a mapping, or anything else: no ties)
    and of the checked ``ties`` (:func:`check_ties`), mapped to one name of
    its group (the names of one tensor, joined through any chain of ties);
    untied names are absent.  Which name of a group is coded is decided by
    the update's order (:func:`cepam.flatten._leaves`: the first present).

    Raises:
        InvalidArgumentError: an explicit tie (:class:`NamedTies`) naming no
            entry of ``update`` (a mapping): a misspelt name would tie
            nothing, and the tensor would be coded twice.
    """
    if not ties and not isinstance(update, Mapping):
        return {}
    if isinstance(ties, NamedTies) and isinstance(update, Mapping):
        missing = [n for pair in ties for n in pair if n not in update]
        if missing:
            raise InvalidArgumentError(
                f"ties: {missing[0]!r} is not an entry of the update (entries: "
                f"{', '.join(map(repr, list(update)[:5]))}{', ...' if len(update) > 5 else ''})")
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
