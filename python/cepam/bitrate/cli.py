"""``cepam bench bitrate``: the bitrate benchmark from the command line.

Examples::

    cepam bench bitrate                      # full run (a few minutes)
    cepam bench bitrate --out /tmp/b --quick # smaller m, fewer points and draws

Writes ``bitrate.csv``, ``bitrate.md`` and ``bitrate.png`` (matplotlib; skipped
with a note if it is missing) into ``--out`` -- by default a new folder
``cepam-bitrate-YYYYmmdd-HHMMSS`` in the current directory -- and never
overwrites earlier results: ``--out`` is checked before the run (created if
missing; a path that is not a writable directory, or one that already holds
result files, is an error, exit 1, unless ``--overwrite``; the shipped
``docs/bitrate`` is regenerated with ``python bench/bitrate.py``, which
passes it) -- and prints, on stderr, its
progress and where it wrote (the report is in the folder only: nothing on
stdout, so that it is not written twice).  scipy and matplotlib are
imported only when the command runs.

``cepam bench`` is a command group: other benchmarks add their own
sub-commands with :func:`bench_subparsers`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from typing import Any

from .._argtypes import integer, positive_int
from ..cli import requires
from .benchmark import MAX_SEED, MIN_DRAWS

__all__ = ["register", "handler", "bench_subparsers", "new_directory"]

_HELP = "bits per coordinate of CEPAM against scalar SDQ, Gaussian+SDQ and I(X; X+Z)"
_QUICK_GRID = (0.1, 1.0, 10.0, 100.0)


def bench_subparsers(subparsers: Any) -> Any:
    """The sub-parsers action of the ``cepam bench`` group, created on first use."""
    parser = subparsers.choices.get("bench")
    if parser is None:
        parser = subparsers.add_parser(
            "bench", help="benchmarks (bitrate, ...)",
            description="Benchmarks; each writes its results as files.")
        parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
        parser._cepam_bench = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    return parser._cepam_bench


def new_directory(prefix: str) -> str:
    """Creates and returns a new folder ``./PREFIX-YYYYmmdd-HHMMSS`` (with
    ``-2``, ``-3``, ... appended if that name is taken)."""
    base = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    for i in itertools.count(1):
        path = base if i == 1 else f"{base}-{i}"
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")  # pragma: no cover


def _directory_path(text: str) -> str:
    """argparse type of ``--out``: a non-empty path."""
    if not text:
        raise argparse.ArgumentTypeError("must be a directory path, got an empty string")
    return text


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``bench bitrate`` to the ``cepam`` parser's ``subparsers``."""
    p = bench_subparsers(subparsers).add_parser("bitrate", help=_HELP, description=_HELP + ".")
    p.add_argument("--out", type=_directory_path, default=None,
                   help="output directory, created if missing; it must not hold results "
                        "already (default: a new folder ./cepam-bitrate-YYYYmmdd-HHMMSS)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace bitrate.csv, bitrate.md and bitrate.png already in --out")
    p.add_argument("--m", type=positive_int, default=None,
                   help="coordinates per payload (default 200000; --quick: 20000)")
    p.add_argument("--draws", type=integer(MIN_DRAWS), default=None,
                   help=f"Monte Carlo draws for the ideal rates, at least {MIN_DRAWS} "
                        "(default 20000; --quick: 4000)")
    p.add_argument("--seed", type=integer(0, MAX_SEED), default=0,
                   help=f"seed of sources and Monte Carlo, 0 to {MAX_SEED} (2^62 - 1)")
    p.add_argument("--quick", action="store_true",
                   help=f"s/sigma in {_QUICK_GRID}, m = 20000, 4000 draws (a smoke run)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.set_defaults(func=handler)
    requires(p, "scipy", extra="bench")
    return p


def handler(args: argparse.Namespace) -> int:
    from .benchmark import run_benchmark
    from .report import prepare_output_directory, write_results
    from .theory import S_OVER_SIGMA

    m = args.m or (20_000 if args.quick else 200_000)
    draws = args.draws or (4000 if args.quick else 20_000)
    grid = _QUICK_GRID if args.quick else S_OVER_SIGMA
    plot = not args.no_plot
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print('cepam bench bitrate: matplotlib is not installed, so no plot '
                  '(pip install "cepam[bench]")', file=sys.stderr)
            plot = False
    if args.out is None:
        out = new_directory("cepam-bitrate")
    else:  # checked now, not after a run of minutes
        out = args.out
        prepare_output_directory(out, overwrite=args.overwrite)
    t0 = time.perf_counter()
    rows = run_benchmark(m=m, grid=grid, draws=draws, seed=args.seed,
                         log=lambda msg: print(msg, file=sys.stderr, flush=True))
    seconds = time.perf_counter() - t0
    paths = write_results(rows, out, m=m, seconds=seconds, draws=draws, plot=plot,
                          overwrite=args.overwrite)
    names = ", ".join(os.path.basename(p) for p in paths.values())
    print(f"cepam bench bitrate: wrote {names} to {os.path.abspath(out)}", file=sys.stderr)
    return 0
