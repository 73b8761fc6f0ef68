"""Length hiding: zero padding inside the sealed section.

A payload's body is encrypted (:mod:`cepam.sealing`), but its length is not:
compression makes the length depend on the update (a larger update costs
more bits).  ``encode(..., pad=...)`` pads the sealed section with zero
bytes (encrypted like the rest) so that the payload's total length is

* ``pad=None``: not padded (the default);
* ``pad="bucket"``: the smallest ``ceil(2^(j/4))`` bytes (``j`` integer) at
  least the unpadded length: a quarter-octave bucket, at most 19 % (on
  average about 9 %) longer, so the length tells only which of about four
  buckets per doubling the payload fell into;
* ``pad="max"``: :func:`max_payload_bytes`, a size fixed by public
  parameters alone (mechanism and scale, clip, coder, lattice, number of
  coordinates, structure), so that every update of that configuration gives
  payloads of one length;
* ``pad=<int>``: exactly that many bytes (a size the deployment fixes).

With ``"max"`` or an int, a payload that does not fit raises
:class:`~cepam.errors.EncodingError` (nothing is sent; a caller that then
sends something else reveals that it happened).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

from ._native import core as _core
from .errors import EncodingError, InvalidArgumentError, InvalidTypeError
from .lattices import LATTICE_CODES
from .mechanisms import Mechanism, core_params
from .payload import CODERS, MAX_PADDING

__all__ = ["PAD_MODES", "check_pad", "bucket_length", "max_payload_bytes", "padding_bytes"]

PAD_MODES = ("bucket", "max")

# Slack of max_payload_bytes above the information bound, in bits: per
# coordinate for the lattice coordinates M (by coder name; more by the noise
# law's ``pad_slack`` (Laplace, cepam.mechanisms), and for Golomb on Z^n
# (n > 1) and on A2, D4 and E8, whose coordinates and trial indices its
# fixed codes fit poorly), per sub-vector for the trial index H (above its
# entropy), and per payload (source model, rANS states, Golomb parameters,
# section padding).  Chosen from the gaps measured on updates at the clip
# norm (Gaussian, uniform, Laplace, Student-t 1 and 2 dof, sparse, constant
# and two-valued; m from 2,000 to 200,000; rms / scale from 0.01 to 1000):
# the smallest margin left is in docs/privacy.md.
_SLACK_M = {"golomb": 1.5, "ans": 0.75}
_SLACK_M_GOLOMB_ROOT_LATTICE = 1.75
_SLACK_M_GOLOMB_ZN = 0.75  # Z^n, n > 1
_SLACK_H = {"golomb": 1.0, "ans": 0.1}
# The ANS coder's trial-index table stops at 64: a larger index costs an
# escape (24 bits) and 16 raw bits, with probability (1 - p)^64.
_ANS_H_TABLE, _ANS_H_ESCAPE_BITS = 64, 40.0
_SLACK_BYTES = 256
# 0.5 log2(1 + s^2) bounds I(X; X + Z) for Gaussian Z of the update's power
# ratio s^2; noise of another law and the same variance allows at most its
# ``entropy_excess`` bits more (h(N(0, v)) - h(Z), cepam.mechanisms).
_Z = LATTICE_CODES["Z"]


def check_pad(pad: object) -> str | int | None:
    """pad as given, checked: None, "bucket", "max" or a positive int."""
    if pad is None:
        return None
    if isinstance(pad, str):
        if pad not in PAD_MODES:
            raise InvalidArgumentError(
                f"pad must be None, {PAD_MODES[0]!r}, {PAD_MODES[1]!r} or a size in bytes, "
                f"got {pad!r}")
        return pad
    if isinstance(pad, bool):
        raise InvalidTypeError("pad must be None, a str or an int, got bool")
    try:
        size = operator.index(pad)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidTypeError(
            f"pad must be None, a str or an int, got {type(pad).__name__}") from None
    if size <= 0:
        raise InvalidArgumentError(f"pad must be a positive number of bytes, got {size}")
    return int(size)


def bucket_length(length: int) -> int:
    """The smallest ``ceil(2^(j/4))`` (``j`` a non-negative integer) that is
    at least ``length``, computed exactly in integers."""
    if length <= 1:
        return 1
    j = 4 * (length.bit_length() - 1)  # 2^(j/4) <= length
    while True:
        power = 1 << j
        root = math.isqrt(math.isqrt(power))  # floor(2^(j/4))
        size = root if root ** 4 == power else root + 1
        if size >= length:
            return size
        j += 1


def _geometric_entropy_bits(p: float) -> float:
    """Entropy in bits of Geometric(p) on {1, 2, ...}."""
    if p >= 1.0:
        return 0.0
    q = 1.0 - p
    return (-q * math.log2(q) - p * math.log2(p)) / p


def max_payload_bytes(mechanism: Mechanism, *, clip: float, m: int, coder: int,
                      lattices: Sequence[tuple[int, int]], fixed_bytes: int) -> int:
    """The payload size ``pad="max"`` pads to, from public parameters alone.

    For an update of ``m`` coordinates clipped to l2 norm ``clip`` the
    per-coordinate power is at most ``s^2 = clip^2 / m`` (in units of the
    noise variance), and by concavity the information any coder must carry
    is at most ``m / 2 log2(1 + s^2)`` bits (plus the noise law's excess);
    the bound adds, for the largest of ``lattices`` ((code, n) pairs), the
    entropy of the trial index per sub-vector and the slacks above, and
    ``fixed_bytes`` (public header, sealed header, tag).

    It is not a worst case over every update: an update whose coded size
    exceeds it (none of the sources measured in docs/privacy.md did) raises
    EncodingError when padded.
    """
    if math.isinf(clip):
        raise InvalidArgumentError("pad='max' needs a clip: the bound is derived from it")
    s2 = (clip / mechanism.std) ** 2 / m if m else 0.0
    coder_name = CODERS[coder]
    per_coordinate = (0.5 * math.log2(1.0 + s2) + mechanism.entropy_excess
                      + _SLACK_M[coder_name] + mechanism.pad_slack)
    worst = 0.0
    for code, n in lattices:
        p = _core.acceptance_probability(core_params(mechanism, lattice=code, n=n))
        subvectors = -(-m // n)
        extra = 0.0
        if coder_name == "golomb" and code != _Z:
            extra = _SLACK_M_GOLOMB_ROOT_LATTICE
        elif coder_name == "golomb" and n > 1:
            extra = _SLACK_M_GOLOMB_ZN
        h_bits = _geometric_entropy_bits(p) + _SLACK_H[coder_name]
        if coder_name == "ans":
            h_bits += (1.0 - p) ** _ANS_H_TABLE * _ANS_H_ESCAPE_BITS
        bits = m * (per_coordinate + extra) + subvectors * h_bits
        worst = max(worst, bits)
    return fixed_bytes + _SLACK_BYTES + math.ceil(worst / 8.0)


def padding_bytes(pad: str | int | None, unpadded: int, *, max_bytes: int | None) -> int:
    """How many zero bytes take a payload of ``unpadded`` bytes to its padded
    length; ``max_bytes`` is :func:`max_payload_bytes` (needed for "max").

    Raises:
        EncodingError: the payload is longer than the fixed size.
    """
    if pad is None:
        return 0
    if pad == "bucket":
        target = bucket_length(unpadded)
    else:
        target = int(max_bytes if pad == "max" else pad)  # type: ignore[arg-type]
    if unpadded > target:
        raise EncodingError(
            f"the payload takes {unpadded} bytes, more than the padded size {target} "
            f"(pad={pad!r}); pass a larger pad= size")
    if target - unpadded > MAX_PADDING:
        raise EncodingError(f"padding of more than {MAX_PADDING} bytes is not supported")
    return target - unpadded
