"""Hostile payloads: ANS bodies forged behind a valid tag.

The model byte of A2, D4 and E8 segments; sampled corruptions of payloads
over several blocks; streams built by the test-side rANS encoder
(tests/helpers/forge.py: escape abuse, bad final states, trailing words);
long streams of constant words and large declared sizes against the
allocation bound; numeric extremes of the model range and the noise scale.

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import math
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

import cepam

from helpers.forge import (
    ANS_BLOCK, CODERS, DBL_MAX, ESCAPE, MAX_ABS_M, NONCE, RANS_LOW, SECRET, STREAMS, U64,
    UNIFORM_MODEL, ZERO_WORD_CASES, AnsBody, AnsModel, GolombBody, RansEncoder, RawPayload, acceptance,
    edited_entries, escape_stream, forged_ans, geometric_cum, on_ans, pack_stream, put_escaped_m,
    put_h, retag, segment, symbols_of, unpack_stream, untagged, zero_word_payload, zigzag,
)
from helpers.hostile import (
    BASES, LARGE_ANS, MB, collect_failures, decode_in_child, outcome, peak_allocation,
    targeted_payload,
)


# --- ANS on A2, D4, E8: the model byte and the point model. -----------------

LATTICE_ANS = {"ans-a2-low": 1, "ans-e8-escapes": 1, "ans-d4-high": 0}  # base: model byte


def test_lattice_bases_use_the_expected_model_and_decode():
    for name, model in LATTICE_ANS.items():
        raw = RawPayload.parse(BASES[name])
        assert AnsBody.parse(raw.body, raw.lattice).point_model == model, name
    # The E8 base's outlier (3.0 against sigma 0.1) lies far outside the
    # point model's candidates: escaped to the box model, and decoded.
    y = cepam.decode(BASES["ans-e8-escapes"], secret=SECRET)
    assert np.all(np.abs(y[np.arange(800) % 800 == 3] - 3.0) < 1.0)


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
@pytest.mark.parametrize("byte", [2, 3, 128, 255])
def test_an_unknown_model_byte_is_a_format_error(name, byte):
    payload = targeted_payload(on_ans(lambda b: b.edit(point_model=byte)), name)
    with pytest.raises(cepam.FormatError, match="unknown lattice point model"):
        cepam.decode(payload, secret=SECRET)


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
def test_the_other_model_byte_decodes_or_is_a_format_error(name):
    payload = targeted_payload(on_ans(lambda b: b.edit(point_model=1 - b.point_model)), name)
    assert outcome(payload) in ("ok", "format")


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
def test_a_body_ending_at_the_model_byte_is_a_format_error(name):
    """Without the model byte, or without the stream after it."""
    body = AnsBody.parse(RawPayload.parse(BASES[name]).body, 2)
    for cut in (body.model.pack(), body.prefix()):
        payload = targeted_payload(lambda r: r.edit(body=cut), name)
        with pytest.raises(cepam.FormatError,
                           match="model byte|entropy-coded body|truncated|segment"):
            cepam.decode(payload, secret=SECRET)
        with pytest.raises(cepam.FormatError):
            cepam.inspect(payload, secret=SECRET)


@pytest.mark.parametrize("name", sorted(LATTICE_ANS))
def test_lattice_streams_of_zero_words_and_states_decode_or_are_format_errors(name):
    """Streams whose states and words are all zeros, all ones or seeded noise
    under each model byte: the point model's tables take any slot."""
    body = AnsBody.parse(RawPayload.parse(BASES[name]).body, 2)
    rng = random.Random(name)
    cases = []
    for point_model in (0, 1):
        for words in (0, 3, 40):
            for fill in ("zeros", "ones", "noise"):
                def word(bits):
                    if fill == "zeros":
                        return 0
                    return (1 << bits) - 1 if fill == "ones" else rng.getrandbits(bits)
                states = [max(word(64), RANS_LOW) for _ in range(STREAMS)]
                stream = pack_stream(states, [word(32) for _ in range(words)])
                edited = body.edit(point_model=point_model, stream=stream)
                cases.append((f"{point_model}-{words}-{fill}",
                              targeted_payload(lambda r, e=edited: r.edit(body=e.pack()), name)))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


