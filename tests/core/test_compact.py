"""The GPU's compact transfers of H and M (csrc/lrsuq/compact.hpp, shared by
the host and the device): each chunk's trial indices and lattice coordinates
travel in the narrowest integer type that holds the chunk's range, and come
back exactly."""

import numpy as np
import pytest

from cepam._core import testing as hooks


@pytest.mark.parametrize("h_max,h_width", [(1, 1), (255, 1), (256, 2), (65535, 2),
                                           (65536, 4), (2**32 - 1, 4)])
@pytest.mark.parametrize("m_lo,m_hi,m_width", [
    (0, 0, 1), (-128, 127, 1), (-129, 0, 2), (0, 128, 2), (-32768, 32767, 2),
    (-32769, 5, 4), (3, 32768, 4), (-2**31, 2**31 - 1, 4), (-2**31 - 1, 0, 8),
    (0, 2**31, 8), (-2**53, 2**53, 8)])
def test_h_and_m_travel_in_the_narrowest_type_and_come_back(h_max, h_width, m_lo, m_hi,
                                                           m_width):
    rng = np.random.default_rng(h_max % 1000 + m_width)
    H = rng.integers(1, h_max, size=1000, endpoint=True).astype(np.uint32)
    H[17] = h_max
    M = rng.integers(m_lo, m_hi, size=3000, endpoint=True).astype(np.int64)
    M[5], M[2999] = m_lo, m_hi
    wh, wm, _, _, H2, M2 = hooks.compact_round_trip(H, M)
    assert (wh, wm) == (h_width, m_width)
    np.testing.assert_array_equal(H2, H)
    np.testing.assert_array_equal(M2, M)


def test_an_empty_chunk_round_trips():
    wh, wm, ph, pm, H2, M2 = hooks.compact_round_trip(np.zeros(0, np.uint32),
                                                      np.zeros(0, np.int64), threads=4)
    assert (wh, wm, ph, pm, H2.size, M2.size) == (1, 1, b"", b"", 0, 0)


def _packed(values: np.ndarray, width: int, signed: bool) -> bytes:
    """The definition of a packed array: each value as a little-endian
    integer of ``width`` bytes."""
    return values.astype(np.dtype(f"<{'i' if signed else 'u'}{width}")).tobytes()


@pytest.mark.parametrize("count,n", [(1_000, 1), (200_003, 1), (65_537, 3), (100_001, 8)])
@pytest.mark.parametrize("threads", [1, 2, 3, 7, 16])
def test_the_hosts_side_gives_the_same_bytes_on_every_thread_count(count, n, threads):
    """The host packs (before a copy to the GPU) and widens (after a copy
    back) a chunk on the call's threads: the same widths, the same packed
    bytes and the same values, whatever the count; the extremes anywhere in
    the chunk (here in its last part) set the widths."""
    rng = np.random.default_rng(count + n)
    H = rng.integers(1, 200, size=count).astype(np.uint32)
    M = rng.integers(-100, 100, size=count * n).astype(np.int64)
    H[-1], M[-2] = 70_000, -40_000  # in the last part: widths 4 and 4
    wh, wm, ph, pm, H2, M2 = hooks.compact_round_trip(H, M, threads=threads)
    assert (wh, wm) == (4, 4)
    assert ph == _packed(H, 4, False) and pm == _packed(M, 4, True)
    np.testing.assert_array_equal(H2, H)
    np.testing.assert_array_equal(M2, M)


@pytest.mark.parametrize("bad", [0, -1])
def test_a_bad_thread_count_is_refused(bad):
    with pytest.raises(ValueError, match="threads"):
        hooks.compact_round_trip(np.zeros(3, np.uint32), np.zeros(3, np.int64), threads=bad)
