"""The GPU's decoder of Golomb bodies, by its host twin
(``_core.testing.decode_by_segments(..., coder=1)``:
csrc/payload/golomb_segment.hpp on coding/golomb_read.hpp, the code the
CUDA kernel runs, one segment after another): the CPU decoder's values bit
for bit on valid bodies, and its outcome on corrupted ones (the same error
type and message, the first the body meets, or the same values)."""

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks

from test_segment_decode import _assert_corruptions_meet, _outcome

KEY = bytes(range(3, 35))
SEGMENT = _core.SEGMENT_COORDINATES
GOLOMB = 1
Z, A2, D4, E8 = 1, 2, 3, 4
GAUSSIAN, LAPLACE, SDQ = 1, 2, 3


def _params(n, mechanism=GAUSSIAN, scale=1e-3, lattice=Z):
    return _core.Params(mechanism=mechanism, scale=scale, lattice=lattice, n=n)


def _both(body, m, params, dtype="float32"):
    cpu = _outcome(lambda: _core.decode(body, m=m, key=KEY, params=params, coder=GOLOMB,
                                        dtype=dtype, threads=2))
    twin = _outcome(lambda: hooks.decode_by_segments(body, m=m, key=KEY, params=params,
                                                       dtype=dtype, coder=GOLOMB))
    return cpu, twin


def _update(m, dtype=np.float32, scale=0.01, seed=0):
    return (np.random.default_rng(seed).normal(size=m) * scale).astype(dtype)


def _body(x, params):
    return _core.encode(x, key=KEY, params=params, factor=1.0, coder=GOLOMB, threads=2)


@pytest.mark.parametrize("lattice,n,mechanism", [
    (Z, 1, GAUSSIAN), (Z, 2, GAUSSIAN), (Z, 3, GAUSSIAN), (Z, 8, GAUSSIAN), (Z, 1, LAPLACE),
    (Z, 2, LAPLACE), (Z, 1, SDQ), (A2, 2, GAUSSIAN), (D4, 4, GAUSSIAN), (E8, 8, GAUSSIAN)])
@pytest.mark.parametrize("m", [1, 5, 4_099, 2 * SEGMENT + 77])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_twin_gives_the_cpu_values(lattice, n, mechanism, m, dtype):
    params = _params(n, mechanism, lattice=lattice)
    cpu, twin = _both(_body(_update(m, np.dtype(dtype), seed=m + n), params), m, params, dtype)
    assert isinstance(cpu, bytes) and twin == cpu


@pytest.mark.parametrize("what", ["heavy tails", "constant", "tiny", "segments of their own"])
def test_long_codes_constant_updates_and_segments_of_their_own_orders_decode_alike(what):
    m = 3 * SEGMENT
    rng = np.random.default_rng(5)
    x = {"heavy tails": rng.standard_t(1.5, size=m) * 0.01,
         "constant": np.full(m, 0.25),
         "tiny": rng.normal(size=m) * 1e-9,
         "segments of their own": rng.normal(size=m) * np.repeat([1e-5, 10.0, 0.1], SEGMENT),
         }[what].astype(np.float32)
    params = _params(2)
    cpu, twin = _both(_body(x, params), m, params)
    assert isinstance(cpu, bytes) and twin == cpu


@pytest.mark.parametrize("lattice,n,mechanism,m,seed", [
    (Z, 1, GAUSSIAN, 20_000, 1), (Z, 2, GAUSSIAN, 2 * SEGMENT + 5, 2), (Z, 3, GAUSSIAN, 9_001, 3),
    (Z, 8, GAUSSIAN, 70_000, 4), (Z, 1, GAUSSIAN, 3, 5), (Z, 2, LAPLACE, 20_000, 6),
    (A2, 2, GAUSSIAN, 20_000, 7), (D4, 4, GAUSSIAN, SEGMENT + 9, 8),
    (E8, 8, GAUSSIAN, 70_000, 9)])
