"""Page faults and speed of one encode call, by lattice and rms/sigma.

    python bench/encode_faults.py [--m 4194304] [--ratios 0.1 0.5 1 10]
                                  [--lattices Z E8] [--repeat 3] [--base DIR] [--rounds 2]

For each lattice and ratio: cepam.encode of m float32 Gaussian coordinates
with rms/sigma = ratio (sigma = 1e-3, ANS, threads=1), after one call to
warm up; the encode speed in million coordinates per second of the calling
thread's CPU time (best of `repeat`), and the minor page faults per call
(the mean over the calls; getrusage), with the fresh memory they stand
for (faults times the page size, MB = 10^6 bytes).  A minor fault is the
kernel handing the process a page it had not touched: memory allocated
afresh and written.

Each lattice and ratio is measured in a fresh process (how much memory a
call takes afresh depends on the allocator's state, which is then that of
a process doing only this).  With --base DIR, the same is measured for the
cepam package in DIR (an older build: DIR/cepam with its _core extension),
alternating with this one `rounds` times (the best speed, the mean
faults), and the last column is this build's speed against it.  Linux (or another system with
getrusage's ru_minflt).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

__all__ = ["measure", "main"]


def measure(m: int, ratios: list[float], lattices: list[str],
            repeat: int) -> dict[str, tuple[float, float]]:
    """{"lattice/ratio": (encode M coords/s, minor faults per call)} for the
    cepam found on sys.path."""
    import numpy as np

    import cepam

    sigma, secret = 1e-3, bytes(range(32))
    mech = cepam.Gaussian(sigma=sigma)
    out = {}
    for ratio in ratios:
        x = np.random.default_rng(1).normal(0, ratio * sigma, m).astype(np.float32)
        for lat in lattices:
            kw = dict(secret=secret, round=0, client=0, lattice=lat, threads=1)
            cepam.encode(x, mech, **kw)  # warm
            best_t, faults = float("inf"), 0
            for _ in range(repeat):
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.thread_time()
                cepam.encode(x, mech, **kw)
                t1 = time.thread_time()
                faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
                best_t = min(best_t, t1 - t0)
            out[f"{lat}/{ratio}"] = (m / best_t / 1e6, faults / repeat)
    return out


def _in_process(path: str | None, m: int, ratio: float, lattice: str,
                repeat: int) -> tuple[float, float]:
    """measure() of one lattice and ratio in a fresh process (the allocator's
    state, which decides how much memory comes fresh, is then that of a
    process doing only this), for the cepam package in `path` (ahead of an
    editable install's finder), or the one installed where path is None."""
    code = ("import json, sys; base = sys.argv[1]; "
            "sys.meta_path = [f for f in sys.meta_path if not base or 'editable' not in "
            "type(f).__module__]; base and sys.path.insert(0, base); "
            "sys.path.insert(1, sys.argv[2]); import cepam, encode_faults as e; "
            "assert not base or cepam.__file__.startswith(base), cepam.__file__; "
            "print(json.dumps(e.measure(*json.loads(sys.argv[3]))))")
    args = json.dumps([m, [ratio], [lattice], repeat])
    env = dict(os.environ, PYTHONPATH=path) if path else None
    run = subprocess.run([sys.executable, "-c", code, os.path.abspath(path) if path else "",
                          os.path.dirname(os.path.abspath(__file__)), args],
                         env=env, capture_output=True, text=True, check=True, cwd="/")
    return tuple(json.loads(run.stdout)[f"{lattice}/{ratio}"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1 << 22)
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.1, 0.5, 1.0, 10.0])
    ap.add_argument("--lattices", nargs="+", default=["Z", "E8"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", help="directory holding an older cepam package to compare")
    ap.add_argument("--rounds", type=int, default=2, help="alternations with --base")
    a = ap.parse_args(argv)
    page = os.sysconf("SC_PAGE_SIZE")
    rounds = a.rounds if a.base else 1
    builds = {"new": None, "base": a.base} if a.base else {"new": None}
    # results[build][key]: [best speed, mean faults per call over the rounds]
    results: dict[str, dict[str, list[float]]] = {b: {} for b in builds}
    for _ in range(rounds):
        for ratio in a.ratios:
            for lat in a.lattices:
                for build, path in builds.items():
                    e, f = _in_process(path, a.m, ratio, lat, a.repeat)
                    best = results[build].setdefault(f"{lat}/{ratio}", [0.0, 0.0])
                    best[0], best[1] = max(best[0], e), best[1] + f / rounds
    new, base = results["new"], results.get("base")
    print(f"m = {a.m} float32, Gaussian sigma = 1e-3, ANS, one thread; encode M coords/s "
          f"(thread CPU time, best of {a.repeat * rounds}); minor page faults per call "
          f"(mean), MB = faults x {page} bytes")
    # Per build: encode speed, faults, MB; then, with a base, the speed ratio.
    cells = lambda e, f: [f"{e:8.2f}", f"{f:8.0f}", f"{f * page / 1e6:6.1f}"]  # noqa: E731
    names = ["enc", "faults", "MB"]
    print(" | ".join([f"{'ratio':>6} {'lattice':>7}", " ".join(f"{n:>8}" for n in names)]
                     + ([" ".join(f"{'base ' + n:>8}" for n in names), "enc x"] if base else [])))
    for ratio in a.ratios:
        for lat in a.lattices:
            k = f"{lat}/{ratio}"
            row = [f"{ratio:>6g} {lat:>7}", " ".join(cells(*new[k]))]
            if base:
                row += [" ".join(cells(*base[k])), f"{new[k][0] / base[k][0]:5.2f}"]
            print(" | ".join(row))

if __name__ == "__main__":
    main()
