"""Peak memory of one encode and one decode, in bytes per coordinate, by thread count.

    python bench/memory.py                          # m = 10^7, 1, 2 and 16 threads
    python bench/memory.py --m 1e7 --threads 1 2 16 --lattices Z E8 auto

Each call runs in a fresh subprocess.  On Linux its peak resident size
(VmHWM, reset through /proc/self/clear_refs just before the call) minus the
resident size before it, the input (encode) or the payload (decode) already
resident; elsewhere ru_maxrss deltas.  Native allocations are included
(tracemalloc cannot see them).  Encode is reported beyond the input; decode
beyond the input (the payload) and beyond input and output (the m values it
returns).  Input: float32 Gaussian of rms/sigma = --ratio (default 10),
sigma = 1e-3, ANS coder (--coder).

A thread count above the cores is fine (the threads take turns): memory
depends on the count, not on the cores.  Next to each measurement the model
of the core's per-thread buffers (model_bytes()), added to the 2-thread
measurement.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

import cepam

__all__ = ["PeakMemory", "measure", "model_bytes", "main"]

SECRET = bytes(range(32))
SIGMA = 1e-3
LATTICES = {"Z": dict(lattice="Z", dim=1), "E8": dict(lattice="E8"), "D4": dict(lattice="D4"),
            "auto": dict(lattice="auto")}


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _trim() -> None:
    """glibc's malloc_trim(0), where there is one (freed heap pages back to the system)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakMemory:
    """Peak resident bytes above the resident size at start (Linux: VmHWM reset
    through clear_refs; elsewhere ru_maxrss, which only sees new peaks)."""

    def __enter__(self) -> "PeakMemory":
        _trim()  # freed heap memory handed back, so that it is not counted as free room
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.linux = _status_kib("VmHWM") is not None
        except OSError:
            self.linux = False
        self.start = _status_kib("VmRSS") * 1024 if self.linux else self._maxrss()
        return self

    def __exit__(self, *exc: object) -> None:
        peak = _status_kib("VmHWM") * 1024 if self.linux else self._maxrss()
        self.bytes = peak - self.start

    @staticmethod
    def _maxrss() -> int:
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def filled(m: int, ratio: float) -> np.ndarray:
    """m float32 Gaussian coordinates of rms ratio * SIGMA, built a chunk at a
    time (no whole-update float64 temporary)."""
    x = np.empty(m, np.float32)
    rng = np.random.default_rng(0)
    for i in range(0, m, 1 << 20):
        x[i:i + (1 << 20)] = rng.standard_normal(min(1 << 20, m - i)) * (ratio * SIGMA)
    return x


def _encode(x: np.ndarray, name: str, coder: str, threads: int, round_: int = 0) -> bytes:
    return cepam.encode(x, cepam.Gaussian(sigma=SIGMA), secret=SECRET, round=round_, client=0,
                        coder=coder, threads=threads, **LATTICES[name])


def _child(args: list) -> None:
    """Measures one encode or decode; prints a JSON line."""
    m, ratio, name, coder, threads, what, path = args
    warm = filled(4096, 1.0)
    if what == "encode":
        x = filled(m, ratio)
        _encode(warm, name, coder, threads)  # code and tables loaded
        with PeakMemory() as peak:
            payload = _encode(x, name, coder, threads)
        with open(path, "wb") as f:
            f.write(payload)
        print(json.dumps({"beyond_input": peak.bytes / m}))
    else:
        with open(path, "rb") as f:
            payload = f.read()
        cepam.decode(_encode(warm, name, coder, threads, round_=1), secret=SECRET,
                     threads=threads)
        with PeakMemory() as peak:
            y = cepam.decode(payload, secret=SECRET, threads=threads)
        print(json.dumps({"beyond_input": peak.bytes / m,
                          "beyond_output": (peak.bytes - y.nbytes) / m}))


