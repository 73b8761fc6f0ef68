"""Throughput and scaling of the whole Python path, and peak memory, in one run.

    python bench/throughput.py                    # the full tables (a few minutes)
    python bench/throughput.py --m 1000000 --ratios 1 --repeat 3 --memory-m 10000000

Speed: million coordinates per second (best of --repeat runs, runs with 1 and
with all threads interleaved, so that a loaded machine slows both alike) for
Z (n = 1), E8, D4 and auto (the default lattice), encode and decode, ANS
coder (--coder), float32 Gaussian input of rms/sigma = each ratio, sigma = 1e-3.
"all" is the cores this process may use (os.sched_getaffinity), or --threads.
Where other work shares the cores (and a scheduler that shares CPU per
session, as Linux's autogroup does, gives a process its share whatever its
thread count), wall-clock speedups say little; the "split" column is the
speedup the measured split of the work gives with a free core per thread:
CPU time on one thread over the CPU span on all (see span()).

More cores (--serial-m): the serial parts of a call, timed one by one, as a
fraction of its single-thread time, and Amdahl's-law predictions from it for
16 and 64 cores.

Memory: peak resident memory beyond the input, in bytes per coordinate, of
one encode and one decode of --memory-m coordinates on all threads, each in a
fresh subprocess: on Linux the peak (VmHWM, reset through /proc/self/clear_refs
just before the call) minus the resident size before it, the input already
resident; elsewhere ru_maxrss deltas.  Native allocations are included
(tracemalloc cannot see them).  Decode is reported beyond the input (the payload) and beyond input and
output (the m float32 values it returns).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

import cepam

SECRET = bytes(range(32))
SIGMA = 1e-3
LATTICES = {"Z": dict(lattice="Z", dim=1), "E8": dict(lattice="E8"), "D4": dict(lattice="D4"),
            "auto": dict(lattice="auto")}


def update(m: int, ratio: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(m) * (ratio * SIGMA)).astype(np.float32)


def encode(x, name, coder, threads, round_=0):
    return cepam.encode(x, cepam.Gaussian(sigma=SIGMA), secret=SECRET, round=round_, client=0,
                        coder=coder, threads=threads, **LATTICES[name])


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def span(fn, threads: int) -> tuple[float, float]:
    """(CPU seconds of the call, all threads; its CPU span): the span is the
    most CPU time one thread spent, the calling thread (time.thread_time,
    which holds the serial parts) or the average of the others (time.process_time
    counts threads that have exited).  On a machine with a free core per
    thread the call would take about its span: the split of the work, measured
    on a loaded machine."""
    p0, t0 = time.process_time(), time.thread_time()
    fn()
    total, main = time.process_time() - p0, time.thread_time() - t0
    others = (total - main) / (threads - 1) if threads > 1 else 0.0
    return total, max(main, others)


def speed_rows(m, ratios, names, coder, threads, repeat):
    rows = []
    for ratio in ratios:
        x = update(m, ratio)
        for name in names:
            payload = encode(x, name, coder, 1)
            assert encode(x, name, coder, threads) == payload  # same bytes on all threads
            best = {key: float("inf") for key in ("e1", "eN", "d1", "dN", "ec1", "esN",
                                                  "dc1", "dsN")}
            runs = {"e": lambda t: encode(x, name, coder, t),
                    "d": lambda t: cepam.decode(payload, secret=SECRET, threads=t)}
            for _ in range(repeat):
                for k, run in runs.items():
                    best[k + "1"] = min(best[k + "1"], timed(lambda: run(1)))
                    best[k + "N"] = min(best[k + "N"], timed(lambda: run(threads)))
                    best[k + "c1"] = min(best[k + "c1"], span(lambda: run(1), 1)[0])
                    best[k + "sN"] = min(best[k + "sN"], span(lambda: run(threads), threads)[1])
            rate = {k: m / best[k] / 1e6 for k in ("e1", "eN", "d1", "dN")}
            rate["e_split"] = best["ec1"] / best["esN"]
            rate["d_split"] = best["dc1"] / best["dsN"]
            bits = cepam.inspect(payload).bits_per_coordinate
            rows.append((ratio, name, rate, bits))
    return rows


def print_speed(rows, m, coder, threads, repeat):
    print(f"\nSpeed: m = {m} float32 coordinates, Gaussian sigma = {SIGMA}, coder {coder}, "
          f"M coords/s (wall clock), best of {repeat}; 1 thread and {threads} threads.  "
          f"'split': CPU time on 1 thread / CPU span on {threads} (see span()), the speedup "
          f"with a free core per thread")
    print(f"| rms/sigma | lattice | encode 1 | encode {threads} | speedup | split | decode 1 | "
          f"decode {threads} | speedup | split | bits/coord |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for ratio, name, r, bits in rows:
        print(f"| {ratio:g} | {name} | {r['e1']:.1f} | {r['eN']:.1f} | {r['eN'] / r['e1']:.2f}x "
              f"| {r['e_split']:.2f}x | {r['d1']:.1f} | {r['dN']:.1f} | {r['dN'] / r['d1']:.2f}x "
              f"| {r['d_split']:.2f}x | {bits:.3f} |")


# --- Serial parts and what they predict for more cores. ------------------------

SEGMENT = 1 << 17  # coordinates per ANS segment: the unit of parallel work


def best_of(repeat: int, fn) -> float:
    """The least CPU time of the calling thread over `repeat` calls of fn."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def serial_rows(m, ratio, names, coder, repeat):
    """The serial parts of a call, timed one by one, over its time on one
    thread (the serial fraction f).  Encode: the sum of squares for the clip
    (one ordered pass over the input), sealing the payload (ChaCha20 and
    HMAC over its bytes, timed as opening it, the same passes) and the
    per-call cost (Python, keys, header: a call on 8 coordinates); decode:
    opening the payload, the output's precision check (an unordered sum of
    squares) and the per-call cost.  For auto, also its choice on a sample:
    its encode time less that of the lattice it chose, halved (the two
    candidates, about a segment each, run side by side given two threads or
    more).  Left out, as too small to time apart:
    the native core's own serial steps (the source model's shape, chosen on
    a 1024-cell histogram; starting the threads; joining the segments)."""
    from cepam import _core
    from cepam.sealing import open_payload

    rows = []
    x, tiny = update(m, ratio), update(8, ratio)
    for name in names:
        payload, small = encode(x, name, coder, 1), encode(tiny, name, coder, 1)
        one_enc = best_of(repeat, lambda: encode(x, name, coder, 1))
        one_dec = best_of(repeat, lambda: cepam.decode(payload, secret=SECRET, threads=1))
        y = cepam.decode(payload, secret=SECRET, threads=1)
        opening = best_of(repeat, lambda: open_payload(payload, SECRET))
        enc = (best_of(repeat, lambda: _core.sum_of_squares(x)) + opening
               + best_of(repeat, lambda: encode(tiny, name, coder, 1)))
        if name == "auto":
            chosen = cepam.inspect(payload, secret=SECRET).lattice  # "Z" (n = 1) or "E8"
            enc += max(0.0, one_enc - best_of(repeat, lambda: encode(x, chosen, coder, 1))) / 2
        dec = (opening + best_of(repeat, lambda: _core.sum_of_squares(y, fixed_order=False))
               + best_of(repeat, lambda: cepam.decode(small, secret=SECRET, threads=1)))
        rows.append((name, {"encode": enc / one_enc, "decode": dec / one_dec}))
    return rows


