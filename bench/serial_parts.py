"""The serial parts of one encode and one decode call that grow with m, timed
one by one, and each as a fraction of a single-thread call.

    python bench/serial_parts.py                       # m = 10^8, Z and E8
    python bench/serial_parts.py --m 10000000 --lattices Z --repeat 3

Input: m float32 coordinates, Gaussian sigma = 1e-3, update rms / sigma =
--ratio (10), ANS coder, no clip (the sum of squares runs all the same).
Every time is CPU time (time.process_time: all of the process's threads),
the least of --repeat runs, so that a loaded machine inflates it little;
"wall N" is the wall clock on --threads threads (default: every core), and
"caller" the CPU time of the calling thread alone in a call on --span-threads
threads (8): the serial work plus the calling thread's share of the parallel
tasks (the core's loops hand tasks to the caller too, and so does the
MAC's: its segments run on the caller and pooled Python threads), an upper
bound of the serial part that more cores cannot shorten.

The parts (payload format version 5, this checkout; version 4 where the
installed cepam is older, to measure a baseline with the same script):

- sum of squares: the clip's norm, `_core.sum_of_squares` of the input;
- keystream: the sealing ChaCha20 XOR over the sealed section;
- MAC: the tag over header and ciphertext (version 5: per-segment HMACs
  combined; version 4: one HMAC);
- assembly: the rest of sealing, `cepam.sealing.seal` less keystream and MAC
  (copies of the body and the payload into place);
- opening: `cepam.sealing.open_payload` less MAC and keystream (the copies
  of a decode);
- precision check: the decoder's unordered sum of squares of its output.

Not timed here: the native body's coding and its writing, all on the
call's threads (each segment copied into place by one thread,
payload/coded_body.hpp: `cepam.encode` writes and encrypts them straight
into the sealed payload, `_core.encode` into the bytes object it returns;
until then, two whole-body copies on the calling thread, about 21 ms each
at 10^8, docs/guide/performance.md).  "assembly" here still seals a bytes
body, as `cepam.encode` did before: an upper bound of the copies it makes.

Python-heap bytes allocated at the peak of `seal` and of `open_payload`
(tracemalloc, which sees bytes objects and numpy arrays, not the native
core's own buffers) count the payload-sized copies: the number printed is
that peak over the payload's length.

`serial_parts()` returns the measurements as a dict, for bench/throughput.py.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings
from typing import Any, Callable

import numpy as np

import cepam
from cepam import _core
from cepam import payload as payload_format
from cepam.keys import TAG_BYTES, mac_key, payload_tag, seal_key
from cepam.sealing import open_payload, seal
from cepam.threads import available_cores

__all__ = ["serial_parts", "caller_time", "main"]

SECRET = bytes(range(32))
SIGMA = 1e-3
LATTICES = {"Z": dict(lattice="Z", dim=1), "E8": dict(lattice="E8"), "D4": dict(lattice="D4")}
VERSION = payload_format.VERSION


def _update(m: int, ratio: float) -> np.ndarray:
    """m float32 Gaussian coordinates of rms ratio * SIGMA (no float64 temporary)."""
    x = np.random.default_rng(0).standard_normal(m, dtype=np.float32)
    x *= np.float32(ratio * SIGMA)
    return x


def _best(repeat: int, fn: Callable[[], Any], clock: Callable[[], float]) -> float:
    """The least time by `clock` of `repeat` calls of fn, seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def _cpu(repeat: int, fn: Callable[[], Any]) -> float:
    """CPU time, all of the process's threads."""
    return _best(repeat, fn, time.process_time)


def _wall(repeat: int, fn: Callable[[], Any]) -> float:
    return _best(repeat, fn, time.perf_counter)


def caller_time(repeat: int, fn: Callable[[], Any]) -> float:
    """CPU time of the calling thread alone."""
    return _best(repeat, fn, time.thread_time)


