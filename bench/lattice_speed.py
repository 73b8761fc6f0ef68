"""Single-thread speed of the default path: Z, D4, E8 and lattice="auto".

    python bench/lattice_speed.py [--m 1000000] [--repeat 3] [--ratios 0.1 0.5 1 10 100]
                                  [--base DIR] [--json FILE] [--clock thread|wall]

Million coordinates per second (best of `repeat`) of cepam.encode and
cepam.decode, float32 Gaussian input with rms/sigma = ratio, sigma = 1e-3,
ANS coder, and the payload's bits per coordinate.  With --base DIR, the
same table is also measured for the cepam package found in DIR (an older
build: DIR/cepam with its _core extension), in the same run, the two
alternating so that the load of a shared machine hits both alike; the last
columns are then new / base.  Times are the calling thread's CPU time by
default (--clock thread: everything runs on that thread, as the benchmark
asks for one; unlike wall-clock time it does not count the time other
processes of a shared machine take the core), or wall-clock time.
"""
import argparse
import inspect
import json
import os
import subprocess
import sys
import time

import numpy as np

LATTICES = [("Z", 1), ("D4", None), ("E8", None), ("auto", None)]


def measure(m, ratios, repeat, clock="thread"):
    """{(lattice, ratio): (enc M/s, dec M/s, bits/coord)} for the cepam on sys.path."""
    import cepam

    now = time.thread_time if clock == "thread" else time.perf_counter
    # One thread; an older cepam (--base) may predate threads= and sealed headers.
    one = {"threads": 1} if "threads" in inspect.signature(cepam.encode).parameters else {}
    sealed = "secret" in inspect.signature(cepam.inspect).parameters
    sigma, secret = 1e-3, bytes(range(32))
    mech = cepam.Gaussian(sigma=sigma)
    out = {}
    for ratio in ratios:
        x = np.random.default_rng(1).normal(0, ratio * sigma, m).astype(np.float32)
        for lat, dim in LATTICES:
            kw = dict(secret=secret, round=0, client=0, lattice=lat, dim=dim, **one)
            te = td = float("inf")
            for _ in range(repeat):
                t0 = now()
                p = cepam.encode(x, mech, **kw)
                t1 = now()
                cepam.decode(p, secret=secret, **one)
                t2 = now()
                te, td = min(te, t1 - t0), min(td, t2 - t1)
            info = cepam.inspect(p, secret=secret) if sealed else cepam.inspect(p)
            out[f"{lat}/{ratio}"] = (m / te / 1e6, m / td / 1e6, 8 * len(p) / m,
                                     f"{info.lattice}{info.dim if info.lattice == 'Z' else ''}")
    return out


def run_in(path, m, ratios, repeat, clock):
    # The older package comes first, ahead of an editable install's finder.
    env = dict(os.environ, PYTHONPATH=path)
    cmd = [sys.executable, "-c",
           "import json, sys; sys.meta_path = [f for f in sys.meta_path if 'editable' not in "
           "type(f).__module__]; sys.path.insert(0, sys.argv[1]); import lattice_speed as s; "
           "import cepam; assert cepam.__file__.startswith(sys.argv[4]), cepam.__file__; "
           "print(json.dumps(s.measure(int(sys.argv[2]), [float(r) for r in sys.argv[6:]], "
           "int(sys.argv[3]), sys.argv[5])))",
           os.path.dirname(os.path.abspath(__file__)), str(m), str(repeat), os.path.abspath(path), clock,
           *map(str, ratios)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                         cwd="/")
    return json.loads(res.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=10 ** 6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.1, 0.5, 1, 10, 100])
    ap.add_argument("--base", help="directory holding an older cepam package to compare")
    ap.add_argument("--rounds", type=int, default=2, help="alternations with --base")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--clock", choices=["thread", "wall"], default="thread",
                    help="the calling thread's CPU time, or wall-clock time")
    a = ap.parse_args()
    a.ratios = [float(r) for r in a.ratios]
    new, base = None, None
    for _ in range(a.rounds if a.base else 1):
        if a.base:
            b = run_in(a.base, a.m, a.ratios, a.repeat, a.clock)
            base = b if base is None else {k: tuple(max(u, v) if i < 2 else u for i, (u, v) in
                                                    enumerate(zip(base[k], b[k])))
                                           for k in b}
        r = measure(a.m, a.ratios, a.repeat, a.clock)
        new = r if new is None else {k: tuple(max(u, v) if i < 2 else u for i, (u, v) in
                                              enumerate(zip(new[k], r[k]))) for k in r}
    print(f"m = {a.m} float32, Gaussian sigma = 1e-3, ANS, one thread; M coords/s "
          f"(best of {a.repeat * (a.rounds if a.base else 1)}); bits = bits/coordinate")
    head = f"{'ratio':>6} {'lattice':>7} {'chosen':>6} {'enc':>7} {'dec':>7} {'bits':>7}"
    if base:
        head += f" | {'base enc':>8} {'base dec':>8} {'base bits':>9} | {'enc x':>6} {'dec x':>6}"
    print(head)
    for ratio in a.ratios:
        for lat, _ in LATTICES:
            k = f"{lat}/{float(ratio)}"
            e, d, bits, chosen = new[k]
            line = f"{ratio:>6g} {lat:>7} {chosen:>6} {e:7.2f} {d:7.2f} {bits:7.4f}"
            if base:
                be, bd, bb, _ = base[k]
                line += f" | {be:8.2f} {bd:8.2f} {bb:9.4f} | {e / be:6.2f} {d / bd:6.2f}"
            print(line)
        z = new[f"Z/{float(ratio)}"]
        e8 = new[f"E8/{float(ratio)}"]
        au = new[f"auto/{float(ratio)}"]
        print(f"{'':>6} E8/Z enc {e8[0] / z[0]:.2f} dec {e8[1] / z[1]:.2f}; auto/Z enc "
              f"{au[0] / z[0]:.2f}; auto bits - min(Z, E8) = {au[2] - min(z[2], e8[2]):+.4f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"new": new, "base": base}, f, indent=1)


if __name__ == "__main__":
    main()
