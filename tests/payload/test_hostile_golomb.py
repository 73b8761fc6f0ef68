"""Hostile payloads: Golomb bodies forged behind a valid tag.

Prefix codes at their limits (|M| <= 2^53, the trial-index cap), the body
coder's own range, long zero runs that declare more coordinates than the
body holds (rejected before allocating), the slowest and the densest legal
bodies.

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam._core import testing as hooks

from helpers.forge import SECRET, expg, forged, unary, zero_run_payloads
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
    payload = forged(shape=(m,), m_code="1" * m).tagged()
    with peak_allocation() as traced:
        y = cepam.decode(payload, secret=SECRET)
    peak = traced.peak
    assert y.shape == (m,) and y.dtype == np.float32
    assert peak < 200 * len(payload) + 4 * MB, peak
