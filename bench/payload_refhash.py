"""Bit-exactness reference for whole payload bodies and the Voronoi lattices.

    python bench/payload_refhash.py record before.json   # before a change
    python bench/payload_refhash.py check  before.json   # after: all must match

(CEPAM_SIMD=portable or avx2 in the environment checks the other code paths.)
bench/refhash.py covers the Z^n quantizer and the Golomb body entry points;
this covers what it leaves out: payload bodies of every lattice (Z^n, A2,
D4, E8) and coder (ans, golomb) over signal-to-noise ratios from 0.01 to
10^4, their decoded values, the LRSUQ outputs (H, M, decoded y) of A2, D4 and
E8, and the lattices alone (closest points, on ties too, and dithers).
"""
import hashlib
import json
import sys

import numpy as np

import cepam._core as c
import cepam._core.testing as hooks
from refhash import digest, outcome  # bench/ is on sys.path when run as a script

LATTICES = [(1, 1), (1, 2), (1, 3), (1, 8), (2, 2), (3, 4), (4, 8)]
RATIOS = (0.01, 0.1, 0.5, 1.0, 2.0, 10.0, 100.0, 1e4)


def run():
    out = {}
    sigma = 1e-3
    for li, (lat, n) in enumerate(LATTICES):
        for m in (1, 7, 9, 1000, 20011):
            for ri, ratio in enumerate(RATIOS):
                if m == 20011 and ratio in (0.01, 1e4):
                    continue
                rng = np.random.default_rng(1000 * li + 10 * ri + m)
                x = rng.normal(0, ratio * sigma, m)
                if ri % 3 == 1:
                    x = rng.uniform(-ratio * sigma, ratio * sigma, m)
                for dt in (np.float32, np.float64):
                    xd = x.astype(dt)
                    key = hashlib.sha256(f"{li}/{m}/{ri}".encode()).digest()
                    mechs = [(1, sigma)]
                    if lat == 1 and n <= 2:
                        mechs.append((2, sigma))
                    if lat == 1 and n == 1:
                        mechs.append((3, 4 * sigma))
                    for mech, scale in mechs:
                        tag = f"L{lat}/n{n}/m{m}/r{ratio}/{np.dtype(dt).name}/mech{mech}"
                        kw = dict(key=key,
                                  params=c.Params(mechanism=mech, scale=scale, lattice=lat, n=n))
                        for coder in (1, 2):
                            r = outcome(lambda: c.encode(xd, factor=0.9 if m == 9 else 1.0,
                                                         coder=coder, **kw))
                            out[f"{tag}/c{coder}/body"] = digest(*r)
                            if r[0] == "ok":
                                y = c.decode(r[1], m=m, coder=coder, dtype="float32", **kw)
                                out[f"{tag}/c{coder}/y"] = digest(y)
                        if lat > 1 and dt == np.float64:
                            H, M = hooks.encode_lattice(xd, factor=1.0, **kw)
                            y = hooks.decode_lattice(H, M, m=m, dtype="float64", **kw)
                            out[f"{tag}/HMy"] = digest(H, M, y)
    rng = np.random.default_rng(7)
    for lat, n in LATTICES:
        if lat == 1:
            continue
        t = rng.normal(0, 3, 4096 * n)
        ties = np.round(rng.normal(0, 3, 4096 * n) * 2) / 2  # halves: ties of rounding
        big = rng.normal(0, 2.0 ** 40, 512 * n)
        for name, tt in (("t", t), ("ties", ties), ("big", big)):
            out[f"closest/{lat}/{name}"] = digest(hooks.lattice_closest_points(tt, lattice=lat, n=n))
        w = rng.integers(0, 2 ** 63, 4096 * n, dtype=np.uint64) * np.uint64(2)
        w[::7] = 0
        w[1::11] = np.uint64(2 ** 64 - 1)
        out[f"dither/{lat}"] = digest(hooks.lattice_dithers(w, lattice=lat, n=n))
    return out


def main():
    mode, path = sys.argv[1], sys.argv[2]
    out = run()
    if mode == "record":
        with open(path, "w") as f:
            json.dump(out, f, indent=0, sort_keys=True)
        print(f"recorded {len(out)} hashes")
    elif mode == "check":
        ref = json.load(open(path))
        bad = [k for k in ref if out.get(k) != ref[k]] + [k for k in out if k not in ref]
        if bad:
            print(f"MISMATCH in {len(bad)} of {len(ref)} hashes:", *bad[:30], sep="\n  ")
            sys.exit(1)
        print(f"all {len(ref)} hashes match")
    else:
        sys.exit("usage: payload_refhash.py record|check file")


if __name__ == "__main__":
    main()
