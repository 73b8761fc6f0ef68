"""Bare payloads and templates: a structure the decoder already knows.

A payload may carry no structure at all (``BARE``: the number of
coordinates only), when the receiver already knows the names, shapes and
dtypes (a server decoding updates of its own global model): the decoder then
takes them from a template (:func:`structure_of`, :func:`match_template`),
which must match the encoded structure's :func:`digest` (sealed in the
payload).  A payload with a structure must agree with its template in
container, names, dtypes and shapes; the size of the template's
:func:`structure_of` (every entry coded, none tied) bounds the coordinates
a payload decoded into it may hold.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import Any

from .errors import FormatError, InvalidArgumentError, InvalidTypeError
from .flatten import _leaf_entry, _leaf_to_numpy, _leaves, _named
from .structure import (
    _DTYPE_CODES,
    BARE,
    BUFFER_CHOICES,
    DICT,
    KIND_NUMPY,
    LIST,
    SINGLE,
    TUPLE,
    Entry,
    Structure,
    is_buffer,
    prefix_hint,
)
from .ties import TiePairs, _as_state_dict, _untied_in, resolve_ties

__all__ = ["bare", "digest", "structure_of", "match_template"]


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
    (``ties``: as for :func:`~cepam.flatten.flatten`) the first is an entry,
    the others ties.

    Raises:
        InvalidTypeError, InvalidArgumentError: as :func:`~cepam.flatten.flatten`.
    """
    container, leaves, tied = _leaves(like, "skip", buffers, ties)
    entries = []
    for name, value, where in leaves:
        entry = _leaf_entry(value, where, name)
        if entry is None:
            entry = _leaf_to_numpy(value, where, name)[1]
        entries.append(_named(entry, name, where))
    return Structure(container, tuple(entries), tied)


def match_template(structure: Structure, like: Any, *, sealed_digest: bytes = b"",
                   buffers: str = "joint", ties: TiePairs = (),
                   untied: Structure | None = None) -> Structure:
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
    not tie it).  ``untied``: ``structure_of(like, buffers=buffers)``
    where the caller has it already (the template read with every entry
    coded), taken as the template when no tie applies.

    Raises:
        FormatError: the payload does not fit the template.
        InvalidTypeError, InvalidArgumentError: ``like`` is not a template.
    """
    state = _as_state_dict(like)  # a module's state_dict; a mapping as it is
    like = like if state is None else state
    groups = _untied_in(structure, resolve_ties(like, ties))
    template = untied if untied is not None and not groups else \
        structure_of(like, buffers=buffers, ties=groups)
    if structure.container == BARE:
        if template.size != structure.size or digest(template) != sealed_digest:
            raise FormatError(_bare_mismatch(structure.size, template, like, sealed_digest,
                                              buffers, groups))
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

    # Names under a wrapper's prefix in one only; else running statistics in
    # one and not the other: the encoder's buffers= choice.
    names = {e[0] for e in ours} ^ {e[0] for e in theirs}
    hint = prefix_hint((e[0] for e in ours), (e[0] for e in theirs)) or (
        " (the running statistics are in one and not the other: pass the encoder's "
        "buffers= choice)" if names and all(is_buffer(name) for name in names) else "")
    return (f"the payload's structure does not match the template at entry {at}: the payload "
            f"has {entry(ours)}, the template {entry(theirs)}{hint}")


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