def measure(m: int, ratio: float, name: str, coder: str, threads: int) -> dict[str, dict]:
    """{"encode": {...}, "decode": {...}}: bytes per coordinate, each call in a
    fresh subprocess (see the module's docstring)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.bin")
        for what in ("encode", "decode"):
            args = json.dumps([m, ratio, name, coder, threads, what, path])
            res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", args],
                                 capture_output=True, text=True, check=True)
            out[what] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


# The native core's buffers that the thread count multiplies (csrc/payload/
# body.cpp, ans_body.hpp): the ANS body's segments (2^17 coordinates), blocks
# (4096 sub-vectors), the decoder's pieces (4096 coordinates), and the rANS
# encoder's symbols (8 bytes: start and frequency), which it holds for a
# whole segment (rANS codes last to first).
SEGMENT, BLOCK, PIECE, SYMBOL = 1 << 17, 4096, 4096, 8
DIMS = {"Z": 1, "E8": 8, "D4": 4}
# Segments every thread needs for a task to take `width` together
# (ans_body.cpp's encode_group_segments and decode_group_segments): the
# encoder's bound on its groups' memory, the width itself for the decoder.
def encode_group_segments(width: int) -> int:
    return 8 if width <= 2 else 48


def decode_group_segments(width: int) -> int:
    return width


# Segments a task takes together, at most: the encoder's rANS streams four
# with AVX-512 (two a register, two registers), else two; the decoder four
# for Z^n with AVX-512 (the conditional coder's two streams a register, two
# registers), else two.
def encode_width() -> int:
    return 4 if cepam.simd_level() == "avx512" else 2


def decode_width(lattice: str) -> int:
    return 4 if lattice == "Z" and cepam.simd_level() == "avx512" else 2


def group_width(widest: int, needs, segments: int, threads: int) -> int:
    """The segments a task takes together (1: one at a time): `widest`,
    halved down to 2 while the threads have fewer than needs(width) each."""
    def enough(k: int) -> bool:
        return segments >= max(k, needs(k)) * threads

    width = widest
    while width > 2 and not enough(width):
        width //= 2
    return width if enough(width) else 1


def model_bytes(m: int, threads: int, lattice: str) -> dict[str, int]:
    """Bytes of the per-thread buffers of an ANS encode and decode of m
    coordinates on `threads` threads (the model the measurements check):
    encode, per thread, the symbols of a segment (a coordinate and, for the
    lattices whose trial index is coded, a sub-vector: one symbol each; the
    point model's stream, where it starts, not counted) and a block's H, M,
    beta and V (4 + 8 + 8 n + 8 n bytes a sub-vector); decode, per thread, a
    block's H and a piece's beta, V and M.  Each times the segments a task
    takes together (ans_body.cpp's SegmentTasks: group_width).  Whole-payload
    copies (the body, the sealed section) are not per thread and not
    counted."""
    n = DIMS[lattice]
    segments = -(-m // SEGMENT)
    subvectors = min(BLOCK, -(-m // n))
    h = 0 if lattice == "Z" else 1
    encode = (min(m, SEGMENT) * (1 + h / n) * SYMBOL) + subvectors * (12 + 16 * n)
    piece = max(1, PIECE // n)
    decode = subvectors * 4 + min(piece, subvectors) * (8 + 16 * n)
    encode *= group_width(encode_width(), encode_group_segments, segments, threads)
    decode *= group_width(decode_width(lattice), decode_group_segments, segments, threads)
    return {"encode": int(encode * threads), "decode": int(decode * threads)}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--child":
        _child(json.loads(argv[1]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=float, default=1e7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 16])
    ap.add_argument("--lattices", nargs="+", default=["Z", "E8", "auto"], choices=list(LATTICES))
    ap.add_argument("--coder", default="ans", choices=["ans", "golomb"])
    ap.add_argument("--ratio", type=float, default=10.0, help="rms/sigma of the update")
    a = ap.parse_args(argv)
    m = int(a.m)
    print(f"cepam {cepam.__version__}, {os.cpu_count()} CPUs; m = {m} float32, rms/sigma = "
          f"{a.ratio:g}, sigma = {SIGMA}, coder {a.coder}; peak resident bytes per coordinate, "
          f"fresh processes")
    print("'model': the 2-thread measurement plus model_bytes()'s per-thread buffers for the "
          "other threads (the lattice auto chose, for auto)")
    print("| lattice | threads | encode, beyond input | model | decode, beyond input | "
          "decode, beyond input and output | model |")
    print("|---|---|---|---|---|---|---|")
    for name in a.lattices:
        chosen = name if name != "auto" else cepam.inspect(
            _encode(filled(m, a.ratio), name, a.coder, 2), secret=SECRET).lattice
        base = measure(m, a.ratio, name, a.coder, 2) if a.coder == "ans" else None
        for threads in a.threads:
            r = base if threads == 2 and base is not None else measure(m, a.ratio, name, a.coder,
                                                                       threads)
            model = ("-", "-")
            if base is not None:
                extra = {k: model_bytes(m, threads, chosen)[k] - model_bytes(m, 2, chosen)[k]
                         for k in ("encode", "decode")}
                model = (f"{base['encode']['beyond_input'] + extra['encode'] / m:.2f}",
                         f"{base['decode']['beyond_output'] + extra['decode'] / m:.2f}")
            print(f"| {name} | {threads} | {r['encode']['beyond_input']:.2f} | {model[0]} | "
                  f"{r['decode']['beyond_input']:.2f} | {r['decode']['beyond_output']:.2f} | "
                  f"{model[1]} |", flush=True)


if __name__ == "__main__":
    main()