def amdahl(f: float, cores: int, m: int) -> float:
    """Speedup on `cores` cores of a call with serial fraction f, whose
    parallel part comes in m / 2^17 segments (at most that many busy cores)."""
    busy = min(cores, -(-m // SEGMENT))
    return 1.0 / (f + (1.0 - f) / busy)


def print_serial(rows, m, ratio, coder, predict_m):
    print(f"\nMore cores (a prediction, not a measurement): the serial parts of a call "
          f"(see serial_rows()) on m = {m} float32 coordinates (rms/sigma = {ratio:g}), coder "
          f"{coder}, as a fraction f of its time on one thread, and Amdahl's law with f for "
          f"m = {predict_m:.0e} (memory bandwidth permitting) on 16 and 64 cores")
    print("| lattice | encode f | encode, 16 cores | encode, 64 cores | decode f | "
          "decode, 16 cores | decode, 64 cores |")
    print("|---|---|---|---|---|---|---|")
    for name, out in rows:
        e, d = out["encode"], out["decode"]
        print(f"| {name} | {100 * e:.1f}% | {amdahl(e, 16, predict_m):.1f}x | "
              f"{amdahl(e, 64, predict_m):.1f}x | {100 * d:.1f}% | {amdahl(d, 16, predict_m):.1f}x "
              f"| {amdahl(d, 64, predict_m):.1f}x |")


# --- Memory: one call in a fresh subprocess. ----------------------------------

def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PeakMemory:
    """Peak resident bytes above the resident size at start (Linux: VmHWM reset
    through clear_refs; elsewhere ru_maxrss, which only sees new peaks)."""

    def __enter__(self) -> "PeakMemory":
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.linux = _status_kib("VmHWM") is not None
        except OSError:
            self.linux = False
        self.start = _status_kib("VmRSS") * 1024 if self.linux else self._maxrss()
        return self

    def __exit__(self, *exc) -> None:
        peak = _status_kib("VmHWM") * 1024 if self.linux else self._maxrss()
        self.bytes = peak - self.start

    @staticmethod
    def _maxrss() -> int:
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _filled(m: int, ratio: float) -> np.ndarray:
    """update(m, ratio) built a chunk at a time (no whole-update float64 temporary)."""
    x = np.empty(m, np.float32)
    rng = np.random.default_rng(0)
    for i in range(0, m, 1 << 20):
        x[i:i + (1 << 20)] = rng.standard_normal(min(1 << 20, m - i)) * (ratio * SIGMA)
    return x


def _child(args) -> None:
    """Measures one encode or decode; prints a JSON line."""
    m, ratio, name, coder, threads, what, path = args
    if what == "encode":
        x = _filled(m, ratio)
        encode(update(4096, 1.0), name, coder, threads)  # code and tables loaded
        with PeakMemory() as peak:
            payload = encode(x, name, coder, threads)
        with open(path, "wb") as f:
            f.write(payload)
        print(json.dumps({"beyond_input": peak.bytes / m}))
    else:
        with open(path, "rb") as f:
            payload = f.read()
        cepam.decode(encode(update(4096, 1.0), name, coder, threads, round_=1), secret=SECRET,
                     threads=threads)
        with PeakMemory() as peak:
            y = cepam.decode(payload, secret=SECRET, threads=threads)
        print(json.dumps({"beyond_input": peak.bytes / m,
                          "beyond_output": (peak.bytes - y.nbytes) / m}))


def memory_rows(m, ratio, names, coder, threads):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(tmp, f"{name}.bin")
            out = {}
            for what in ("encode", "decode"):
                args = json.dumps([m, ratio, name, coder, threads, what, path])
                res = subprocess.run([sys.executable, __file__, "--child", args],
                                     capture_output=True, text=True, check=True)
                out[what] = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append((name, out))
    return rows


def print_memory(rows, m, ratio, coder, threads):
    print(f"\nPeak memory: m = {m} float32 coordinates (rms/sigma = {ratio:g}), coder {coder}, "
          f"{threads} threads, bytes per coordinate (peak resident size, fresh processes)")
    print("| lattice | encode, beyond the input | decode, beyond the input | "
          "decode, beyond input and output |")
    print("|---|---|---|---|")
    for name, out in rows:
        print(f"| {name} | {out['encode']['beyond_input']:.2f} | "
              f"{out['decode']['beyond_input']:.2f} | {out['decode']['beyond_output']:.2f} |")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1_000_000)
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.5, 1.0, 10.0, 100.0])
    ap.add_argument("--lattices", nargs="+", default=list(LATTICES), choices=list(LATTICES))
    ap.add_argument("--coder", default="ans", choices=["ans", "golomb"])
    ap.add_argument("--threads", type=int, default=None,
                    help="the 'all' thread count (default: the cores this process may use)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-m", type=int, default=10_000_000,
                    help="coordinates for the memory table (0: skip it)")
    ap.add_argument("--memory-ratio", type=float, default=100.0,
                    help="rms/sigma of the memory table's update (default: the longest payloads)")
    ap.add_argument("--serial-m", type=int, default=4_000_000,
                    help="coordinates for the serial-parts table (0: skip it)")

    a = ap.parse_args()
    threads = a.threads or cepam.threads.available_cores()
    print(f"cepam {cepam.__version__}, {os.cpu_count()} CPUs, {threads} threads for 'all'; "
          f"machine: {os.uname().machine}, {_cpu_name()}")
    rows = speed_rows(a.m, a.ratios, a.lattices, a.coder, threads, a.repeat)
    print_speed(rows, a.m, a.coder, threads, a.repeat)
    if a.serial_m > 0:
        rows = serial_rows(a.serial_m, 1.0, a.lattices, a.coder, a.repeat)
        print_serial(rows, a.serial_m, 1.0, a.coder, 10 ** 8)
    if a.memory_m > 0:
        rows = memory_rows(a.memory_m, a.memory_ratio, a.lattices, a.coder, threads)
        print_memory(rows, a.memory_m, a.memory_ratio, a.coder, threads)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
