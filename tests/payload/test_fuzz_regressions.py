"""Every input the fuzzer (fuzz/fuzz_body.cpp) found, kept in fuzz/regressions/,
replayed through the binding: each must raise a cepam error or decode to
finite values, never crash.  The frame layout is the fuzz target's (see its
header comment): u8 target, u8 mechanism, u8 lattice, u8 n, u8 coder, f64
scale, u32 m, 32-byte stream key, then the body.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import cepam
from cepam import _core
from cepam._core import testing as hooks

from helpers.paths import ROOT

FRAME = struct.Struct("<BBBBBdI32s")
REGRESSIONS = sorted((ROOT / "fuzz" / "regressions").iterdir())
MAX_COORDINATES = 1 << 14  # the fuzz target's cap


def replay(frame: bytes) -> None:
    target, mechanism, lattice, n, coder, scale, m, key = FRAME.unpack_from(frame)
    body = frame[FRAME.size:]
    if m > MAX_COORDINATES:
        return

    def params() -> dict:  # built where a target takes them, as the fuzz target does
        return dict(key=key, params=_core.Params(mechanism=mechanism, scale=scale,
                                                 lattice=lattice, n=n))

    target %= 5
    if target in (0, 1):
        y = _core.decode(body, m=m, coder=coder, dtype=("float32", "float64")[target], **params())
        assert np.all(np.isfinite(y))
    elif target == 2:
        _core.decode_symbols(body, m=m, coder=coder, **params())
    elif target == 3:
        _core.body_parts(body, coder=coder, lattice=lattice)
    else:
        N = -(-m // n) if n else 0
        if len(body) < N * (4 + 8 * n):
            return
        H = np.frombuffer(body, "<u4", N)
        M = np.frombuffer(body, "<i8", N * n, offset=4 * N)
        y = hooks.decode_lattice(H, M, m=m, dtype="float64", **params())
        assert np.all(np.isfinite(y))


def test_there_are_regressions():
    assert REGRESSIONS


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_a_fuzzer_finding_is_a_cepam_error_not_a_crash(path):
    try:
        replay(path.read_bytes())
    except cepam.CepamError:
        pass


@pytest.mark.parametrize("path", [p for p in REGRESSIONS if p.name.startswith("decoded-overflow")],
                         ids=lambda p: p.name)
def test_a_decoded_value_that_overflows_is_a_format_error(path):
    """The first finding: a noise scale so large that beta (G m + V)
    overflows the output type decoded to Inf; now a DecodingError (a
    FormatError)."""
    with pytest.raises(cepam.DecodingError, match="overflow"):
        replay(path.read_bytes())
