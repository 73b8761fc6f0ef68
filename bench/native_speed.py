"""Single-thread throughput of the native core (million coordinates / s).

    python bench/native_speed.py [--m 4194304] [--repeat 5] [--n 1 2] [--clock wall|thread]

Best of `repeat` runs for each stage, float32 Gaussian input, sigma = 1e-3:
LRSUQ encode, best_expg_order, body encode, body decode, LRSUQ decode, and
the whole encode path (encode + best_expg_order + body encode) and decode
path (body decode + decode).  Last, for n = 1, the two draws every
coordinate needs whatever the coder: its keystream words (`keystream_words`,
the dither's; the latent words are drawn inside the next) and its latent
radius (`latent_radius`: latent words, then two logarithms, a cosine and a
square root), which bound the encoder and the decoder.  Times are
wall-clock time, or with --clock thread the calling thread's CPU time (every
function timed here runs on that thread; other processes of a shared
machine then do not count).
"""
import argparse
import time

import numpy as np

import cepam._core as c
import cepam._core.testing as hooks


CLOCK = time.perf_counter


def best(fn, repeat):
    t = float("inf")
    for _ in range(repeat):
        t0 = CLOCK()
        r = fn()
        t = min(t, CLOCK() - t0)
    return t, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=2 ** 22)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--n", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--mechanism", type=int, default=1)
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if a.clock == "thread" else time.perf_counter
    m, sigma, key = a.m, 1e-3, bytes(32)
    x = np.random.default_rng(0).normal(0, 0.01, m).astype(np.float32)
    print(f"m = {m}, mechanism {a.mechanism}, M coords/s (best of {a.repeat}, {a.clock} clock)")
    print(f"{'n':>2} {'encode':>8} {'expg_k':>8} {'body_enc':>8} {'body_dec':>8} "
          f"{'decode':>8} | {'ENC path':>8} {'DEC path':>8}")
    for n in a.n:
        params = c.Params(mechanism=a.mechanism, scale=sigma, lattice=1, n=n)
        kw = dict(key=key, params=params)
        t_enc, (H, M) = best(lambda: hooks.encode_lattice(x, factor=1.0, **kw), a.repeat)
        t_k, k = best(lambda: hooks.best_expg_order(M), a.repeat)
        g = hooks.golomb_parameter(c.acceptance_probability(params))
        t_be, (body, hb, mb) = best(lambda: hooks.body_encode(H, M, golomb=g, expg_k=k), a.repeat)
        t_bd, _ = best(lambda: hooks.body_decode(body, N=len(H), count=len(M), golomb=g, expg_k=k,
                                             h_bits=hb, m_bits=mb), a.repeat)
        t_dec, _ = best(lambda: hooks.decode_lattice(H, M, m=m, dtype="float32", **kw), a.repeat)
        r = lambda t: m / t / 1e6  # noqa: E731
        print(f"{n:>2} {r(t_enc):8.1f} {r(t_k):8.1f} {r(t_be):8.1f} {r(t_bd):8.1f} "
              f"{r(t_dec):8.1f} | {r(t_enc + t_k + t_be):8.1f} {r(t_bd + t_dec):8.1f}")
    # In pieces of 2^16 coordinates, as the codec draws them (its chunks are
    # smaller still): one array of m words would time the page faults of
    # fresh memory as much as the draws.
    piece = min(m, 1 << 16)

    def draws(fn):
        return lambda: [fn(first, min(piece, m - first)) for first in range(0, m, piece)]

    t_words, _ = best(draws(lambda first, count: hooks.keystream_words(key, 1, first, count)),
                      a.repeat)
    t_radius, _ = best(draws(lambda first, count: hooks.latent_radius(
        key=key, params=c.Params(mechanism=a.mechanism, scale=sigma, lattice=1, n=1),
        first=first, count=count)), a.repeat)
    print(f"n = 1 draws, M coords/s: keystream words {m / t_words / 1e6:.1f}, latent radii "
          f"{m / t_radius / 1e6:.1f}, both {m / (t_words + t_radius) / 1e6:.1f}")


if __name__ == "__main__":
    main()
