"""Single-thread throughput of the native core (million coordinates / s).

    python bench/native_speed.py [--m 4194304] [--repeat 5] [--n 1 2]

Best of `repeat` runs for each stage, float32 Gaussian input, sigma = 1e-3:
LRSUQ encode, best_expg_order, body encode, body decode, LRSUQ decode, and
the whole encode path (encode + best_expg_order + body encode) and decode
path (body decode + decode).
"""
import argparse
import time

import numpy as np

import cepam._core as c
import cepam._core.testing as hooks


def best(fn, repeat):
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = fn()
        t = min(t, time.perf_counter() - t0)
    return t, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=2 ** 22)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--n", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--mechanism", type=int, default=1)
    a = ap.parse_args()
    m, sigma, key = a.m, 1e-3, bytes(32)
    x = np.random.default_rng(0).normal(0, 0.01, m).astype(np.float32)
    print(f"m = {m}, mechanism {a.mechanism}, M coords/s (best of {a.repeat})")
    print(f"{'n':>2} {'encode':>8} {'expg_k':>8} {'body_enc':>8} {'body_dec':>8} "
          f"{'decode':>8} | {'ENC path':>8} {'DEC path':>8}")
    for n in a.n:
        kw = dict(key=key, mechanism=a.mechanism, scale=sigma, lattice=1, n=n)
        t_enc, (H, M) = best(lambda: hooks.encode_lattice(x, factor=1.0, **kw), a.repeat)
        t_k, k = best(lambda: hooks.best_expg_order(M), a.repeat)
        g = hooks.golomb_parameter(c.acceptance_probability(a.mechanism, sigma, 1, n))
        t_be, (body, hb, mb) = best(lambda: hooks.body_encode(H, M, golomb=g, expg_k=k), a.repeat)
        t_bd, _ = best(lambda: hooks.body_decode(body, N=len(H), count=len(M), golomb=g, expg_k=k,
                                             h_bits=hb, m_bits=mb), a.repeat)
        t_dec, _ = best(lambda: hooks.decode_lattice(H, M, m=m, dtype="float32", **kw), a.repeat)
        r = lambda t: m / t / 1e6  # noqa: E731
        print(f"{n:>2} {r(t_enc):8.1f} {r(t_k):8.1f} {r(t_be):8.1f} {r(t_bd):8.1f} "
              f"{r(t_dec):8.1f} | {r(t_enc + t_k + t_be):8.1f} {r(t_bd + t_dec):8.1f}")


if __name__ == "__main__":
    main()
