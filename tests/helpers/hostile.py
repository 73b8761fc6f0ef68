"""The harness of the hostile-payload tests (tests/payload/test_hostile*.py):
the valid payloads they corrupt, and the outcome of decoding one.

On every input the decoder must either decode to an update with the
structure its header declares, or raise ``cepam.FormatError``
(``AuthenticationError`` when the tag is wrong): never another exception, a
crash, a hang, or an allocation out of proportion to the payload's length.
``outcome`` says which; ``decode_in_child`` decodes where a crash cannot take
the test run down; ``peak_allocation`` measures what a block allocates.

The forger seals with an independent ChaCha20 (``cryptography``): a test
module that imports this one skips without it, before it forges anything.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import cepam

from helpers.forge import ANS_BLOCK, CODERS, NONCE, SECRET, RawPayload

__all__ = [
    "BASES", "BASE_NAMES", "LARGE_ANS", "MB", "assert_declared_structure", "collect_failures",
    "decode_in_child", "outcome", "peak_allocation", "targeted_payload",
]

pytest.importorskip("cryptography.hazmat.primitives.ciphers",
                    reason="the hostile-payload forger needs cryptography")

MB = 1 << 20


def _leaves(result, structure):
    entries = structure.entries
    if structure.container == 0:
        return [result]
    if structure.container == 3:
        assert isinstance(result, dict)
        assert list(result) == [e.name for e in entries]
        return list(result.values())
    assert type(result) is (list if structure.container == 1 else tuple)
    assert len(result) == len(entries)
    return list(result)


def assert_declared_structure(result, payload: bytes) -> None:
    """result has the container, names, shapes and dtypes the header declares."""
    info = cepam.inspect(payload)
    for leaf, e in zip(_leaves(result, info.structure), info.structure.entries):
        if not isinstance(leaf, np.ndarray):  # a torch tensor (output="auto", torch kind)
            assert e.kind == 1 and type(leaf).__module__.startswith("torch")
            want = "float64" if e.dtype == "float64" else "float32"  # decode's dtype="auto"
            assert tuple(leaf.shape) == e.shape and str(leaf.dtype) == f"torch.{want}"
            continue
        assert leaf.shape == e.shape
        want = "float64" if e.dtype == "float64" else "float32"  # float16, bfloat16 widened
        assert leaf.dtype == np.dtype(want)


@contextlib.contextmanager
def peak_allocation():
    """Traces Python/numpy allocations in the block; afterwards ``.peak`` holds the
    peak number of bytes allocated in it (``with peak_allocation() as traced: ...``)."""
    traced = SimpleNamespace(peak=None)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        yield traced
        traced.peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def outcome(payload: bytes, *, secret: bytes = SECRET, output: str = "numpy",
            max_coordinates: int = 1 << 28) -> str:
    """'ok' (decoded, with the declared structure) or 'format' (FormatError).

    Any other exception propagates.  output='numpy' by default so that a header
    whose entries claim to be torch tensors decodes without torch.
    """
    with warnings.catch_warnings():
        # A hostile body may hold values that overflow float16: a warning, not an error.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = cepam.decode(payload, secret=secret, output=output,
                                  max_coordinates=max_coordinates)
        except cepam.FormatError:
            return "format"
    assert_declared_structure(result, payload)
    return "ok"


def collect_failures(payloads) -> list[str]:
    """Decodes each (label, payload); returns a description of each bad outcome."""
    failures = []
    for label, payload in payloads:
        try:
            outcome(payload)
        except Exception as exc:  # noqa: BLE001 - anything else is the bug we look for
            failures.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
    return failures


_CHILD = r"""
import pickle, sys, warnings
import cepam
warnings.simplefilter("ignore", RuntimeWarning)
with open(sys.argv[1], "rb") as f:
    secret, cases = pickle.load(f)
for label, payload in cases:
    print("start", label, flush=True)
    try:
        cepam.decode(payload, secret=secret, output="numpy")
        print("done ok", flush=True)
    except cepam.FormatError:
        print("done format", flush=True)
    except Exception as exc:
        print("done other", type(exc).__name__, str(exc)[:200].replace("\n", " "), flush=True)
