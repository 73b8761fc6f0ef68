"""threads=: the same payload bytes and decoded values for every thread count.

Sizes are chosen not to divide evenly into ANS segments (2^17 coordinates),
Golomb chunks (2^16) or blocks (4096 sub-vectors), and to span several of
each.  Also: the argument checks, CEPAM_THREADS, the error of a hostile body
(the same whatever the count), the ANS segment framing behind a valid tag,
and the native worker pool (threads kept, several callers, a forked child).
"""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam._core import testing as hooks
from cepam.threads import MAX_THREADS, THREADS_ENV, available_cores, resolve_threads
from helpers.forking import in_forked_child, run_script

SECRET = bytes(range(32))
NONCE = bytes(range(16))  # payloads compared byte for byte share a nonce
THREAD_COUNTS = (1, 2, 3, 8)
SEGMENT = 1 << 17
MODEL_BYTE = {"Z": False, "A2": True, "D4": True, "E8": True}

# (lattice, dim, mechanism): every lattice, and Z in several dimensions and mechanisms.
SETTINGS = [
    ("Z", 1, cepam.Gaussian(sigma=1e-3)),
    ("Z", 3, cepam.Gaussian(sigma=1e-3)),
    ("Z", 2, cepam.Laplace(b=1e-3)),
    ("Z", 1, cepam.SDQ(step=1e-3)),
    ("A2", None, cepam.Gaussian(sigma=1e-3)),
    ("D4", None, cepam.Gaussian(sigma=1e-3)),
    ("E8", None, cepam.Gaussian(sigma=1e-3)),
]


def update(m: int, *, seed: int = 0, ratio: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(m) * ratio * 1e-3).astype(np.float32)


def encode_all(x, mechanism, **kwargs) -> list[bytes]:
    return [cepam.encode(x, mechanism, secret=SECRET, round=1, client=2, threads=t, nonce=NONCE,
                         **kwargs)
            for t in THREAD_COUNTS]


