"""Composition over rounds: a privacy-loss-distribution accountant.

Usage mirrors ``dp_accounting.PrivacyAccountant`` and Opacus' accountants:
compose events, then ask for eps at a delta (or delta at an eps).

>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
>>> acct = PLDAccountant()
>>> acct = acct.compose(CepamGaussianRound(sigma=0.3, setting=s), count=80)
>>> round(acct.get_epsilon(1e-5), 2)
1.31
>>> f"{acct.get_delta(2.0):.2e}"
'3.53e-07'

Each event is turned into a PLD that dominates it under the symmetric
replace-one relation (:mod:`.pld`, connect-the-dots on its privacy profile),
and the PLDs are convolved. The grid step: by default 1e-4 nats, coarsened
where an event's losses reach so far that it must be (at most 2**16 grid
points per side; :meth:`PLDAccountant.discretization` says which step was
used). A ``discretization`` you pass is honoured exactly, or refused with
:class:`~cepam.errors.InvalidArgumentError` when an event would need more
than 2**22 grid points per side at that step: never coarsened silently
(``coarsen=True`` asks for the default's behaviour from a finer start). This is the same machinery that
``dp_accounting``'s PLD accountant uses; cepam's CEPAM event has no
``dp_accounting`` counterpart (see ``docs/privacy.md``), so the default
backend is cepam's own numpy code. ``backend="dp_accounting"`` instead builds
each event's PMF with ``dp_accounting``'s connect-the-dots constructor on the
same grid deltas and composes with its PLD class (a cross-check; needs the
optional ``dp-accounting`` package).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from .._checks import check_choice
from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validation as _v
from .events import (CepamGaussianRound, PrivacyEvent,  # noqa: F401 (doctest)
                     check_one_relation, relation_and_level)
from .pld import (MAX_COMPOSED_BINS, CompositionTooLarge, PrivacyLossDistribution,
                  directed_grid_deltas, profile_grid_deltas)
from .profile import EPSILON_CAP
from .setting import FLSetting  # noqa: F401 (doctest)

__all__ = ["PLDAccountant", "DEFAULT_DISCRETIZATION", "require_dp_accounting"]

#: Default PLD grid step (nats).
DEFAULT_DISCRETIZATION = 1e-4
_MAX_GRID = 2**16  # grid points per side when the accountant chooses the step
_MAX_EXPLICIT_GRID = 2**22  # ... when the caller does (about 1.5 s for 80 rounds)
#: The most bins a self-composition may have when the accountant chooses the
#: step: a composition that needs more is redone on a coarser grid.  10^5
#: rounds of a sample-level round at noise multiplier 0.0027 (`cepam privacy
#: --sigma 1e-3 ... --rounds 100000`) took 6.9 GB and 72 s with up to 2**27
#: bins, and take 1.05 GB and 6.6 s with this limit (its eps 9.88e7 against
#: 9.92e7: each grid's connect-the-dots bound is valid).  Below eps of about
#: 800 at the default step no composition comes near it.  A caller's own
#: step keeps pld.MAX_COMPOSED_BINS.
_MAX_CHOSEN_BINS = 2**23
_COARSENINGS = 8  # coarser grids tried before the composition's error is raised
_TAIL = 1e-18
_SCAN = np.concatenate(([0.0], np.logspace(-6, math.log10(EPSILON_CAP), 601)))

Backend = Literal["numpy", "dp_accounting"]


def require_dp_accounting() -> Any:
    """Import and return the optional ``dp_accounting`` package.

    Raises:
        InvalidArgumentError: it is not installed (``pip install
            'cepam[dp]'`` or ``pip install dp-accounting``).
    """
    try:
        import dp_accounting  # noqa: F401
        from dp_accounting.pld import pld_pmf, privacy_loss_distribution
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidArgumentError(
            "this needs the optional package dp-accounting "
            "(pip install 'cepam[dp]' or pip install dp-accounting)"
        ) from exc
    return pld_pmf, privacy_loss_distribution


def _epsilon_max(event: PrivacyEvent) -> float:
    """Where the event's profile has (essentially) reached its floor: below
    1e-18, or within 1e-6 (relative) of its value at the cap."""
    d = _v.bounding_deltas(event.privacy_profile(_SCAN), _SCAN)
    floor = max(_TAIL, float(d[-1]) * (1 + 1e-6))
    k = int(np.argmax(d <= floor))
    return float(max(_SCAN[k], 1e-6))


def _directions(event: PrivacyEvent) -> Any:
    """The event's directed profiles (remove, add), or None if it is symmetric."""
    directed = getattr(event, "directed_profiles", None)
    return None if directed is None else directed()


