"""The fixed cost of one cepam.encode and one cepam.decode call.

    python bench/call_cost.py [--m 10] [--calls 2000] [--rounds 5] [--lattice Z] [--clip C]
                              [--profile]
    python bench/call_cost.py --m 1e7 1e8 --calls 1 --rounds 3 --out   # big updates
    python bench/call_cost.py --m 3600 --entries 300 --calls 200       # a model's entries
    python bench/call_cost.py --clip 1 --calls 1000 --rounds 7 --against ../old/python

Encodes, then decodes, m float32 coordinates (Gaussian sigma = 1e-3,
rms/sigma = 1, threads=1) `calls` times in a row, `rounds` times; prints
the microseconds per call of the best round (the mean over its calls) and
of the median round, as the calling thread's CPU time and as wall-clock
time.  At m = 10 the work proportional to m is a few hundred nanoseconds,
so this is the per-call cost: argument checks, key derivation (HKDF),
header and structure, sealing (ChaCha20 and HMAC), the native call and the
result's construction.  Also printed: the CPU model (/proc/cpuinfo).

--clip C encodes with clip=C, as a user who wants a privacy guarantee does
(without it, the default, each encode also issues a PrivacyWarning).

Two more rows, "encode dflt" and "decode dflt", call them as a user does:
the default lattice ("auto") and threads (None: CEPAM_THREADS, else the
cores); and two, "Codec enc" and "Codec dec", call a client's
cepam.Codec (a new round each call) and a server's (expecting the
payload's round), both with those defaults.

--profile runs each call under cProfile instead and prints the functions
that take most of the time (for finding what the fixed cost is made of).

--entries N codes a dict of N float32 entries (a state_dict of N tensors,
m coordinates in all, split as evenly as can be): the cost that grows with
a model's entries (flattening, the header, the checks and the result's
construction of each), which a server's decoder pays payload after payload.

--against DIR compares this cepam with the one importable from DIR (a
folder holding a ``cepam`` package, such as another checkout's
``python/`` with its built extension), on a machine whose speed moves from
minute to minute: --pairs pairs of processes, one of each build in turn,
each printing its rows' best CPU time; the table gives each build's best
over the pairs and the ratio (this build over DIR's).

--out also times decode(payload, out=buffer) into one buffer kept across
the calls (no fresh output pages: the decode of round after round), and
prints every call's CPU time per coordinate, in nanoseconds, for each m
given (--m takes several values, e.g. 1e7 1e8: the per-coordinate cost of
big updates, which a fresh output's page zeroing raised at 10^8).
"""
from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import pstats
import statistics
import subprocess
import sys
import time

import numpy as np

import cepam
from chacha20_speed import cpu_model  # bench/ is on sys.path when run as a script

__all__ = ["per_call", "main"]


def per_call(fn, calls: int, rounds: int) -> dict[str, float]:
    """Microseconds per call of fn(): best and median round, CPU and wall."""
    cpu, wall = [], []
    fn()  # warm
    for _ in range(rounds):
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(calls):
            fn()
        c1, w1 = time.thread_time(), time.perf_counter()
        cpu.append((c1 - c0) / calls * 1e6)
        wall.append((w1 - w0) / calls * 1e6)
    return {"cpu best": min(cpu), "cpu median": statistics.median(cpu),
            "wall best": min(wall), "wall median": statistics.median(wall)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=float, nargs="+", default=[10])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lattice", default="Z", help='"Z", "E8", "auto", ...')
    ap.add_argument("--clip", type=float, default=None,
                    help="the encoder's clip (default: none, a PrivacyWarning a call)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--entries", type=int, default=1,
                    help="code a dict of this many entries (default 1: one array)")
    ap.add_argument("--out", action="store_true",
                    help="also decode into a buffer kept across calls; CPU ns per coordinate")
    ap.add_argument("--against", metavar="DIR",
                    help="compare with the cepam importable from DIR, in alternating processes")
    ap.add_argument("--pairs", type=int, default=10, help="process pairs for --against")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # (--against's child)
    a = ap.parse_args(argv)
    if a.against is not None and a.profile:
        ap.error("--against times the calls; --profile profiles them: one or the other")
    for m in a.m:
        if not 1 <= a.entries <= m:
            ap.error(f"--entries must be between 1 and m = {int(m)}")
        if a.against is not None:
            compare(a, int(m))
        else:
            run(a, int(m))