@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("lattice,dim,mechanism", SETTINGS)
def test_bytes_and_values_are_the_same_for_every_thread_count(lattice, dim, mechanism, coder):
    # Three segments and a part for n = 1; not a multiple of n, 4096 or 2^16.
    m = 3 * SEGMENT + 12_345
    x = update(m, ratio=0.7)
    payloads = encode_all(x, mechanism, lattice=lattice, dim=dim, coder=coder)
    assert all(p == payloads[0] for p in payloads)
    decoded = [cepam.decode(payloads[0], secret=SECRET, threads=t) for t in THREAD_COUNTS]
    for y in decoded[1:]:
        np.testing.assert_array_equal(y, decoded[0])
    assert decoded[0].shape == (m,)
    info = cepam.inspect(payloads[0], secret=SECRET)  # the body's parts are sealed
    if coder == "ans":
        n = info.dim
        N = -(-m // n)
        segments = -(-N // (SEGMENT // n))
        assert info.body_bits["segments"] == 8 * segments * (5 if MODEL_BYTE[lattice] else 4)


def test_clipped_padded_payloads_are_the_same_for_every_thread_count():
    """The clip's sum of squares (over several blocks of 2^16), the sealing
    keystream (parts of 1 MiB) and the tag (segments of 1 MiB), each split
    over the threads: the same bytes for every count."""
    m = 3 * SEGMENT + 12_345
    x = update(m, ratio=5.0)
    clip = float(np.linalg.norm(x.astype(np.float64))) / 2
    size = 3 * (1 << 20) + 777
    payloads = encode_all(x, cepam.Gaussian(sigma=1e-3), clip=clip, pad=size)
    assert all(p == payloads[0] for p in payloads)
    assert len(payloads[0]) == size
    decoded = [cepam.decode(payloads[0], secret=SECRET, threads=t) for t in THREAD_COUNTS]
    for y in decoded[1:]:
        np.testing.assert_array_equal(y, decoded[0])


# The native worker pool (common/worker_pool.hpp): its threads kept from call
# to call, calls from several Python threads at once, and a forked child.
# Each runs in a fresh process, so that the pool holds what its calls made.
POOL_SCRIPT = """
import threading
import numpy as np
import cepam
from cepam._core import testing as hooks

x = (np.random.default_rng(0).standard_normal(4 * (1 << 17) + 99) * 1e-3).astype(np.float32)
mech = cepam.Gaussian(sigma=1e-3)
clip = float(np.linalg.norm(x.astype(np.float64))) / 2

def encode(threads):
    return cepam.encode(x, mech, secret=bytes(32), round=0, client=0, clip=clip,
                        threads=threads, nonce=bytes(16))

one = encode(1)
assert hooks.pool_threads() == 0, hooks.pool_threads()
for _ in range(3):  # the same three helpers, call after call
    assert encode(4) == one
    assert hooks.pool_threads() == 3, hooks.pool_threads()
np.testing.assert_array_equal(cepam.decode(one, secret=bytes(32), threads=4),
                              cepam.decode(one, secret=bytes(32), threads=1))
assert hooks.pool_threads() == 3, hooks.pool_threads()
# Four callers at once, 3 threads each.
out = [None] * 4
def call(i):
    out[i] = [encode(3) for _ in range(3)]
callers = [threading.Thread(target=call, args=(i,)) for i in range(4)]
for t in callers:
    t.start()
for t in callers:
    t.join()
assert all(p == one for calls in out for p in calls)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_the_worker_pool_keeps_its_threads_serves_several_callers_and_survives_fork():
    # A child forked with the pool's threads asleep has none of them: it makes its own.
    run_script(POOL_SCRIPT + in_forked_child("encode(4) == one and hooks.pool_threads() == 3"))


KEPT_MAPPINGS_SCRIPT = """
import numpy as np, cepam
from cepam._core import testing as hooks
def encode(seed, ratio, lattice, m=100_000):
    x = (np.random.default_rng(seed).standard_normal(m) * ratio * 1e-3).astype(np.float32)
    return cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=bytes(32), round=0, client=0,
                        lattice=lattice, clip=1e9, threads=1, nonce=bytes(16))
assert hooks.kept_mapping_bytes() == 0
first = {lattice: encode(1, 3.0, lattice) for lattice in ("Z", "E8")}
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_kept_working_buffers_are_bounded_and_leave_no_trace_in_later_payloads():
    # The large working buffers a call frees are kept mapped for the next
    # (common/pages.hpp), up to a bound: a payload coded in buffers that
    # another update's coding left (other values, escapes at rms/sigma 300,
    # another lattice) is the same payload, and decodes to the same values.
    # A forked child keeps none (every buffer fresh, as the parent's first
    # Z encode): it codes the same bytes.
    run_script(KEPT_MAPPINGS_SCRIPT + """
assert 0 < hooks.kept_mapping_bytes() <= hooks.kept_mapping_limit()
for lattice in ("E8", "Z"):
    encode(9, 300.0, "Z"); encode(8, 0.5, "E8")  # buffers full of other symbols
    again = encode(1, 3.0, lattice)
    assert again == first[lattice], lattice
    y = cepam.decode(again, secret=bytes(32), threads=1)
    encode(7, 100.0, lattice)
    assert np.array_equal(cepam.decode(again, secret=bytes(32), threads=1), y), lattice
    assert hooks.kept_mapping_bytes() <= hooks.kept_mapping_limit()
""" + in_forked_child("hooks.kept_mapping_bytes() == 0 and encode(1, 3.0, 'E8') == first['E8'] "
                      "and encode(1, 3.0, 'Z') == first['Z'] and hooks.kept_mapping_bytes() == 0"))


@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_segments_coded_in_pairs_with_kept_buffers_give_the_same_bytes(lattice):
    """Where every thread has 16 segments or more, the ANS encoder codes them
    in pairs and keeps its word buffers from segment to segment (body.cpp);
    with fewer, one at a time with fresh buffers: the same bytes, padded
    or not."""
    m = 16 * SEGMENT + 4321  # 17 segments on Z: pairs on 1 thread, not on 2 or 3
    x = update(m, seed=4, ratio=3.0)
    for pad in (None, 3 * m):
        payloads = [cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=SECRET, round=1, client=2,
                                 lattice=lattice, threads=t, pad=pad, nonce=NONCE)
                    for t in (1, 2, 3)]
        assert payloads[1] == payloads[0] and payloads[2] == payloads[0], pad


