"""Hostile payloads: targeted edits of each field behind a valid tag.

Every field of the public header (on payloads of both coders), of the Golomb
body's prefix and sections, and of the ANS body's source model and rANS
stream, set to edge and hostile values by the forger (tests/helpers/forge.py),
sealed and tagged again: each case must raise ``FormatError`` (FORMAT) or may
also decode to the declared structure (EITHER).  Also: all these payloads
together do not grow the peak memory.

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import cepam

from helpers.forge import (
    ANS, ANS_BLOCK, BINS, CODERS, DBL_MAX, GOLOMB, KNOT_BITS, KNOT_SCALE, MAX_GROWTH, RANS_LOW,
    SECRET, STREAMS, U64, UNIFORM, ZERO_WORD_CASES, AnsBody, AnsModel, GolombBody, RawEntry,
    RawPayload, bits_to_bytes, edited_entries, expg_unsigned, on_ans, on_golomb, on_model,
    pack_stream, unpack_stream, zero_run_payloads, zero_word_payload,
)
from helpers.hostile import BASES, MB, outcome, peak_allocation, targeted_payload


# --- Targeted edits of header fields, behind a valid tag. -------------------

FORMAT = "format"  # must raise FormatError
EITHER = "either"  # may decode (to the declared structure) or raise FormatError


def _set_bit(body: bytes, bit: int, value: int) -> bytes:
    b = bytearray(body)
    if value:
        b[bit // 8] |= 0x80 >> (bit % 8)
    else:
        b[bit // 8] &= ~(0x80 >> (bit % 8)) & 0xFF
    return bytes(b)


def _fid(v: float) -> str:
    """A float for a test id (-nan and nan apart)."""
    return ("-" if math.isnan(v) and math.copysign(1.0, v) < 0 else "") + repr(v)


# (id, base payload without the coder prefix, edit: RawPayload -> RawPayload, expected
# outcome, message regex): header edits, run on the payloads of both coders.
HEADER_TARGETED = [
    # Declared sizes.
    ("m-2^62-single-dim", "gauss-n1",
     lambda r: r.edit(m=1 << 62, entries=edited_entries(r, dims=(1 << 62,))), FORMAT, None),
    ("m-2^62-two-dims", "gauss-n2",
     lambda r: r.edit(m=1 << 62, entries=edited_entries(r, dims=(1 << 31, 1 << 31))), FORMAT, None),
    ("m-2^62-shape-unchanged", "gauss-n1", lambda r: r.edit(m=1 << 62), FORMAT,
     "add up|too large"),
    ("m-2^64-1-n1", "gauss-n1",
     lambda r: r.edit(m=U64, entries=edited_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^64-1-n2", "gauss-n2",
     lambda r: r.edit(m=U64, entries=edited_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^64-3-n4", "laplace-n4-clip",
     lambda r: r.edit(m=U64 - 2, entries=edited_entries(r, dims=(U64 - 2,))), FORMAT, None),
    ("m-2^64-1-n8", "gauss-n1",
     lambda r: r.edit(n=8, m=U64, entries=edited_entries(r, dims=(U64,))), FORMAT, None),
    ("m-2^56-plus-1", "gauss-n1",
     lambda r: r.edit(m=(1 << 56) + 1, entries=edited_entries(r, dims=((1 << 56) + 1,))), FORMAT,
     "too large"),
    # Below the header's own bound, above decode's default max_coordinates (2^28).
    ("m-2^56", "gauss-n1",
     lambda r: r.edit(m=1 << 56, entries=edited_entries(r, dims=(1 << 56,))), FORMAT,
     "max_coordinates"),
    ("m-2^40", "gauss-n2",
     lambda r: r.edit(m=1 << 40, entries=edited_entries(r, dims=(1 << 20, 1 << 20))), FORMAT,
     "max_coordinates"),
    ("m-2^28-plus-1", "gauss-n1",
     lambda r: r.edit(m=(1 << 28) + 1, entries=edited_entries(r, dims=((1 << 28) + 1,))), FORMAT,
     "max_coordinates"),
    ("m-zero", "gauss-n1", lambda r: r.edit(m=0), FORMAT, None),
    ("m-zero-empty-shape", "gauss-n1", lambda r: r.edit(m=0, entries=edited_entries(r, dims=(0,))),
     FORMAT, None),
    ("m-zero-empty-shape-n2", "gauss-n2-m300",
     lambda r: r.edit(m=0, entries=edited_entries(r, dims=(0, 3))), FORMAT, None),
    ("m-one-more", "gauss-n1", lambda r: r.edit(m=r.m + 1), FORMAT, "add up"),
    ("m-one-less", "gauss-n1", lambda r: r.edit(m=r.m - 1), FORMAT, "exceed|add up"),
    ("m-one-more-than-body-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m + 1, entries=edited_entries(r, dims=(r.m + 1,))), FORMAT, None),
    ("m-one-less-than-body-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m - 1, entries=edited_entries(r, dims=(r.m - 1,))), FORMAT, None),
    ("m-4096-more-with-shape", "gauss-n1",
     lambda r: r.edit(m=r.m + ANS_BLOCK, entries=edited_entries(r, dims=(r.m + ANS_BLOCK,))),
     FORMAT, None),
    ("dims-huge-product", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(1 << 32, 1 << 32, 1 << 32))), FORMAT,
     "exceed|too large"),
    ("dims-32-times-2^64-1", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(U64,) * 32)), FORMAT, "exceed|too large"),
    ("dims-product-wraps-2^64", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(1 << 32, 1 << 32, r.m))), FORMAT,
     "exceed|too large"),
    ("zero-size-entry-with-2^61-dim", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(0, 1 << 61)) + [RawEntry(b"", 0, 1, (r.m,))],
                      container=1), EITHER, None),
    ("zero-size-entry-with-2^64-1-dim", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(U64, 0)) + [RawEntry(b"", 0, 1, (r.m,))],
                      container=1), EITHER, None),
    ("zero-size-entry-small", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(0, 7)) + [RawEntry(b"", 0, 1, (r.m,))],
                      container=1), EITHER, None),
    # Entry table.
    ("entry-count-2^32-1", "dict-n2", lambda r: r.edit(count=(1 << 32) - 1), FORMAT, "entries"),
    ("entry-count-0", "dict-n2", lambda r: r.edit(count=0), FORMAT, "entries"),
    ("entry-count-one-more", "dict-n2", lambda r: r.edit(count=len(r.entries) + 1), FORMAT, None),
    ("entry-count-one-less", "dict-n2", lambda r: r.edit(count=len(r.entries) - 1), FORMAT, None),
    ("two-entries-in-single-container", "gauss-n1",
     lambda r: r.edit(entries=r.entries * 2, m=2 * r.m), FORMAT, "entries"),
    ("name-length-65535", "dict-n2",
     lambda r: r.edit(entries=edited_entries(r, name=b"a" * 65535)), FORMAT, "name"),
    ("name-length-1025", "dict-n2",
     lambda r: r.edit(entries=edited_entries(r, name=b"a" * 1025)), FORMAT, "name"),
    ("name-length-1024", "dict-n2",
     lambda r: r.edit(entries=edited_entries(r, name=b"a" * 1024)), EITHER, None),
    ("ndim-255", "gauss-n1", lambda r: r.edit(entries=edited_entries(r, ndim=255)), FORMAT, "rank"),
    ("ndim-255-with-dims", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(1,) * 254 + (r.m,))), FORMAT, "rank"),
    ("ndim-33", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(1,) * 32 + (r.m,))), FORMAT, "rank"),
    ("ndim-32", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, dims=(1,) * 31 + (r.m,))), EITHER, None),
    ("ndim-0", "gauss-n1", lambda r: r.edit(entries=edited_entries(r, dims=())), FORMAT, None),
    ("kind-2", "gauss-n1", lambda r: r.edit(entries=edited_entries(r, kind=2)), FORMAT, "kind"),
    ("dtype-0", "gauss-n1", lambda r: r.edit(entries=edited_entries(r, dtype=0)), FORMAT, "dtype"),
    ("dtype-5", "gauss-n1", lambda r: r.edit(entries=edited_entries(r, dtype=5)), FORMAT, "dtype"),
    ("dtype-255", "gauss-n1", lambda r: r.edit(entries=edited_entries(r, dtype=255)), FORMAT, "dtype"),
    ("dtype-f16-to-f64", "dict-n2", lambda r: r.edit(entries=[
        dataclasses.replace(e, dtype=2) for e in r.entries]), EITHER, None),
    ("duplicate-dict-names", "dict-n2",
     lambda r: r.edit(entries=[r.entries[0], dataclasses.replace(r.entries[1],
                                                                 name=r.entries[0].name)]
                      + r.entries[2:]), FORMAT, "duplicate"),
    ("named-entry-in-list", "tuple-laplace-n3",
     lambda r: r.edit(entries=edited_entries(r, name=b"w")), FORMAT, "named"),
    ("named-entry-in-single", "gauss-n1",
     lambda r: r.edit(entries=edited_entries(r, name=b"w")), FORMAT, "named"),
    ("utf8-invalid-ff", "dict-n2", lambda r: r.edit(entries=edited_entries(r, name=b"\xff")),
     FORMAT, "UTF-8"),
    ("utf8-truncated", "dict-n2", lambda r: r.edit(entries=edited_entries(r, name=b"ab\xc3")),
     FORMAT, "UTF-8"),
    ("utf8-overlong-nul", "dict-n2", lambda r: r.edit(entries=edited_entries(r, name=b"\xc0\x80")),
     FORMAT, "UTF-8"),
    ("utf8-surrogate", "dict-n2", lambda r: r.edit(entries=edited_entries(r, name=b"\xed\xa0\x80")),
     FORMAT, "UTF-8"),
    ("utf8-above-u10ffff", "dict-n2",
     lambda r: r.edit(entries=edited_entries(r, name=b"\xf4\x90\x80\x80")), FORMAT, "UTF-8"),
    # Codes and parameters.
    *[(f"mechanism-{c}", "gauss-n1", (lambda c: lambda r: r.edit(mechanism=c))(c), FORMAT,
       "mechanism") for c in (0, 4, 255)],
    ("gauss-n1-to-sdq", "gauss-n1", lambda r: r.edit(mechanism=3), EITHER, None),
    ("laplace-n1-to-sdq", "laplace-n1", lambda r: r.edit(mechanism=3), EITHER, None),
    ("sdq-to-gauss", "sdq-n1", lambda r: r.edit(mechanism=1), EITHER, None),
    ("sdq-to-laplace", "sdq-n1", lambda r: r.edit(mechanism=2), EITHER, None),
    ("gauss-n2-to-sdq", "gauss-n2", lambda r: r.edit(mechanism=3), FORMAT, "dimension"),
    *[(f"sdq-n{n}", "sdq-n1", (lambda n: lambda r: r.edit(n=n))(n), FORMAT, "dimension")
      for n in (0, 2, 3, 8, 9, 255)],
    *[(f"lattice-{c}", "gauss-n2", (lambda c: lambda r: r.edit(lattice=c))(c), FORMAT,
       "lattice") for c in (0, 5, 255)],
    # A2 (code 2) is a valid lattice of dimension 2: the Z^2 body does not
    # decode as an A2 body, or does into garbage of the right shape; D4 and
    # E8 need another n.
    ("lattice-a2-over-z2-body", "gauss-n2", lambda r: r.edit(lattice=2), "any", ""),
    *[(f"lattice-{c}-wrong-n", "gauss-n2", (lambda c: lambda r: r.edit(lattice=c))(c), FORMAT,
       "dimension") for c in (3, 4)],
    *[(f"coder-{c}", "gauss-n2", (lambda c: lambda r: r.edit(coder=c))(c), FORMAT, "coder")
      for c in (0, 3, 255)],
    *[(f"container-{c}", "dict-n2", (lambda c: lambda r: r.edit(container=c))(c), FORMAT,
       "container") for c in (5, 255)],
    # 4 is a bare payload (no structure): one with entries is malformed.
    ("container-4-with-entries", "dict-n2", lambda r: r.edit(container=4), FORMAT,
     "without structure has entries"),
    ("dict-as-single-container", "dict-n2", lambda r: r.edit(container=0), FORMAT, None),
    ("dict-as-list-container", "dict-n2", lambda r: r.edit(container=1), FORMAT, "named"),
    ("list-as-dict-container", "tuple-laplace-n3", lambda r: r.edit(container=3),
     FORMAT, "duplicate"),
    *[(f"reserved-{v:#x}", "gauss-n1", (lambda v: lambda r: r.edit(reserved=v))(v), FORMAT,
       "reserved") for v in (1, 0x100, 0xFFFF)],
    *[(f"scale-{_fid(v)}", "gauss-n2", (lambda v: lambda r: r.edit(scale=v))(v), FORMAT, "scale")
      for v in (math.nan, -math.nan, -1.0, 0.0, -0.0, math.inf, -math.inf)],
    *[(f"sdq-step-{v}", "sdq-n1", (lambda v: lambda r: r.edit(scale=v))(v), FORMAT, "scale")
      for v in (math.nan, -1.0, 0.0, math.inf)],
    *[(f"clip-{_fid(v)}", "laplace-n4-clip", (lambda v: lambda r: r.edit(clip=v))(v), FORMAT,
       "clip") for v in (math.nan, -1.0, 0.0, -0.0, -math.inf)],
    ("clip-inf", "laplace-n4-clip", lambda r: r.edit(clip=math.inf), EITHER, None),
    *[(f"scale-{v:g}-{base}", base, (lambda v: lambda r: r.edit(scale=v))(v), EITHER, None)
      for base in ("gauss-n2", "laplace-n2", "sdq-n1", "gauss-n1")
      for v in (5e-324, 1e-300, 1e-8, 1e8, 1e300, DBL_MAX)],
    *[(f"laplace-n{n}", "laplace-n4-clip", (lambda n: lambda r: r.edit(n=n))(n), FORMAT,
       "dimension") for n in (5, 6, 7, 8)],
    *[(f"gauss-n{n}", "gauss-n2", (lambda n: lambda r: r.edit(n=n))(n), FORMAT, "dimension")
      for n in (0, 9, 255)],
    *[(f"laplace-n{n}-bad", "laplace-n2", (lambda n: lambda r: r.edit(n=n))(n), FORMAT,
       "dimension") for n in (0, 9, 255)],
    *[(f"gauss-n{n}-reinterpreted", "gauss-n2", (lambda n: lambda r: r.edit(n=n))(n), EITHER,
       None) for n in (1, 3, 4, 8)],
    ("gauss-to-laplace", "gauss-n2", lambda r: r.edit(mechanism=2), EITHER, None),
    ("laplace-to-gauss", "laplace-n4-clip", lambda r: r.edit(mechanism=1), EITHER, None),
    # Context: any values are fine (another key: noise, but the declared structure).
    ("context-max", "dict-n2", lambda r: r.edit(round=U64, client=U64, message=U64), EITHER,
     None),
    ("context-other-client", "gauss-n2-m300", lambda r: r.edit(client=r.client + 1), EITHER,
     None),
]


def _padding_bit(b: GolombBody, section: str, *, first: bool) -> GolombBody:
    """Sets the first or last padding bit of the H or M section."""
    start = 0 if section == "H" else 8 * b.h_bytes
    bits = b.h_bits if section == "H" else b.m_bits
    pad = -bits % 8
    assert pad > 0, "pick a base payload whose section has padding"
    bit = start + bits + (0 if first else pad - 1)
    return b.edit(sections=_set_bit(b.sections, bit, 1))


# Edits of the Golomb body (its 21-byte prefix and sections), behind a valid tag.
GOLOMB_TARGETED = [
    # Coder swap: a Golomb body read as an ANS body.
    ("golomb-body-read-as-ans", "golomb-gauss-n2", lambda r: r.edit(coder=ANS), EITHER, None),
    ("golomb-body-read-as-ans-m300", "golomb-gauss-n2-m300", lambda r: r.edit(coder=ANS),
     EITHER, None),
    # The prefix itself.
    *[(f"prefix-truncated-to-{k}", "golomb-gauss-n2", (lambda k: lambda r:
       r.edit(body=r.body[:k]))(k), FORMAT, "too short|length can carry") for k in (0, 1, 4, 5, 13, 20)],
    # Section lengths.
    ("h_bits-2^64-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=U64)), FORMAT, None),
    ("m_bits-2^64-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(m_bits=U64)), FORMAT, None),
    ("both-bits-2^64-1", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(h_bits=U64, m_bits=U64)), FORMAT, None),
    ("h_bits-2^61", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=1 << 61)), FORMAT,
     None),
    ("h_bits-2^63-m_bits-2^63", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(h_bits=1 << 63, m_bits=1 << 63)), FORMAT, None),
    ("h_bits-plus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=b.h_bits + 1)),
     FORMAT, None),
    ("h_bits-minus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(h_bits=b.h_bits - 1)),
     FORMAT, None),
    ("m_bits-plus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(m_bits=b.m_bits + 1)),
     FORMAT, None),
    ("m_bits-minus-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(m_bits=b.m_bits - 1)),
     FORMAT, None),
    ("m_bits-plus-1-n1", "golomb-laplace-n1", on_golomb(lambda b: b.edit(m_bits=b.m_bits + 1)),
     FORMAT, None),
    ("m_bits-minus-1-n1", "golomb-laplace-n1",
     on_golomb(lambda b: b.edit(m_bits=b.m_bits - 1)), FORMAT, None),
    ("h_bits-on-constant-H", "golomb-gauss-n1",
     on_golomb(lambda b: b.edit(h_bits=1, sections=b"\x80" + b.sections)), FORMAT, None),
    ("bits-moved-between-sections", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(h_bits=b.h_bits + 8, m_bits=b.m_bits - 8)), FORMAT, None),
    ("m_bits-zero", "golomb-gauss-n1", on_golomb(lambda b: b.edit(m_bits=0, sections=b"")),
     FORMAT, None),
    # Coder parameters.
    ("golomb-0-where-H-varies", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=0)),
     FORMAT, None),
    ("golomb-0-H-section-dropped", "golomb-laplace-n2",
     on_golomb(lambda b: b.edit(golomb=0, h_bits=0, sections=b.sections[b.h_bytes:])),
     EITHER, None),
    ("golomb-2^16+1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=(1 << 16) + 1)),
     FORMAT, "Golomb"),
    ("golomb-2^32-1", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=(1 << 32) - 1)),
     FORMAT, "Golomb"),
    ("golomb-2^16", "golomb-gauss-n2", on_golomb(lambda b: b.edit(golomb=1 << 16)), EITHER,
     None),
    *[(f"golomb-{g}-reinterpreted", "golomb-laplace-n2",
       (lambda g: on_golomb(lambda b: b.edit(golomb=g)))(g), EITHER, None)
      for g in (1, 2, 3, 7, 255)],
    ("golomb-1-on-n1", "golomb-gauss-n1",
     on_golomb(lambda b: b.edit(golomb=1, h_bits=24,
                                sections=bits_to_bytes("1" * 24) + b.sections)), EITHER, None),
    ("H-2-on-n1", "golomb-gauss-n1",
     on_golomb(lambda b: b.edit(golomb=1, h_bits=25,
                                sections=bits_to_bytes("01" + "1" * 23) + b.sections)),
     FORMAT, "trial index"),
    ("H-2-on-sdq", "golomb-sdq-n1",
     on_golomb(lambda b: b.edit(golomb=1, h_bits=25,
                                sections=bits_to_bytes("01" + "1" * 23) + b.sections)),
     FORMAT, "trial index"),
    *[(f"expg-order-{k}", "golomb-gauss-n2", (lambda k: on_golomb(lambda b: b.edit(expg_k=k)))(k),
       FORMAT, "exp-Golomb") for k in (55, 56, 63, 64, 128, 255)],
    *[(f"expg-order-{k}-reinterpreted", "golomb-gauss-n2",
       (lambda k: on_golomb(lambda b: b.edit(expg_k=k)))(k), EITHER, None)
      for k in (0, 1, 2, 3, 54)],
    # Padding bits of each section.
    ("H-padding-first-bit", "golomb-laplace-n2",
     on_golomb(lambda b: _padding_bit(b, "H", first=True)), FORMAT, "padding"),
    ("H-padding-last-bit", "golomb-laplace-n2",
     on_golomb(lambda b: _padding_bit(b, "H", first=False)), FORMAT, "padding"),
    ("M-padding-first-bit", "golomb-laplace-n2",
     on_golomb(lambda b: _padding_bit(b, "M", first=True)), FORMAT, "padding"),
    ("M-padding-last-bit", "golomb-dict-n2",
     on_golomb(lambda b: _padding_bit(b, "M", first=False)), FORMAT, "padding"),
    ("body-all-zero", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(sections=bytes(len(b.sections)))), FORMAT, None),
    ("body-all-ones", "golomb-gauss-n2",
     on_golomb(lambda b: b.edit(sections=b"\xff" * len(b.sections))), FORMAT, None),
    ("whole-body-all-zero", "golomb-gauss-n2", lambda r: r.edit(body=bytes(len(r.body))),
     FORMAT, None),
    ("whole-body-all-ones", "golomb-gauss-n2", lambda r: r.edit(body=b"\xff" * len(r.body)),
     FORMAT, None),
]


def _codes_summing_to(total: int, k: int = 0) -> str:
    """63 increments (64 bins): total in the first, zeros after."""
    return "".join(expg_unsigned(v, k) for v in [total] + [0] * (BINS - 2))


def _recoded(model: AnsModel, order: int) -> AnsModel:
    """The same knots, coded at another order."""
    return model.recoded(order=order)


def _with_padding(model: AnsModel, pad) -> AnsModel:
    """The same knots at an order whose codes leave padding bits; pad(bits) -> str."""
    for order in [model.order] + list(range(KNOT_BITS + 1)):
        recoded = _recoded(model, order)
        bits = -len(recoded.codes) % 8
        if bits:
            return recoded.edit(padding=pad(bits))
    raise AssertionError("no order leaves padding")


def _replace_first_code(model: AnsModel, code: str) -> AnsModel:
    """Replaces the first increment's code by `code` (any bit string)."""
    first = expg_unsigned(model.increments()[0], model.order)
    assert model.codes.startswith(first)
    return model.edit(codes=code + model.codes[len(first):], padding=None)


