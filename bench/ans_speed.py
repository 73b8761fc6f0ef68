"""Speed and bit-exactness of the payload body coders (coder 2, "ans", above all).

    python bench/ans_speed.py speed [--m 4194304] [--repeat 5] [--n 1 2] [--coder ans golomb]
    python bench/ans_speed.py record ref.json   # before a change
    python bench/ans_speed.py check  ref.json   # after: every hash must match
    CEPAM_SIMD=portable python bench/ans_speed.py check ref.json   # and without SIMD

speed: single-thread throughput (million coordinates / s, best of `repeat`)
of the whole cepam.encode / cepam.decode path, float32 x ~ N(0, 0.01),
Gaussian sigma = 1e-3, as in the project's performance targets.

record / check: SHA-256 of the body bytes, the decoded values and the
decoded symbols over many configurations (Gaussian n = 1, 2, 3, 8; Laplace
n = 1, 2, 4; SDQ; float32 / float64; m in {0, 1, 7, 4095, 4097, 100003};
noise scales from 1e-6 to 10 relative to the data; clip factors; both
coders), and of the outcome (values, or the exception's type and message)
of decoding corrupted ANS bodies (flipped bytes, truncations, appended
bytes, a wrong m or dimension) and of encoding invalid input (bad clipping
factors; NaN, Inf and too large values in later blocks).
"""
import argparse
import json
import sys
import time

import numpy as np

import cepam
import cepam._core as c
from refhash import digest, outcome  # bench/ is on sys.path when run as a script

GAUSSIAN, LAPLACE, SDQ = 1, 2, 3
GOLOMB, ANS = 1, 2


