"""The GPU's decoder of ANS bodies (the box model's on every lattice, and
the point model's on A2, D4 and E8), by its host twin
(``_core.testing.decode_by_segments``: csrc/payload/segment_decode.hpp, the
code the CUDA kernel runs, one segment after another): the CPU decoder's
values bit for bit on valid bodies, and its outcome on corrupted ones (the
same error type and message, the first the stream meets, or the same
values)."""

import struct
from pathlib import Path

import numpy as np
import pytest

from cepam import _core
from cepam._core import testing as hooks

KEY = bytes(range(1, 33))
SEGMENT = 1 << 17
Z, A2, D4, E8 = 1, 2, 3, 4
BOX_LATTICES = [(A2, 2), (D4, 4), (E8, 8)]  # (the point model's lattices; Gaussian only)


def _params(n, mechanism=1, scale=1e-3, lattice=Z):
    return _core.Params(mechanism=mechanism, scale=scale, lattice=lattice, n=n)


def _outcome(decode):
    """The values, or (error type, message)."""
    try:
        return decode().tobytes()
    except Exception as e:  # noqa: BLE001  (the outcome is compared, whatever it is)
        return type(e).__name__, str(e)


def _both(body, m, params, dtype="float32"):
    cpu = _outcome(lambda: _core.decode(body, m=m, key=KEY, params=params, coder=2, dtype=dtype,
                                        threads=2))
    twin = _outcome(lambda: hooks.decode_by_segments(body, m=m, key=KEY, params=params,
                                                       dtype=dtype))
    return cpu, twin


def _update(m, dtype=np.float32, scale=0.01, seed=0):
    return (np.random.default_rng(seed).normal(size=m) * scale).astype(dtype)


@pytest.mark.parametrize("n,mechanism", [(1, 1), (2, 1), (3, 1), (8, 1), (1, 2), (2, 2), (3, 2)])
@pytest.mark.parametrize("m", [1, 5, 4_099, 2 * SEGMENT + 77])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_twin_gives_the_cpu_values(n, mechanism, m, dtype):
    params = _params(n, mechanism)
    x = _update(m, np.dtype(dtype), seed=m + n)
    body = _core.encode(x, key=KEY, params=params, factor=1.0, coder=2, threads=2)
    cpu, twin = _both(body, m, params, dtype)
    assert isinstance(cpu, bytes) and twin == cpu


@pytest.mark.parametrize("lattice,n", BOX_LATTICES)
@pytest.mark.parametrize("m", [1, 4_099, 2 * SEGMENT + 77])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_twin_gives_the_cpu_values_on_a2_d4_e8(lattice, n, m, dtype):
    """An update at rms/sigma = 10: no sub-vector has a point table, so the
    body is the box model's, with the basis's offsets."""
    params = _params(n, lattice=lattice)
    x = _update(m, np.dtype(dtype), seed=m + n)
    body = _core.encode(x, key=KEY, params=params, factor=1.0, coder=2, threads=2)
    cpu, twin = _both(body, m, params, dtype)
    assert isinstance(cpu, bytes) and twin == cpu