def test_corrupted_bodies_meet_the_cpu_outcome(lattice, n, mechanism, m, seed):
    """Whatever a malicious client sends with a valid tag: the twin refuses
    what the CPU refuses, with the same error, and decodes the rest to the
    same values (a corruption can still be a valid body)."""
    params = _params(n, mechanism, lattice=lattice)
    body = _body(_update(m, seed=seed), params)
    _assert_corruptions_meet(body, seed, lambda bad: _both(bad, m, params))


def _section_edits(body: bytes, m: int, n: int):
    """Edits aimed at each of the reader's checks, in the first segment of a
    body on Z^n: its sections' first and last bytes set, a section one bit
    longer or shorter (the lengths edited), and every bit of the H
    section's first bytes flipped."""
    h_bits = int.from_bytes(body[5:13], "little")
    m_bits = int.from_bytes(body[13:21], "little")
    h_at, m_at = 21, 21 + (h_bits + 7) // 8
    out = []
    for at in (h_at, m_at - 1, m_at, m_at + (m_bits + 7) // 8 - 1):
        for value in (0x00, 0xFF, 0x01, 0x80):
            b = bytearray(body)
            b[at] = value
            out.append(bytes(b))
    for field, bits in ((5, h_bits), (13, m_bits)):
        for delta in (-1, 1, 8):
            b = bytearray(body)
            b[field:field + 8] = max(bits + delta, 0).to_bytes(8, "little")
            out.append(bytes(b))
    for bit in range(8 * 4):
        b = bytearray(body)
        b[h_at + bit // 8] ^= 0x80 >> (bit % 8)
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("n,mechanism", [(2, GAUSSIAN), (1, LAPLACE), (1, GAUSSIAN)])
def test_every_check_of_the_reader_meets_the_cpu_outcome(n, mechanism):
    """Trailing bits, non-zero padding, codes cut by a section's end, a
    trial index above the cap, coordinates out of range: the same error,
    the first the body meets."""
    m = 9_000
    params = _params(n, mechanism)
    body = _body(_update(m, seed=n), params)
    errors = set()
    for bad in _section_edits(body, m, n):
        cpu, twin = _both(bad, m, params)
        assert twin == cpu
        if isinstance(cpu, tuple):
            errors.add(cpu[1])
    assert len(errors) >= 3, errors


def _forged_trials(x, bad: int) -> bytes:
    """The Golomb body of Gaussian Z^1's LRSUQ of x forged with g = 1 (the
    encoder codes no trial index there: every trial is accepted) and a trial
    index of 2, which it cannot send, at sub-vector `bad`."""
    H, M = hooks.encode_lattice(x, key=KEY, params=_params(1), factor=1.0)
    H = H.copy()
    H[bad] = 2
    k = hooks.best_expg_order(M)
    sections, h_bits, m_bits = hooks.body_encode(H, M, golomb=1, expg_k=k)
    return (1).to_bytes(4, "little") + bytes([k]) + h_bits.to_bytes(8, "little") \
        + m_bits.to_bytes(8, "little") + sections


def test_a_bad_trial_index_and_an_overflow_are_ordered_as_on_the_cpu():
    """The CPU checks a chunk of 256 sub-vectors' trial indices, then its
    values: with a scale of 1.2e37 float32 overflows from sub-vector 253
    (chunk 0) on (format version 10's streams), so a bad trial index at 300
    (chunk 1) comes after the overflow, and one at 255 (chunk 0) before it.
    The twin names the same error each time."""
    m = 4_000
    x = _update(m, seed=9)
    outcomes = {}
    for bad in (300, 255):
        for scale in (1e-3, 1.2e37):
            params = _core.Params(mechanism=GAUSSIAN, scale=scale, lattice=Z, n=1)
            cpu, twin = _both(_forged_trials(x, bad), m, params)
            assert twin == cpu
            outcomes[bad, scale] = cpu[1]
    assert "sub-vector 300" in outcomes[300, 1e-3] and "trial" in outcomes[300, 1e-3]
    assert "sub-vector 253:" in outcomes[300, 1.2e37] and "overflow" in outcomes[300, 1.2e37]
    assert "sub-vector 255" in outcomes[255, 1.2e37] and "trial" in outcomes[255, 1.2e37]
