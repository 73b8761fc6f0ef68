"""Where an encode or a decode spends its time, by stage (Linux `perf`).

    python bench/stage_profile.py                    # Z and E8, m = 10^7, rms/sigma = 10
    python bench/stage_profile.py --lattices Z --ratio 1 --m 1e6 --calls 5

A child process loads a float32 Gaussian update (or its payload) that this
process wrote beforehand, then encodes it (or decodes the payload) `calls`
times on one thread under `perf record`; the samples of the child are
grouped into the stages of the STAGES table by their symbol, and each
stage's share of all samples is printed (the child's start-up, numpy and the
loading included, in "other": a few percent at m = 10^7).

The symbols of the native core are needed: a wheel's `_core` is stripped,
so build one that is not, e.g.

    pip install --no-build-isolation -C cmake.define.CMAKE_STRIP=/bin/true .

(the script says so when it finds no cepam symbol).  Needs `perf` with
user-space sampling allowed (`kernel.perf_event_paranoid` at most 2).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections import defaultdict

import numpy as np

__all__ = ["STAGES", "stage_of", "main"]

# (stage, pattern of the symbols it is made of); the first match wins.
STAGES: tuple[tuple[str, str], ...] = (
    ("ChaCha keystream (dithers, latents)", r"blocks\d+_|chacha20|ChaCha"),
    ("latent radii (ziggurat, log, cos)", r"maxwell|gaussian_radii|gaussian_pair_radii|"
                                          r"laplace_radii|detmath"),
    ("dithers and reconstruction", r"reconstruct|dither"),
    ("LRSUQ trials (scale, quantize, accept)", r"trial|lrsuq_encode_range|scale_inputs|reciprocals|"
                                               r"with_latent|ChunkSideInfo|closest"),
    ("source model statistics", r"count_cells|SourceModel::statistic|fixed_avx2|any_avx2|"
                                r"model_stats|max_abs|cells_avx512|cell_loop"),
    ("conditional coder (per-symbol CDF)", r"cell_lanes|cell_kernels|encode_run|decode_in_groups|"
                                           r"decode_groups|CellCoder|BoxGroups|"
                                           r"cell_symbol|ball_probabilities|point_walk|"
                                           r"PointCoder|GeometricCoder"),
    ("rANS streams", r"AnsEncoder|AnsSegment|AnsDecoder|rans"),
    ("kernel: fresh pages", r"clear_page|page_fault|do_anonymous_page"),
    ("memory copies", r"memmove|memcpy|memset"),
)


def stage_of(symbol: str) -> str:
    """The STAGES entry a symbol belongs to, or "other"."""
    for stage, pattern in STAGES:
        if re.search(pattern, symbol):
            return stage
    return "other"


def _child(path: str, mode: str, lattice: str, sigma: float, calls: int) -> None:
    import cepam

    warnings.simplefilter("ignore", cepam.errors.PrivacyWarning)  # no clip: the coder's speed
    secret = bytes(32)
    if mode == "encode":
        x = np.load(path)
        for _ in range(calls):
            cepam.encode(x, cepam.Gaussian(sigma=sigma), secret=secret, round=0, client=0,
                         threads=1, lattice=lattice, coder="ans")
    else:
        with open(path, "rb") as f:
            payload = f.read()
        for _ in range(calls):
            cepam.decode(payload, secret=secret, threads=1)


def _profile(mode: str, lattice: str, m: int, ratio: float, sigma: float, calls: int,
             workdir: str) -> dict[str, float]:
    import cepam

    x = (np.random.default_rng(0).normal(size=m) * (ratio * sigma)).astype(np.float32)
    path = os.path.join(workdir, f"{mode}-{lattice}")
    if mode == "encode":
        np.save(path + ".npy", x)
        path += ".npy"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cepam.errors.PrivacyWarning)
            payload = cepam.encode(x, cepam.Gaussian(sigma=sigma), secret=bytes(32), round=0,
                                   client=0, threads=1, lattice=lattice, coder="ans")
        with open(path, "wb") as f:
            f.write(payload)
    data = path + ".perf"
    subprocess.run(["perf", "record", "-q", "-o", data, "--", sys.executable, __file__,
                    "--child", mode, path, lattice, repr(sigma), str(calls)], check=True,
                   env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    # (sample counts, -n: perf's percentages, rounded to 0.01 each, lose
    # about a percent over the many symbols of a few samples)
    report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-n",
                             "--sort", "sym", "--percent-limit", "0"],
                            capture_output=True, text=True, check=True).stdout
    counts: dict[str, int] = defaultdict(int)
    for line in report.splitlines():
        match = re.match(r"\s+[0-9.]+%\s+([0-9]+)\s+\[[.k]\]\s+(.*)", line)
        if match:
            counts[stage_of(match.group(2))] += int(match.group(1))
    if not any(stage != "other" for stage in counts):
        sys.exit("no cepam symbol in the profile: build the extension unstripped "
                 "(this script's docstring says how)")
    total = sum(counts.values())
    return {stage: 100.0 * count / total for stage, count in counts.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=float, default=1e7)
    parser.add_argument("--ratio", type=float, default=10.0, help="rms / sigma of the update")
    parser.add_argument("--sigma", type=float, default=1e-3)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--lattices", nargs="+", default=["Z", "E8"])
    args = parser.parse_args(argv)
    m = int(args.m)
    columns = [(mode, lattice) for lattice in args.lattices for mode in ("encode", "decode")]
    with tempfile.TemporaryDirectory() as workdir:
        results = {c: _profile(*c, m, args.ratio, args.sigma, args.calls, workdir)
                   for c in columns}
    print(f"share of samples (%), one thread, m = {m}, rms/sigma = {args.ratio}, "
          f"{args.calls} calls a column")
    names = [stage for stage, _ in STAGES] + ["other"]
    header = "| stage | " + " | ".join(f"{lat} {mode}" for mode, lat in columns) + " |"
    print(header)
    print("|---|" + "---:|" * len(columns))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{results[c].get(name, 0.0):.1f}" for c in columns)
              + " |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, path, lattice, sigma, calls = sys.argv[2:7]
        _child(path, mode, lattice, float(sigma), int(calls))
    else:
        main()
