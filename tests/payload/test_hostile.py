"""Hostile payloads: the decoder (the server) must survive anything a client sends.

A client holds its own secret, so it can send a *correctly tagged* hostile
payload: the header and body parsers are tested both without re-tagging (the
tag check must reject the payload) and behind a valid tag, recomputed over the
corrupted content with the client's MAC key.  On every input the decoder must
either decode to an update with the structure its header declares, or raise
``cepam.FormatError`` (``AuthenticationError`` when the tag is wrong): never
another exception, a crash, a hang, or an allocation out of proportion to the
payload's length (the ANS decoder allocates its output, m values, before it
has read the body: ``max_coordinates`` bounds that).

The payload format (docs/format.md): the public header names the body coder; the
sealed section (lattice, n, padding length, body, zero padding) is encrypted with
ChaCha20 under the message's seal key, and the tag covers both.  The forger
(tests/helpers/forge.py) seals with an independent ChaCha20 (the
``cryptography`` package), so a hostile payload reaches the parsers behind a
valid tag exactly as one from a malicious client holding the secret would;
the harness (tests/helpers/hostile.py) holds the valid payloads to corrupt.
Every category runs on payloads of both coders.

This module: the forger's own checks, edits without a valid tag, blind
corruptions behind one (bit flips, truncations, trailing garbage, seeded
mutations), the native body entry points and torch-declared entries.
test_hostile_targeted.py edits each field of the header and the bodies;
test_hostile_ans.py and test_hostile_golomb.py forge bodies of each coder.

Everything is seeded; nothing here measures time.
"""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam.keys import TAG_BYTES, Context, stream_key

from helpers.forge import (
    CODERS, GOLOMB, GOLOMB_PARAMS, GOLOMB_SEGMENT, KNOT_SCALE, MAX_GROWTH, MIN_PAYLOAD,
    OTHER_SECRET, SEALED_HEADER, SECRET, STREAMS, U64, VERSION, AnsBody, GolombBody, RawEntry,
    RawPayload, acceptance, best_knot_order, edited_entries, escape_stream, expg, forged, forged_ans, retag,
    symbols_of, unary, unpack_stream, untagged,
)
from helpers.hidden_imports import run_without
from helpers.hostile import (
    BASES, BASE_NAMES, LARGE_ANS, assert_declared_structure, collect_failures, outcome,
    targeted_payload,
)


# ---------------------------------------------------------------------------
# The forger (tests/helpers/forge.py) against real payloads.
# ---------------------------------------------------------------------------


def test_bases_are_valid_and_decode():
    for name, payload in BASES.items():
        assert outcome(payload) == "ok", name
        assert payload[4] == VERSION
        assert cepam.inspect(payload).coder == name.split("-")[0], name
        assert 48 < len(payload) < (1200 if name.endswith("m300") else 400), name
    for name, payload in LARGE_ANS.items():
        assert outcome(payload) == "ok", name


