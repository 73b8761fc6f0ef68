"""Hostile payloads: Golomb bodies forged behind a valid tag.

Prefix codes at their limits (|M| <= 2^53, the trial-index cap), the body
coder's own range, long zero runs that declare more coordinates than the
body holds (rejected before allocating), the slowest and the densest legal
bodies, and edits of a body's later segments (format version 7).

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam._core import testing as hooks

from helpers.forge import (
    GOLOMB_PARAMS, GOLOMB_SEGMENT, NONCE, SECRET, SEGMENT_COORDINATES, U64, GolombBody, RawPayload,
    expg, forged, unary, zero_run_payloads,
)
from helpers.hostile import MB, outcome, peak_allocation


# --- Golomb: hand-forged bodies, prefix-code limits and zero runs. -----------


def test_forged_prefix_codes_at_the_limits():
    # -2^53 and 2^53 - 1 are accepted (|M| <= 2^53 is the decoder's bound).
    assert outcome(forged(shape=(2,), m_code=expg((1 << 53) - 1) + expg(-(1 << 53)))
                   .tagged()) == "ok"
    with pytest.raises(cepam.FormatError, match="out of range|longer than allowed"):
        cepam.decode(forged(shape=(1,), m_code=expg((1 << 53) + 1)).tagged(), secret=SECRET)
    with pytest.raises(cepam.FormatError, match="out of range|longer than allowed"):
        cepam.decode(forged(shape=(1,), m_code=expg(-(1 << 53) - 1)).tagged(), secret=SECRET)
    # Order 54: every coordinate takes exactly 55 bits.
    assert outcome(forged(shape=(2,), expg_k=54, m_code=expg(0, 54) + expg(-(1 << 53), 54))
                   .tagged()) == "ok"
    # 56 leading zeros in the M code: longer than any legal code.
    with pytest.raises(cepam.FormatError, match="longer than allowed"):
        cepam.decode(forged(shape=(1,), m_code="0" * 56 + "1" * 57).tagged(), secret=SECRET)
    # Trial index at the cap (65536) is accepted, one more is not.
    cap = 1 << 16
    at_cap = forged(n=2, golomb=1, shape=(2,), h_code=unary(cap), m_code=expg(0) * 2)
    assert outcome(at_cap.tagged()) == "ok"
    above = forged(n=2, golomb=1, shape=(2,), h_code=unary(cap + 1), m_code=expg(0) * 2)
    with pytest.raises(cepam.FormatError, match="longer than allowed|above the cap"):
        cepam.decode(above.tagged(), secret=SECRET)
    # The same with the largest Golomb parameter: H - 1 = 65535 in 16 bits.
    big_g = forged(n=2, golomb=1 << 16, shape=(2,), h_code="1" + "1" * 16, m_code=expg(0) * 2)
    assert outcome(big_g.tagged()) == "ok"
    big_g_q1 = forged(n=2, golomb=1 << 16, shape=(2,), h_code="01" + "0" * 16,
                      m_code=expg(0) * 2)
    with pytest.raises(cepam.FormatError):
        cepam.decode(big_g_q1.tagged(), secret=SECRET)
    # Trailing bits inside a declared section.
    with pytest.raises(cepam.FormatError, match="trailing"):
        cepam.decode(forged(shape=(1,), m_code=expg(3) + "1").tagged(), secret=SECRET)
    # Laplace on Z^2 with an H above 1 decodes; on Z^1 an H above 1 is rejected.
    lap2 = forged(n=2, mechanism=2, golomb=1, shape=(2,), h_code=unary(9), m_code=expg(0) * 2)
    assert outcome(lap2.tagged()) == "ok"
    lap1 = forged(n=1, mechanism=2, golomb=1, shape=(1,), h_code=unary(2), m_code=expg(0))
    with pytest.raises(cepam.FormatError, match="trial index"):
        cepam.decode(lap1.tagged(), secret=SECRET)
    # SDQ codes no H either.
    sdq = forged(n=1, mechanism=3, golomb=1, shape=(1,), h_code=unary(2), m_code=expg(0))
    with pytest.raises(cepam.FormatError, match="trial index"):
        cepam.decode(sdq.tagged(), secret=SECRET)
    assert outcome(forged(n=1, mechanism=3, shape=(2,), m_code=expg(5) + expg(-(1 << 53)))
                   .tagged()) == "ok"


@pytest.mark.parametrize("value", [(1 << 53), -(1 << 53), (1 << 53) - 1, -(1 << 53) + 1])
@pytest.mark.parametrize("k", [0, 3, 54])
def test_body_coder_decodes_every_coordinate_it_encodes(value, k):
    """The native body coder accepts |M| <= 2^53 on encode (MAX_ABS_M), so the body
    decoder must accept the same range, or a body it wrote is a FormatError."""
    assert _core.MAX_ABS_M == 1 << 53
    H = np.ones(1, np.uint32)
    M = np.array([value], np.int64)
    body, h_bits, m_bits = hooks.body_encode(H, M, golomb=0, expg_k=k)
    H2, M2 = hooks.body_decode(body, N=1, count=1, golomb=0, expg_k=k, h_bits=h_bits,
                               m_bits=m_bits)
    assert M2.tolist() == [value] and H2.tolist() == [1]


ZERO_RUNS = zero_run_payloads(256 * 1024)


@pytest.mark.parametrize("label,declared,capacity,payload", ZERO_RUNS,
                         ids=[z[0].replace(" ", ",") for z in ZERO_RUNS])
def test_long_zero_runs_in_the_golomb_body_fail_fast_with_little_allocation(
        label, declared, capacity, payload):
    with peak_allocation() as traced:
        assert outcome(payload) == "format", label
    peak = traced.peak
    if declared > capacity:
        # Rejected before allocating anything sized by the declared count (the Golomb
        # sections bound it): only copies of the payload itself.
        assert peak < 6 * len(payload) + MB, (label, peak)
    else:
        # Linear in the payload: H (uint32), M (int64) and the output are
        # allocated for at most 8 coordinates per body byte.
        assert peak < 160 * len(payload) + 4 * MB, (label, peak)


def test_every_trial_index_at_the_cap_decodes():
    """The slowest legal H section (65535 zeros before each one) still decodes."""
    cap = 1 << 16
    subvectors = 16
    raw = forged(n=2, golomb=1, shape=(2 * subvectors,), h_code=unary(cap) * subvectors,
                 m_code=expg(0) * (2 * subvectors))
    assert outcome(raw.tagged()) == "ok"


def test_a_valid_dense_golomb_body_allocates_in_proportion_to_its_length():
    """The densest legal body (1 bit per coordinate) decodes; allocation is linear."""
    m = 8 * 64 * 1024
    segments = m // SEGMENT_COORDINATES
    payload = forged(shape=(m,), h_code=[""] * segments,
                     m_code=["1" * SEGMENT_COORDINATES] * segments).tagged()
    with peak_allocation() as traced:
        y = cepam.decode(payload, secret=SECRET)
    peak = traced.peak
    assert y.shape == (m,) and y.dtype == np.float32
    assert peak < 200 * len(payload) + 4 * MB, peak


# --- Golomb: bodies of several segments (format version 7). ------------------


def _multi_segment_payload() -> bytes:
    """A real Golomb payload of three segments on Z^2 (the last one short),
    under a fixed nonce: with a fresh one, about one payload in 37 has no
    padding bit in its last segment (both sections end on a byte), which
    _last_padding_bit needs."""
    x = np.random.default_rng(11).normal(scale=0.3, size=2 * SEGMENT_COORDINATES + 1001)
    return cepam.encode(x.astype(np.float32), cepam.Gaussian(sigma=0.2), secret=SECRET,
                        round=1, client=4, dim=2, coder="golomb", nonce=NONCE)


MULTI = _multi_segment_payload()


def _decode_error(payload: bytes, threads: int) -> str | None:
    try:
        cepam.decode(payload, secret=SECRET, threads=threads)
    except cepam.FormatError as exc:
        return str(exc)
    return None


def test_a_golomb_body_of_several_segments_matches_the_forger():
    raw = RawPayload.parse(MULTI)
    body = GolombBody.parse(raw.body)
    assert body.pack() == raw.body and len(body.later) == 2
    assert [s.m_bits > 0 and s.h_bits > 0 for s in [body, *body.later]] == [True] * 3
    y = {t: cepam.decode(MULTI, secret=SECRET, threads=t) for t in (1, 2, 3)}
    assert all(np.array_equal(y[1], v) for v in y.values())


def _on_segment(s: int, **changes):
    """An edit of segment s's lengths or sections (s >= 1: a later one)."""
    def edit(b: GolombBody) -> GolombBody:
        later = list(b.later)
        later[s - 1] = dataclasses.replace(later[s - 1], **changes)
        return b.edit(later=later)
    return edit