def _peak_python_bytes(fn: Callable[[], Any]) -> int:
    """Peak Python-heap bytes allocated while fn runs (tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _threaded(fn: Callable[..., Any], threads: int) -> Callable[..., Any]:
    """fn with threads= where this version takes it (version 5), else fn."""
    return (lambda *a, **k: fn(*a, threads=threads, **k)) if VERSION >= 5 else fn


def _sealer(payload: bytes, threads: int) -> Callable[[], bytes]:
    """A call of cepam.sealing.seal that rebuilds `payload` from its parts."""
    header, sealed = open_payload(payload, SECRET)
    if VERSION >= 5:
        head = payload_format.sealed_head(sealed.lattice, sealed.n, sealed.padding,
                                          digest=sealed.digest)
        return lambda: seal(header, head, body=sealed.body, padding=sealed.padding,
                            secret=SECRET, threads=threads)
    return lambda: seal(header, payload_format.pack_sealed(sealed.lattice, sealed.n, sealed.body,
                                                           sealed.padding, digest=sealed.digest),
                        secret=SECRET)


def serial_parts(m: int, lattice: str, *, ratio: float = 10.0, threads: int | None = None,
                 span_threads: int = 8, repeat: int = 3,
                 x: np.ndarray | None = None) -> dict[str, float]:
    """The serial parts of an encode and a decode of m float32 coordinates
    (see the module doc): CPU seconds on one thread ("..._cpu"), wall seconds
    on `threads` threads ("..._wall"), the single-thread calls' CPU seconds
    ("encode_cpu", "decode_cpu"), the calling thread's CPU seconds on
    `span_threads` threads ("..._caller"), the payload's bytes and the
    Python-heap peaks of seal and open over them ("seal_copies",
    "open_copies")."""
    threads = threads or available_cores()
    x = _update(m, ratio) if x is None else x
    mech = cepam.Gaussian(sigma=SIGMA)

    def encode(t: int) -> bytes:
        return cepam.encode(x, mech, secret=SECRET, round=0, client=0, coder="ans",
                            threads=t, **LATTICES[lattice])

    payload = encode(1)
    header, offset = payload_format.parse_header(payload)
    data = memoryview(payload)[:-TAG_BYTES]
    sealed_bytes = bytearray(data[offset:])
    key, mac = seal_key(SECRET, header.context, header.nonce), mac_key(SECRET)
    y = cepam.decode(payload, secret=SECRET, threads=1)
    xor = _threaded(_core.seal_xor, 1)
    xor_n = _threaded(_core.seal_xor, threads)
    tag = _threaded(payload_tag, 1)
    tag_n = _threaded(payload_tag, threads)
    squares = _threaded(_core.sum_of_squares, 1)
    squares_n = _threaded(_core.sum_of_squares, threads)
    opener = _threaded(open_payload, 1)
    sealer = _sealer(payload, 1)
    assert sealer() == payload
    spanned = {"sumsq": lambda: _threaded(_core.sum_of_squares, span_threads)(x),
               "seal": _sealer(payload, span_threads),
               "open": lambda: _threaded(open_payload, span_threads)(payload, SECRET),
               "precision": lambda: _threaded(_core.sum_of_squares, span_threads)(
                   y, fixed_order=False)}
    out: dict[str, float] = {"m": m, "bytes": len(payload), "threads": threads,
                             "version": VERSION}
    out["encode_cpu"] = _cpu(repeat, lambda: encode(1))
    out["decode_cpu"] = _cpu(repeat, lambda: cepam.decode(payload, secret=SECRET, threads=1))
    out["sumsq_cpu"] = _cpu(repeat, lambda: squares(x))
    out["sumsq_wall"] = _wall(repeat, lambda: squares_n(x))
    out["keystream_cpu"] = _cpu(repeat, lambda: xor(sealed_bytes, key=key))
    out["keystream_wall"] = _wall(repeat, lambda: xor_n(sealed_bytes, key=key))
    out["mac_cpu"] = _cpu(repeat, lambda: tag(mac, data))
    out["mac_wall"] = _wall(repeat, lambda: tag_n(mac, data))
    out["seal_cpu"] = _cpu(repeat, sealer)
    out["assembly_cpu"] = max(0.0, out["seal_cpu"] - out["keystream_cpu"] - out["mac_cpu"])
    out["open_cpu"] = _cpu(repeat, lambda: opener(payload, SECRET))
    out["opening_cpu"] = max(0.0, out["open_cpu"] - out["keystream_cpu"] - out["mac_cpu"])
    out["precision_cpu"] = _cpu(repeat, lambda: squares(y, fixed_order=False))
    for key, fn in spanned.items():
        out[f"{key}_caller"] = caller_time(repeat, fn)
    out["span_threads"] = span_threads
    out["seal_copies"] = _peak_python_bytes(sealer) / len(payload)
    out["open_copies"] = _peak_python_bytes(lambda: opener(payload, SECRET)) / len(payload)
    return out


ROWS = [("sum of squares (encode)", "sumsq", "encode"),
        ("keystream XOR (encode; decode alike)", "keystream", "encode"),
        ("MAC (encode; decode alike)", "mac", "encode"),
        ("assembly copies (encode)", "assembly", "encode"),
        ("opening copies (decode)", "opening", "decode"),
        ("precision check (decode)", "precision", "decode")]


def print_parts(lattice: str, out: dict[str, float]) -> None:
    print(f"\nLattice {lattice}, m = {out['m']:.0e}, payload format version {out['version']}, "
          f"payload {out['bytes'] / 1e6:.1f} MB; single-thread call, CPU seconds: encode "
          f"{out['encode_cpu']:.2f}, decode {out['decode_cpu']:.2f}")
    print(f"| part | CPU s, 1 thread | share of the 1-thread call | wall s, {out['threads']} "
          f"threads |")
    print("|---|---|---|---|")
    for label, key, call in ROWS:
        wall = out.get(f"{key}_wall")
        print(f"| {label} | {out[f'{key}_cpu']:.4f} | "
              f"{100 * out[f'{key}_cpu'] / out[f'{call}_cpu']:.2f}% | "
              f"{'' if wall is None else f'{wall:.4f}'} |")
    encode_caller = out["sumsq_caller"] + out["seal_caller"]
    decode_caller = out["open_caller"] + out["precision_caller"]
    print(f"Calling thread's CPU on {out['span_threads']} threads (an upper bound of the serial "
          f"part): encode (sum of squares + seal) {encode_caller:.4f} s = "
          f"{100 * encode_caller / out['encode_cpu']:.2f}% of the 1-thread call; decode (open + "
          f"precision check) {decode_caller:.4f} s = "
          f"{100 * decode_caller / out['decode_cpu']:.2f}%")
    print(f"Python-heap peak over the payload's length: seal {out['seal_copies']:.2f}, "
          f"open {out['open_copies']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=10**8)
    parser.add_argument("--ratio", type=float, default=10.0)
    parser.add_argument("--lattices", nargs="+", default=["Z", "E8"], choices=list(LATTICES))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--span-threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore", cepam.PrivacyWarning)  # no clip: a benchmark's input
    x = _update(args.m, args.ratio)
    for lattice in args.lattices:
        print_parts(lattice, serial_parts(args.m, lattice, ratio=args.ratio,
                                          threads=args.threads, span_threads=args.span_threads,
                                          repeat=args.repeat, x=x))


if __name__ == "__main__":
    main()
