"""Same input, secret, context and nonce give the same bytes, everywhere.

The golden payloads in tests/golden/v10.json pin the format, the ChaCha8 stream
layout, the latent samplers and the coders: a change of platform, compiler or
code that alters one bit fails here.  Regenerate them only on purpose (with a
format version bump): see tests/golden/generate.py.
"""

import importlib.util
import json

import numpy as np
import pytest

import cepam

from helpers.paths import TESTS as HERE

GOLDEN = json.loads((HERE / "golden" / "v10.json").read_text())
_spec = importlib.util.spec_from_file_location("golden_generate", HERE / "golden" / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)


@pytest.mark.parametrize("name", list(generate.CASES))
def test_golden_payloads(name):
    expected = GOLDEN["cases"][name]
    payload = generate.encode_case(name)
    assert payload.hex() == expected["payload"]
    y = generate.decode_case(name, bytes.fromhex(expected["payload"]))
    leaves = y if isinstance(y, dict) else {"": y}
    for key, values in expected["decoded"].items():
        assert [float(v).hex() for v in np.ravel(leaves[key])] == values


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", list(generate.LARGE))
def test_large_golden_payloads_for_every_thread_count(name, threads):
    """Payloads of over 2^16 coordinates (the clip's sum of squares over
    several blocks), over 1 MiB (a tag over several MAC segments) and of
    several body segments (ANS, and Golomb since version 6): the committed
    digests, whatever the thread count."""
    import hashlib

    expected = GOLDEN["large"][name]
    payload = generate.encode_large(name, threads=threads)
    assert len(payload) == expected["bytes"]
    assert hashlib.sha256(payload).hexdigest() == expected["payload_sha256"]
    y = cepam.decode(payload, secret=generate.SECRET, threads=threads)
    assert hashlib.sha256(y.tobytes()).hexdigest() == expected["decoded_sha256"]


def test_golden_input_is_the_committed_one():
    assert [float(v).hex() for v in generate.X] == GOLDEN["x"]
    assert generate.SECRET.hex() == GOLDEN["secret"]


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_same_context_and_nonce_same_bytes(dim):
    rng = np.random.default_rng(1)
    x = rng.normal(scale=0.01, size=10_007).astype(np.float32)
    secret = bytes(range(32))
    kwargs = dict(secret=secret, round=2, client=9, dim=dim, clip=1.0)
    a = cepam.encode(x, cepam.Gaussian(sigma=1e-3), nonce=bytes(range(16)), **kwargs)
    b = cepam.encode(x.copy(), cepam.Gaussian(sigma=1e-3), nonce=bytes(range(16)), **kwargs)
    assert a == b
    np.testing.assert_array_equal(cepam.decode(a, secret=secret), cepam.decode(b, secret=secret))
    # Without a nonce each payload draws its own: other bytes, other noise.
    c = cepam.encode(x, cepam.Gaussian(sigma=1e-3), **kwargs)
    d = cepam.encode(x, cepam.Gaussian(sigma=1e-3), **kwargs)
    assert len({a, c, d}) == 3
    assert len({cepam.decode(p, secret=secret).tobytes() for p in (a, c, d)}) == 3


def test_every_context_field_changes_the_randomness():
    x = np.zeros(1000)
    secret = bytes(range(32))
    mech = cepam.Gaussian(sigma=1.0)
    base = dict(secret=secret, round=1, client=1, message=1, nonce=bytes(16))
    outputs = {cepam.decode(cepam.encode(x, mech, **base), secret=secret).tobytes()}
    changes = (("round", 2), ("client", 2), ("message", 2), ("nonce", bytes(15) + b"\1"))
    for field, value in changes:
        kwargs = dict(base, **{field: value})
        outputs.add(cepam.decode(cepam.encode(x, mech, **kwargs), secret=secret).tobytes())
    other = dict(base, secret=bytes(range(1, 33)))
    outputs.add(cepam.decode(cepam.encode(x, mech, **other), secret=other["secret"]).tobytes())
    assert len(outputs) == 6


