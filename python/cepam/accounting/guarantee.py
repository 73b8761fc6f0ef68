"""The value type for a one-round privacy statement."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["RoundGuarantee"]


class RoundGuarantee(NamedTuple):
    """One round is ``(epsilon, delta)``-DP.

    Attributes:
        epsilon: the round's epsilon (>= 0, natural-log units).
        delta: the round's delta in [0, 1].
        eps_tilde: the base mechanism's epsilon the pair was derived from
            (the paper's ``eps_t``; ``epsilon = log(1 + p (e^eps_tilde - 1))``),
            or ``None`` when the pair was obtained otherwise.
    """

    epsilon: float
    delta: float
    eps_tilde: float | None = None