@pytest.mark.parametrize("m", [0, 1, 7, 4097, SEGMENT - 1, SEGMENT, SEGMENT + 1])
def test_sizes_at_segment_edges(m):
    x = update(m, seed=m)
    for coder in ("ans", "golomb"):
        for lattice in ("Z", "E8"):
            payloads = encode_all(x, cepam.Gaussian(sigma=1e-3), lattice=lattice, coder=coder)
            assert all(p == payloads[0] for p in payloads), (coder, lattice)
            ys = [cepam.decode(payloads[0], secret=SECRET, threads=t) for t in THREAD_COUNTS]
            for y in ys:
                np.testing.assert_array_equal(y, ys[0])


def test_auto_and_codec_take_threads():
    x = update(SEGMENT + 99, ratio=1.0)
    payloads = encode_all(x, cepam.Gaussian(sigma=1e-3))  # lattice="auto"
    assert all(p == payloads[0] for p in payloads)
    codecs = [cepam.Codec(cepam.Gaussian(sigma=1e-3), secret=SECRET, client=2, threads=t,
                          allow_unclipped=True)
              for t in THREAD_COUNTS]
    coded = [c.encode(x, round=1, nonce=NONCE) for c in codecs]
    assert all(p == payloads[0] for p in coded)
    for c in codecs:
        np.testing.assert_array_equal(c.decode(coded[0]), cepam.decode(coded[0], secret=SECRET))


def test_the_sdq_baselines_take_threads():
    # encode_sdq and the noisy SDQ baselines pass threads= to the encoder:
    # the same bytes for every count (the noise is drawn before, in one stream).
    from cepam import baselines

    x = update(SEGMENT + 99, ratio=1.0)
    for coder in ("ans", "golomb"):
        plain = [baselines.encode_sdq(x, step=1e-3, secret=SECRET, round=0, client=0,
                                      coder=coder, threads=t, nonce=NONCE)
                 for t in THREAD_COUNTS]
        noisy = [baselines.encode_gaussian_sdq(x, 1e-3, step=3e-3, rng=np.random.default_rng(5),
                                               secret=SECRET, round=0, client=1, coder=coder,
                                               threads=t, nonce=NONCE) for t in THREAD_COUNTS]
        laplace = [baselines.encode_laplace_sdq(x, 1e-3, step=3e-3,
                                                rng=np.random.default_rng(6), secret=SECRET,
                                                round=0, client=2, coder=coder, threads=t,
                                                nonce=NONCE)
                   for t in THREAD_COUNTS]
        for payloads in (plain, noisy, laplace):
            assert all(p == payloads[0] for p in payloads), coder
    with pytest.raises(cepam.InvalidArgumentError, match="threads"):
        baselines.encode_sdq(x, step=1e-3, secret=SECRET, round=0, client=0, threads=0)


def test_golomb_segments_are_the_section_coders_bytes():
    """The Golomb body is coded in segments in parallel (format version 7):
    after the body's parameter, each segment must be its exp-Golomb order
    (the best for the segment's own M), its lengths and the bytes the
    one-shot section coder gives for that segment's H and M with that
    order, for every thread count."""
    m = 2 * SEGMENT + 777
    key = bytes(32)
    # |M| below 2^15, 2^31 and above (a segment holds M as int16, int32, int64).
    # And an update whose segments start small and widen in a later piece of
    # 2^14 coordinates (ratio None: in segment 0, int16 to int32 at 20,000 and
    # to int64 at 40,000; in segment 1, int16 to int64 at 50,000 in).
    for ratio, n, least in [(30.0, 1, 0), (30.0, 2, 0), (30.0, 3, 0), (30.0, 8, 0),
                            (1e6, 1, 1 << 15), (1e10, 2, 1 << 31), (None, 1, 1 << 31)]:
        if ratio is None:
            x = update(m, ratio=3.0)
            x[20_000] = 1e3
            x[[40_000, SEGMENT + 50_000]] = -1e9
        else:
            x = update(m, ratio=ratio)
        params = _core.Params(mechanism=1, scale=1e-3, lattice=1, n=n)
        H, M = hooks.encode_lattice(x, key=key, params=params, factor=1.0)
        assert np.abs(M).max() > least
        per = SEGMENT // n  # sub-vectors a segment
        starts = range(0, len(H), per)
        assert len(starts) == 3
        for threads in THREAD_COUNTS:
            body = _core.encode(x, key=key, params=params, factor=1.0,
                                coder=1, threads=threads)
            (g,) = struct.unpack_from("<I", body, 0)
            assert (g == 0) == (n == 1)  # H is coded where trials can be rejected
            at = 4
            for j0 in starts:
                own = M[j0 * n:(j0 + per) * n]
                k = hooks.best_expg_order(own)
                sections, h_bits, m_bits = hooks.body_encode(
                    H[j0:j0 + per], own, golomb=g, expg_k=k)
                assert struct.unpack_from("<BQQ", body, at) == (k, h_bits, m_bits)
                assert body[at + 17:at + 17 + len(sections)] == sections
                at += 17 + len(sections)
            assert at == len(body)