def test_forged_payload_helpers_match_the_format():
    """The test-side model round-trips real payloads and forges decodable ones."""
    assert MIN_PAYLOAD == cepam.payload.MIN_PAYLOAD
    for name, payload in {**BASES, **LARGE_ANS}.items():
        raw = RawPayload.parse(payload)
        assert raw.tagged() == payload
        info = cepam.inspect(payload, secret=SECRET)
        assert 8 * raw.header_len() == info.header_bits
        if raw.coder == GOLOMB:
            body = GolombBody.parse(raw.body)
            assert body.pack() == raw.body
            segments = [body, *body.later]
            assert info.body_bits == {
                "params": 8 * GOLOMB_PARAMS.size,
                "segments": 8 * GOLOMB_SEGMENT.size * len(segments),
                "H": sum(s.h_bits for s in segments), "M": sum(s.m_bits for s in segments),
                "padding": sum(8 * len(s.sections) - s.h_bits - s.m_bits for s in segments),
            }, name
        else:
            body = AnsBody.parse(raw.body, raw.lattice)
            assert body.pack() == raw.body
            assert (body.point_model is None) == (raw.lattice == 1), name
            assert info.body_bits == {"model": 8 * len(body.model.pack()),
                                      "segments": 8 * (len(body.prefix())
                                                       - len(body.model.pack())),
                                      "stream": 8 * len(body.stream)}, name
            assert body.after == b"", name
            incs = body.model.increments()
            assert sum(incs) <= KNOT_SCALE and body.model.order == best_knot_order(incs)
            assert body.model.recoded().pack() == body.model.pack()
            assert body.model.bins % 2 == 0 and body.model.growth <= MAX_GROWTH
            assert (len(body.stream) - 8 * STREAMS) % 4 == 0
    assert len(unpack_stream(AnsBody.parse(RawPayload.parse(BASES["ans-gauss-n2-m300"]).body)
                             .stream)[1]) > 8, "the m300 base should have stream words"
    ok = forged(shape=(3,), m_code=expg(0) + expg(-1) + expg(5)).tagged()
    assert outcome(ok) == "ok"
    ok2 = forged(n=2, golomb=1, shape=(3,), h_code=unary(1) + unary(3),
                 m_code=expg(0) * 4).tagged()
    assert outcome(ok2) == "ok"
    # ANS: escapes only (H not coded for Gaussian on Z^1) and with H coded (Z^2).
    M = [1 << 40, -(1 << 40), 12345678901, -7]
    raw = forged_ans(shape=(4,), stream=escape_stream(M))
    assert outcome(raw.tagged()) == "ok"
    H, M2 = symbols_of(raw)
    assert H.tolist() == [1] * 4 and M2.tolist() == M
    p2 = acceptance(1, 2)
    raw2 = forged_ans(n=2, shape=(4,), stream=escape_stream(M, n=2, H=[3, 70], p=p2))
    assert outcome(raw2.tagged()) == "ok"
    H, M2 = symbols_of(raw2)
    assert H.tolist() == [3, 70] and M2.tolist() == M


def test_forged_streams_with_table_coded_trial_indices_decode():
    """The test-side geometric table matches the decoder's: H = 1 .. 12 coded by the
    table (Laplace on Z^2), M escaped, decode to exactly those symbols."""
    M = [(-1) ** i * ((1 << 42) + 12345 * i) for i in range(24)]
    raw = forged_ans(n=2, mechanism=2, shape=(24,), scale=0.1,
                     stream=escape_stream(M, n=2, H=list(range(1, 13)),
                                          p=acceptance(2, 2, scale=0.1)))
    H, M2 = symbols_of(raw)
    assert H.tolist() == list(range(1, 13)) and M2.tolist() == M

# ---------------------------------------------------------------------------
# Without a valid tag.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["golomb-gauss-n2", "golomb-dict-n2", "ans-gauss-n2",
                                  "ans-dict-n2", "ans-sdq-n1"])
def test_every_single_bit_flip_without_retag_is_rejected(name):
    payload = BASES[name]
    bad = []
    for bit in range(8 * len(payload)):
        flipped = bytearray(payload)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            cepam.decode(bytes(flipped), secret=SECRET)
        except cepam.FormatError:
            continue  # also fine for the header: parsed before or after the tag
        except cepam.AuthenticationError:
            if bit < 8 * 5:  # magic and version are checked before the tag
                bad.append(f"bit {bit}: AuthenticationError, expected FormatError")
            continue
        except Exception as exc:  # noqa: BLE001
            bad.append(f"bit {bit}: {type(exc).__name__}: {exc}")
            continue
        bad.append(f"bit {bit}: decoded")
    assert not bad, bad[:10]


@pytest.mark.parametrize("name", ["golomb-gauss-n1", "golomb-dict-n2", "ans-gauss-n1",
                                  "ans-dict-n2"])
def test_every_truncation_without_retag_is_rejected(name):
    payload = BASES[name]
    for length in range(len(payload)):
        expected = cepam.FormatError if length < MIN_PAYLOAD else (
            cepam.FormatError, cepam.AuthenticationError)
        with pytest.raises(expected):
            cepam.decode(payload[:length], secret=SECRET)


def test_truncation_below_minimum_says_too_short():
    for name in ("golomb-gauss-n1", "ans-gauss-n1"):
        with pytest.raises(cepam.FormatError, match="too short"):
            cepam.decode(BASES[name][: MIN_PAYLOAD - 1], secret=SECRET)
    with pytest.raises(cepam.FormatError, match="too short"):
        cepam.decode(b"", secret=SECRET)