def _last_padding_bit(b: GolombBody) -> GolombBody:
    """The last padding bit of the last segment's M section (or, where that
    section ends on a byte, of its H section) set."""
    seg = b.later[-1]
    h_bytes = (seg.h_bits + 7) // 8
    end = len(seg.sections) if seg.m_bits % 8 else h_bytes
    assert (seg.m_bits if end == len(seg.sections) else seg.h_bits) % 8, "no padding"
    sections = bytearray(seg.sections)
    sections[end - 1] |= 1
    return b.edit(later=[b.later[0], dataclasses.replace(seg, sections=bytes(sections))])


SEGMENT_EDITS = {
    "h_bits+1": lambda b: _on_segment(1, h_bits=b.later[0].h_bits + 1)(b),
    "h_bits-1": lambda b: _on_segment(1, h_bits=b.later[0].h_bits - 1)(b),
    "m_bits+1": lambda b: _on_segment(1, m_bits=b.later[0].m_bits + 1)(b),
    "m_bits-1": lambda b: _on_segment(2, m_bits=b.later[1].m_bits - 1)(b),
    "m_bits-2^64-1": _on_segment(2, m_bits=U64),
    "h_bits-2^61": _on_segment(1, h_bits=1 << 61),
    "order-55": _on_segment(2, expg_k=55),
    "order-255": _on_segment(1, expg_k=255),
    "last-dropped": lambda b: b.edit(later=b.later[:1]),
    "last-repeated": lambda b: b.edit(later=[*b.later, b.later[-1]]),
    "last-truncated": lambda b: _on_segment(2, sections=b.later[1].sections[:-1])(b),
    "byte-moved-between-segments": lambda b: b.edit(later=[
        dataclasses.replace(b.later[0], m_bits=b.later[0].m_bits + 8,
                            sections=b.later[0].sections + b.later[1].sections[:1]),
        dataclasses.replace(b.later[1], h_bits=b.later[1].h_bits - 8,
                            sections=b.later[1].sections[1:])]),
    "padding-bit": _last_padding_bit,
}