class PLDAccountant:
    """Privacy accountant based on privacy loss distributions.

    Args:
        discretization: PLD grid step in nats (> 0), honoured exactly:
            :meth:`compose` refuses an event whose losses would need more
            than ``2**22`` grid points per side at this step. ``None`` (the
            default): :data:`DEFAULT_DISCRETIZATION`, coarsened where an
            event's losses reach beyond ``2**16`` steps (tiny noise), and
            where a composition would need more than ``2**23`` bins (many
            rounds of tiny noise: about a gigabyte of memory at that size);
            the result stays a valid bound.
        coarsen: with an explicit ``discretization``, treat it as the finest
            step wanted and coarsen it as the default does, instead of
            refusing (``calibrate_sigma`` does this). Implied when
            ``discretization`` is None.
        tail_mass_truncation: tail mass that each composition may cut (sent
            to +inf, i.e. added to delta), default 1e-15.
        backend: ``"numpy"`` (default) or ``"dp_accounting"``.

    Raises:
        InvalidArgumentError, InvalidTypeError: bad arguments;
            ``backend="dp_accounting"`` without the package.
    """

    def __init__(self, *, discretization: float | None = None, coarsen: bool = False,
                 tail_mass_truncation: float = 1e-15, backend: Backend = "numpy") -> None:
        self._h = None if discretization is None else _v.positive("discretization", discretization)
        if not isinstance(coarsen, bool):
            raise InvalidTypeError(f"coarsen must be a bool, got {type(coarsen).__name__}")
        self._coarsen = coarsen or self._h is None
        self._tol = _v.positive("tail_mass_truncation", tail_mass_truncation)
        check_choice("backend", backend, ("numpy", "dp_accounting"))
        if backend == "dp_accounting":
            require_dp_accounting()
        self._backend = backend
        self._ledger: list[tuple[PrivacyEvent, int]] = []
        # The first event composed of each (relation, level): check_one_relation's.
        self._kinds: dict[tuple[str | None, str], PrivacyEvent] = {}
        self._cache: Any = None

    @property
    def ledger(self) -> tuple[tuple[PrivacyEvent, int], ...]:
        """The composed ``(event, count)`` pairs, in order."""
        return tuple(self._ledger)

    @property
    def backend(self) -> str:
        return self._backend

    def compose(self, event: PrivacyEvent, count: int = 1) -> "PLDAccountant":
        """Add ``count`` runs of ``event``; returns ``self`` for chaining.

        Raises:
            InvalidTypeError: ``event`` lacks ``privacy_profile``.
            InvalidArgumentError: count < 1; an event of another
                neighbouring relation or level than those composed
                (:func:`~.events.check_one_relation`); or, with an explicit
                ``discretization`` (and ``coarsen=False``), an event whose
                losses reach beyond ``2**22`` steps of it (the message names
                the finest step that works).
        """
        if not isinstance(event, PrivacyEvent):
            raise InvalidTypeError(
                f"event must provide privacy_profile() and describe(), got {type(event).__name__}")
        count = _v.integer("count", count)
        # (one event of each relation and level composed stands for them all)
        check_one_relation([*self._kinds.values(), event])
        if not self._coarsen:
            emax = _epsilon_max(event)
            if emax / self._h > _MAX_EXPLICIT_GRID:
                raise InvalidArgumentError(
                    f"discretization={self._h:g} is too fine for this event: its privacy "
                    f"losses reach {emax:.4g} nats, {emax / self._h:.3g} grid steps per side "
                    f"(at most {_MAX_EXPLICIT_GRID}); pass discretization >= "
                    f"{emax / _MAX_EXPLICIT_GRID:.3g}, or None to let the accountant choose")
        self._kinds.setdefault(relation_and_level(event), event)
        self._ledger.append((event, count))
        self._cache = None
        return self

    def _plan(self) -> tuple[float, list[float]]:
        """(grid step, each ledger event's largest grid loss)."""
        emaxes = [_epsilon_max(e) for e, _ in self._ledger]
        base = DEFAULT_DISCRETIZATION if self._h is None else self._h
        if not self._coarsen:
            return base, emaxes
        return max([base, *(e / _MAX_GRID for e in emaxes)]), emaxes

    def discretization(self) -> float:
        """The grid step the composed PLD uses (nats): the one passed, or,
        when the accountant chooses (``discretization=None`` or
        ``coarsen=True``), the default coarsened if an event's losses reach
        beyond ``2**16`` steps, and again where a composition would need
        more than ``2**23`` bins (composes the ledger if not yet done)."""
        return self._composed()[0]

    def _single(self, profile: Any, directed: bool, h: float, emax: float, count: int) -> Any:
        """One event's PLD (one direction), self-composed ``count`` times."""
        if self._backend == "numpy":
            build = (PrivacyLossDistribution.from_directed_profile if directed else
                     PrivacyLossDistribution.from_privacy_profile)
            return build(profile, discretization=h, epsilon_max=emax).self_compose(
                count, tail_mass_truncation=self._tol,
                max_bins=_MAX_CHOSEN_BINS if self._coarsen else MAX_COMPOSED_BINS)
        pld_pmf, pld_mod = require_dp_accounting()
        grid = directed_grid_deltas if directed else profile_grid_deltas
        m, deltas = grid(profile, discretization=h, epsilon_max=emax)
        pmf = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(h, -m, m, deltas)
        return pld_mod.PrivacyLossDistribution(pmf).self_compose(
            count, tail_mass_truncation=self._tol)

    def _composed(self) -> tuple[float, list[Any]]:
        """(grid step, the composed PLD of each direction: one for symmetric
        events; two (remove, add) once an event's directions differ
        (add/remove), each composed on its own, a symmetric event counting
        in both).  Where the accountant chooses the step and a composition
        would need more than ``_MAX_CHOSEN_BINS`` bins, the whole ledger is
        composed again on a grid coarser in proportion (a coarser grid's
        bound is valid, if looser)."""
        if self._cache is None:
            h, emaxes = self._plan()
            for attempt in range(_COARSENINGS + 1):
                try:
                    self._cache = h, self._compose_all(h, emaxes)
                    break
                except CompositionTooLarge as e:
                    if not self._coarsen or attempt == _COARSENINGS:
                        raise
                    h *= max(2.0, 1.05 * e.bins / e.limit)
        return self._cache

    def _compose_all(self, h: float, emaxes: list[float]) -> list[Any]:
        """The ledger's composed PLD of each direction (see _composed) on
        grid step h."""
        if self._backend == "numpy":
            identity = PrivacyLossDistribution.identity(discretization=h)
        else:
            if h > 700:
                raise InvalidArgumentError(
                    f"the dp_accounting backend cannot use a grid step of {h:.3g} nats "
                    "(it overflows); use the numpy backend")
            identity = require_dp_accounting()[1].identity(value_discretization_interval=h)
        directions = [_directions(e) for e, _ in self._ledger]
        directed = any(d is not None for d in directions)
        totals = [identity] * (2 if directed else 1)
        for (event, count), emax, profiles in zip(self._ledger, emaxes, directions):
            if profiles is not None:
                singles = [self._single(p, True, h, emax, count) for p in profiles]
            else:
                singles = [self._single(event.privacy_profile, False, h, emax, count)] * \
                    len(totals)
            totals = [t.compose(s, tail_mass_truncation=self._tol)
                      for t, s in zip(totals, singles)]
        return totals

    def get_epsilon(self, delta: float) -> float:
        """Smallest eps with total ``delta(eps) <= delta`` (``math.inf`` if no
        finite eps is certified, e.g. delta below the chance that a sample
        is used at all when the noise is negligible).

        Raises:
            InvalidArgumentError: delta outside (0, 1).
        """
        delta = _v.probability_open("delta", delta)
        if not self._ledger:
            return 0.0
        return max(float(t.get_epsilon_for_delta(delta)) for t in self._composed()[1])

    def get_delta(self, epsilon: float) -> float:
        """Total delta at ``epsilon`` (>= 0; ``inf`` gives the mass of
        unbounded loss).

        Raises:
            InvalidArgumentError: eps < 0 or NaN.
        """
        eps = _v.real("epsilon", epsilon)
        if eps < 0:
            raise InvalidArgumentError(f"epsilon must be >= 0, got {eps!r}")
        if not self._ledger:
            return 0.0
        return max(float(t.get_delta_for_epsilon(eps)) for t in self._composed()[1])

    def privacy_loss_distribution(self) -> Any:
        """The composed PLD (cepam's :class:`~.pld.PrivacyLossDistribution`,
        or dp_accounting's with that backend); with directed events (add/remove),
        the direction with the larger mass of unbounded loss."""
        return max(self._composed()[1], key=lambda t: getattr(t, "infinity_mass", 0.0))
