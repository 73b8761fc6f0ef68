"""atheris target over the Python layer of the decoder: the header and
structure parser (cepam.payload), the checks of cepam.decode, unflatten and
cepam.inspect, with the native body decoder below them, on payloads a
malicious client holding the secret can send (the target appends the valid
tag to whatever bytes it is given).

    python fuzz/fuzz_payload.py [libFuzzer flags] CORPUS_DIR...

(fuzz/run_python SECONDS runs it with seeds from fuzz/make_corpus.py.)  Any
exception other than a cepam error is a finding.
"""

from __future__ import annotations

import sys

import atheris

import cepam
from cepam.keys import mac_key, payload_tag

# (instrument_imports misses cepam's editable install, whose finder is not
# the standard one; instrument_all covers every loaded Python function.)
atheris.instrument_all()

SECRET = bytes(range(32))  # the secret fuzz/make_corpus.py encodes with
MAC = mac_key(SECRET)
MAX_COORDINATES = 1 << 14


def one_input(data: bytes) -> None:
    payload = data + payload_tag(MAC, data)
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
