"""docs/guide/troubleshooting.md quotes errors "as cepam prints them": each
quoted error (those without an ellipsis) is the one its cause raises, word
for word."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import cepam
from helpers.paths import ROOT

SECRET = bytes(range(32))
G = cepam.Gaussian(sigma=1e-3)
X = np.ones(4, np.float32)


def _encode(x=X, mechanism=G, **kw):
    args = dict(secret=SECRET, round=0, client=0, clip=10.0)
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cepam.encode(x, mechanism, **args)


def _twice():
    codec = cepam.Codec(G, secret=SECRET, client=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        codec.encode(X, round=3)
        codec.encode(X, round=3)


def _wrong_round():
    codec = cepam.Codec(G, secret=SECRET, client=0, clip=10.0)
    codec.decode(codec.encode(X, round=0), round=1)


CAUSES = {
    "secret": lambda: _encode(secret=b"abc"),
    "int64": lambda: _encode(np.arange(3)),
    "nan": lambda: _encode(np.array([1.0, np.nan], np.float32)),
    "too large": lambda: _encode(np.array([1e12, 0.0]), cepam.Gaussian(sigma=1e-6), lattice="Z",
                                 clip=None),
    "reuse": _twice,
    "laplace on E8": lambda: _encode(mechanism=cepam.Laplace(b=1e-3), lattice="E8"),
    "wrong secret": lambda: cepam.decode(_encode(), secret=bytes(32)),
    "short": lambda: cepam.decode(_encode()[:40], secret=SECRET),
    "max_coordinates": lambda: cepam.decode(_encode(np.zeros(1000, np.float32)), secret=SECRET,
                                            max_coordinates=10),
    "template": lambda: cepam.decode(_encode(), secret=SECRET, like={"w": X}),
    "round": _wrong_round,
    "dtype": lambda: cepam.decode(_encode(), secret=SECRET, dtype="float16"),
}


def _quoted() -> set[str]:
    text = (ROOT / "docs" / "guide" / "troubleshooting.md").read_text(encoding="utf-8")
    return {m for m in re.findall(r"^\*\*`([A-Za-z]+Error: .*)`\*\*$", text, re.M)
            if "..." not in m}


def test_every_quoted_error_has_a_cause_here():
    assert len(_quoted()) == len(CAUSES)


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_a_quoted_error_is_what_cepam_prints(cause):
    with pytest.raises(cepam.CepamError) as info:
        CAUSES[cause]()
    assert f"{type(info.value).__name__}: {info.value}" in _quoted()
