"""What sealing costs: the ChaCha20 pass over the sealed section, against the
whole encode and decode, and the decoder's finiteness scan (which runs only
for absurd noise scales: see cepam._finite).

    python bench/seal_cost.py [--m 10000000] [--repeats 3]

Prints the best of ``repeats`` timings of each step on one update (Gaussian
coordinates, rms / sigma = 6, float32, ANS coder, lattice Z and auto) and
their ratios to encode and decode; measure on an idle machine for absolute
figures, the ratios hold on a loaded one.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import cepam
from cepam import _core
from cepam._finite import check_decoded_finite
from cepam.flatten import flatten
from cepam.keys import Context, seal_key


def best(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    secret = bytes(range(32))
    x = (np.random.default_rng(0).normal(size=args.m) * 6e-3).astype(np.float32)
    mech = cepam.Gaussian(sigma=1e-3)
    for lattice in ("Z", "auto"):
        kwargs = dict(secret=secret, round=0, client=0, lattice=lattice, clip=1e9)
        payload = cepam.encode(x, mech, **kwargs)
        sealed = bytearray(cepam.inspect(payload).sealed_bits // 8)
        key = seal_key(secret, Context(0, 0, 0), cepam.inspect(payload).nonce)
        t_seal = best(lambda: _core.seal_xor(sealed, key=key), args.repeats)
        t_enc = best(lambda: cepam.encode(x, mech, **kwargs), args.repeats)
        t_dec = best(lambda: cepam.decode(payload, secret=secret), args.repeats)
        y = cepam.decode(payload, secret=secret)
        _, structure = flatten(y)
        t_fin = best(lambda: check_decoded_finite(y, structure, mechanism=1, scale=1e300),
                     args.repeats)
        mb = len(sealed) / 1e6
        print(f"lattice {lattice}: m = {args.m:,}, {8 * len(payload) / args.m:.3f} bits/coord, "
              f"sealed section {mb:.2f} MB")
        print(f"  seal (ChaCha20 XOR)  {t_seal * 1e3:8.2f} ms  ({mb / t_seal:.0f} MB/s) = "
              f"{100 * t_seal / t_enc:.2f} % of encode, {100 * t_seal / t_dec:.2f} % of decode")
        print(f"  finiteness scan      {t_fin * 1e3:8.2f} ms  = "
              f"{100 * t_fin / t_dec:.2f} % of decode (only for scales above ~1e18)")
        print(f"  encode {t_enc:.3f} s, decode {t_dec:.3f} s (whole, sealed)")


if __name__ == "__main__":
    main()
