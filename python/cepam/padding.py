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
* ``pad="levels"``: the smallest of :data:`LEVELS` lengths (:func:`level_lengths`)
  at least the unpadded length: :func:`max_payload_bytes` and the lengths
  a third of an octave (a factor ``2^(1/3)``, 1.26) apart below it, so that
  the length takes one of 8 values fixed by public parameters (it tells at
  most 3 bits about the update) and a payload at least the lowest level
  (``max_payload_bytes / 2^(7/3)``, a fifth of it) is at most 26 % longer;
* ``pad=<int>``: exactly that many bytes (a size the deployment fixes).

With ``"max"``, ``"levels"`` or an int, a payload that does not fit raises
:class:`~cepam.errors.EncodingError` (nothing is sent; a caller that then
sends something else reveals that it happened).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

from ._checks import check_int
from ._native import core as _core
from .auto import _bound_options, _check_lattice, _check_prefer
from .errors import EncodingError, InvalidArgumentError, InvalidTypeError
from .keys import TAG_BYTES
from .lattices import LATTICE_CODES
from .mechanisms import Mechanism, core_params, mechanism_from_code
from .payload import (CODERS, DIGEST_BYTES, MAX_PADDING, SEALED_HEADER_BYTES, is_bare,
                      parse_header)

__all__ = ["PAD_MODES", "LEVELS", "LEVELS_PER_OCTAVE", "MAX_LENGTH", "MAX_LEVEL_COUNT",
           "MAX_LEVELS_PER_OCTAVE", "check_pad", "hides_at_least",
           "bucket_length", "level_lengths", "max_payload_bytes", "padding_bytes", "uses_bound",
           "fixed_bytes", "length_fits", "is_padded_as"]

PAD_MODES = ("bucket", "max", "levels")
# pad="levels": this many lengths, consecutive ones a factor 2^(1/LEVELS_PER_OCTAVE)
# apart, the largest max_payload_bytes (chosen from the table of
# bench/pad_rules.py in docs/privacy.md, section 9).
LEVELS = 8
LEVELS_PER_OCTAVE = 3

#: The longest payload length the padding functions take: the tag
#: authenticates a payload's length as a u64 (docs/format.md, Keys), and a
#: padded payload is far shorter (max_payload_bytes: a header, 256 bytes and
#: at most payload.MAX_PADDING, 4 GiB, of body).
MAX_LENGTH = 1 << 64
#: level_lengths' largest ``count`` and ``per_octave``: far more levels, and
#: finer, than any rule needs (pad="levels" uses LEVELS and
#: LEVELS_PER_OCTAVE: 8 levels a third of an octave apart; pad="bucket" is a
#: quarter octave).
MAX_LEVEL_COUNT = 1024
MAX_LEVELS_PER_OCTAVE = 64

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
@dataclass(frozen=True)
class _CoderSlack:
    """A coder's slack above the bound, in bits: per coordinate (``m``; on
    A2, D4, E8 ``m_root`` more, on Z^n with n > 1 ``m_zn`` more) and per
    sub-vector (``h``); a trial-index table stopping at ``h_table`` costs
    ``h_escape`` bits for a larger index (``h_table`` 0: no table)."""

    m: float
    h: float
    m_root: float = 0.0
    m_zn: float = 0.0
    h_table: int = 0
    h_escape: float = 0.0


# One row a coder of the core's table (payload.CODERS), by name.  The ANS
# coder's trial-index table stops at 64: a larger index costs an escape (24
# bits) and 16 raw bits, with probability (1 - p)^64.
_CODER_SLACK = {
    "ans": _CoderSlack(m=0.75, h=0.1, h_table=64, h_escape=40.0),
    "golomb": _CoderSlack(m=1.5, h=1.0, m_root=1.75, m_zn=0.75),
}
_SLACK_BYTES = 256
# 0.5 log2(1 + s^2) bounds I(X; X + Z) for Gaussian Z of the update's power
# ratio s^2; noise of another law and the same variance allows at most its
# ``entropy_excess`` bits more (h(N(0, v)) - h(Z), cepam.mechanisms).
_Z = LATTICE_CODES["Z"]


def check_pad(pad: object) -> str | int | None:
    """pad as given, checked: None, "bucket", "max", "levels" or a positive int.

    Raises:
        InvalidArgumentError: an unknown mode, or a size that is not positive.
        InvalidTypeError: neither None, a str nor an int (a bool included).
    """
    if pad is None:
        return None
    if isinstance(pad, str):
        if pad not in PAD_MODES:
            modes = ", ".join(repr(mode) for mode in PAD_MODES)
            raise InvalidArgumentError(
                f"pad must be None, {modes} or a size in bytes, got {pad!r}")
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


#: The padding rules by how little a payload's length can tell, least
#: hiding first: None (the coded size itself), "bucket" (its quarter-octave
#: bucket), "levels" (one of LEVELS lengths: at most log2(LEVELS) bits),
#: "max" (one length: nothing); a size in bytes hides as "max" does.
_HIDING = (None, "bucket", "levels", "max")