"""


def decode_in_child(cases, *, max_crashes: int = 4) -> dict[str, str]:
    """Decodes each (label, payload) in a child process, so that a crash of the native
    decoder fails one test instead of killing the test run.  Returns label -> 'ok',
    'format', 'other ...', or 'crashed (...)' for a case the child died on (a new child
    then goes on with the next case, up to max_crashes times)."""
    cases = list(cases)
    results: dict[str, str] = {}
    for _ in range(max_crashes + 1):
        todo = [c for c in cases if c[0] not in results]
        if not todo:
            break
        with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
            pickle.dump((SECRET, todo), f)
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, f.name], capture_output=True,
                                  text=True)
        finally:
            os.unlink(f.name)
        current = None
        for line in proc.stdout.splitlines():
            if line.startswith("start "):
                current = line[len("start "):]
            elif line.startswith("done ") and current is not None:
                results[current] = line[len("done "):]
                current = None
        if proc.returncode == 0:
            break
        results[current or todo[0][0]] = f"crashed (exit status {proc.returncode})"
    return results


# ---------------------------------------------------------------------------
# Small valid payloads to corrupt (a few dozen coordinates each), for both coders.
# ---------------------------------------------------------------------------


def _make_bases() -> dict[str, bytes]:
    out = {}
    for coder in CODERS:
        rng = np.random.default_rng(20240611)
        x = rng.normal(size=24).astype(np.float32)
        g, lap = cepam.Gaussian(sigma=0.1), cepam.Laplace(b=0.1)

        def enc(value, mech, **kw):
            return cepam.encode(value, mech, secret=SECRET, round=3, client=11, coder=coder,
                                nonce=NONCE, **kw)  # (fixed bytes to edit)

        out.update({
            f"{coder}-gauss-n1": enc(x, g, dim=1),
            f"{coder}-gauss-n2": enc(x, g, dim=2),
            f"{coder}-gauss-n3-f64-padded": enc(rng.normal(size=25), g, dim=3),  # padded
            f"{coder}-laplace-n1": enc(x, lap, dim=1),
            f"{coder}-laplace-n2": enc(x, lap, dim=2),
            f"{coder}-laplace-n4-clip": enc(x, lap, dim=4, clip=2.0),
            f"{coder}-dict-n2": enc({"layer.weight": x[:12].reshape(3, 4),
                                     "layer.bias": x[12:16].astype(np.float16),
                                     "é": rng.normal(size=(2, 2, 2))}, g, dim=2),
            f"{coder}-tuple-laplace-n3": enc((x[:5], x[5:].astype(np.float64)), lap, dim=3),
            f"{coder}-sdq-n1": enc(x, cepam.SDQ(step=0.05), dim=1),
            # Enough coordinates for the ANS stream to hold words after its states.
            f"{coder}-gauss-n2-m300": enc(rng.normal(scale=0.3, size=300), g, dim=2),
            # A2, D4, E8: with the ANS coder, the point model at low SNR (A2, E8;
            # the E8 one with an outlier, which takes the escape to the box model),
            # the box model at high SNR (D4).
            f"{coder}-a2-low": enc(0.01 * rng.normal(size=400), g, lattice="A2"),
            f"{coder}-e8-escapes": enc(np.where(np.arange(800) % 800 == 3, 3.0,
                                                0.001 * rng.normal(size=800)), g, lattice="E8"),
            f"{coder}-d4-high": enc(10 * x, g, lattice="D4"),
        })
    return out


BASES = _make_bases()
BASE_NAMES = sorted(BASES)


def _make_large_ans() -> dict[str, bytes]:
    """ANS payloads over several 4096-sub-vector blocks (for sampled corruptions)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=2 * ANS_BLOCK + 5)
    return {
        "gauss-n1-3-blocks": cepam.encode(x, cepam.Gaussian(sigma=0.2), secret=SECRET,
                                          round=1, client=2, dim=1, nonce=NONCE),
        "laplace-n2-2-blocks": cepam.encode(x.astype(np.float32), cepam.Laplace(b=0.2),
                                            secret=SECRET, round=1, client=3, dim=2,
                                            nonce=NONCE),
    }


LARGE_ANS = _make_large_ans()


def targeted_payload(edit, base: str) -> bytes:
    """BASES[base] parsed, edited (RawPayload -> RawPayload), sealed and tagged again."""
    return edit(RawPayload.parse(BASES[base])).tagged()