def best(fn, repeat):
    """Best wall-clock and best thread-CPU time of `repeat` calls, and a result.

    On a shared machine the CPU time is the steadier measure (the native
    core runs in the calling thread)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        r = fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.thread_time() - c0)
    return wall, cpu, r


def speed(a):
    x = np.random.default_rng(0).normal(0, 0.01, a.m).astype(np.float32)
    secret = bytes(range(32))
    mech = cepam.Gaussian(sigma=1e-3)
    print(f"m = {a.m}, float32, Gaussian sigma = 1e-3, M coords/s (best of {a.repeat}; "
          "wall clock and thread CPU time)")
    print(f"{'coder':>7} {'n':>2} {'enc wall':>9} {'dec wall':>9} {'enc cpu':>9} {'dec cpu':>9} "
          f"{'bits/coord':>10}")
    for coder in a.coder:
        for n in a.n:
            we, ce, p = best(lambda: cepam.encode(x, mech, secret=secret, round=1, client=0,
                                                  dim=n, coder=coder, threads=1), a.repeat)
            wd, cd, _ = best(lambda: cepam.decode(p, secret=secret, threads=1), a.repeat)
            r = [a.m / t / 1e6 for t in (we, wd, ce, cd)]
            print(f"{coder:>7} {n:>2} {r[0]:9.2f} {r[1]:9.2f} {r[2]:9.2f} {r[3]:9.2f} "
                  f"{8 * len(p) / a.m:10.4f}", flush=True)


# ---------------------------------------------------------------- hashes


def inputs(m, dtype, rng):
    """Unit-scale data with zeros, outliers and a heavy tail."""
    x = rng.normal(0, 1.0, m)
    if m >= 7:
        x[::5] = 0.0
        x[1::11] = 5.0
        x[2::13] = -5.0
        x[3::17] = rng.normal(0, 100.0, len(x[3::17]))
    return x.astype(dtype)


def configs():
    mechs = [(GAUSSIAN, n) for n in (1, 2, 3, 8)] + [(LAPLACE, n) for n in (1, 2, 4)]
    mechs.append((SDQ, 1))
    for mech, n in mechs:
        for dtype in ("float32", "float64"):
            for m in (0, 1, 7, 4095, 4097, 100003):
                for rel in (1e-6, 1e-3, 0.1, 1.0, 10.0):
                    for coder in (GOLOMB, ANS):
                        yield mech, n, dtype, m, rel, coder


def corruptions(body, rng):
    """(name, corrupted body) pairs."""
    out = [("trunc4", body[:-4]), ("trunc1", body[:-1]), ("extra", body + b"\0\0\0\0"),
           ("empty", b"")]
    for i in range(6):
        if not body:
            break
        b = bytearray(body)
        pos = int(rng.integers(len(b)))
        b[pos] ^= 1 << int(rng.integers(8))
        out.append((f"flip{i}@{pos}", bytes(b)))
    if len(body) > 600:  # a flip in the rANS stream itself, far from its start
        b = bytearray(body)
        b[len(b) // 2] ^= 0x40
        out.append(("flipmid", bytes(b)))
    return out


def bad_inputs(out, key):
    """Invalid factors, and non-finite or too large values in later blocks:
    the exceptions (type and message) must not change."""
    for coder in (GOLOMB, ANS):
        for m in (0, 5, 10000):
            x = np.linspace(-1, 1, m)
            for factor in (float("nan"), -1.0, float("inf")):
                params = c.Params(mechanism=GAUSSIAN, scale=0.1, lattice=1, n=1)
                r = outcome(lambda: c.encode(x, key=key, params=params, factor=factor,
                                             coder=coder))
                out[f"factor/{coder}/{m}/{factor}"] = digest(*r)
        for n in (1, 2):
            for dtype in ("float32", "float64"):
                for bad in (float("nan"), float("inf"), -float("inf"), 1e300, 3e10):
                    for at in (0, 4095, 4096, 9000, 19999):
                        x = np.random.default_rng(at).normal(0, 1, 20000)
                        x[at] = bad
                        with np.errstate(over="ignore"):  # 1e300 as float32 is inf
                            x = x.astype(dtype)
                        params = c.Params(mechanism=GAUSSIAN, scale=1e-6, lattice=1, n=n)
                        r = outcome(lambda: c.encode(x, key=key, params=params, factor=1.0,
                                                     coder=coder))
                        out[f"badx/{coder}/{n}/{dtype}/{bad}/{at}"] = digest(*r)


def hashes():
    out = {}
    key = bytes(range(32))
    bad_inputs(out, key)
    for mech, n, dtype, m, rel, coder in configs():
        rng = np.random.default_rng([mech, n, m, int(rel * 1e6), coder])
        x = inputs(m, dtype, rng)
        for factor in (1.0, 0.37):
            kw = dict(key=key, params=c.Params(mechanism=mech, scale=rel * factor, lattice=1, n=n))
            name = f"{mech}/{n}/{dtype}/{m}/{rel}/{coder}/{factor}"
            r = outcome(lambda: c.encode(x, factor=factor, coder=coder, **kw))
            if r[0] == "err":
                out[name] = digest(*r)
                continue
            body = r[1]
            y = outcome(lambda: c.decode(body, m=m, coder=coder, dtype=dtype, **kw))
            s = outcome(lambda: c.decode_symbols(body, m=m, coder=coder, **kw))
            out[name] = digest(body, *y, *(s[1] if s[0] == "ok" else s))
            if coder != ANS or factor != 1.0 or m > 5000:
                continue
            for what, bad in corruptions(body, rng):
                res = outcome(lambda: c.decode(bad, m=m, coder=coder, dtype=dtype, **kw))
                out[f"{name}/{what}"] = digest(*res)
            for dm in (-1, 1, n):
                res = outcome(lambda: c.decode(body, m=m + dm, coder=coder, dtype=dtype, **kw)
                              if m + dm >= 0 else None)
                out[f"{name}/m{dm:+d}"] = digest(*res)
            if mech == GAUSSIAN:
                other = dict(kw, n=n % 8 + 1)
                res = outcome(lambda: c.decode(body, m=m, coder=coder, dtype=dtype, **other))
                out[f"{name}/dim"] = digest(*res)
    return out


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--m", type=int, default=2 ** 22)
    s.add_argument("--repeat", type=int, default=5)
    s.add_argument("--n", type=int, nargs="+", default=[1, 2])
    s.add_argument("--coder", nargs="+", default=["ans"])
    for cmd in ("record", "check"):
        sub.add_parser(cmd).add_argument("file")
    a = ap.parse_args()
    if a.cmd == "speed":
        speed(a)
        return
    t0 = time.perf_counter()
    got = hashes()
    if a.cmd == "record":
        with open(a.file, "w") as f:
            json.dump(got, f, indent=0, sort_keys=True)
        print(f"recorded {len(got)} hashes in {time.perf_counter() - t0:.0f} s")
        return
    with open(a.file) as f:
        ref = json.load(f)
    bad = sorted(k for k in ref.keys() | got.keys() if ref.get(k) != got.get(k))
    for k in bad[:20]:
        print("MISMATCH", k)
    print(f"{len(got) - len(bad)} of {len(ref)} hashes match "
          f"({time.perf_counter() - t0:.0f} s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