@pytest.mark.parametrize("label", sorted(SEGMENT_EDITS))
def test_edits_of_later_golomb_segments_are_format_errors_for_every_thread_count(label):
    raw = RawPayload.parse(MULTI)
    payload = raw.edit(body=SEGMENT_EDITS[label](GolombBody.parse(raw.body)).pack()).tagged()
    errors = {t: _decode_error(payload, t) for t in (1, 2, 3)}
    assert errors[1] is not None and len(set(errors.values())) == 1, errors
    with peak_allocation() as traced:
        assert outcome(payload) == "format"
    # The output (1 MiB as float32) and pieces of the body at most.
    assert traced.peak < 4 * len(payload) + 2 * MB, traced.peak


def test_the_first_failing_segment_s_error_is_reported_whatever_the_threads():
    raw = RawPayload.parse(MULTI)
    body = GolombBody.parse(raw.body)
    first = _on_segment(1, m_bits=body.later[0].m_bits - 1)(body)
    both = _last_padding_bit(first)
    alone = _decode_error(raw.edit(body=first.pack()).tagged(), 1)
    later = _decode_error(raw.edit(body=_last_padding_bit(body).pack()).tagged(), 1)
    assert alone is not None and later is not None and alone != later
    payload = raw.edit(body=both.pack()).tagged()
    assert {_decode_error(payload, t) for t in (1, 2, 3, 8)} == {alone}


def test_an_empty_update_s_body_is_its_parameter_alone_and_in_range():
    """m = 0: no segments, so nothing but the parameter, checked as ever."""
    raw = forged(shape=(0,))
    assert raw.body == GOLOMB_PARAMS.pack(0) + GOLOMB_SEGMENT.pack(0, 0, 0)
    assert outcome(raw.edit(body=GOLOMB_PARAMS.pack(0)).tagged()) == "ok"
    empty = cepam.encode(np.zeros(0, np.float32), cepam.Gaussian(sigma=0.2), secret=SECRET,
                         round=0, client=0, coder="golomb")
    assert RawPayload.parse(empty).body == GOLOMB_PARAMS.pack(0)
    with pytest.raises(cepam.FormatError, match="Golomb parameter out of range"):
        cepam.decode(raw.edit(body=GOLOMB_PARAMS.pack((1 << 16) + 1)).tagged(), secret=SECRET)
    with pytest.raises(cepam.FormatError, match="declared segments"):
        cepam.decode(raw.tagged(), secret=SECRET)


def test_each_golomb_segment_takes_the_order_of_its_own_coordinates():
    """Version 7: a segment's order is the best for its own coordinates (so an
    encoder holds one segment's M at a time), not one order for the body."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(scale=0.05, size=SEGMENT_COORDINATES),
                        rng.normal(scale=50.0, size=SEGMENT_COORDINATES),
                        rng.normal(scale=5.0, size=999)]).astype(np.float32)
    payload = cepam.encode(x, cepam.Gaussian(sigma=0.2), secret=SECRET, round=0, client=0,
                           coder="golomb")
    body = GolombBody.parse(RawPayload.parse(payload).body)
    orders = [body.expg_k, *(s.expg_k for s in body.later)]
    # (Each order is the best for its segment's M: tests/codec/test_threads.py.)
    assert len(orders) == 3 and len(set(orders)) == 3, orders
    y = {t: cepam.decode(payload, secret=SECRET, threads=t) for t in (1, 2, 3)}
    assert all(np.array_equal(y[1], v) for v in y.values())