def test_results_do_not_depend_on_threads():
    """Encoding from several threads at once gives the single-threaded bytes."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(2)
    xs = [rng.normal(scale=0.01, size=50_000) for _ in range(6)]
    secret = bytes(range(32))

    def job(i):
        return cepam.encode(xs[i], cepam.Gaussian(sigma=1e-3), secret=secret, round=i, client=0,
                            dim=2, nonce=bytes(16))

    serial = [job(i) for i in range(6)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        parallel = list(pool.map(job, range(6)))
    assert serial == parallel


@pytest.mark.parametrize("level", ["portable", "avx2"])
def test_every_simd_level_gives_the_golden_bytes(level):
    """CEPAM_SIMD caps the instruction set chosen at run time; integer ChaCha20
    and FMA-free float kernels make every level produce the same payloads."""
    import os
    import subprocess
    import sys

    script = (
        "import hashlib, importlib.util, json, sys, cepam\n"
        f"spec = importlib.util.spec_from_file_location('g', {str(HERE / 'golden' / 'generate.py')!r})\n"
        "g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)\n"
        "out = {}\n"
        "for name in g.CASES:\n"
        "    out[name] = g.encode_case(name).hex()\n"
        "for name in g.LARGE:\n"
        "    out[name] = hashlib.sha256(g.encode_large(name)).hexdigest()\n"
        "sys.stdout.write('\\nRESULT' + json.dumps(out))\n"
    )
    env = {**os.environ, "CEPAM_SIMD": level}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         check=True)
    got = json.loads(run.stdout.rsplit("RESULT", 1)[1])
    assert got == ({name: case["payload"] for name, case in GOLDEN["cases"].items()}
                   | {name: case["payload_sha256"] for name, case in GOLDEN["large"].items()})


def test_multi_segment_decode_is_the_same_at_every_simd_level_and_thread_count():
    """The decoder interleaves the rANS streams of several segments (four at
    a time with AVX-512, two with AVX2, one with the portable code), and
    leaves a stream to the scalar code where a table is not plain, a slot is
    the escape or a guess misses; with AVX-512 its guess interpolates where
    the tables have many cells.  Heavy-tailed updates of 5 2^17 + 12345
    coordinates (six segments, the last short) at rms/sigma 0.3, 3 and 300,
    and Gaussian ones at 0.5 (few cells) and 100 (many) take all those
    paths; every level and thread count decodes them alike."""
    import hashlib
    import os
    import subprocess
    import sys
    import warnings

    m = 5 * 2**17 + 12345
    rng = np.random.default_rng(7)
    payloads = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cepam.errors.PrivacyWarning)
        for ratio, tails in ((0.3, True), (3.0, True), (300.0, True), (0.5, False), (100.0, False)):
            draw = rng.standard_t(2, size=m) if tails else rng.normal(size=m)
            x = (draw * (ratio * 1e-3)).astype(np.float32)
            payloads.append(cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=bytes(32), round=0,
                                         client=0, lattice="Z", coder="ans", threads=1))

    def digests(threads):
        return [hashlib.sha256(np.asarray(cepam.decode(p, secret=bytes(32), threads=threads))
                               .tobytes()).hexdigest() for p in payloads]

    native = digests(1)
    assert digests(3) == native
    script = (
        "import hashlib, sys, numpy as np, cepam\n"
        "payloads = [bytes.fromhex(h) for h in sys.stdin.read().split()]\n"
        "print(' '.join(hashlib.sha256(np.asarray(cepam.decode(p, secret=bytes(32), threads=2))"
        ".tobytes()).hexdigest() for p in payloads))\n"
    )
    for level in ("portable", "avx2"):
        run = subprocess.run([sys.executable, "-c", script], input=" ".join(p.hex() for p in payloads),
                             env={**os.environ, "CEPAM_SIMD": level}, capture_output=True, text=True,
                             check=True)
        assert run.stdout.split() == native, level


def test_encode_of_four_segments_at_once_is_the_same_at_every_simd_level_and_thread_count():
    """The rANS encoder finishes four segments at a time with AVX-512 where
    every thread has 48 segments or more (two where 8, else one): updates of
    48 2^17 + 4321 coordinates (49 segments, the last short) code to the
    same bytes on 1 thread (groups of four with AVX-512), 2 (pairs) and 3,
    and with the AVX2 and portable code (pairs of scalar chains)."""
    import os
    import subprocess
    import sys

    m = 48 * 2**17 + 4321
    script = (
        "import hashlib, sys, warnings, numpy as np, cepam\n"
        "warnings.simplefilter('ignore')\n"
        f"m = {m}\n"
        "rng = np.random.default_rng(11)\n"
        "inputs = [(rng.standard_t(3, size=m) * 3e-3).astype(np.float32),\n"
        "          (rng.normal(size=m) * 0.1).astype(np.float32)]\n"
        "threads = [int(t) for t in sys.argv[1:]]\n"
        "print(' '.join(hashlib.sha256(cepam.encode(x, cepam.Gaussian(sigma=1e-3), "
        "secret=bytes(32), round=0, client=0, lattice='Z', coder='ans', nonce=bytes(16), "
        "threads=t)).hexdigest() for x in inputs for t in threads))\n"
    )

    def digests(threads, level=None):
        env = dict(os.environ)
        if level is not None:
            env["CEPAM_SIMD"] = level
        run = subprocess.run([sys.executable, "-c", script, *map(str, threads)], env=env,
                             capture_output=True, text=True, check=True)
        return run.stdout.split()

    native = digests([1, 2, 3])
    assert native[0] == native[1] == native[2] and native[3] == native[4] == native[5]
    for level in ("avx2", "portable"):
        assert digests([1], level) == [native[0], native[3]], level