def _stream_edit(f):
    """An edit of the ANS stream as (states, words) -> (states, words)."""
    def edit(b: AnsBody) -> AnsBody:
        states, words = unpack_stream(b.stream)
        return b.edit(stream=pack_stream(*f(states, words)))
    return on_ans(edit)


# Edits of the ANS body (source model and rANS stream), behind a valid tag.
ANS_TARGETED = [
    # Coder swap: an ANS body read as a Golomb body.
    ("ans-body-read-as-golomb", "ans-gauss-n2", lambda r: r.edit(coder=GOLOMB), FORMAT, None),
    ("ans-body-read-as-golomb-m300", "ans-gauss-n2-m300", lambda r: r.edit(coder=GOLOMB),
     FORMAT, None),
    # Source model: the range A.
    *[(f"range-{_fid(v)}-{base}", base, (lambda v: on_model(a=v))(v), FORMAT, "range")
      for base in ("ans-gauss-n2", "ans-laplace-n1")
      for v in (0.0, -0.0, -1.0, -5e-324, math.nan, -math.nan, math.inf, -math.inf,
                5e-324, 1e-310, 2.2250738585072014e-308,  # K / 2A overflows
                math.ldexp(1.0, -1019))],
    *[(f"range-{v!r}-accepted-{base}", base, (lambda v: on_model(a=v))(v), EITHER, None)
      for base in ("ans-gauss-n2", "ans-sdq-n1")
      for v in (math.ldexp(1.0, -1018), 1e-300, 1e-9, 1e9, 1e300, DBL_MAX / 2,
                math.nextafter(DBL_MAX / 2, math.inf), DBL_MAX)],
    # The code order of the knot increments.
    *[(f"order-{k}", "ans-gauss-n2", (lambda k: on_model(order=k))(k), FORMAT, "order")
      for k in (13, 14, 64, 128, 255)],
    *[(f"order-{k}-reinterpreted", "ans-gauss-n2", (lambda k: on_model(order=k))(k), EITHER,
       None) for k in (0, 1, 5, 11, 12)],
    # The bin count K (even, 2 .. 64) and the growth g (<= 64) of the bin edges.
    *[(f"bins-{k}", "ans-gauss-n2", (lambda k: on_ans(lambda b: b.edit(
        model=b.model.recoded().edit(bins=k))))(k), FORMAT, "bin count")
      for k in (0, 1, 3, 33, 63, 65, 66, 128, 255)],
    *[(f"bins-{k}-reinterpreted", "ans-gauss-n2", (lambda k: on_model(bins=k))(k), EITHER,
       None) for k in (2, 4, 16, 30, 34, 62, 64)],
    *[(f"bins-{k}-uniform-growth-{g}-{base}", base, (lambda k, g: on_ans(lambda b: b.edit(
        model=AnsModel.of([KNOT_SCALE // k] * (k - 1), a=b.model.a, growth=g))))(k, g),
       EITHER, None)
      for base in ("ans-gauss-n2", "ans-laplace-n1") for k in (2, 4, 16, 32, 64)
      for g in (0, 1, 13, MAX_GROWTH)],
    *[(f"growth-{g}", "ans-gauss-n2", (lambda g: on_model(growth=g))(g), FORMAT, "growth")
      for g in (MAX_GROWTH + 1, 128, 255)],
    *[(f"growth-{g}-reinterpreted", "ans-gauss-n2", (lambda g: on_model(growth=g))(g), EITHER,
       None) for g in (0, 1, 19, MAX_GROWTH)],
    # All the mass in the narrowest bin (one grid cell wide at the largest growth).
    *[(f"peaked-growth-{g}-bins-{k}", "ans-gauss-n2", (lambda k, g: on_ans(lambda b: b.edit(
        model=AnsModel.of([0] * (k // 2 - 1) + [KNOT_SCALE] + [0] * (k // 2 - 1),
                          a=b.model.a, growth=g))))(k, g), EITHER, None)
      for k in (2, 16, 64) for g in (0, MAX_GROWTH)],
    # Knot increments.
    ("knots-sum-4097", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=b.model.edit(bins=BINS, order=0, codes=_codes_summing_to(4097),
                                                padding=None))), FORMAT, "knots"),
    ("knots-sum-8190", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=b.model.edit(bins=BINS, order=0, codes=_codes_summing_to(8190),
                                                padding=None))), FORMAT, "knots"),
    ("knots-63-times-66", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([66] * 63, a=b.model.a))), FORMAT, "knots"),
    ("knots-63-times-65", "ans-gauss-n2",  # 4095: the implied last increment is 0
     on_ans(lambda b: b.edit(model=AnsModel.of([65] * 63, a=b.model.a))), EITHER, None),
    ("knots-sum-4096-in-first", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([4096] + [0] * 62, a=b.model.a))), EITHER,
     None),
    ("knots-sum-4096-in-last", "ans-laplace-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([0] * 62 + [4096], a=b.model.a))), EITHER,
     None),
    ("knots-all-zero", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of([0] * 63, a=b.model.a))), EITHER, None),
    ("knots-uniform", "ans-dict-n2",
     on_ans(lambda b: b.edit(model=AnsModel.of(UNIFORM, a=b.model.a))), EITHER, None),
    ("knot-code-14-zeros", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_replace_first_code(_recoded(b.model, 0),
                                                       "0" * 14 + "1" + "0" * 14))),
     FORMAT, "prefix code longer"),
    ("knot-code-13-zeros", "ans-gauss-n2",  # value 2^13 - 1 > 4096
     on_ans(lambda b: b.edit(model=_replace_first_code(_recoded(b.model, 0),
                                                       "0" * 13 + "1" + "0" * 13))),
     FORMAT, "knots"),
    ("knot-code-order-12-13-zeros", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_replace_first_code(_recoded(b.model, 12),
                                                       "0" * 13 + "1" + "0" * 25))),
     FORMAT, "knots"),
    # Padding of the model's last byte.
    ("model-padding-first-bit", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "1" + "0" * (k - 1)))),
     FORMAT, "padding"),
    ("model-padding-last-bit", "ans-gauss-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "0" * (k - 1) + "1"))),
     FORMAT, "padding"),
    ("model-padding-all-ones", "ans-dict-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "1" * k))),
     FORMAT, "padding"),
    ("model-padding-zero-at-another-order", "ans-dict-n2",
     on_ans(lambda b: b.edit(model=_with_padding(b.model, lambda k: "0" * k))), EITHER, None),
    # Model truncated (body cut inside the model, the tag recomputed).
    *[(f"model-cut-to-{k}", "ans-gauss-n2", (lambda k: lambda r: r.edit(body=r.body[:k]))(k),
       FORMAT, "source model|truncated|length can carry") for k in (0, 1, 8, 9, 10)],
    ("model-only", "ans-gauss-n2",
     on_ans(lambda b: b.edit(stream=b"")), FORMAT, "segment"),
    # An extra byte between model and stream: the stream is misaligned.
    ("byte-between-model-and-stream", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b"\x00" + b.stream)), FORMAT, None),
    # Stream: its length.
    *[(f"stream-length-{k}", "ans-gauss-n2-m300", (lambda k: on_ans(
        lambda b: b.edit(stream=b.stream[:k])))(k), FORMAT,
        "bad length|truncated|segment")
      for k in (0, 1, 8, 24, 31, 33, 34, 35)],
    *[(f"stream-plus-{k}-bytes", "ans-gauss-n2-m300", (lambda k: on_ans(
        lambda b: b.edit(stream=b.stream + bytes(k))))(k), FORMAT, "bad length|trailing")
      for k in (1, 2, 3, 4, 5, 8, 4096)],
    ("stream-last-word-dropped", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b.stream[:-4])), FORMAT, None),
    ("stream-first-word-dropped", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b.stream[:32] + b.stream[36:])), FORMAT, None),
    # Stream: the four states must lie in [2^31, 2^63).
    *[(f"state-{lane}-{v:#x}-{base}", base, (lambda lane, v: on_ans(
        lambda b: b.with_state(lane, v)))(lane, v), FORMAT, "bad state")
      for base in ("ans-gauss-n1", "ans-gauss-n2-m300") for lane in range(STREAMS)
      for v in (0, 1, RANS_LOW - 1, 1 << 63, U64)],
    *[(f"state-{lane}-{v:#x}-in-range", "ans-gauss-n2-m300", (lambda lane, v: on_ans(
        lambda b: b.with_state(lane, v)))(lane, v), EITHER, None)
      for lane in (0, 3) for v in (RANS_LOW, RANS_LOW + 1, (1 << 63) - 1)],
    ("states-all-2^31-no-words", "ans-gauss-n2",
     on_ans(lambda b: b.edit(stream=pack_stream([RANS_LOW] * 4, []))), FORMAT, None),
    ("states-all-2^31-with-words", "ans-gauss-n2-m300",
     _stream_edit(lambda s, w: ([RANS_LOW] * 4, w)), FORMAT, None),
    ("states-swapped", "ans-gauss-n2-m300", _stream_edit(lambda s, w: (s[::-1], w)), EITHER,
     None),
    ("words-reversed", "ans-gauss-n2-m300", _stream_edit(lambda s, w: (s, w[::-1])), EITHER,
     None),
    ("words-all-zero", "ans-gauss-n2-m300", _stream_edit(lambda s, w: (s, [0] * len(w))),
     EITHER, None),
    ("words-all-ones", "ans-gauss-n2-m300",
     _stream_edit(lambda s, w: (s, [0xFFFFFFFF] * len(w))), EITHER, None),
    ("whole-stream-zero", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=bytes(len(b.stream)))), FORMAT, "bad state"),
    ("whole-stream-ones", "ans-gauss-n2-m300",
     on_ans(lambda b: b.edit(stream=b"\xff" * len(b.stream))), FORMAT, "bad state"),
    ("whole-body-zero", "ans-gauss-n2", lambda r: r.edit(body=bytes(len(r.body))), FORMAT,
     "range"),
    ("whole-body-ones", "ans-gauss-n2", lambda r: r.edit(body=b"\xff" * len(r.body)), FORMAT,
     "range"),
]