def compare(a: argparse.Namespace, m: int) -> None:
    """--against: each row's best CPU time over --pairs alternating pairs of
    processes, this build's and DIR's, and their ratio."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(cepam.__file__)))
    bench = os.path.dirname(os.path.abspath(__file__))
    child = ["--m", str(m), "--calls", str(a.calls), "--rounds", str(a.rounds), "--lattice",
             a.lattice, "--entries", str(a.entries), "--json"]
    child += ([] if a.clip is None else ["--clip", repr(a.clip)]) + (["--out"] if a.out else [])
    best: dict[str, dict[str, float]] = {ours: {}, a.against: {}}
    for _ in range(a.pairs):
        for root in best:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, bench]))
            out = subprocess.run([sys.executable, __file__, *child], env=env, check=True,
                                 capture_output=True, text=True).stdout
            for name, us in json.loads(out.splitlines()[-1]).items():
                best[root][name] = min(best[root].get(name, float("inf")), us)
    print(f"CPU: {cpu_model()}; m = {m}; best CPU us per call over {a.pairs} alternating "
          f"pairs of processes (each: best of {a.rounds} rounds of {a.calls} calls)")
    print(f"{'call':>12} {'this':>9} {'against':>9} {'ratio':>7}   (this: {ours}; against: "
          f"{a.against})")
    for name, us in best[ours].items():
        theirs = best[a.against].get(name, float("nan"))
        print(f"{name:>12} {us:9.1f} {theirs:9.1f} {us / theirs:7.3f}")


def update(m: int, entries: int, sigma: float) -> np.ndarray | dict[str, np.ndarray]:
    """m float32 coordinates of standard deviation sigma: one array, or a
    dict of ``entries`` arrays splitting them as evenly as can be."""
    flat = np.random.default_rng(0).normal(0, sigma, m).astype(np.float32)
    if entries == 1:
        return flat
    cuts = [m * i // entries for i in range(entries + 1)]
    return {f"layer{i}.weight": flat[cuts[i]:cuts[i + 1]].copy() for i in range(entries)}


def run(a: argparse.Namespace, m: int) -> None:
    """The table (or the profile) of one m."""
    sigma, secret = 1e-3, bytes(range(32))
    mech = cepam.Gaussian(sigma=sigma)
    x = update(m, a.entries, sigma)
    kw = dict(secret=secret, round=0, client=0, lattice=a.lattice, threads=1, clip=a.clip)
    payload = cepam.encode(x, mech, **kw)
    # A client's and a server's Codec, with the defaults (lattice="auto",
    # threads=None): the client encodes round after round (a context once),
    # the server decodes the client's payload of round 0, expecting it.
    client = cepam.Codec(mech, secret=secret, client=0, clip=a.clip)
    server = cepam.Codec(mech, secret=secret, client=0, clip=a.clip,
                         allow_unclipped=a.clip is None)
    rounds = itertools.count()
    codec_payload = client.encode(x, round=next(rounds))
    calls = {
        "encode": lambda: cepam.encode(x, mech, **kw),
        "decode": lambda: cepam.decode(payload, secret=secret, threads=1),
        # as a user calls them: lattice="auto" and threads=None, the defaults
        "encode dflt": lambda: cepam.encode(x, mech, secret=secret, round=0, client=0,
                                            clip=a.clip),
        "decode dflt": lambda: cepam.decode(payload, secret=secret),
        "Codec enc": lambda: client.encode(x, round=next(rounds)),
        "Codec dec": lambda: server.decode(codec_payload, round=0),
    }
    if a.out:
        buffer = np.empty(m, np.float32)  # (a dict's: all its coordinates, its entries views)
        if a.entries == 1:
            buffer = buffer.reshape(np.shape(x))
        calls["decode out="] = lambda: cepam.decode(payload, secret=secret, threads=1,
                                                   out=buffer)
    if a.json:  # (--against's child: each row's best CPU time, one line)
        print(json.dumps({name: per_call(fn, a.calls, a.rounds)["cpu best"]
                          for name, fn in calls.items()}))
        return
    print(f"CPU: {cpu_model()}; cepam {cepam.__version__}; m = {m} float32"
          + (f" in {a.entries} entries" if a.entries > 1 else "") + ", "
          f"lattice {a.lattice}, clip {a.clip}, payload {len(payload)} bytes, threads=1")
    if a.profile:
        for name, fn in calls.items():
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(a.calls):
                fn()
            prof.disable()
            print(f"\n{name}, {a.calls} calls under cProfile (its own overhead included):")
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return
    print(f"microseconds per call, mean over {a.calls} calls: best and median of "
          f"{a.rounds} rounds")
    print(f"{'call':>12} {'CPU best':>9} {'CPU median':>11} {'wall best':>10} {'wall median':>12}"
          + (f" {'CPU ns/coord (best)':>20}" if a.out else ""))
    for name, fn in calls.items():
        r = per_call(fn, a.calls, a.rounds)
        print(f"{name:>12} {r['cpu best']:9.1f} {r['cpu median']:11.1f} {r['wall best']:10.1f} "
              f"{r['wall median']:12.1f}"
              + (f" {r['cpu best'] * 1e3 / m:20.2f}" if a.out else ""))


if __name__ == "__main__":
    main()
