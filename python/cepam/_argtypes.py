"""argparse value types shared by the ``cepam`` commands.

Each parses one command-line word and raises ``argparse.ArgumentTypeError``
(a usage error, exit code 2, naming the option) for a value out of range.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable, TypeVar

__all__ = ["checked", "integer", "positive_int", "nonnegative_int", "positive_float",
           "open_unit_interval"]

_T = TypeVar("_T", int, float)


def checked(kind: Callable[[str], _T], test: Callable[[_T], bool],
            what: str) -> Callable[[str], _T]:
    """An argparse type: ``kind(text)`` for which ``test`` holds, else an
    ArgumentTypeError saying it ``must be {what}``."""
    def parse(text: str) -> _T:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    return parse


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``minimum`` to ``maximum`` (both
    included; no upper bound for None), else an ArgumentTypeError naming the
    range, e.g. ``must be a non-negative integer at most 4611686018427387903,
    got -1``."""
    what = {0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer of at least {minimum}")
    if maximum is not None:
        what += f" at most {maximum}"
    return checked(int, lambda v: v >= minimum and (maximum is None or v <= maximum), what)


positive_int = integer(1)
nonnegative_int = integer(0)
positive_float = checked(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
open_unit_interval = checked(float, lambda v: 0 < v < 1, "in the open interval (0, 1)")
