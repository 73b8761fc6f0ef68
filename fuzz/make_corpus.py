"""Writes the fuzzer's seed corpus: frames (see fuzz/fuzz_body.cpp) holding
real payload bodies from :func:`cepam.encode`.

Usage: ``python fuzz/make_corpus.py DIR`` (frames for fuzz/fuzz_body.cpp), or
``python fuzz/make_corpus.py --payloads DIR`` (the payloads without their
tags, for fuzz/fuzz_payload.py).  Covers the Gaussian, Laplace and
SDQ mechanisms; Z^n for n = 1 .. 8, A2, D4 and E8; the "ans" coder (box
and point models: low and high signal-to-noise ratios) and the "golomb"
coder; tiny and large updates, and the most compressible update (a constant
far below the noise).  Every frame decodes without error (checked here).
"""

from __future__ import annotations

import hashlib
import struct
import sys
import warnings
from pathlib import Path

import numpy as np

import cepam
from cepam.keys import stream_key
from cepam.payload import pack_header, pack_sealed
from cepam.sealing import open_payload

# The seeds cover every lattice and coder, unclipped, at rates where Z would
# be cheaper: what the library warns a user about is on purpose here.
warnings.simplefilter("ignore", cepam.PrivacyWarning)
warnings.simplefilter("ignore", cepam.RateWarning)

SECRET = bytes(range(32))
SIZES = (1, 3, 17, 200, 3000)  # coordinates: tiny to large (the harness caps at 2^14)
SNRS = (0.05, 3.0)  # rms of the update over the noise scale
TARGETS = (0, 2)  # decode to float32, decode the symbols


def frame(target: int, payload: bytes) -> bytes:
    """A native target's input: the decoder's settings, the stream key and
    the body as the decoder sees it (decrypted, past the tag check)."""
    header, sealed = open_payload(payload, SECRET)
    key = stream_key(SECRET, header.context, header.nonce)
    prefix = struct.pack("<BBBBBdI", target, header.mechanism, sealed.lattice, sealed.n,
                         header.coder, header.scale, header.m)
    return prefix + key + sealed.body


def plaintext(payload: bytes) -> bytes:
    """The payload before sealing and tagging: public header, then the sealed
    section in clear (fuzz_payload.py seals and tags what it is given)."""
    header, sealed = open_payload(payload, SECRET)
    return bytes(pack_header(header)) + bytes(pack_sealed(sealed.lattice, sealed.n, sealed.body,
                                                          sealed.padding))


def settings() -> list[tuple[cepam.Mechanism, str, int]]:
    gauss, laplace, sdq = cepam.Gaussian(sigma=0.5), cepam.Laplace(b=0.5), cepam.SDQ(step=0.5)
    out = [(gauss, "Z", n) for n in range(1, 9)]
    out += [(laplace, "Z", n) for n in range(1, 5)]
    out += [(gauss, "A2", 2), (gauss, "D4", 4), (gauss, "E8", 8), (sdq, "Z", 1)]
    return out


def payloads() -> list[bytes]:
    rng = np.random.default_rng(14)
    out, message = [], 0
    for mechanism, lattice, dim in settings():
        for coder in ("ans", "golomb"):
            for m in SIZES:
                for snr in SNRS:
                    x = (rng.standard_normal(m) * snr * 0.5).astype(np.float32)
                    message += 1
                    out.append(cepam.encode(x, mechanism, secret=SECRET, round=1, client=2,
                                            message=message, lattice=lattice, dim=dim,
                                            coder=coder))
            # The most compressible update: a constant far below the noise.
            message += 1
            out.append(cepam.encode(np.full(4096, 1e-300), mechanism, secret=SECRET, round=1,
                                    client=2, message=message, lattice=lattice, dim=dim,
                                    coder=coder))
    return out


def main(argv: list[str]) -> int:
    whole = argv[1:2] == ["--payloads"]
    args = argv[2:] if whole else argv[1:]
    if len(args) != 1:
        print("usage: python fuzz/make_corpus.py [--payloads] DIR", file=sys.stderr)
        return 2
    directory = Path(args[0])
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for payload in payloads():
        cepam.decode(payload, secret=SECRET)  # every seed is a valid payload
        seeds = [plaintext(payload)] if whole else [frame(t, payload) for t in TARGETS]
        for data in seeds:
            (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
            count += 1
    print(f"{count} seeds in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
