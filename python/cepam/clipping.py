"""Adaptive clipping: the clip follows a target quantile of the update norms.

Andrew, Thakkar, McMahan and Ramaswamy (2021), "Differentially private
learning with adaptive clipping", geometric update: each sampled client
reports whether its update's l2 norm was within the round's clip ``C_t``
(``b_i = 1`` if ``||update_i|| <= C_t``, before clipping), noised by the
client itself; the server turns the noised bits into ``bbar``, the noised
fraction of unclipped updates, and sets

    ``C_{t+1} = C_t * exp(-eta * (bbar - gamma))``

with ``gamma`` the target quantile and ``eta`` the learning rate.  When more
than a fraction ``gamma`` of the updates is within the clip the clip shrinks,
otherwise it grows, so it settles at the ``gamma``-quantile of the norms.
The noise multiplier is held fixed (the noise scales with the clip), so the
privacy accounting does not depend on the clips the run takes.

>>> clip = AdaptiveClip(1.0, target_quantile=0.5, learning_rate=0.2)
>>> round(clip.update(1.0), 4)   # every update within the clip: it shrinks
0.9048
"""

from __future__ import annotations

import math
import numbers

from ._checks import check_positive
from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["AdaptiveClip"]


class AdaptiveClip:
    """The state of an adaptive clip and its update rule.

    Args:
        initial: the first round's clip ``C_0`` (> 0, finite), in the update's
            units.
        target_quantile: ``gamma`` in (0, 1), the fraction of updates meant to
            be within the clip (0.5: the median norm).
        learning_rate: ``eta`` > 0, the step of the geometric update.

    Raises:
        InvalidTypeError: a value that is not a real number.
        InvalidArgumentError: a value out of range.
    """

    def __init__(self, initial: float, *, target_quantile: float = 0.5,
                 learning_rate: float = 0.2) -> None:
        self._clip = check_positive("initial", initial)
        quantile = check_positive("target_quantile", target_quantile)
        if not quantile < 1.0:
            raise InvalidArgumentError(f"target_quantile must be in (0, 1), got {quantile!r}")
        self.target_quantile = quantile
        self.learning_rate = check_positive("learning_rate", learning_rate)

    @property
    def clip(self) -> float:
        """The current clip ``C_t``."""
        return self._clip

    def update(self, noised_unclipped_fraction: float) -> float:
        """One geometric step from the round's noised fraction of unclipped
        updates ``bbar`` (any finite real: the noise may take it outside
        [0, 1]); returns the new clip ``C_{t+1}``.

        Raises:
            InvalidTypeError: ``bbar`` is not a real number.
            InvalidArgumentError: ``bbar`` is not finite, or the new clip
                would not be a positive finite number.
        """
        bbar = noised_unclipped_fraction
        if isinstance(bbar, bool) or not isinstance(bbar, numbers.Real):
            raise InvalidTypeError(f"the noised unclipped fraction must be a real number, "
                                   f"got {type(bbar).__name__}")
        bbar = float(bbar)
        if not math.isfinite(bbar):
            raise InvalidArgumentError(f"the noised unclipped fraction must be finite, "
                                       f"got {bbar!r}")
        new = self._clip * math.exp(-self.learning_rate * (bbar - self.target_quantile))
        if not (math.isfinite(new) and new > 0.0):
            raise InvalidArgumentError(f"the clip would become {new!r}")
        self._clip = new
        return new

    def __repr__(self) -> str:
        return (f"AdaptiveClip(clip={self._clip!r}, target_quantile={self.target_quantile!r}, "
                f"learning_rate={self.learning_rate!r})")
