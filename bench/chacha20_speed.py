"""cepam's ChaCha20 against OpenSSL's, side by side on the same core.

    python bench/chacha20_speed.py [--rounds 3] [--seconds 2] [--levels avx512 avx2 portable]

For each SIMD level (CEPAM_SIMD, which caps the level cepam picks at run
time) a fresh process measures cepam's sealing keystream (`seal_xor`: the
ChaCha20 keystream XORed in place into a buffer of 16 KiB, 1 MiB and 64 MiB)
and its codec keystream (`keystream_words`, 1 MiB of 64-bit words), and
`openssl speed -evp chacha20 -bytes 16384 -seconds S` runs with OpenSSL
capped to the same instruction set (OPENSSL_ia32cap: AVX-512 left on for
avx512, AVX-512F/VL off for avx2; for portable, OpenSSL's scalar code, with
SSSE3 off as well).  The rounds alternate the two, and each figure is the
best over the rounds; within a round, cepam's are the best of several
timings of at least 64 MiB each.

Every figure is bytes per second of CPU time (GB/s = 10^9 bytes/s), as
`openssl speed` reports by default, so that other work on the machine
counts against neither.  The ratio is cepam's seal_xor over a 1 MiB buffer
(which stays in the L2 cache, as OpenSSL's 16 KiB buffer stays in L1)
against OpenSSL's figure for the same level.  Also printed: the CPU model
(/proc/cpuinfo) and the OpenSSL version.  Needs the `openssl` program.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

__all__ = ["cpu_model", "measure_cepam", "measure_openssl", "main"]

KEY = bytes(range(32))
SEAL_SIZES = (16 << 10, 1 << 20, 64 << 20)  # bytes
KEYSTREAM_WORDS = 1 << 17  # 1 MiB of 64-bit words
PER_TIMING = 64 << 20  # bytes processed per timing, at least

# OPENSSL_ia32cap masks ("~" clears bits): the first word is CPUID leaf 1
# (EDX, ECX: bit 41 = SSSE3), the second leaf 7 (EBX: bit 5 = AVX2,
# bit 16 = AVX512F, bit 31 = AVX512VL).  None: OpenSSL's own choice.
OPENSSL_CAPS = {
    "avx512": None,
    "avx2": ":~0x80010000",
    "portable": "~0x20000000000:~0x80010020",
}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else platform.processor())."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _best_rate(fn, nbytes: int, repeat: int) -> float:
    """Best bytes per second of thread CPU time over `repeat` timings, each
    calling fn() often enough to process at least PER_TIMING bytes."""
    calls = max(1, PER_TIMING // nbytes)
    fn()  # warm: first-call setup and page faults out of the timings
    best = 0.0
    for _ in range(repeat):
        t0 = time.thread_time()
        for _ in range(calls):
            fn()
        dt = time.thread_time() - t0
        if dt > 0:
            best = max(best, calls * nbytes / dt)
    return best


def measure_cepam(repeat: int = 5) -> dict[str, float]:
    """cepam's keystream rates in this process (GB/s of CPU time): seal_xor
    at each size of SEAL_SIZES and keystream_words over 1 MiB."""
    import numpy as np

    import cepam._core as core
    import cepam._core.testing as hooks

    out = {}
    for size in SEAL_SIZES:
        buf = np.zeros(size, dtype=np.uint8)
        out[f"seal_xor {size}"] = _best_rate(lambda b=buf: core.seal_xor(b, key=KEY), size,
                                             repeat) / 1e9
    out["keystream"] = _best_rate(lambda: hooks.keystream_words(KEY, 1, 0, KEYSTREAM_WORDS),
                                  8 * KEYSTREAM_WORDS, repeat) / 1e9
    return out


def measure_openssl(cap: str | None, seconds: int) -> float:
    """OpenSSL's ChaCha20 rate in GB/s (CPU time) at 16 KiB, from `openssl
    speed -evp chacha20`, with OPENSSL_ia32cap = cap (None: unset)."""
    env = dict(os.environ)
    env.pop("OPENSSL_ia32cap", None)
    if cap is not None:
        env["OPENSSL_ia32cap"] = cap
    run = subprocess.run(["openssl", "speed", "-evp", "chacha20", "-bytes", "16384", "-seconds",
                          str(seconds)], env=env, capture_output=True, text=True, check=True)
    # The last line: "ChaCha20   7667505.04k" (1000s of bytes per second).
    for line in reversed(run.stdout.splitlines()):
        m = re.match(r"\s*chacha20\s+([0-9.]+)k\s*$", line, re.IGNORECASE)
        if m:
            return float(m.group(1)) * 1e3 / 1e9
    raise RuntimeError("no ChaCha20 figure in the output of openssl speed:\n" + run.stdout)


def _cepam_in_child(level: str, repeat: int) -> dict[str, float]:
    """measure_cepam() in a fresh process whose CEPAM_SIMD is `level`."""
    env = {**os.environ, "CEPAM_SIMD": level}
    run = subprocess.run([sys.executable, __file__, "--worker", "--repeat", str(repeat)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=2, help="openssl speed -seconds")
    ap.add_argument("--repeat", type=int, default=5, help="timings per cepam figure and round")
    ap.add_argument("--levels", nargs="+", default=list(OPENSSL_CAPS), choices=list(OPENSSL_CAPS))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(measure_cepam(a.repeat)))
        return
    if shutil.which("openssl") is None:
        sys.exit("chacha20_speed: the openssl program is needed")
    version = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.strip()
    flags = cpu_flags()
    print(f"CPU: {cpu_model()} (avx2: {'avx2' in flags}, avx512f: {'avx512f' in flags})")
    print(f"OpenSSL: {version}")
    print(f"best of {a.rounds} rounds, GB/s of CPU time (10^9 bytes/s)")
    best: dict[str, dict[str, float]] = {lv: {} for lv in a.levels}
    for _ in range(a.rounds):
        for lv in a.levels:
            row = best[lv]
            ossl = measure_openssl(OPENSSL_CAPS[lv], a.seconds)
            row["openssl"] = max(row.get("openssl", 0.0), ossl)
            for name, v in _cepam_in_child(lv, a.repeat).items():
                row[name] = max(row.get(name, 0.0), v)
    sizes = [f"seal_xor {s}" for s in SEAL_SIZES]
    head = ["level", "openssl 16K"] + [f"seal_xor {s >> 10}K" if s < 1 << 20 else
                                       f"seal_xor {s >> 20}M" for s in SEAL_SIZES]
    head += ["keystream 1M", "seal_xor 1M / openssl"]
    print(" | ".join(head))
    for lv in a.levels:
        row = best[lv]
        cells = [lv, f"{row['openssl']:.2f}"] + [f"{row[s]:.2f}" for s in sizes]
        cells += [f"{row['keystream']:.2f}", f"{row[f'seal_xor {1 << 20}'] / row['openssl']:.2f}"]
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
