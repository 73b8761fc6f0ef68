"""argparse value types shared by the ``cepam`` commands.

Each parses one command-line word and raises ``argparse.ArgumentTypeError``
(a usage error, exit code 2, naming the option) for a value out of range.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

__all__ = ["checked", "positive_int", "nonnegative_int", "positive_float", "open_unit_interval"]


def checked(kind: Callable[[str], float], test: Callable[[float], bool],
            what: str) -> Callable[[str], float]:
    """An argparse type: ``kind(text)`` for which ``test`` holds, else an
    ArgumentTypeError saying it ``must be {what}``."""
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    return parse


positive_int = checked(int, lambda v: v >= 1, "a positive integer")
nonnegative_int = checked(int, lambda v: v >= 0, "a non-negative integer")
positive_float = checked(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
open_unit_interval = checked(float, lambda v: 0 < v < 1, "in the open interval (0, 1)")
