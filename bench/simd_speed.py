"""Z encode and decode at each SIMD level of the native kernels, in one run.

    python bench/simd_speed.py                       # m = 10^7, 3 rounds (about 2 minutes here)
    python bench/simd_speed.py --m 1e6 --rounds 5 --levels avx2 portable

For each level (avx512, avx2, neon, portable: CEPAM_SIMD caps the level
cepam picks at run time; "avx512" and "neon", the top levels of x86-64 and
aarch64, leave it uncapped) a fresh process encodes and
decodes the same float32 Gaussian update (rms/sigma = 10, sigma = 1e-3,
Z^1, ANS coder, one thread: README's Speed setting) and reports M
coordinates per second of CPU time (the process's, so that other work on
the machine counts against none).  The rounds visit the levels in turn, and
each figure is the best over the rounds.  A level the CPU lacks is
reported as such (cepam.simd_level() in the worker says which level ran).
The payloads of every level (under one fixed nonce) are checked to be the
same bytes.  The ratios are each level's rate over the fastest level's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import warnings

from chacha20_speed import cpu_model  # bench/ is on sys.path
from throughput import LATTICES, SECRET, SIGMA, update

LEVELS = ("avx512", "avx2", "neon", "portable")


def measure(m: int, ratio: float) -> dict:
    """One encode and one decode of Z at m coordinates on one thread in this
    process: M coordinates a CPU second, the level that ran, the payload's
    SHA-256."""
    import cepam

    warnings.simplefilter("ignore", cepam.errors.PrivacyWarning)  # no clip: the coder's speed
    x = update(m, ratio)
    t0 = time.process_time()
    payload = cepam.encode(x, cepam.Gaussian(sigma=SIGMA), secret=SECRET, round=0, client=0,
                           coder="ans", threads=1, nonce=bytes(16), **LATTICES["Z"])
    t1 = time.process_time()
    cepam.decode(payload, secret=SECRET, threads=1)
    t2 = time.process_time()
    return {"level": cepam.simd_level(), "encode": m / (t1 - t0) / 1e6,
            "decode": m / (t2 - t1) / 1e6, "sha256": hashlib.sha256(payload).hexdigest()}


def _in_child(level: str, m: int, ratio: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CEPAM_SIMD", "CEPAM_THREADS")}
    if level in ("avx2", "portable"):  # (the values CEPAM_SIMD takes)
        env["CEPAM_SIMD"] = level
    run = subprocess.run([sys.executable, __file__, "--worker", "--m", str(m), "--ratio",
                          str(ratio)], env=env, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=float, default=1e7, help="coordinates")
    ap.add_argument("--ratio", type=float, default=10.0, help="rms/sigma of the update")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--levels", nargs="+", default=list(LEVELS), choices=LEVELS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    m = int(a.m)
    if a.worker:
        print(json.dumps(measure(m, a.ratio)))
        return
    print(f"CPU: {cpu_model()}; Z, ANS, float32, rms/sigma {a.ratio:g}, m = {m:,}, one thread; "
          f"M coordinates per CPU second, best of {a.rounds} rounds")
    best: dict[str, dict] = {}
    for _ in range(a.rounds):
        for level in a.levels:
            got = _in_child(level, m, a.ratio)
            row = best.setdefault(level, got)
            for key in ("encode", "decode"):
                row[key] = max(row[key], got[key])
            if got["sha256"] != row["sha256"] or got["level"] != row["level"]:
                sys.exit(f"simd_speed: level {level} changed between rounds: {got} {row}")
    if len({row["sha256"] for row in best.values()}) != 1:
        sys.exit("simd_speed: the payloads differ between SIMD levels: "
                 + ", ".join(f"{lv} {row['sha256'][:16]}" for lv, row in best.items()))
    ran = {level: row for level, row in best.items() if row["level"] == level}
    for level in set(best) - set(ran):
        print(f"{level}: not on this CPU ({best[level]['level']} ran instead); left out")
    if not ran:
        return
    top = {key: max(row[key] for row in ran.values()) for key in ("encode", "decode")}
    print("level | Z encode | Z decode | encode / fastest | decode / fastest")
    for level, row in ran.items():
        print(f"{level} | {row['encode']:.1f} | {row['decode']:.1f} | "
              f"{row['encode'] / top['encode']:.2f} | {row['decode'] / top['decode']:.2f}")
    digest = next(iter(ran.values()))["sha256"][:16]
    print(f"payload bytes identical at every level (SHA-256 {digest})")


if __name__ == "__main__":
    main()