@pytest.mark.parametrize("lattice,n", [(1, 1), (1, 3), (1, 7), (3, 4), (4, 8)])
@pytest.mark.parametrize("coder", [1, 2])
def test_the_decoders_give_lrsuq_of_the_encoders_symbols(lattice, n, coder):
    """The ANS decoder (coder 2) decodes a block's trial indices, then its
    lattice points piece by piece (4096 coordinates: 1365 sub-vectors for
    n = 3, not a divisor of the block), two segments at a time where it
    pairs them; the Golomb decoder (coder 1) reads each segment's H and M
    piece by piece (2^14 coordinates, 2^12 for n >= 4: 5,461 sub-vectors
    for n = 3, not a divisor of the segment).  Their symbols and values
    must be those of LRSUQ alone, the coder left out."""
    m = 2 * SEGMENT + 12_345  # pairs on one thread; a short last segment
    key = bytes(range(1, 33))
    x = update(m, ratio=3.0)
    params = dict(key=key, params=_core.Params(mechanism=1, scale=1e-3, lattice=lattice, n=n))
    H, M = hooks.encode_lattice(x, factor=1.0, **params)
    expected = hooks.decode_lattice(H, M, m=m, dtype="float64", **params)
    for threads in (1, 3):
        body = _core.encode(x, factor=1.0, coder=coder, threads=threads, **params)
        h, mm = _core.decode_symbols(body, m=m, coder=coder, threads=threads, **params)
        np.testing.assert_array_equal(h, H)
        np.testing.assert_array_equal(mm, M)
        y = _core.decode(body, m=m, coder=coder, dtype="float64", threads=threads, **params)
        np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("bad", [0, -1, MAX_THREADS + 1])
def test_a_bad_thread_count_is_refused(bad):
    x = update(10)
    with pytest.raises(cepam.InvalidArgumentError, match="threads"):
        cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0, client=0,
                     threads=bad)
    payload = cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0, client=0)
    with pytest.raises(cepam.InvalidArgumentError, match="threads"):
        cepam.decode(payload, secret=SECRET, threads=bad)
    with pytest.raises(cepam.InvalidArgumentError, match="threads"):
        cepam.Codec(cepam.Gaussian(sigma=1e-3), secret=SECRET, threads=bad)


@pytest.mark.parametrize("bad", [1.0, "2", True])
def test_a_thread_count_of_the_wrong_type_is_refused(bad):
    with pytest.raises(cepam.InvalidTypeError, match="threads"):
        cepam.encode(update(10), cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0, client=0,
                     threads=bad)


