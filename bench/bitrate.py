"""The bitrate benchmark: writes docs/bitrate/bitrate.{csv,md,png}.

    python bench/bitrate.py                 # full run (m = 200000, 20000 draws)
    python bench/bitrate.py --quick --out /tmp/bitrate

The same as ``cepam bench bitrate``; see ``cepam.bitrate`` for what is
measured and computed.
"""

from __future__ import annotations

import argparse
import os
import sys

from cepam.bitrate.cli import handler, register

if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(prog="bench/bitrate.py")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    # (--overwrite: this script regenerates the shipped results in place)
    argv = ["bench", "bitrate", "--out", os.path.join(root, "docs", "bitrate"), "--overwrite",
            *sys.argv[1:]]
    args = parser.parse_args(argv)
    sys.exit(handler(args))
