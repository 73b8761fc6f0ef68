"""Checks and measures the CUDA path on a GPU machine.

    python bench/gpu_check.py             # the cuda tests, then the table
    python bench/gpu_check.py --sizes 1e6 1e7 1e8

1. Runs the tests marked ``cuda`` (tests/test_cuda.py): the LRSUQ stage on the
   GPU against the CPU codec, bit for bit, for every lattice and mechanism,
   the golden vectors, and decode(device="cuda").
2. Prints the throughput of the LRSUQ stage on the GPU (kernel time, and the
   host-device transfers separately) and of the whole encode/decode of a CUDA
   tensor, against the CPU codec in the same run, in millions of coordinates
   per second.  Exits non-zero if a test fails or the device bytes differ.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LATTICES = {"Z": (1, 1), "D4": (3, 4), "E8": (4, 8)}  # name: (code, n)


def run_tests() -> int:
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "cuda",
                            str(ROOT / "tests" / "test_cuda.py")], cwd=ROOT)


def table(sizes: list[int]) -> bool:
    import torch

    import cepam
    from cepam import _cuda
    from cepam import _core
    from cepam._core import testing as hooks

    key = bytes(range(32))
    same = True
    name = torch.cuda.get_device_name(0)
    print(f"\nGPU: {name}; M coordinates per second (float32, Gaussian, sigma = 1e-3, "
          "rms/sigma = 10)")
    print("| m | lattice | LRSUQ kernel enc | transfers enc | LRSUQ kernel dec | transfers dec "
          "| cepam.encode GPU tensor | cepam.encode CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for m in sizes:
        x = (np.random.default_rng(0).normal(size=m) * 1e-2).astype(np.float32)
        xd = torch.from_numpy(x).cuda()
        for lat, (code, n) in LATTICES.items():
            kw = dict(key=key, params=_core.Params(mechanism=1, scale=1e-3, lattice=code, n=n))
            H, M, beta, V, t_enc = _cuda.encode_lattice(xd.__dlpack__(stream=1), factor=1.0, **kw)
            capsule, t_dec = _cuda.decode_lattice(H, M, m=m, dtype="float32", **kw)
            if m <= 10**7:
                H2, M2 = hooks.encode_lattice(x, factor=1.0, **kw)
                same &= bool(np.array_equal(H, H2) and np.array_equal(M, M2))
                y = torch.from_dlpack(capsule).cpu().numpy()
                same &= y.tobytes() == hooks.decode_lattice(H, M, m=m, dtype="float32", **kw).tobytes()
            del capsule
            secret = cepam.new_secret()
            t0 = time.perf_counter()
            p_gpu = cepam.encode(xd, cepam.Gaussian(sigma=1e-3), secret=secret, round=0,
                                 client=0, lattice=lat)
            t1 = time.perf_counter()
            p_cpu = cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=secret, round=0,
                                 client=1, lattice=lat)
            t2 = time.perf_counter()
            del p_gpu, p_cpu
            rate = lambda ms: m / (ms * 1e3) if ms > 0 else float("inf")  # noqa: E731
            print(f"| {m:.0e} | {lat} | {rate(t_enc['kernel_ms']):.0f} | "
                  f"{rate(t_enc['transfer_ms']):.0f} | {rate(t_dec['kernel_ms']):.0f} | "
                  f"{rate(t_dec['transfer_ms']):.0f} | {m / (t1 - t0) / 1e6:.1f} | "
                  f"{m / (t2 - t1) / 1e6:.1f} |")
    print("\nbytes identical to the CPU codec:", "yes" if same else "NO")
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7, 1e8],
                        help="update sizes m (coordinates)")
    parser.add_argument("--no-tests", action="store_true", help="only the table")
    args = parser.parse_args()
    import cepam.cuda

    ok, why = cepam.cuda.status()
    if not ok:
        print(f"no CUDA path: {why}", file=sys.stderr)
        return 1
    failed = 0 if args.no_tests else run_tests()
    same = table([int(s) for s in args.sizes])
    return 1 if failed or not same else 0


if __name__ == "__main__":
    sys.exit(main())
