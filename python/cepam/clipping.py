"""Adaptive clipping (Andrew, Thakkar, McMahan and Ramaswamy 2021) and the
noised clipped-or-not count, for the built-in harness and the Flower strategy.

Each round ``t`` every sampled client compares the l2 norm of its update
(before clipping) with the round's clip ``C_t`` and reports the bit
``b_i = 1`` if ``norm <= C_t`` else ``0``, plus its own noise
``N(0, count_sigma^2)`` (:func:`noisy_bit`).  The server sums the reports
and turns the sum into the noised unclipped fraction ``bbar``
(:func:`noised_unclipped_fraction`):

* ``relation="replace-one"``: ``bbar = sum / k`` (k the clients that
  reported);
* ``relation="add-remove"``: ``bbar = (sum + N(0, (T - k) count_sigma^2)) / n``
  with ``T = cepam.accounting.cohort_cap(clients=n, sample_rate=q)`` and
  ``n`` the expected clients per round (the fixed denominator: the noise on
  the sum is always ``T`` clients' worth, so it does not reveal ``k``).

``1 - bbar`` is the per-round *noised clipped fraction*, the metric to
publish (for a fixed clip too).  With adaptive clipping
(:class:`AdaptiveClip`) the clip follows the geometric rule
``C_{t+1} = C_t exp(-eta (bbar - gamma))``, which moves ``C`` towards the
``gamma`` quantile of the update norms.  The per-coordinate noise scales with
the clip, ``sigma_t = (sigma / C_0) C_t``, so the noise multiplier the
accountant sees is the same every round; the count's own cost is accounted by
passing ``count_sigma`` to :func:`cepam.accounting.client_epsilon`.

:func:`default_count_sigma` is Andrew et al.'s suggestion: noise of std
``n / 20`` on the count sum (for ``T`` clients' worth of per-client noise,
per client ``(n / 20) / sqrt(T)``).

>>> clip = AdaptiveClip(initial_clip=1.0, target_quantile=0.5, learning_rate=0.2)
>>> round(clip.update(1.0), 4)  # every client unclipped: the clip shrinks
0.9048
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Sequence

import numpy as np

from ._checks import check_nonnegative, check_positive, check_real
from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["AdaptiveClip", "noisy_bit", "noised_unclipped_fraction", "default_count_sigma",
           "RELATIONS", "CLIP_RANGE"]

#: The neighbouring relations (as in :mod:`cepam.accounting`).
RELATIONS = ("replace-one", "add-remove")

#: :class:`AdaptiveClip` keeps its clip within this factor of the initial clip
#: either way (and within float64's normal range): the geometric rule,
#: driven by a noised fraction far from [0, 1] or by a large learning rate,
#: would otherwise reach 0 or overflow.  A clip 1e100 times its start is
#: already no clip; one 1e-100 times it, all noise.
CLIP_RANGE = 1e100


def _check_relation(relation: object) -> str:
    if relation not in RELATIONS:
        raise InvalidArgumentError(f"relation must be one of {RELATIONS}, got {relation!r}")
    return str(relation)


def _check_fraction(name: str, value: object, *, open_ends: bool) -> float:
    value = check_real(name, value)
    ok = 0.0 < value < 1.0 if open_ends else 0.0 <= value <= 1.0
    if not ok:
        raise InvalidArgumentError(
            f"{name} must be in {'(0, 1)' if open_ends else '[0, 1]'}, got {value!r}")
    return value


class AdaptiveClip:
    """The clip of adaptive clipping and its geometric update rule.

    Args:
        initial_clip: ``C_0``, the first round's clip (l2, in the update's
            units; > 0).
        target_quantile: ``gamma`` in (0, 1): the fraction of updates the
            clip should leave unclipped (default 0.5, the median).
        learning_rate: ``eta`` > 0 of the geometric update (default 0.2).

    Raises:
        InvalidArgumentError, InvalidTypeError: a value out of range or of the
            wrong type.

    Attributes:
        clip: the current clip ``C_t``, always within :data:`CLIP_RANGE` of
            ``initial_clip`` either way (and positive and finite).
        initial_clip, target_quantile, learning_rate: as given.
    """

    def __init__(self, *, initial_clip: float, target_quantile: float = 0.5,
                 learning_rate: float = 0.2) -> None:
        self.initial_clip = check_positive("initial_clip", initial_clip)
        self.target_quantile = _check_fraction("target_quantile", target_quantile,
                                               open_ends=True)
        self.learning_rate = check_positive("learning_rate", learning_rate)
        self.clip = self.initial_clip

    def noise_std(self, sigma: float) -> float:
        """The round's per-coordinate noise std ``(sigma / C_0) C_t`` for the
        run's ``sigma`` (given at ``C_0``): the noise multiplier stays fixed.

        Raises:
            InvalidArgumentError, InvalidTypeError: ``sigma`` not positive.
        """
        std = check_positive("sigma", sigma) / self.initial_clip * self.clip
        if not 0.0 < std < math.inf:
            raise InvalidArgumentError(f"sigma {sigma!r} at the clip {self.clip!r} (from "
                                       f"{self.initial_clip!r}) gives a noise std of {std!r}")
        return std

    def clip_bounds(self) -> tuple[float, float]:
        """``(lowest, highest)`` clip the update rule may reach: within
        :data:`CLIP_RANGE` of ``initial_clip`` either way, and within
        float64's normal range."""
        return (max(self.initial_clip / CLIP_RANGE, sys.float_info.min),
                min(self.initial_clip * CLIP_RANGE, sys.float_info.max))

    def update(self, noised_unclipped_fraction: float) -> float:
        """Applies ``C <- C exp(-eta (bbar - gamma))`` with ``bbar`` the
        round's noised unclipped fraction (:func:`noised_unclipped_fraction`;
        it may fall outside [0, 1] through its noise) and returns the new
        clip, held within :meth:`clip_bounds` (a clip that would leave them
        stops at the bound: ``bbar`` far outside [0, 1] or a large ``eta``
        would otherwise take it to 0 or beyond float64).  A NaN ``bbar`` (a
        round in which no client reported) leaves the clip unchanged.

        Raises:
            InvalidTypeError: ``bbar`` is not a real number.
            InvalidArgumentError: ``bbar`` is infinite (or an int beyond
                float64's range).
        """
        bbar = check_real("noised_unclipped_fraction", noised_unclipped_fraction)
        if math.isnan(bbar):
            return self.clip
        if math.isinf(bbar):
            raise InvalidArgumentError("noised_unclipped_fraction must be finite")
        lowest, highest = self.clip_bounds()
        exponent = -self.learning_rate * (bbar - self.target_quantile)  # (may be +-inf)
        exponent = min(max(exponent, math.log(lowest / self.clip)), math.log(highest / self.clip))
        self.clip = min(max(self.clip * math.exp(exponent), lowest), highest)
        return self.clip

    def state_dict(self) -> dict[str, float]:
        """The state to checkpoint (:meth:`load_state_dict` restores it)."""
        return {"clip": self.clip, "initial_clip": self.initial_clip,
                "target_quantile": self.target_quantile, "learning_rate": self.learning_rate}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Restores :meth:`state_dict`'s clip.

        Raises:
            InvalidTypeError: ``state`` is not a dict, or a value in it is not
                a real number (the message names its key).
            InvalidArgumentError: a key is missing, a value is out of range
                (the clip outside :meth:`clip_bounds`), or the state is of
                another configuration.
        """
        if not isinstance(state, dict):
            raise InvalidTypeError(f"state must be a dict (from state_dict()), got "
                                   f"{type(state).__name__}")
        missing = [key for key in self.state_dict() if key not in state]
        if missing:
            raise InvalidArgumentError(f"state lacks the key(s) {', '.join(map(repr, missing))} "
                                       "(state_dict() writes them)")
        for key in ("initial_clip", "target_quantile", "learning_rate"):
            value = check_real(f"state[{key!r}]", state[key])
            if value != getattr(self, key):
                raise InvalidArgumentError(f"checkpointed {key} {state[key]} differs from "
                                           f"{getattr(self, key)}")
        clip = check_positive("state['clip']", state["clip"])
        lowest, highest = self.clip_bounds()
        if not lowest <= clip <= highest:
            raise InvalidArgumentError(f"state['clip'] {clip!r} is outside the clip's bounds "
                                       f"[{lowest!r}, {highest!r}] (CLIP_RANGE)")
        self.clip = clip


def default_count_sigma(*, clients: float, cap: int) -> float:
    """Andrew et al.'s count noise, per client: std ``clients / 20`` on the
    count sum of ``cap`` clients' worth of noise, i.e. ``(clients / 20) /
    sqrt(cap)`` each.

    Args:
        clients: n, the expected clients per round (> 0).
        cap: T, the clients' worth of noise on the sum (>= 1): the cohort
            cap of :func:`cepam.accounting.cohort_cap` under add-remove, the
            cohort size ``n`` without sampling.

    Raises:
        InvalidArgumentError, InvalidTypeError: a value out of range.
    """
    clients = check_positive("clients", clients)
    if isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or cap < 1:
        raise InvalidArgumentError(f"cap must be an integer >= 1, got {cap!r}")
    return clients / 20.0 / math.sqrt(int(cap))


def noisy_bit(norm: float, *, clip: float, count_sigma: float,
              rng: np.random.Generator) -> float:
    """What one client reports: ``1`` if ``norm <= clip`` else ``0``, plus
    ``N(0, count_sigma^2)`` drawn from the client's own ``rng``.

    Args:
        norm: the l2 norm of the client's update before clipping (a finite
            real number >= 0).
        clip: the round's clip ``C_t`` (> 0).
        count_sigma: the per-client noise std (> 0).
        rng: the client's own numpy Generator (never the server's).

    Raises:
        InvalidArgumentError, InvalidTypeError: a value out of range.
    """
    norm = check_nonnegative("norm", norm)
    clip = check_positive("clip", clip)
    count_sigma = check_positive("count_sigma", count_sigma)
    if not isinstance(rng, np.random.Generator):
        raise InvalidTypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    return (1.0 if norm <= clip else 0.0) + count_sigma * float(rng.standard_normal())


def noised_unclipped_fraction(noisy_bits: Sequence[float], *, relation: str = "replace-one",
                              clients: float | None = None, cap: int | None = None,
                              count_sigma: float | None = None,
                              rng: np.random.Generator | None = None) -> float:
    """The server's ``bbar`` from the clients' noisy bits (:func:`noisy_bit`).

    Args:
        noisy_bits: the reports of the k clients of the round.
        relation: ``"replace-one"`` (``sum / k``; the other arguments are not
            used) or ``"add-remove"`` (``(sum + top-up) / clients``).
        clients: n, the expected clients per round: the fixed denominator
            (add-remove).
        cap: T, from :func:`cepam.accounting.cohort_cap` (add-remove).
        count_sigma: the clients' per-client noise std (add-remove: the
            top-up noise has std ``count_sigma sqrt(max(T - k, 0))``, from
            :func:`cepam.accounting.topup_noise_std`).
        rng: the server's own Generator for the top-up (add-remove).

    Returns:
        ``bbar`` (it may leave [0, 1] through the noise).  With no report:
        NaN under replace-one (nothing is released), the top-up noise alone
        (``T`` clients' worth) over ``clients`` under add-remove, so that an
        empty round does not show.

    Raises:
        InvalidArgumentError, InvalidTypeError: bad arguments, or
            ``"add-remove"`` without ``clients``, ``cap``, ``count_sigma`` and
            ``rng``.
    """
    relation = _check_relation(relation)
    bits = np.asarray(noisy_bits)
    if bits.dtype.kind not in "iuf":
        raise InvalidTypeError(f"noisy_bits must be real numbers, got {type(noisy_bits).__name__}"
                               f" of dtype {bits.dtype}")
    bits = bits.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(bits)):
        raise InvalidArgumentError("noisy_bits must be finite")
    k = int(bits.size)
    try:
        total = math.fsum(bits.tolist())
    except OverflowError:  # (their sum is beyond float64)
        raise InvalidArgumentError("noisy_bits sum beyond float64's range: these are no "
                                   "noisy bits (a bit of 0 or 1 plus the count noise)") from None
    if relation == "replace-one":
        return total / k if k else math.nan
    if clients is None or cap is None or count_sigma is None or rng is None:
        raise InvalidArgumentError(
            "relation 'add-remove' needs clients, cap, count_sigma and rng")
    if not isinstance(rng, np.random.Generator):
        raise InvalidTypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    from .accounting import topup_noise_std

    std = topup_noise_std(sigma=check_positive("count_sigma", count_sigma), cohort=k,
                          cap=int(cap))
    topup = std * float(rng.standard_normal()) if std > 0 else 0.0
    return (total + topup) / check_positive("clients", clients)