def hides_at_least(pad: str | int | None, floor: str | int | None) -> bool:
    """Whether padding rule ``pad`` hides at least as much of an update as
    rule ``floor`` (both as :func:`check_pad` takes them): by the order
    None, "bucket", "levels", "max", a size in bytes ranking with "max"
    (one length for every update).

    Raises:
        InvalidArgumentError, InvalidTypeError: as :func:`check_pad`.
    """
    def rank(rule: str | int | None) -> int:
        rule = check_pad(rule)
        return _HIDING.index("max" if isinstance(rule, int) else rule)

    return rank(pad) >= rank(floor)


def bucket_length(length: int) -> int:
    """The smallest ``ceil(2^(j/4))`` (``j`` a non-negative integer) that is
    at least ``length``, computed exactly in integers.

    Args:
        length: a payload's length in bytes, an int (numpy integers count)
            from 0 to :data:`MAX_LENGTH`.

    Raises:
        InvalidTypeError: ``length`` is not an integer.
        InvalidArgumentError: it is negative or above :data:`MAX_LENGTH`.
    """
    length = check_int("length", length, minimum=0, maximum=MAX_LENGTH)
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


def uses_bound(pad: str | int | None) -> bool:
    """Whether ``pad`` needs :func:`max_payload_bytes` ("max" and "levels")."""
    return pad in ("max", "levels")


def level_lengths(max_bytes: int, *, count: int = LEVELS,
                  per_octave: int = LEVELS_PER_OCTAVE) -> tuple[int, ...]:
    """The ``count`` lengths ``pad="levels"`` pads to, largest first:
    ``ceil(max_bytes / 2^(j / per_octave))`` for ``j = 0 .. count - 1``
    (by default :data:`LEVELS` and :data:`LEVELS_PER_OCTAVE`), computed
    exactly in integers (the smallest ``L`` with ``L^q 2^j >= max_bytes^q``,
    ``q = per_octave``), so that they depend on ``max_bytes`` alone.  A
    payload of ``n`` bytes between the lowest and ``max_bytes`` is padded
    by at most a factor ``2^(1 / per_octave)`` (plus a byte of rounding);
    the length takes at most ``count`` values: ``log2(count)`` bits.

    Raises:
        InvalidArgumentError: ``max_bytes``, ``count`` or ``per_octave`` is
            not positive, or above :data:`MAX_LENGTH`,
            :data:`MAX_LEVEL_COUNT` or :data:`MAX_LEVELS_PER_OCTAVE`.
        InvalidTypeError: one of them is not an int.
    """
    top = check_int("max_bytes", max_bytes, minimum=1, maximum=MAX_LENGTH)
    count = check_int("count", count, minimum=1, maximum=MAX_LEVEL_COUNT)
    q = check_int("per_octave", per_octave, minimum=1, maximum=MAX_LEVELS_PER_OCTAVE)
    target = top ** q
    # the smallest size with size^q 2^j >= top^q: the q-th root, rounded up,
    # of ceil(top^q / 2^j)
    return tuple(_ceil_root(-(-target >> j), q) for j in range(count))