# --- ANS: sampled corruptions of payloads over several blocks. ---------------


@pytest.mark.parametrize("name", sorted(LARGE_ANS))
def test_multi_block_ans_truncations_and_bit_flips_behind_a_valid_tag(name):
    data = untagged(LARGE_ANS[name])
    raw = RawPayload.parse(LARGE_ANS[name])
    stream_at = raw.header_len() + len(AnsBody.parse(raw.body).model.pack())
    rng = random.Random(len(data))
    # Truncations: inside the model, at and next to word boundaries of the stream.
    lengths = set(range(raw.header_len(), stream_at + 40))
    for _ in range(40):
        cut = rng.randrange(stream_at + 32, len(data))
        lengths.update({cut, cut - cut % 4, len(data) - 4 * rng.randint(1, 8)})
    for length in sorted(lengths):
        with pytest.raises(cepam.FormatError):
            cepam.decode(retag(data[:length]), secret=SECRET)
    # Bit flips: every bit of the model, and sampled bits of the stream (first and last
    # words included: the decoder reads them at the start and at the end).
    bits = list(range(8 * raw.header_len(), 8 * stream_at))
    bits += list(range(8 * stream_at, 8 * (stream_at + 36)))
    bits += list(range(8 * len(data) - 32, 8 * len(data)))
    bits += rng.sample(range(8 * stream_at, 8 * len(data)), 60)
    cases = []
    results = {"ok": 0, "format": 0}
    for bit in bits:
        flipped = bytearray(data)
        flipped[bit // 8] ^= 0x80 >> (bit % 8)
        cases.append((f"bit {bit}", retag(bytes(flipped))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]
    for label, payload in cases[-60:]:
        results[outcome(payload)] += 1
    # A flipped stream bit is almost always caught (the states must end at 2^31).
    assert results["format"] >= 55, results


def test_multi_segment_z_bit_flips_behind_a_valid_tag_decode_or_fail_cleanly():
    """Five segments: the decoder takes four streams at a time with AVX-512
    (two segments' states a register) and two otherwise, and a stream that
    stops (its table not plain, its slot the escape, its words near their
    end) takes a symbol alone while the others wait.  Flipped bits in every
    segment's stream (its states, first and last words, and a sample) must
    decode or raise FormatError, in a child process that a crash would
    kill."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=4 * 2**17 + 777).astype(np.float32)
    payload = cepam.encode(x, cepam.Gaussian(sigma=0.2), secret=SECRET, round=1, client=2,
                           lattice="Z", nonce=NONCE, threads=1)
    data = untagged(payload)
    raw = RawPayload.parse(payload)
    body_at = raw.header_len()
    _, pos = AnsModel.parse(raw.body)
    spans = []  # each segment's rANS stream, as offsets into data
    while pos < len(raw.body):
        (length,) = struct.unpack_from("<I", raw.body, pos)
        spans.append((body_at + pos + 4, body_at + pos + 4 + length))
        pos += 4 + length
    assert len(spans) == 5 and pos == len(raw.body)
    pick = random.Random(11)
    cases = []
    for k, (start, end) in enumerate(spans):
        bits = [8 * start + 7, 8 * (start + 8 * STREAMS) + 1, 8 * end - 5]
        bits += pick.sample(range(8 * start, 8 * end), 12)
        for bit in bits:
            flipped = bytearray(data)
            flipped[bit // 8] ^= 0x80 >> (bit % 8)
            cases.append((f"segment {k} bit {bit}", retag(bytes(flipped))))
    results = decode_in_child(cases)
    assert {label: r for label, r in results.items() if r not in ("ok", "format")} == {}
    # A flipped stream bit is almost always caught (the states must end at 2^31).
    assert sum(r == "format" for r in results.values()) >= len(cases) - 5, results


# --- ANS: hand-built streams (escape abuse). ----------------------------------


def _escape_payload(M, *, n=1, mechanism=1, H=None, escape_h=False, scale=0.25,
                    m_code=put_escaped_m, dims=None) -> RawPayload:
    p = acceptance(mechanism, n, scale=scale)
    stream = escape_stream(M, n=n, H=H, p=p, escape_h=escape_h, m_code=m_code)
    return forged_ans(n=n, mechanism=mechanism, scale=scale, shape=dims or (len(M),),
                      stream=stream)


@pytest.mark.parametrize("mechanism,n", [(1, 1), (2, 1), (3, 1), (1, 2), (2, 4), (1, 8)],
                         ids=["gauss-n1", "laplace-n1", "sdq-n1", "gauss-n2", "laplace-n4",
                              "gauss-n8"])
def test_every_coordinate_escaped_with_maximal_raw_length_decodes(mechanism, n):
    """The longest legal escape (6 + 55 raw bits: |M| = 2^53) for every coordinate, over
    more than two blocks, with every H escaped at the trial cap where H is coded."""
    N = 2 * ANS_BLOCK + 3
    M = [MAX_ABS_M if i % 2 else -MAX_ABS_M for i in range(N * n)]
    assert zigzag(MAX_ABS_M).bit_length() == 55
    H = [1 << 16] * N  # the trial cap, escaped (raw 16 bits = 65535)
    raw = _escape_payload(M, n=n, mechanism=mechanism, H=H)
    payload = raw.tagged()
    with peak_allocation() as traced:
        assert outcome(payload) == "ok"
    peak = traced.peak
    assert peak < 8 * len(payload) + 4 * MB, peak
    H2, M2 = symbols_of(raw)
    assert M2.tolist() == M
    assert H2.tolist() == (H if acceptance(mechanism, n) < 1
                           else [1] * N)


@pytest.mark.parametrize("length,z,match", [
    (56, 1 << 55, "out of range"),
    (63, (1 << 63) - 1, "out of range"),
    (55, (1 << 55) - 1, "out of range"),  # zigzag: -2^54
    (55, (1 << 54) + 2, "out of range"),  # 2^53 + 1
    (54, (1 << 54) - 1, None),  # -2^53: accepted
    (55, 1 << 54, None),  # 2^53: accepted
], ids=["len-56", "len-63", "minus-2^54", "2^53+1", "minus-2^53", "2^53"])
def test_escaped_coordinates_beyond_2_53_are_rejected(length, z, match):
    def code(enc, j, length=length, z=z):
        put_escaped_m(enc, 0, length=length, z=z)

    raw = _escape_payload([0, 0, 0], m_code=code)
    if match is None:
        assert outcome(raw.tagged()) == "ok"
    else:
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(raw.tagged(), secret=SECRET)


@pytest.mark.parametrize("j", [0, 1, -1, 2, -2])
@pytest.mark.parametrize("mechanism,n", [(1, 1), (3, 1), (1, 2)], ids=["gauss", "sdq", "gauss-n2"])
def test_escaped_coordinates_inside_the_table_are_non_canonical(j, mechanism, n):
    """An escape must code a value the table cannot: one inside it is a FormatError."""
    M = [1 << 40] * (3 * n)
    M[n] = j  # sub-vector 1, coordinate 0
    raw = _escape_payload(M, n=n, mechanism=mechanism)
    with pytest.raises(cepam.FormatError, match="non-canonical"):
        cepam.decode(raw.tagged(), secret=SECRET)


def test_escape_with_a_zero_length_is_non_canonical():
    def code(enc, j):
        put_escaped_m(enc, 0, length=0, z=0)  # M = 0, inside every table

    with pytest.raises(cepam.FormatError, match="non-canonical"):
        cepam.decode(_escape_payload([1], m_code=code).tagged(), secret=SECRET)


def test_escape_with_leading_zero_raw_bits_decodes_or_is_a_format_error():
    """The escape's length field is not required to be minimal (documents the current
    rule: the value, not its length, is checked)."""
    def code(enc, j):
        put_escaped_m(enc, j, length=55)  # 2^40 in 55 raw bits

    raw = _escape_payload([1 << 40, -(1 << 40)], m_code=code)
    assert outcome(raw.tagged()) in ("ok", "format")


@pytest.mark.parametrize("h,match", [(1, "non-canonical"), (2, "non-canonical"),
                                     (64, "non-canonical"), (65, None), (1000, None),
                                     (1 << 16, None)])
@pytest.mark.parametrize("mechanism,n", [(1, 2), (2, 2), (2, 4)],
                         ids=["gauss-n2", "laplace-n2", "laplace-n4"])
def test_escaped_trial_indices(h, match, mechanism, n):
    """H escapes carry H - 1 in 16 raw bits: H <= 64 is non-canonical (the table codes
    it), 65 .. 65536 (the cap, the largest 16 bits can say) decode."""
    N = 5
    H = [3, h, 1, h, 64]
    M = [1 << 45] * (N * n)
    cum = geometric_cum(acceptance(mechanism, n))

    def stream():
        enc = RansEncoder()
        for j in range(N):
            put_h(enc, H[j], cum, escape=(H[j] == h))
        for v in M:
            put_escaped_m(enc, v)
        return enc.finish()

    raw = forged_ans(n=n, mechanism=mechanism, shape=(N * n,), stream=stream())
    if match:
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(raw.tagged(), secret=SECRET)
    else:
        assert outcome(raw.tagged()) == "ok"
        assert symbols_of(raw)[0].tolist() == H


def test_escapes_under_a_tiny_scale_are_non_canonical():
    """With a tiny scale the table spans every |M| <= 2^53 (in coarse symbols and raw
    offsets), so no escape is canonical."""
    for scale in (1e-300, 5e-324):
        raw = _escape_payload([MAX_ABS_M, -MAX_ABS_M], scale=scale)
        with pytest.raises(cepam.FormatError, match="non-canonical"):
            cepam.decode(raw.tagged(), secret=SECRET)


@pytest.mark.parametrize("coder", CODERS)
def test_an_empty_update_and_hostile_variants(coder):
    """m = 0: the ANS body is a source model and no segment; anything else there is a
    FormatError."""
    payload = cepam.encode(np.zeros((0, 3), np.float32), cepam.Gaussian(sigma=0.1),
                           secret=SECRET, round=0, client=0, coder=coder)
    assert cepam.decode(payload, secret=SECRET).shape == (0, 3)
    raw = RawPayload.parse(payload)
    if coder == "ans":
        model, length = AnsModel.parse(raw.body)
        assert length == len(raw.body)
        empty = segment(pack_stream([RANS_LOW] * STREAMS, []))
        bad_bodies = [model.pack() + empty, model.pack() + empty[:4], model.pack() + bytes(1),
                      model.edit(a=math.nan).pack()]
    else:
        body = GolombBody.parse(raw.body)
        bad_bodies = [body.edit(m_bits=1, sections=b"\x80").pack(),
                      body.edit(sections=b"\x00").pack(), raw.body[:-1]]
    for bad in bad_bodies + [b""]:
        with pytest.raises(cepam.FormatError):
            cepam.decode(raw.edit(body=bad).tagged(), secret=SECRET)


def test_a_trial_index_escape_on_a_lattice_without_trials_is_not_read():
    """Gaussian on Z^1, Laplace on Z^1 and SDQ code no H: an H escape there is read as an
    M escape (length 0xFFFF >> 10 = 63 bits: out of range)."""
    for mechanism in (1, 2, 3):
        enc = RansEncoder()
        enc.put(ESCAPE, 1)
        enc.put_raw(0xFFFF, 16)
        raw = forged_ans(mechanism=mechanism, shape=(1,), stream=enc.finish())
        with pytest.raises(cepam.FormatError):
            cepam.decode(raw.tagged(), secret=SECRET)


def test_final_states_and_trailing_words_are_checked():
    raw = _escape_payload([1 << 40] * 7)
    states, words = unpack_stream(AnsBody.parse(raw.body).stream)
    assert outcome(raw.tagged()) == "ok" and len(words) > 2
    for edit, match in (
        (lambda s, w: (s, w + [0]), "trailing data"),  # a word the decoder never reads
        (lambda s, w: (s, w[:-1]), "entropy-coded"),  # one word short
        (lambda s, w: ([s[0] + 1] + s[1:], w), None),  # a state off by one
        (lambda s, w: (s[:3] + [s[3] ^ (1 << 40)], w), None),
        (lambda s, w: (s, [w[0] ^ 1] + w[1:]), None),
        (lambda s, w: (s, w[:-1] + [w[-1] ^ (1 << 31)]), None),
    ):
        bad = raw.edit(body=UNIFORM_MODEL.pack() + segment(pack_stream(*edit(list(states),
                                                                             list(words)))))
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(bad.tagged(), secret=SECRET)


# --- ANS: long streams, large declared sizes, and the allocation bound. ------

@pytest.mark.parametrize("label,n,mechanism,m,words", ZERO_WORD_CASES,
                         ids=[c[0] for c in ZERO_WORD_CASES])
def test_streams_of_constant_words_with_a_large_declared_size_fail(label, n, mechanism, m, words):
    """Constant words behind valid states, declaring many coordinates: the decoder runs out
    of words or ends in the wrong state (work bounded by m); it allocates the output
    (m values) and O(4096) per block, nothing more."""
    for states in ((RANS_LOW,) * 4, ((1 << 63) - 1,) * 4, (0x5A5A5A5A5A5A5A5A,) * 4):
        payload = zero_word_payload(n, mechanism, m, words, states=states)
        with peak_allocation() as traced:
            assert outcome(payload) == "format", (label, states)
        peak = traced.peak
        assert peak < 4 * m + 6 * len(payload) + 2 * MB, (label, peak)


def test_a_peaked_source_model_with_no_words_fails():
    """All the model's mass in one bin: each coordinate costs a tiny fraction of a bit,
    so 32 bytes of states could stand for many coordinates; the decoder still ends in
    the wrong state (or runs out) and says so."""
    peaked = AnsModel.of([0] * 31 + [4096] + [0] * 31, a=1e-3)
    for m, mechanism in ((100_000, 1), (100_000, 3)):
        payload = zero_word_payload(1, mechanism, m, b"", model=peaked,
                                     states=((1 << 62) + (1 << 23),) * 4)
        assert outcome(payload) == "format"


def test_max_coordinates_refuses_a_large_declared_size_before_allocating():
    """A server that passes its model size refuses more, before allocating anything."""
    m = 10**6
    payload = zero_word_payload(1, 1, m + 1, b"\xff" * 64)
    with peak_allocation() as traced:
        with pytest.raises(cepam.FormatError, match="max_coordinates"):
            cepam.decode(payload, secret=SECRET, max_coordinates=m)
        codec = cepam.Codec(cepam.Gaussian(sigma=0.25), secret=SECRET, client=6,
                            allow_unclipped=True)
        with pytest.raises(cepam.FormatError, match="max_coordinates"):
            codec.decode(payload, max_coordinates=m)
    peak = traced.peak
    assert peak < 6 * len(payload) + MB, peak
    # At the limit the payload is read (and fails on its body).
    assert outcome(zero_word_payload(1, 1, m, b"\xff" * 64), max_coordinates=m) == "format"


@pytest.mark.parametrize("coder", CODERS)
def test_2_62_coordinates_are_refused_up_front(coder):
    raw = RawPayload.parse(BASES[f"{coder}-gauss-n1"])
    for m in (1 << 62, U64, 1 << 57):
        payload = raw.edit(m=m, entries=edited_entries(raw, dims=(m,))).tagged()
        with peak_allocation() as traced:
            for limit in (1 << 28, 1 << 62, 1 << 64):
                with pytest.raises(cepam.FormatError, match="too large"):
                    cepam.decode(payload, secret=SECRET, max_coordinates=limit)
        peak = traced.peak
        assert peak < 6 * len(payload) + MB, peak


def test_a_tiny_valid_ans_payload_for_many_coordinates_allocates_only_its_output():
    """A constant update costs almost nothing with ANS: a short payload may decode to many
    values, allocating the output (bounded by max_coordinates) and O(4096) per block."""
    m = 1 << 18
    payload = cepam.encode(np.zeros(m, np.float32), cepam.Gaussian(sigma=10.0), secret=SECRET,
                           round=0, client=0)
    assert len(payload) < m // 8
    with peak_allocation() as traced:
        y = cepam.decode(payload, secret=SECRET)
    peak = traced.peak
    assert y.shape == (m,) and y.dtype == np.float32
    assert peak < 4 * m + 20 * len(payload) + 2 * MB, peak
    with pytest.raises(cepam.FormatError, match="max_coordinates"):
        cepam.decode(payload, secret=SECRET, max_coordinates=m - 1)


# --- ANS: numeric extremes of the model range and the noise scale. -----------


def _extreme_cases():
    base = RawPayload.parse(BASES["ans-gauss-n1"])
    sdq = RawPayload.parse(BASES["ans-sdq-n1"])
    lap = RawPayload.parse(BASES["ans-laplace-n2"])
    cases = []
    for raw, name in ((base, "gauss-n1"), (sdq, "sdq-n1"), (lap, "laplace-n2")):
        body = AnsBody.parse(raw.body)
        for a in (math.ldexp(1.0, -1018), 1.0, 1e300, DBL_MAX / 2,
                  math.nextafter(DBL_MAX / 2, math.inf), 1.79e308, DBL_MAX):
            for scale in (5e-324, 1e-300, 1.0, 1e280, 1e300, DBL_MAX):
                edited = raw.edit(scale=scale, body=body.edit(model=body.model.edit(a=a)).pack())
                cases.append((f"{name} A={a!r} scale={scale!r}", edited.tagged()))
    return cases


def test_extreme_model_ranges_and_scales_do_not_crash_the_decoder():
    """Source-model ranges near DBL_MAX (2A overflows, so the model's bin width is
    infinite) with huge noise scales (cell edges near A): decoded in a child process,
    so that a crash of the native decoder fails this test only."""
    cases = _extreme_cases()
    results = decode_in_child(cases)
    bad = sorted(f"{label}: {r}" for label, r in results.items() if r not in ("ok", "format"))
    assert not bad, bad
    assert len(results) == len(cases)


_HONEST_EXTREME_CHILD = r"""
import numpy as np, cepam
x = np.array([1.7e308, -1.7e308, 1.0e308, 5e307, -1.2e308, 0.0] * 4)
for sigma in (1e300, 1e295):
    for coder in ("golomb", "ans"):
        try:
            p = cepam.encode(x, cepam.Gaussian(sigma=sigma), secret=bytes(32), round=0,
                             client=0, coder=coder)
        except cepam.EncodingError:
            print(sigma, coder, "refused", flush=True)
            continue
        y = cepam.decode(p, secret=bytes(32))
        print(sigma, coder, "ok", y.shape, flush=True)
"""


def test_an_honest_update_near_dbl_max_round_trips_or_is_refused():
    """An update with |x| near DBL_MAX and a noise scale large enough for LRSUQ
    (|x / beta| < 2^50): the source model's range A is then above DBL_MAX / 2.  Encoding
    must give a payload that decodes, or an EncodingError; never a crash (in a child)."""
    proc = subprocess.run([sys.executable, "-c", _HONEST_EXTREME_CHILD], capture_output=True,
                          text=True)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    done = [line for line in proc.stdout.splitlines() if line.endswith(("refused", "(24,)"))]
    assert len(done) == 4, proc.stdout
