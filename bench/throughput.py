"""Throughput and scaling of the whole Python path, and its serial parts, in one run.

    python bench/throughput.py                       # m = 4 * 10^6 (about a minute here)
    python bench/throughput.py --m 1e8 --repeat 1    # the issue's measure
    python bench/throughput.py --m 1e7 --threads 1 2 16

Speed: million coordinates per second (wall clock, best of --repeat runs,
the thread counts interleaved, so that a loaded machine slows them alike)
for Z (n = 1), E8 and auto (--lattices), encode and decode, ANS coder
(--coder), float32 Gaussian input of rms/sigma = --ratio (default 10),
sigma = 1e-3, on 1, 2 and all threads ("all": the cores this process may
use, os.sched_getaffinity; or --threads).  The payload's bytes are checked
to be the same for every thread count.  Next to each speedup, Amdahl's law's
prediction from the serial fraction f measured in the same run.  Where other
work shares the cores (a scheduler that shares CPU per session, as Linux's
autogroup does, gives a process its share whatever its thread count),
wall-clock speedups say little; the "split" column is the speedup the
measured split of the work gives with a free core per thread: CPU time on
one thread over the CPU span on all (see span()).

Serial parts (serial_parts()): each part of a call that more cores cannot
shorten, as the calling thread's CPU time at the same m: the parts format
version 5 runs in parallel (the clip's sum of squares, sealing, opening, the
precision check) timed in a call on 8 threads (bench/serial_parts.py; the
caller's share of the parallel work included, an upper bound), the rest
timed alone; their sum as a fraction f of the call's single-thread time.

Where the CPU time goes on all threads against one (a parallel part that
scales worse than its split predicts): user and system CPU seconds and
minor page faults of one call on each thread count (resource.getrusage),
and whether the CPUs are cores or SMT siblings (Linux's CPU topology: on
16 CPUs that are 8 cores with two threads each, each thread runs slower
when its sibling works, and the user time grows with the thread count; page
faults and unmapping show as system time).

Peak memory by thread count: bench/memory.py.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time
import warnings
from pathlib import Path

import numpy as np

import cepam
from serial_parts import caller_time, serial_parts as parallel_parts  # bench/ is on sys.path

SECRET = bytes(range(32))
SIGMA = 1e-3
RATIO = 10.0
LATTICES = {"Z": dict(lattice="Z", dim=1), "E8": dict(lattice="E8"), "D4": dict(lattice="D4"),
            "auto": dict(lattice="auto")}


def update(m: int, ratio: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(m) * (ratio * SIGMA)).astype(np.float32)


def encode(x, name, coder, threads, round_=0):
    """The payload of ``x`` (a fixed nonce: encode draws a fresh one a call,
    and speed_row compares payloads across thread counts)."""
    return cepam.encode(x, cepam.Gaussian(sigma=SIGMA), secret=SECRET, round=round_, client=0,
                        coder=coder, threads=threads, nonce=bytes(16), **LATTICES[name])


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


def usage(fn) -> tuple[float, float, int]:
    """(user CPU seconds, system CPU seconds, minor page faults) of the
    process over one call of fn: all its threads."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    fn()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt


def cpu_topology() -> str:
    """The CPUs this process may use, as physical cores and hardware
    threads (Linux's /sys topology; "unknown" elsewhere)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topology.joinpath("physical_package_id").read_text().strip(),
                       topology.joinpath("core_id").read_text().strip()))
        except OSError:
            return f"{len(cpus)} CPUs, topology unknown"
    per_core = len(cpus) / len(cores) if cores else 0
    return (f"{len(cpus)} CPUs on {len(cores)} physical cores "
            f"({per_core:g} hardware threads a core{': SMT' if per_core > 1 else ''})")


# --- Serial parts and what they predict. -------------------------------------

SEGMENT = 1 << 17  # coordinates per ANS segment: the unit of parallel work


def serial_parts(x: np.ndarray, payload: bytes, name: str, coder: str,
                 repeat: int) -> dict[str, dict[str, float]]:
    """The serial parts of an encode of x and a decode of its payload, in
    CPU seconds of the calling thread (best of `repeat`).

    Payload format version 5 runs the clip's sum of squares, the sealing
    keystream, the MAC's segments, the payload's assembly and the decoder's
    precision check in parallel: their serial part is timed as the calling
    thread's CPU time in a call on 8 threads (bench/serial_parts.py: the
    serial work plus the caller's share of the parallel tasks, an upper
    bound, so f and the speedups predicted from it are conservative).  Then
    the range check (|x| bound, a pass only where the clipped norm is too
    coarse), the per-call cost (an encode and a decode of 8 coordinates)
    and, for auto, the statistics it decides on (a 4,096-coordinate sample;
    it encodes once).  Left out, as too small to time apart: the native core's
    own serial steps (the source model's shape, chosen on a 1024-cell
    histogram; starting the threads; joining the segments)."""
    from cepam import _core
    from cepam._finite import check_encodable_range
    from cepam.auto import _shape
    from cepam.flatten import flatten

    spans = parallel_parts(x.size, "E8" if name == "auto" else name, x=x, repeat=repeat,
                           span_threads=8)
    flat, structure = flatten(x)
    tiny = update(8, 1.0)
    small = encode(tiny, name, coder, 1)
    mechanism = cepam.Gaussian(sigma=SIGMA)
    norm = math.sqrt(_core.sum_of_squares(x, threads=8))
    enc = {
        "sum of squares": spans["sumsq_caller"],
        "sealing (keystream, MAC, assembly)": spans["seal_caller"],
        "range check": caller_time(repeat, lambda: check_encodable_range(
            flat, structure, norm=norm, factor=1.0, mechanism=mechanism)),
        "per call": caller_time(repeat, lambda: encode(tiny, name, coder, 1)),
    }
    if name == "auto":
        rms = norm / math.sqrt(x.size) / SIGMA
        enc["auto's statistics"] = caller_time(
            repeat, lambda: _shape(None, lambda: flat, x.size, rms, 1.0, SIGMA))
    dec = {
        "opening (MAC, keystream, copies)": spans["open_caller"],
        "output check": spans["precision_caller"],
        "per call": caller_time(repeat, lambda: cepam.decode(small, secret=SECRET, threads=1)),
    }
    return {"encode": enc, "decode": dec}


def amdahl(f: float, threads: int, m: int) -> float:
    """Speedup on `threads` free cores of a call with serial fraction f,
    whose parallel part comes in m / 2^17 segments (at most that many busy
    threads)."""
    busy = max(1, min(threads, -(-m // SEGMENT)))
    return 1.0 / (f + (1.0 - f) / busy)


# --- Speed. ----------------------------------------------------------------------

def speed_row(x: np.ndarray, name: str, coder: str, counts: list[int], repeat: int) -> dict:
    """Best wall-clock seconds (and CPU split) of encode and decode on each
    thread count; checks the payload is the same bytes on each."""
    payload = encode(x, name, coder, 1)
    for t in counts[1:]:
        if encode(x, name, coder, t) != payload:
            raise SystemExit(f"{name}: the payload on {t} threads differs from 1 thread's")
    runs = {"encode": lambda t: encode(x, name, coder, t),
            "decode": lambda t: cepam.decode(payload, secret=SECRET, threads=t)}
    wall = {(k, t): float("inf") for k in runs for t in counts}
    cpu1 = {k: float("inf") for k in runs}
    spanN = {k: float("inf") for k in runs}
    use = {(k, t): (math.inf, math.inf, 0) for k in runs for t in (1, counts[-1])}
    for _ in range(repeat):
        for k, run in runs.items():
            for t in counts:
                wall[k, t] = min(wall[k, t], timed(lambda: run(t)))
            cpu1[k] = min(cpu1[k], span(lambda: run(1), 1)[0])
            spanN[k] = min(spanN[k], span(lambda: run(counts[-1]), counts[-1])[1])
            for t in (1, counts[-1]):  # the run of least CPU time
                use[k, t] = min(use[k, t], usage(lambda: run(t)), key=lambda u: u[0] + u[1])
    return {"payload": payload, "wall": wall, "split": {k: cpu1[k] / spanN[k] for k in runs},
            "usage": use, "bits": 8 * len(payload) / x.size}


def print_serial(name: str, parts: dict, one: dict, m: int) -> dict[str, float]:
    """Prints the serial parts; returns f (their sum over the 1-thread time)."""
    f = {}
    for what in ("encode", "decode"):
        total = sum(parts[what].values())
        f[what] = total / one[what]
        cells = ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in parts[what].items())
        print(f"{name} {what}: {cells}; sum {1e3 * total:.2f} ms = {100 * f[what]:.2f}% of "
              f"{1e3 * one[what]:.1f} ms on one thread")
    return f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=float, default=4e6)
    ap.add_argument("--ratio", type=float, default=RATIO, help="rms/sigma of the update")
    ap.add_argument("--lattices", nargs="+", default=["Z", "E8", "auto"], choices=list(LATTICES))
    ap.add_argument("--coder", default="ans", choices=["ans", "golomb"])
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="the thread counts (default: 1, 2 and the cores this process may use)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    warnings.simplefilter("ignore", cepam.errors.PrivacyWarning)  # no clip: the coder's speed
    m = int(a.m)
    counts = sorted(set(a.threads or [1, 2, cepam.threads.available_cores()]))
    if counts[0] != 1:
        counts = [1] + counts
    print(f"cepam {cepam.__version__}, {cpu_topology()} ({_cpu_name()}, "
          f"{os.uname().machine}); m = {m} float32, Gaussian sigma = {SIGMA}, rms/sigma = "
          f"{a.ratio:g}, coder {a.coder}; threads {counts}; best of {a.repeat}")
    x = update(m, a.ratio)
    print("\nSerial parts (CPU time of the calling thread, best of --repeat; serial_parts()):")
    rows = []
    for name in a.lattices:
        row = speed_row(x, name, a.coder, counts, a.repeat)
        parts = serial_parts(x, row["payload"], name, a.coder, a.repeat)
        one = {k: row["wall"][k, 1] for k in ("encode", "decode")}
        rows.append((name, row, print_serial(name, parts, one, m)))
        # (each lattice's speeds as soon as they are measured, for runs cut short)
        print(f"{name} speed: " + "; ".join(
            f"{what} " + " / ".join(f"{m / row['wall'][what, t] / 1e6:.1f}" for t in counts)
            + f" M/s on {'/'.join(map(str, counts))} threads" for what in ("encode", "decode")),
            flush=True)
    print(f"\nSpeed: M coordinates/s (wall clock); speedup over 1 thread, and in brackets "
          f"Amdahl's prediction from f (free cores, segments of 2^17 permitting); 'split': CPU "
          f"time on 1 thread / CPU span on {counts[-1]} (see span()).  Payload bytes identical "
          f"on every thread count: checked.")
    if counts[-1] > cepam.threads.available_cores():
        print(f"({counts[-1]} threads on {cepam.threads.available_cores()} cores: they take "
              f"turns, so the split says how the system shared the cores, not how the work "
              f"split.)")
    head = ["lattice", "bits/coord"]
    for what in ("encode", "decode"):
        head += [f"{what} {t}" for t in counts] + [f"{what} x{t}" for t in counts[1:]]
        head += [f"{what} split"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, row, f in rows:
        cells = [name, f"{row['bits']:.3f}"]
        for what in ("encode", "decode"):
            w = row["wall"]
            cells += [f"{m / w[what, t] / 1e6:.1f}" for t in counts]
            cells += [f"{w[what, 1] / w[what, t]:.2f}x ({amdahl(f[what], t, m):.2f}x)"
                      for t in counts[1:]]
            cells += [f"{row['split'][what]:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    top = counts[-1]
    print(f"\nWhere the CPU time goes (one call, least CPU time of --repeat; all threads): "
          f"user and system CPU seconds and minor page faults on 1 and {top} threads")
    print(f"| lattice | call | user 1 | user {top} | system 1 | system {top} | faults 1 "
          f"| faults {top} |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row, _ in rows:
        for what in ("encode", "decode"):
            (u1, s1, f1), (un, sn, fn) = row["usage"][what, 1], row["usage"][what, top]
            print(f"| {name} | {what} | {u1:.3f} | {un:.3f} | {s1:.3f} | {sn:.3f} | {f1} "
                  f"| {fn} |")
    print("\nAmdahl's prediction for more cores from the same f (at this m):")
    print("| lattice | encode f | 16 | 64 | decode f | 16 | 64 |")
    print("|---|---|---|---|---|---|---|")
    for name, _, f in rows:
        print(f"| {name} | {100 * f['encode']:.2f}% | {amdahl(f['encode'], 16, m):.1f}x | "
              f"{amdahl(f['encode'], 64, m):.1f}x | {100 * f['decode']:.2f}% | "
              f"{amdahl(f['decode'], 16, m):.1f}x | {amdahl(f['decode'], 64, m):.1f}x |")


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
