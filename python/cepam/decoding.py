"""The decode pipeline: the payload opened and checked against what the
decoder expects, its body decoded (into the caller's ``out=`` memory, or on
a GPU with ``device=``), the values checked against their output dtype and
the update's structure rebuilt (:func:`cepam.decode` and
:meth:`cepam.Codec.decode` check their own arguments and call
:func:`_decode`)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._native import core as _core
from .cuda import check_device_output, decode_on_device, decodes_on_device, parse_device, to_device
from .cuda_device import cuda_index_of
from ._checks import check_choice
from .errors import FormatError, InvalidArgumentError, InvalidTypeError
from .expected import Expected
from .keys import SecretKeys, check_integer
from .mechanisms import core_params, mechanism_from_code
from .precision import check_output
from .sealing import open_payload
from .flatten import rebuild
from .structure import (
    OUTPUT_CHOICES,
    BARE,
    KIND_NUMPY,
    KIND_TORCH,
    SINGLE,
    Structure,
    check_buffers,
    check_dtype_choice,
    decoded_of,
    entry_kind as _entry_kind,
    output_dtypes,
)
from .template import match_template, structure_of
from .ties import (TiePairs, _as_state_dict, apply_ties, has_meta, resolve_ties, ties_in,
                   with_ties)
from .threads import resolve_threads

__all__ = ["DEFAULT_MAX_COORDINATES", "_decode"]

#: The largest update a decoder without a template (``like=``) accepts.
DEFAULT_MAX_COORDINATES = 1 << 28


def _entry_names(structure: Structure) -> tuple[str, ...]:
    """Each entry as the decoder's messages name it (kept with the
    structure: a server decodes one model's structure payload after
    payload)."""
    entries = structure.entries
    return tuple(f"entry {e.name!r}" if e.name else
                 f"entry {i}" if len(entries) > 1 else "the update"
                 for i, e in enumerate(entries))


def _is_torch(value: Any) -> bool:
    """Whether value is a torch tensor (torch imported only if it already is)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _output_buffer(out: Any, structure: Structure, *, dtype: str, output: str,
                   decoded: str, cuda_index: int | None = None) -> Any:
    """The 1-D view of ``out`` (decode's ``out=``) the decoder writes into,
    checked: a numpy array or CPU torch tensor (the view a numpy array) or,
    with ``cuda_index`` (decode's ``device=``), a torch tensor in that CUDA
    device's memory (the view a tensor); C-contiguous and writable, of the
    dtype every entry is returned in (``decoded``: the decoded vector's),
    shaped like a single-array payload's entry or, for a list, tuple or
    dict, 1-D of all the payload's coordinates.

    Raises:
        InvalidTypeError: out is not a numpy array or torch tensor.
        InvalidArgumentError: its dtype, shape, layout, device or kind does
            not fit, it is read-only (or a tensor that requires grad), or
            the entries decode to several dtypes.
    """
    single = structure.container in (SINGLE, BARE)
    if _is_torch(out):
        kind, name = "a torch tensor", str(out.dtype).removeprefix("torch.")
        shape, contiguous, writable = tuple(out.shape), out.is_contiguous(), not out.requires_grad
        if cuda_index is None and out.device.type != "cpu":
            raise InvalidArgumentError(f"out must be in host memory, got a tensor on "
                                       f"{out.device} (or decode with device= on its GPU)")
        if cuda_index is not None and cuda_index_of(out) != cuda_index:
            raise InvalidArgumentError(f"out must be a tensor on cuda:{cuda_index}, as device= "
                                       f"says, got one on {out.device}")
    elif isinstance(out, np.ndarray):
        if cuda_index is not None:
            raise InvalidArgumentError(f"out must be a torch tensor on cuda:{cuda_index}, as "
                                       f"device= says, got a numpy array")
        kind, name = "a numpy array", out.dtype.name
        shape, contiguous, writable = out.shape, out.flags.c_contiguous, out.flags.writeable
    else:
        raise InvalidTypeError(f"out must be a numpy array or a torch tensor, got "
                               f"{type(out).__name__}")
    dtypes = set(output_dtypes(structure, dtype=dtype, output=output))
    if len(dtypes) > 1:
        raise InvalidArgumentError(
            f"out= needs every entry decoded in one dtype; with dtype={dtype!r} they decode "
            f"to {sorted(dtypes)} (pass dtype='float32' or 'float64')")
    if dtypes != {decoded}:
        raise InvalidArgumentError(
            f"out= takes the decoder's own dtype, float32 or float64; with dtype={dtype!r} "
            f"the entries are cast to {dtypes.pop()} after decoding (pass dtype={decoded!r}, "
            "or decode without out=)")
    if name != decoded:
        raise InvalidArgumentError(f"out has dtype {name}; the payload decodes to {decoded} "
                                   f"(dtype={dtype!r})")
    expected = structure.entries[0].shape if single else (structure.size,)
    if shape != expected:
        what = "its entry's shape" if single else "1-D, all its coordinates"
        raise InvalidArgumentError(f"out has shape {shape}; the payload needs {expected} "
                                   f"({what})")
    if not contiguous:
        raise InvalidArgumentError("out must be C-contiguous")
    if not writable:
        raise InvalidArgumentError("out must be writable" + (
            " (a tensor that requires grad is not: pass a detached one)" if _is_torch(out)
            else ""))
    if single:
        returned = _entry_kind(structure.entries[0], output)
        if returned != (KIND_TORCH if _is_torch(out) else KIND_NUMPY):
            raise InvalidArgumentError(
                f"out is {kind} but the payload decodes to a "
                f"{'torch tensor' if returned == KIND_TORCH else 'numpy array'}: pass "
                f"output= to match, or the other kind of out")
    if cuda_index is not None:
        return out.view(-1)
    return (out.numpy() if _is_torch(out) else out).reshape(-1)