@pytest.mark.parametrize("lattice,n", BOX_LATTICES)
@pytest.mark.parametrize("m,scale", [(5_000, 1e-7), (2 * SEGMENT + 3, 3e-4), (70_001, 1e-2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_point_model_bodies_decode_alike(lattice, n, m, scale, dtype):
    """Updates below the noise (rms/sigma = 10^-4, 0.3, and 10 for a body
    of the box model): segments of the point model (model byte 1), where a
    sub-vector with a table takes its candidate or the escape and its box
    symbols, decode to the CPU's values."""
    params = _params(n, lattice=lattice)
    body = _core.encode(_update(m, np.dtype(dtype), scale=scale, seed=m), key=KEY, params=params,
                        factor=1.0, coder=2, threads=1)
    at = _core.body_parts(body, coder=2, lattice=lattice, m=m, n=n)["model"] // 8
    assert body[at + 4] == (1 if scale < 1e-2 else 0)  # (the first segment's model byte)
    cpu, twin = _both(body, m, params, dtype)
    assert isinstance(cpu, bytes) and twin == cpu


@pytest.mark.parametrize("what", ["heavy tails", "constant", "tiny", "huge"])
def test_coarse_tables_escapes_and_padding_decode_alike(what):
    """Values outside the model's table (escapes), coarse tables (a noise
    far below the update), and a body the bomb rule pads (a constant
    update)."""
    m = 50_000
    rng = np.random.default_rng(5)
    x = {"heavy tails": rng.standard_t(1.5, size=m) * 0.01,
         "constant": np.full(m, 0.25),
         "tiny": rng.normal(size=m) * 1e-9,
         "huge": rng.normal(size=m) * 1e3}[what].astype(np.float32)
    params = _params(1)
    body = _core.encode(x, key=KEY, params=params, factor=1.0, coder=2, threads=1)
    cpu, twin = _both(body, m, params)
    assert isinstance(cpu, bytes) and twin == cpu


def _corruptions(body: bytes, rng: np.random.Generator, count: int):
    """Flipped bytes, bytes set, truncations and extensions."""
    out = []
    for _ in range(count):
        b = bytearray(body)
        kind = rng.integers(4)
        at = int(rng.integers(len(b)))
        if kind == 0:
            b[at] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            b[at] = int(rng.integers(256))
        elif kind == 2:
            del b[at:]
        else:
            b[at:at] = bytes(rng.integers(256, size=int(rng.integers(1, 9)), dtype=np.uint8))
        out.append(bytes(b))
    return out


def _assert_corruptions_meet(body: bytes, seed: int, both) -> None:
    """60 corruptions of body (seeded): both(bad) -> (cpu, twin) outcomes
    must be equal, and some must be errors."""
    refused = 0
    for bad in _corruptions(body, np.random.default_rng(seed), 60):
        cpu, twin = both(bad)
        assert twin == cpu
        refused += not isinstance(cpu, bytes)
    assert refused > 0  # (the comparison saw errors, not only values)


@pytest.mark.parametrize("lattice,n,m,seed,scale", [
    (Z, 1, 20_000, 1, 0.01), (Z, 2, 2 * SEGMENT + 5, 2, 0.01), (Z, 3, 9_001, 3, 0.01),
    (Z, 8, 70_000, 4, 0.01), (Z, 1, 3, 5, 0.01), (A2, 2, 20_000, 6, 0.01),
    (D4, 4, SEGMENT + 9, 7, 0.01), (E8, 8, 70_000, 8, 0.01), (A2, 2, 20_000, 9, 1e-4),
    (D4, 4, 9_001, 10, 1e-4), (E8, 8, 2 * SEGMENT + 5, 11, 3e-4)])
def test_corrupted_bodies_meet_the_cpu_outcome(lattice, n, m, seed, scale):
    """Whatever a malicious client sends with a valid tag: the twin refuses
    what the CPU refuses, with the same error, and decodes the rest to the
    same values (a corruption can still be a valid stream); bodies of the
    box model and (scale below the noise) of the point model."""
    params = _params(n, lattice=lattice)
    body = _core.encode(_update(m, scale=scale, seed=seed), key=KEY, params=params, factor=1.0,
                        coder=2, threads=1)
    _assert_corruptions_meet(body, seed, lambda bad: _both(bad, m, params))


def test_the_stream_errors_are_named_as_on_the_cpu():
    """Corruptions aimed at each check: a bad length, a bad state, a
    truncated stream, trailing words."""
    m = 10_000
    params = _params(1)
    body = _core.encode(_update(m), key=KEY, params=params, factor=1.0, coder=2, threads=1)
    parts = _core.body_parts(body, coder=2, lattice=1, m=m, n=1)
    model = parts["model"] // 8
    stream = model + 4  # (after the segment's length)
    seen = set()
    for bad in (body[:-1], body[:stream] + b"\xff" * 8 + body[stream + 8:],
                body[:stream + 40] + body[stream + 44:],
                body[:-4] + bytes(4)):
        cpu, twin = _both(bad, m, params)
        assert twin == cpu
        seen.add(cpu[1] if isinstance(cpu, tuple) else "decoded")
    assert len(seen) >= 2


def test_values_that_overflow_are_refused_as_on_the_cpu():
    """A payload's scale is the sender's choice: one far too large for the
    output type makes the values overflow, and both decoders name the first
    such sub-vector.  The fuzzer's frame (fuzz/fuzz_body.cpp's layout) that
    found the twin writing infinities where the CPU refuses."""
    frame = (Path(__file__).parents[2] / "fuzz" / "regressions" / "z-twin-overflow-1").read_bytes()
    mechanism, lattice, n = frame[1], frame[2], frame[3]
    scale, m = struct.unpack_from("<d", frame, 5)[0], struct.unpack_from("<I", frame, 13)[0]
    key, body = frame[17:49], frame[49:]
    params = _core.Params(mechanism=mechanism, scale=scale, lattice=lattice, n=n)
    outcomes = {}
    for dtype in ("float32", "float64"):
        cpu = _outcome(lambda: _core.decode(body, m=m, key=key, params=params, coder=2,
                                            dtype=dtype, threads=1))
        twin = _outcome(lambda: hooks.decode_by_segments(body, m=m, key=key, params=params,
                                                           dtype=dtype))
        assert twin == cpu
        outcomes[dtype] = cpu
    assert outcomes["float32"][0] == "DecodingError"  # (float64 holds the values)
    assert isinstance(outcomes["float64"], bytes)