def _ceil_root(n: int, q: int) -> int:
    """The smallest integer ``r >= 1`` with ``r^q >= n`` (``n >= 1``): integer
    Newton steps from just above the root's float estimate (two or three)."""
    x = int(2.0 ** (math.log2(n) / q) * (1.0 + 1e-9)) + 1  # (float's error: ~1e-14)
    if x ** q < n:  # not above the root after all: start from a power of two that is
        x = 1 << -(-n.bit_length() // q)
    while True:  # Newton from above decreases to floor(n^(1/q))
        y = ((q - 1) * x + n // x ** (q - 1)) // q
        if y >= x:
            break
        x = y
    return x if x ** q >= n else x + 1


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

    Raises:
        InvalidArgumentError: no clip.
        EncodingError: a bound beyond the 4 GiB padding can reach (for
            example a clip beyond float64 in units of the noise std).
    """
    if math.isinf(clip):
        raise InvalidArgumentError(
            "pad='max' and pad='levels' need a clip: the bound is derived from it")
    ratio = clip / mechanism.std
    if not m:
        log2_1_s2 = 0.0  # log2(1 + s^2), s^2 = ratio^2 / m
    elif ratio > 2.0**30 * math.sqrt(m):  # (s^2 > 2^60: no overflow of ratio^2 from 1e154 up)
        log2_1_s2 = 2.0 * math.log2(ratio) - math.log2(m)
    else:
        log2_1_s2 = math.log2(1.0 + ratio ** 2 / m)
    slack = _CODER_SLACK[CODERS[coder]]
    per_coordinate = (0.5 * log2_1_s2 + mechanism.entropy_excess + slack.m
                      + mechanism.pad_slack)
    worst = 0.0
    for code, n in lattices:
        p = _core.acceptance_probability(core_params(mechanism, lattice=code, n=n))
        subvectors = -(-m // n)
        extra = slack.m_root if code != _Z else slack.m_zn if n > 1 else 0.0
        h_bits = _geometric_entropy_bits(p) + slack.h
        if slack.h_table:
            h_bits += (1.0 - p) ** slack.h_table * slack.h_escape
        bits = m * (per_coordinate + extra) + subvectors * h_bits
        worst = max(worst, bits)
    if not worst / 8.0 <= MAX_PADDING:
        raise EncodingError(f"pad='max' and pad='levels' bound this payload at "
                            f"{worst / 8.0:.3g} bytes (clip {clip:g} is {ratio:.3g} times the "
                            f"noise std), beyond the {MAX_PADDING} bytes padding can reach: "
                            "pass a smaller clip or pad=None")
    return fixed_bytes + _SLACK_BYTES + math.ceil(worst / 8.0)


def padding_bytes(pad: str | int | None, unpadded: int, *, max_bytes: int | None) -> int:
    """How many zero bytes take a payload of ``unpadded`` bytes to its padded
    length; ``max_bytes`` is :func:`max_payload_bytes` (needed for "max" and
    "levels").

    Raises:
        EncodingError: the payload is longer than the fixed size (for
            "levels": than ``max_bytes``).
    """
    if pad is None:
        return 0
    if pad == "bucket":
        target = bucket_length(unpadded)
    elif pad == "levels":
        levels = level_lengths(int(max_bytes))  # type: ignore[arg-type]
        target = min((size for size in levels if size >= unpadded), default=levels[0])
    else:
        target = int(max_bytes if pad == "max" else pad)  # type: ignore[arg-type]
    if unpadded > target:
        raise EncodingError(
            f"the payload takes {unpadded} bytes, more than the padded size {target} "
            f"(pad={pad!r}); pass a larger pad= size")
    if target - unpadded > MAX_PADDING:
        raise EncodingError(f"padding of more than {MAX_PADDING} bytes is not supported")
    return target - unpadded


def fixed_bytes(head_bytes: int, *, bare: bool) -> int:
    """A payload's bytes outside its body and padding: its public header
    (``head_bytes``), the sealed header, a bare payload's structure digest
    (``bare``: encoded with ``structure=False``) and the tag; the
    ``fixed_bytes`` of :func:`max_payload_bytes`."""
    return head_bytes + SEALED_HEADER_BYTES + (DIGEST_BYTES if bare else 0) + TAG_BYTES


def length_fits(pad: str | int | None, length: int, *, max_bytes: int | None) -> bool:
    """Whether ``length`` bytes is a whole payload's length that padding rule
    ``pad`` gives: any length (None), a quarter-octave bucket
    (:func:`bucket_length`), ``max_bytes`` ("max"), one of
    :func:`level_lengths` of ``max_bytes`` ("levels"), or the size (an int).
    ``max_bytes`` (:func:`max_payload_bytes`) is needed for "max" and
    "levels" only."""
    if pad is None:
        return True
    if pad == "bucket":
        return bucket_length(length) == length
    if pad == "levels":
        return length in level_lengths(int(max_bytes))  # type: ignore[arg-type]
    return length == (max_bytes if pad == "max" else pad)


def is_padded_as(payload: bytes | bytearray | memoryview, pad: object, *,
                 lattice: object = "auto", dim: object = None,
                 prefer: object = "balanced") -> bool:
    """Whether ``payload``'s length is one that ``cepam.encode(..., pad=pad,
    lattice=lattice, dim=dim, prefer=prefer)`` gives a payload of its
    public header (mechanism and scale, clip, coder, number of coordinates,
    structure): a check of what an eavesdropper saw, from public fields
    alone, before the payload is opened.  A client that padded less than it
    was told to (or whose unauthenticated round configuration was altered on
    its way) sent a length outside the rule; the length has then told what
    the rule was to hide, and this only detects it (a node's floor,
    ``cepam.flower.mod.MIN_PAD_KEY``, prevents it).  A length inside the
    rule proves nothing more: a payload padded to another rule's length can
    fall on one of this rule's lengths.

    Args:
        payload: the payload.
        pad: the padding rule (as ``cepam.encode`` takes it).
        lattice, dim, prefer: the encoder's (they fix the bound of "max" and
            "levels": :func:`max_payload_bytes` over every lattice the
            setting may choose).

    Raises:
        FormatError: the public header is malformed.
        InvalidArgumentError, InvalidTypeError: a bad ``pad``, ``lattice``,
            ``dim`` or ``prefer``, or a "max" or "levels" bound that the
            header's clip does not allow (no clip).
    """
    pad = check_pad(pad)
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidTypeError(f"payload must be bytes, got {type(payload).__name__}")
    header, offset = parse_header(payload)
    mechanism = mechanism_from_code(header.mechanism, header.scale)
    choice = _check_lattice(lattice, dim, mechanism)
    prefer = _check_prefer(prefer, choice)
    max_bytes = None
    if uses_bound(pad):
        try:
            max_bytes = max_payload_bytes(
                mechanism, clip=header.clip, m=header.m, coder=header.coder,
                lattices=_bound_options(choice, mechanism, header.coder, prefer),
                fixed_bytes=fixed_bytes(offset, bare=is_bare(payload)))
        except EncodingError:  # a bound beyond what padding reaches: no payload pads to it
            return False
    return length_fits(pad, len(payload), max_bytes=max_bytes)