@pytest.mark.parametrize("magic", [b"CEPN", b"cepm", b"\x00\x00\x00\x00", b"PK\x03\x04"])
@pytest.mark.parametrize("retagged", [False, True], ids=["tag-stale", "tag-valid"])
@pytest.mark.parametrize("coder", CODERS)
def test_wrong_magic_is_a_format_error(magic, retagged, coder):
    base = BASES[f"{coder}-gauss-n2"]
    data = magic + untagged(base)[4:]
    payload = retag(data) if retagged else data + base[-TAG_BYTES:]
    with pytest.raises(cepam.FormatError, match="magic"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="magic"):
        cepam.inspect(payload)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 0x82, 255])
@pytest.mark.parametrize("retagged", [False, True], ids=["tag-stale", "tag-valid"])
@pytest.mark.parametrize("coder", CODERS)
def test_wrong_version_is_a_format_error(version, retagged, coder):
    base = BASES[f"{coder}-laplace-n2"]
    raw = RawPayload.parse(base).edit(version=version)
    payload = raw.tagged() if retagged else raw.data() + base[-TAG_BYTES:]
    with pytest.raises(cepam.FormatError, match="version"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.FormatError, match="version"):
        cepam.inspect(payload)


def test_a_version_1_payload_is_refused_by_version():
    """A v1 payload (coder fields in the header, then the H and M sections) is not
    parsed as v2: the version byte says so, tagged or not."""
    raw = RawPayload.parse(BASES["golomb-gauss-n2"])
    body = GolombBody.parse(raw.body)
    v1 = raw.edit(version=1, body=body.pack())  # v1: the Golomb fields right after the entries
    for payload in (v1.tagged(), v1.data() + BASES["golomb-gauss-n2"][-TAG_BYTES:]):
        with pytest.raises(cepam.FormatError, match="version 1"):
            cepam.decode(payload, secret=SECRET)


@pytest.mark.parametrize("name", BASE_NAMES)
def test_wrong_secret_is_an_authentication_error(name):
    with pytest.raises(cepam.AuthenticationError, match="tag"):
        cepam.decode(BASES[name], secret=OTHER_SECRET)
    codec = cepam.Codec(cepam.Gaussian(sigma=0.1), secret=OTHER_SECRET, client=11)
    with pytest.raises(cepam.AuthenticationError):
        codec.decode(BASES[name])


@pytest.mark.parametrize("coder", CODERS)
def test_payload_tagged_under_another_secret_is_an_authentication_error(coder):
    forged_elsewhere = retag(untagged(BASES[f"{coder}-gauss-n2"]), secret=OTHER_SECRET)
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(forged_elsewhere, secret=SECRET)
    # Under the other secret the tag verifies, but the sealed section decrypts
    # under the other seal key to noise: a FormatError (or, rarely, a decodable
    # body).
    assert outcome(forged_elsewhere, secret=OTHER_SECRET) in {"ok", "format"}


def test_tag_edits_and_trailing_bytes_without_retag_are_authentication_errors():
    for name in ("golomb-dict-n2", "ans-dict-n2"):
        p = BASES[name]
        for bad in (p[:-1] + bytes([p[-1] ^ 0x80]), p[:-TAG_BYTES] + bytes(TAG_BYTES),
                    p + b"\x00", p + p[-TAG_BYTES:], untagged(p) + b"\x00" + p[-TAG_BYTES:]):
            with pytest.raises(cepam.AuthenticationError):
                cepam.decode(bad, secret=SECRET)


@pytest.mark.parametrize("coder", CODERS)
def test_a_tagged_payload_for_a_2_62_coordinate_update_without_retag_is_rejected(coder):
    base = BASES[f"{coder}-gauss-n1"]
    raw = RawPayload.parse(base)
    raw = raw.edit(m=1 << 62, entries=[RawEntry(b"", 0, 1, (1 << 62,))])
    with pytest.raises(cepam.AuthenticationError):
        cepam.decode(raw.data() + base[-TAG_BYTES:], secret=SECRET)


@pytest.mark.parametrize("payload", ["x" * 200, 123, None, [1, 2, 3], 1.5, {"a": b"x"}],
                         ids=["str", "int", "None", "list", "float", "dict"])
