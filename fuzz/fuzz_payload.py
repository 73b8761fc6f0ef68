"""atheris target over the Python layer of the decoder: the header and
structure parser (cepam.payload), the checks of cepam.decode, unflatten and
cepam.inspect, with the native body decoder below them, on payloads a
malicious client holding the secret can send: the target reads what it is
given as a public header followed by the sealed section in clear, seals
that section and appends the valid tag (bytes that do not parse as a header
are tagged as they are).

    python fuzz/fuzz_payload.py [libFuzzer flags] CORPUS_DIR...

(fuzz/run_python SECONDS runs it with seeds from fuzz/make_corpus.py.)  Any
exception other than a cepam error is a finding.
"""

from __future__ import annotations

import sys

import atheris

import cepam
from cepam.keys import TAG_BYTES, mac_key, payload_tag
from cepam.payload import parse_header
from cepam.sealing import seal

# (instrument_imports misses cepam's editable install, whose finder is not
# the standard one; instrument_all covers every loaded Python function.)
atheris.instrument_all()

SECRET = bytes(range(32))  # the secret fuzz/make_corpus.py encodes with
MAC = mac_key(SECRET)
MAX_COORDINATES = 1 << 14


def sealed(data: bytes) -> bytes:
    """data (header, then the sealed section in clear) as a client sends it."""
    try:
        header, offset = parse_header(data + bytes(TAG_BYTES))
    except cepam.CepamError:
        return data + payload_tag(MAC, data)
    return seal(header, bytearray(data[offset:]), secret=SECRET)


def one_input(data: bytes) -> None:
    payload = sealed(data)
    try:
        cepam.inspect(payload)
    except cepam.CepamError:
        pass
    try:
        cepam.decode(payload, secret=SECRET, output="numpy", max_coordinates=MAX_COORDINATES)
    except cepam.CepamError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