def test_the_default_is_the_environment_or_the_cores(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert resolve_threads(None) == available_cores() >= 1
    monkeypatch.setenv(THREADS_ENV, "3")
    assert resolve_threads(None) == 3
    assert resolve_threads(5) == 5  # an explicit count wins
    for bad in ("0", "x", "1.5", str(MAX_THREADS + 1)):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(cepam.InvalidArgumentError, match=THREADS_ENV):
            cepam.encode(update(4), cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0,
                         client=0)


def test_the_environment_is_read_as_os_environ_holds_it(monkeypatch):
    # (read from the mapping behind os.environ: it must follow every change,
    # and an os.environ replaced by a plain mapping)
    monkeypatch.setenv(THREADS_ENV, "4")
    assert resolve_threads(None) == 4
    os.environ[THREADS_ENV] = " 6 "  # (as a program sets it, after import)
    assert resolve_threads(None) == 6
    del os.environ[THREADS_ENV]
    assert resolve_threads(None) == available_cores()
    monkeypatch.setattr(os, "environ", {THREADS_ENV: "2"})
    assert resolve_threads(None) == 2
    monkeypatch.setattr(os, "environ", {})
    assert resolve_threads(None) == available_cores()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_the_default_follows_the_affinity_mask(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    code = ("import os, cepam.threads as t; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "print(t.resolve_threads(None))")
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.strip() == "1"


# --- Hostile segment framing (behind a valid tag): the same error at every count. ----


def _opened_body(payload: bytes) -> bytes:
    """The payload's (decrypted) body."""
    from cepam.sealing import open_payload

    return open_payload(payload, SECRET)[1].body


def _tagged(payload: bytes, body: bytes) -> bytes:
    """payload with its body replaced, sealed and tagged again (a client's own
    forgery: it holds the secret)."""
    from cepam.payload import pack_sealed
    from cepam.sealing import open_payload, seal

    header, sealed = open_payload(payload, SECRET)
    return seal(header, pack_sealed(sealed.lattice, sealed.n, body, 0), secret=SECRET)


def _segments(body: bytes, model_size: int) -> list[tuple[int, int]]:
    """(offset of the length field, length) of each segment."""
    out, pos = [], model_size
    while pos < len(body):
        (length,) = struct.unpack_from("<I", body, pos)
        out.append((pos, length))
        pos += 4 + length
    return out


@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_hostile_segment_framing(lattice):
    m = 2 * SEGMENT + 5
    payload = cepam.encode(update(m), cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0,
                           client=0, lattice=lattice)
    body = _opened_body(payload)
    info = cepam.inspect(payload, secret=SECRET)
    model_size = info.body_bits["model"] // 8
    segs = _segments(body, model_size)
    n = 1 if lattice == "Z" else 8
    assert len(segs) == -(-(-(-m // n)) // (SEGMENT // n))
    (first_at, first_len), (second_at, second_len) = segs[0], segs[1]

    def with_length(at, value):
        return body[:at] + struct.pack("<I", value) + body[at + 4:]

    def flipped(*segments):  # a byte in the middle of each segment's rANS stream
        out = bytearray(body)
        for at, length in segments:
            out[at + 4 + length // 2] ^= 0x5A
        return bytes(out)

    bad = {
        "first-length-huge": with_length(first_at, 0xFFFFFFFF),
        "first-length-plus-4": with_length(first_at, first_len + 4),
        "first-length-minus-4": with_length(first_at, first_len - 4),
        "first-length-zero": with_length(first_at, 0),
        "second-length-plus-1": with_length(second_at, second_len + 1),
        "last-segment-dropped": body[:segs[-1][0]],
        "extra-segment": body + body[second_at:second_at + 4 + second_len],
        "trailing-byte": body + b"\x00",
        # Z decodes two segments at a time on one thread (their chains
        # interleaved): a failure in either, or both, is the first in
        # segment order, as on more threads.
        "second-stream-byte": flipped(segs[1]),
        "both-streams-byte": flipped(segs[0], segs[1]),
        "segments-swapped": body[:first_at] + body[second_at:second_at + 4 + second_len]
        + body[first_at:second_at] + body[second_at + 4 + second_len:],
    }
    if lattice == "E8":
        bad["model-byte-2"] = body[:first_at + 4] + b"\x02" + body[first_at + 5:]
    for name, edited in bad.items():
        forged = _tagged(payload, edited)
        messages = set()
        for t in THREAD_COUNTS:
            try:
                cepam.decode(forged, secret=SECRET, threads=t)
            except cepam.FormatError as e:
                messages.add(str(e))
            else:
                messages.add("decoded")
        assert len(messages) == 1 and "decoded" not in messages, (name, messages)
        # (Framing intact: only decoding sees these.)
        if name not in ("segments-swapped", "second-stream-byte", "both-streams-byte"):
            with pytest.raises(cepam.FormatError):
                cepam.inspect(forged, secret=SECRET)


def test_the_cores_are_read_again_once_the_affinity_is_a_second_old(monkeypatch):
    """available_cores keeps the affinity it read for AFFINITY_SECONDS (a
    system call a decode of a few coordinates would feel), then reads it
    again: a process whose affinity changes sees it within a second."""
    import cepam.threads as threads

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no affinity on this platform")
    now = [1000.0]
    cores = [{0, 1, 2}]
    monkeypatch.setattr(threads, "_clock", lambda: now[0])
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: cores[0])
    monkeypatch.setattr(threads, "_affinity", [-math.inf, 1])
    assert available_cores() == min(3, MAX_THREADS)
    cores[0] = {0}
    now[0] += threads.AFFINITY_SECONDS / 2
    assert available_cores() == min(3, MAX_THREADS)  # kept
    now[0] += threads.AFFINITY_SECONDS
    assert available_cores() == 1  # read again