def test_non_bytes_payloads_are_invalid_type_errors(payload):
    with pytest.raises(cepam.InvalidTypeError, match="payload must be bytes"):
        cepam.decode(payload, secret=SECRET)
    with pytest.raises(cepam.InvalidTypeError, match="payload must be bytes"):
        cepam.inspect(payload)
    codec = cepam.Codec(cepam.Gaussian(sigma=0.1), secret=SECRET, client=11)
    with pytest.raises(TypeError, match="payload must be bytes"):
        codec.decode(payload)


def test_bytes_like_payloads_are_accepted():
    for name in ("golomb-tuple-laplace-n3", "ans-tuple-laplace-n3"):
        p = BASES[name]
        for like in (bytearray(p), memoryview(p)):
            assert_declared_structure(cepam.decode(like, secret=SECRET), p)
            assert cepam.inspect(like).coordinates == 24


def test_inspect_on_every_single_bit_flip_of_the_header_raises_format_error_only():
    """inspect() reads hostile public headers without the secret: info or
    FormatError; with the secret every flip (tag not recomputed) is refused."""
    for name in ("golomb-dict-n2", "golomb-laplace-n4-clip", "ans-dict-n2",
                 "ans-laplace-n4-clip", "ans-sdq-n1"):
        payload = BASES[name]
        raw = RawPayload.parse(payload)
        for bit in range(8 * raw.header_len()):
            flipped = bytearray(payload)
            flipped[bit // 8] ^= 1 << (bit % 8)
            with pytest.raises((cepam.FormatError, cepam.AuthenticationError)):
                cepam.inspect(bytes(flipped), secret=SECRET)
            try:
                info = cepam.inspect(bytes(flipped))
            except cepam.FormatError:
                continue
            assert info.coordinates == sum(math.prod(e.shape) for e in info.structure.entries)
            assert info.sealed and info.body_bits is None
            assert info.sealed_bits == info.total_bits - info.header_bits - info.tag_bits
            info.as_dict()  # and it can be shown


@pytest.mark.parametrize("name", ["golomb-dict-n2", "ans-dict-n2", "ans-gauss-n2-m300"])
def test_inspect_on_every_truncation_raises_format_error_or_reads_the_parts(name):
    """inspect() without the secret reads the public header only: a truncation
    that leaves less than the header and the sealed section's own header is a
    FormatError, anything longer reads (the sealed part is not parsed).  With
    the secret every truncation is refused (the tag no longer verifies)."""
    payload = BASES[name]
    raw = RawPayload.parse(payload)
    header_end = raw.header_len() + SEALED_HEADER.size
    for length in range(len(payload)):
        truncated = payload[:length]
        with pytest.raises((cepam.FormatError, cepam.AuthenticationError)):
            cepam.inspect(truncated, secret=SECRET)
        if length - TAG_BYTES < header_end:
            with pytest.raises(cepam.FormatError):
                cepam.inspect(truncated)
        else:
            info = cepam.inspect(truncated)
            assert info.total_bits == 8 * length and info.sealed

# ---------------------------------------------------------------------------
# Behind a valid tag: a client attacking the server with its own key.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", BASE_NAMES)
def test_every_single_bit_flip_behind_a_valid_tag_decodes_or_is_a_format_error(name):
    data = untagged(BASES[name])
    cases = []
    for bit in range(8 * len(data)):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        cases.append((f"bit {bit} (byte {bit // 8})", retag(bytes(flipped))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


@pytest.mark.parametrize("name", ["golomb-dict-n2", "ans-dict-n2", "ans-laplace-n4-clip"])
def test_every_single_bit_flip_behind_a_valid_tag_with_output_auto(name):
    """As above with output="auto": a flipped kind byte declares a torch tensor, which
    decodes to one where torch is installed and is a clear InvalidArgumentError
    naming torch where it is not."""
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
    data = untagged(BASES[name])
    bad = []
    for bit in range(8 * len(data)):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        payload = retag(bytes(flipped))
        try:
            outcome(payload, output="auto")
        except cepam.InvalidArgumentError as exc:
            if have_torch or "torch" not in str(exc):
                bad.append(f"bit {bit}: {exc}")
        except Exception as exc:  # noqa: BLE001
            bad.append(f"bit {bit}: {type(exc).__name__}: {exc}")
    assert not bad, bad[:10]


@pytest.mark.parametrize("name", BASE_NAMES)
def test_every_truncation_behind_a_valid_tag_is_a_format_error(name):
    data = untagged(BASES[name])
    for length in range(len(data)):
        payload = retag(data[:length])
        with pytest.raises(cepam.FormatError):
            cepam.decode(payload, secret=SECRET)


BODY_TRUNCATION_MESSAGES = {
    "golomb": "length|section|too short",
    "ans": "source model|entropy-coded body|truncated|bad length|prefix code|segment|"
           "length can carry",
}


@pytest.mark.parametrize("name", ["golomb-gauss-n2", "golomb-dict-n2", "ans-gauss-n2",
                                  "ans-dict-n2", "ans-gauss-n2-m300"])
def test_every_truncation_of_the_body_keeping_the_header_is_a_format_error(name):
    """Drop trailing body bytes but keep the header (and the Golomb section lengths),
    sealed and tagged: the body parser, not the header parser, must notice;
    likewise for the ciphertext truncated (and re-tagged).  Padding declared
    longer than the section is refused by the sealed section's parser."""
    raw = RawPayload.parse(BASES[name])
    match = BODY_TRUNCATION_MESSAGES[name.split("-")[0]]
    for length in range(len(raw.body)):
        with pytest.raises(cepam.FormatError, match=match):
            cepam.decode(raw.edit(body=raw.body[:length]).tagged(), secret=SECRET)
    data = untagged(BASES[name])
    for length in range(raw.header_len(), len(data)):
        with pytest.raises(cepam.FormatError):
            cepam.decode(retag(data[:length]), secret=SECRET)
    for declared in (len(raw.body) + 1, 1 << 31, (1 << 32) - 1):
        with pytest.raises(cepam.FormatError, match="padding"):
            cepam.decode(raw.edit(padding_length=declared).tagged(), secret=SECRET)


TRAILING_MESSAGES = {"golomb": "body length", "ans": "trailing data|bad length"}


@pytest.mark.parametrize("garbage", [b"\x00", b"\xff", b"\x00" * 8, b"CEPM", bytes(range(64))])
def test_trailing_garbage_behind_a_valid_tag_is_a_format_error(garbage):
    """Garbage after the body (declared part of it) is the body parser's to
    refuse; as padding, anything but zero bytes is refused."""
    for name in ("golomb-gauss-n1", "golomb-dict-n2", "ans-gauss-n1", "ans-dict-n2",
                 "ans-gauss-n2-m300"):
        raw = RawPayload.parse(BASES[name])
        with pytest.raises(cepam.FormatError, match=TRAILING_MESSAGES[name.split("-")[0]]):
            cepam.decode(raw.edit(body=raw.body + garbage).tagged(), secret=SECRET)
        padded = raw.edit(padding=garbage).tagged()
        if any(garbage):
            with pytest.raises(cepam.FormatError, match="padding"):
                cepam.decode(padded, secret=SECRET)
        else:  # zero padding: the payload decodes as the unpadded one does
            got, want = (cepam.decode(p, secret=SECRET) for p in (padded, BASES[name]))
            got, want = (list(r.values()) if isinstance(r, dict) else [r] for r in (got, want))
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)


def _random_mutation(rng: random.Random, pool: list[bytes]) -> bytes:
    data = bytearray(rng.choice(pool))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op == 0 and data:  # replace a byte
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 1:  # insert a byte
            data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        elif op == 2 and data:  # delete a run
            i = rng.randrange(len(data))
            del data[i : i + rng.randint(1, 8)]
        elif op == 3:  # splice with another payload
            other = rng.choice(pool)
            data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]
        elif op == 4 and data:  # an extreme byte value
            data[rng.randrange(len(data))] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
        elif op == 5 and len(data) >= 8:  # an extreme 64-bit little-endian field
            i = rng.randrange(len(data) - 7)
            data[i : i + 8] = struct.pack("<Q", rng.choice([0, 1, U64, 1 << 62, 1 << 63, 1 << 32,
                                                            1 << 31, (1 << 63) - 1]))
    return bytes(data)


@pytest.mark.parametrize("coder", CODERS)
def test_seeded_random_mutations_behind_a_valid_tag_decode_or_are_format_errors(coder):
    rng = random.Random(0xCE9A + len(coder))
    pool = [untagged(p) for name, p in BASES.items() if name.startswith(coder)]
    cases = []
    for i in range(3000):
        cases.append((f"mutation {i}", retag(_random_mutation(rng, pool))))
    failures = collect_failures(cases)
    assert not failures, failures[:10]


@pytest.mark.parametrize("coder", CODERS)
def test_seeded_random_mutations_include_both_outcomes(coder):
    """Guards the fuzz test above against testing only one path."""
    rng = random.Random(0xCE9A + len(coder))
    pool = [untagged(p) for name, p in BASES.items() if name.startswith(coder)]
    seen = set()
    for _ in range(400):
        try:
            seen.add(outcome(retag(_random_mutation(rng, pool))))
        except Exception:  # noqa: BLE001 - reported by the fuzz test itself
            pass
    assert seen == {"ok", "format"}

# --- The native body entry points on hostile bodies. -------------------------


@pytest.mark.parametrize("name", ["golomb-gauss-n2", "ans-gauss-n2", "ans-gauss-n2-m300",
                                  "golomb-sdq-n1", "ans-laplace-n4-clip", "ans-a2-low",
                                  "ans-e8-escapes", "ans-d4-high"])
def test_native_body_functions_raise_format_errors_on_hostile_bodies(name):
    """_core.decode, _core._core.decode_symbols and _core.body_parts (the tools' entry points) on truncated
    and bit-flipped bodies: a result or FormatError, nothing else."""
    raw = RawPayload.parse(BASES[name])
    key = stream_key(SECRET, Context(raw.round, raw.client, raw.message), raw.nonce)
    kw = dict(m=raw.m, key=key, coder=raw.coder,
              params=_core.Params(mechanism=raw.mechanism, scale=raw.scale,
                                  lattice=raw.lattice, n=raw.n))
    bodies = [raw.body[:k] for k in range(len(raw.body))]
    for bit in range(0, 8 * len(raw.body), 3):
        b = bytearray(raw.body)
        b[bit // 8] ^= 1 << (bit % 8)
        bodies.append(bytes(b))
    bad = []
    for i, body in enumerate(bodies):
        for call in (lambda: _core.decode(body, dtype="float64", **kw),
                     lambda: _core.decode_symbols(body, **kw),
                     lambda: _core.body_parts(body, coder=raw.coder, lattice=raw.lattice)):
            try:
                call()
            except cepam.FormatError:
                pass
            except Exception as exc:  # noqa: BLE001
                bad.append(f"body {i}: {type(exc).__name__}: {exc}")
    assert not bad, bad[:10]

# --- Torch-declared entries. -------------------------------------------------


def _torch_kind_payload(coder: str = "ans") -> bytes:
    return targeted_payload(lambda r: r.edit(entries=edited_entries(r, kind=1)), f"{coder}-gauss-n1")


@pytest.mark.parametrize("coder", CODERS)
def test_torch_kind_entry_decodes_to_numpy_on_request(coder):
    assert outcome(_torch_kind_payload(coder)) == "ok"


def test_torch_kind_entry_without_torch_is_a_clear_cepam_error(tmp_path):
    # In a fresh interpreter that cannot import torch (whether or not this
    # one can), as for a user who installed cepam without torch.
    path = tmp_path / "payload.bin"
    path.write_bytes(_torch_kind_payload())
    code = ("import pathlib, cepam\n"
            "try:\n"
            f"    cepam.decode(pathlib.Path(sys.argv[1]).read_bytes(), secret={SECRET!r})\n"
            "except cepam.InvalidArgumentError as exc:\n"
            "    print('InvalidArgumentError:', exc)\n")
    proc = run_without({"torch"}, code, str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("InvalidArgumentError:") and "torch" in proc.stdout, proc.stdout


def test_torch_kind_entry_with_torch_decodes_to_a_tensor():
    torch = pytest.importorskip("torch")
    y = cepam.decode(_torch_kind_payload(), secret=SECRET)
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (24,)