def _decode(payload: object, secret: bytes, output: str, dtype: str, max_coordinates: object,
            expected: Expected, like: Any, threads: object, device: object,
            buffers: object, ties: TiePairs, out: Any = None) -> Any:
    check_choice("output", output, OUTPUT_CHOICES)
    cuda_index = parse_device(device)
    if cuda_index is not None:
        if output == "numpy":
            raise InvalidArgumentError("device='cuda' returns torch tensors: output='numpy' "
                                       "cannot be")
        output = "torch"
    dtype = check_dtype_choice(dtype)
    buffers = check_buffers(buffers)
    untied = None  # the template's structure, every entry coded: its size bounds m
    if like is not None:
        state = _as_state_dict(like)  # a module's state_dict(), built once a call
        if state is not None and state is not like and has_meta(state):  # (by object)
            ties = (*ties, *ties_in(state, like).items())
        like = state or like
    if max_coordinates is None:  # the template's size, else the bare default
        if like is not None:
            untied = structure_of(like, buffers=buffers)
        limit = DEFAULT_MAX_COORDINATES if untied is None else untied.size
        what = "max_coordinates" if like is None else "the template's size (like=)"
    else:
        limit = check_integer("max_coordinates", max_coordinates)
        what = "max_coordinates"
        if limit < 0:
            raise InvalidArgumentError(f"max_coordinates must be non-negative, got {limit}")
    threads = resolve_threads(threads)
    keys = SecretKeys(secret)
    header, sealed = open_payload(payload, keys, threads=threads)  # the tag, then parsing
    expected.enforce(header)  # after the tag: the settings are the sender's own
    structure = header.structure
    # A template checks a structured payload first (its header's entries,
    # parsed already: the error names the first that differs, and nothing
    # is decoded); a bare payload, which carries only a digest, by its size.
    if like is not None and structure.container != BARE:
        structure = match_template(structure, like, sealed_digest=sealed.digest,
                                   buffers=buffers, ties=ties, untied=untied)
    if header.m > limit:
        raise FormatError(f"payload declares {header.m} coordinates, more than "
                          f"{what} {limit}: refused before decoding")
    if like is not None and structure.container == BARE:
        structure = match_template(structure, like, sealed_digest=sealed.digest,
                                   buffers=buffers, ties=ties, untied=untied)
    elif like is None and structure.container == BARE:
        raise InvalidArgumentError("the payload carries no structure (encoded with "
                                   "structure=False): pass like=, a template of the update")
    elif ties:
        structure = with_ties(structure, resolve_ties(None, ties))
    mechanism = mechanism_from_code(header.mechanism, header.scale)
    outputs = output_dtypes(structure, dtype=dtype, output=output)
    key = keys.stream(header.context, header.nonce)
    params = core_params(mechanism, lattice=sealed.lattice, n=sealed.n)
    decoded = decoded_of(outputs)
    # device="cuda" with the CUDA path, for an update of at least
    # cepam.cuda.DEVICE_DECODE_MIN_COORDINATES: the GPU decodes into device
    # memory (out='s where given), where the result stays (the decode
    # kernel, or the whole body: cepam.cuda.decodes_body_on_device); else the
    # host decodes, with out= straight into the caller's memory (with
    # device=: into host memory, copied to the GPU or into out= below).
    buffer = None if out is None else _output_buffer(out, structure, dtype=dtype, output=output,
                                                     decoded=decoded, cuda_index=cuda_index)
    on_gpu = cuda_index is not None and decodes_on_device(m=header.m, coder=header.coder)
    if on_gpu:
        flat = decode_on_device(sealed.body, m=header.m, key=key, params=params,
                                coder=header.coder, dtype=decoded, threads=threads,
                                index=cuda_index, out=buffer)
    else:
        # (by position: body, m, key, params, coder, dtype, threads, out)
        flat = _core.decode(sealed.body, header.m, key, params, header.coder, decoded, threads,
                            buffer if cuda_index is None else None)
    start = 0
    for entry, where, name in zip(structure.entries,
                                  structure.derived("entry names", _entry_names), outputs):
        values = flat[start : start + entry.size]
        if on_gpu:
            check_device_output(values, name, noise_std=mechanism.std, where=where)
        else:  # (the host's sums run on the call's threads)
            check_output(values, name, noise_std=mechanism.std, where=where,
                         threads=threads)
        start += entry.size
    # (tied last, so that a move to the GPU keeps them one object)
    untied = Structure(structure.container, structure.entries) if structure.ties else structure
    moved = cuda_index is not None and not on_gpu  # decoded on the host for a GPU
    if moved and buffer is not None:  # (out= is a CUDA tensor: torch is imported)
        flat = buffer.copy_(sys.modules["torch"].from_numpy(flat))
    result = rebuild(flat, untied, output=output, names=outputs)
    if moved and buffer is None:
        result = to_device(result, cuda_index)
    if out is not None and structure.container in (SINGLE, BARE):
        return out  # (its values written in place; a structure's entries are views of it)
    return apply_ties(result, structure, like)