TARGETED = [(f"{coder}-{case}", f"{coder}-{base}", edit, expected, match)
            for coder in CODERS for case, base, edit, expected, match in HEADER_TARGETED] \
    + GOLOMB_TARGETED + ANS_TARGETED


@pytest.mark.parametrize("case_id,base,edit,expected,match", TARGETED,
                         ids=[t[0] for t in TARGETED])
def test_targeted_edit_behind_a_valid_tag(case_id, base, edit, expected, match):
    payload = targeted_payload(edit, base)
    if expected == FORMAT:
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(payload, secret=SECRET, output="numpy")
    else:
        assert outcome(payload) in ("ok", "format")
    # Without the secret, inspect sees only FormatError or a header.
    try:
        cepam.inspect(payload)
    except cepam.FormatError:
        pass


def test_targeted_case_ids_are_unique():
    ids = [t[0] for t in TARGETED]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("table", ["header", "golomb", "ans"])
def test_targeted_either_cases_reach_both_outcomes(table):
    """Sanity: the EITHER cases above include both outcomes, so neither kind is vacuous."""
    cases = {"header": TARGETED[: 2 * len(HEADER_TARGETED)], "golomb": GOLOMB_TARGETED,
             "ans": ANS_TARGETED}[table]
    seen = set()
    for case_id, base, edit, expected, _ in cases:
        if expected == EITHER:
            try:
                seen.add(outcome(targeted_payload(edit, base)))
            except Exception:  # noqa: BLE001 - the parametrized test reports it
                pass
    assert seen == {"ok", "format"}


def test_the_model_code_order_is_not_part_of_the_meaning():
    """Any order 0..12 codes the same knots: the payload decodes to the same values."""
    raw = RawPayload.parse(BASES["ans-dict-n2"])
    body = AnsBody.parse(raw.body)
    want = cepam.decode(BASES["ans-dict-n2"], secret=SECRET)
    for k in range(KNOT_BITS + 1):
        model = body.model.recoded(order=k)
        got = cepam.decode(raw.edit(body=body.edit(model=model).pack()).tagged(), secret=SECRET)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])

def test_hostile_cases_do_not_grow_peak_rss():
    """All targeted, 2^62-sized, zero-run and constant-word payloads together: peak RSS
    grows < 200 MB and Python/numpy allocations stay small (tracemalloc sees numpy's
    buffers)."""
    resource = pytest.importorskip("resource")  # Unix only
    payloads = [targeted_payload(edit, base) for _, base, edit, _, _ in TARGETED]
    payloads += [p for *_, p in zero_run_payloads(128 * 1024)]
    payloads += [zero_word_payload(n, mech, m, words) for _, n, mech, m, words in
                 ZERO_WORD_CASES]
    rss_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with peak_allocation() as traced:
        for payload in payloads:
            try:
                outcome(payload)
            except Exception:  # noqa: BLE001 - wrong types are reported by other tests
                pass
    peak = traced.peak
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kb) / 1024
    assert peak < 64 * MB, peak
    assert rss_growth_mb < 200, rss_growth_mb
