"""One interface for the analyses a CEPAM round is accounted with (as Opacus'
``IAccountant`` and its ``create_accountant`` registry).

An :class:`Analysis` is one way of stating what a round costs: its *level*
(``"record"``: one training example replaced, for the paper's loop;
``"client"``: one client's whole data, for any loop), its neighbouring
*relation*, its *threat model* (:mod:`.setting`) and, at record level, its
per-round bound.  It turns one round of a mechanism (``cepam.Gaussian``,
``cepam.Laplace``) into the :class:`~cepam.accounting.PrivacyEvent` that an
accountant or a :class:`~cepam.accounting.Ledger` composes
(:meth:`Analysis.round_event`), composes such events into an eps
(:meth:`Analysis.epsilon`) and says in one line what that eps is
(:meth:`Analysis.describe`).

The analyses, by name, in one table (:data:`ANALYSES`):

* ``"paper"`` -- :class:`PaperBound`, the paper's Theorem (:mod:`.paper`);
* ``"tight"`` -- :class:`TightBound`, the tight record-level bound (:mod:`.tight`);
* ``"client"`` -- :class:`ClientLevel`, client-level DP with client sampling
  and either relation (:mod:`.client_level`; ``cepam.Gaussian`` only).

The two record-level bounds read their per-round functions from
:data:`~cepam.accounting.events.BOUND_FUNCTIONS`.

>>> import cepam
>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
>>> tight = create_analysis("tight", setting=s)
>>> tight.describe()
"record-level (the paper's loop), replace-one, threat model 'client', tight bound"
>>> event = tight.round_event(cepam.Gaussian(sigma=0.5), clients=30)
>>> round(tight.epsilon([(event, 80)], delta=1e-5), 2)
0.31
>>> client = create_analysis("client", clip=1.0, relation="add-remove")
>>> client.describe()
"client-level, add-remove, threat model 'client'"
>>> event = client.round_event(cepam.Gaussian(sigma=0.1), clients=100, sample_rate=0.1)
>>> round(client.epsilon([(event, 50)], delta=1e-5), 3)
3.151
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
from collections.abc import Iterable
from typing import Any, ClassVar

from ..errors import InvalidArgumentError, InvalidTypeError
from ..mechanisms import MECHANISM_CLASSES, Gaussian, Laplace
from . import _validation as _v
from .accountant import PLDAccountant
from .client_level import ClientLevelRound
from .cohort import COHORT_TAIL, Relation, Sampling, check_cohort_tail, check_sampling
from .events import (
    LEVELS, BoundFunctions, CepamGaussianRound, CepamLaplaceRound, PrivacyEvent, bound_functions,
    relation_and_level,
)
from .guarantee import RoundGuarantee
from .setting import FLSetting, ThreatModel, check_setting

__all__ = ["Analysis", "RecordLevel", "PaperBound", "TightBound", "ClientLevel", "ANALYSES",
           "create_analysis"]


class Analysis(abc.ABC):
    """What one round of a mechanism costs, and what rounds cost together.

    Attributes:
        name: the analysis' key in :data:`ANALYSES`.
        level: ``"record"`` (one training example) or ``"client"`` (one
            client's whole data).
        relation: the neighbouring relation, ``"replace-one"`` or (client
            level) ``"add-remove"``.
        threat_model: ``"client"``, ``"aggregate"`` or ``"server"``
            (:mod:`.setting`).
        mechanisms: the mechanism classes it accounts.
    """

    name: ClassVar[str]
    level: ClassVar[str]
    mechanisms: ClassVar[tuple[type, ...]]
    relation: str
    threat_model: str

    @abc.abstractmethod
    def round_event(self, mechanism: Any, *, clients: float, **options: Any) -> PrivacyEvent:
        """The privacy event of one round of ``mechanism``.

        Args:
            mechanism: the round's ``cepam.Gaussian`` or ``cepam.Laplace``.
            clients: the clients of the round (see each analysis).
            **options: what the analysis needs besides (see each analysis).

        Returns:
            The event an accountant or a ledger composes.

        Raises:
            InvalidArgumentError: a mechanism the analysis does not cover
                (the message names the analyses that do), or values the
                event refuses.
            InvalidTypeError: ``mechanism`` is no cepam mechanism, or values
                of the wrong type.
        """

    @abc.abstractmethod
    def describe(self) -> str:
        """One line that says what an eps of this analysis is: its level,
        relation, threat model and bound; printed beside every eps."""

    @classmethod
    def covers(cls, mechanism: object) -> bool:
        """Whether the analysis accounts rounds of ``mechanism`` (an instance)."""
        return isinstance(mechanism, cls.mechanisms)

    @classmethod
    def _check_mechanism(cls, mechanism: object) -> None:
        """Raise unless the analysis covers ``mechanism`` (see :meth:`round_event`)."""
        if not isinstance(mechanism, MECHANISM_CLASSES):
            raise InvalidTypeError(f"mechanism must be a cepam.Gaussian or cepam.Laplace, got "
                                   f"{type(mechanism).__name__}")
        if cls.covers(mechanism):
            return
        kind = f"cepam.{type(mechanism).__name__}"
        others = [name for name, analysis in ANALYSES.items() if analysis.covers(mechanism)]
        where = (f"the analyses {', '.join(map(repr, others))} cover it" if others else
                 "no analysis covers it (it is not a differential-privacy mechanism)")
        raise InvalidArgumentError(f"the {cls.name!r} analysis does not cover {kind}: {where}")

    def epsilon(self, events: Iterable[tuple[PrivacyEvent, int]], *, delta: float) -> float:
        """eps after ``events``, at total ``delta``.

        Rounds of pure DP alone (every event a
        :class:`~cepam.accounting.CepamLaplaceRound`) add up their eps (basic
        composition, delta 0: ``delta`` is checked but not needed); otherwise
        the events are composed, in order, by a
        :class:`~cepam.accounting.PLDAccountant` with its defaults.

        Args:
            events: ``(event, count)`` pairs, each event composed ``count``
                (>= 1) times.
            delta: total delta in (0, 1).

        Returns:
            eps >= 0 (``0.0`` without events; ``math.inf`` where no finite
            eps is certified).

        Raises:
            InvalidArgumentError: delta or a count out of range; an event
                at another level, or under another neighbouring relation,
                than the analysis's (its eps would be presented as this
                analysis's; an event at the caller's level, a
                GaussianEvent's, passes unless it names another relation).
            InvalidTypeError: an item that is not an ``(event, count)`` pair.
        """
        delta = _v.probability_open("delta", delta)
        pairs = _pairs(events)
        own, caller = _EVENT_LEVELS[self.level], LEVELS["gaussian"]
        for event, _ in pairs:
            relation, level = relation_and_level(event)
            if level not in (own, caller) or relation not in (None, self.relation):
                raise InvalidArgumentError(
                    f"the {self.describe()} analysis cannot account a {level} event under "
                    f"relation {relation!r}: its eps would be presented as this analysis's")
        if not pairs:
            return 0.0
        if all(isinstance(event, CepamLaplaceRound) for event, _ in pairs):
            total = 0.0
            for event, count in pairs:
                total += event.epsilon * count
            return total
        accountant = PLDAccountant()
        for event, count in pairs:
            accountant.compose(event, count)
        return float(accountant.get_epsilon(delta))


def _pairs(events: object) -> list[tuple[PrivacyEvent, int]]:
    """``events`` as a list of checked ``(event, count)`` pairs."""
    if not isinstance(events, Iterable):
        raise InvalidTypeError(f"events must be (event, count) pairs, got "
                               f"{type(events).__name__}")
    pairs = []
    for item in events:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise InvalidTypeError(f"events must be (event, count) pairs, got {item!r}")
        event, count = item
        if not isinstance(event, PrivacyEvent):
            raise InvalidTypeError(f"not a privacy event: {event!r}")
        pairs.append((event, _v.integer("count", count)))
    return pairs


class RecordLevel(Analysis):
    """A record-level analysis: one training example of one client replaced,
    for the paper's loop (:mod:`.setting`); accounts ``cepam.Gaussian`` and
    ``cepam.Laplace`` rounds with one per-round bound.

    Args:
        setting: the FL setting (its threat model is the analysis'; its
            ``clients`` the K of :meth:`gaussian_epsilon` and :meth:`gaussian_round`).

    Raises:
        InvalidTypeError: ``setting`` is not an :class:`~cepam.accounting.FLSetting`.
    """

    level: ClassVar[str] = "record"
    mechanisms: ClassVar[tuple[type, ...]] = (Gaussian, Laplace)
    #: How ``cepam privacy`` describes the per-round bound.
    summary: ClassVar[str]
    #: Whether the bound's delta never exceeds the chance that a given sample
    #: is used at all (so that a larger target delta is met by every sigma).
    delta_at_most_sampling: ClassVar[bool]

    def __init__(self, setting: FLSetting) -> None:
        self.setting = check_setting(setting)
        self.relation = "replace-one"
        self.threat_model = self.setting.threat_model

    @property
    def functions(self) -> BoundFunctions:
        """The bound's per-round functions (:data:`~cepam.accounting.events.BOUND_FUNCTIONS`)."""
        return bound_functions(self.name)

    def _setting(self, clients: int) -> FLSetting:
        """The setting with ``clients`` averaged."""
        if clients == self.setting.clients:
            return self.setting
        return dataclasses.replace(self.setting, clients=clients)

    def round_event(self, mechanism: Any, *, clients: int,
                    dimension: int | None = None) -> CepamGaussianRound | CepamLaplaceRound:
        """One CEPAM round with this bound.

        Args:
            mechanism: the round's ``cepam.Gaussian`` or ``cepam.Laplace``.
            clients: K, the updates averaged in the round (>= 1; >= 2 against
                a curious client).
            dimension: coordinates ``m`` of an update; needed for
                ``cepam.Laplace`` (its l1 bound), ignored for ``cepam.Gaussian``.

        Returns:
            A :class:`~cepam.accounting.CepamGaussianRound` or
            :class:`~cepam.accounting.CepamLaplaceRound`.

        Raises:
            InvalidArgumentError, InvalidTypeError: as :meth:`Analysis.round_event`.
        """
        self._check_mechanism(mechanism)
        setting = self._setting(clients)
        if isinstance(mechanism, Laplace):
            return CepamLaplaceRound(scale=mechanism.b, setting=setting, dimension=dimension,
                                     bound=self.name)
        return CepamGaussianRound(sigma=mechanism.sigma, setting=setting, bound=self.name)

    def gaussian_epsilon(self, delta: float, *, sigma: float) -> float:
        """Per-round eps of a CEPAM-Gaussian round at ``delta``, K of the setting.

        Args:
            delta: per-round delta in (0, 1).
            sigma: per-coordinate noise std of each client's decoded update (> 0).

        Returns:
            eps >= 0, or ``math.inf``.

        Raises:
            InvalidArgumentError: delta or sigma out of range.
        """
        return self.functions.gaussian_epsilon(delta, sigma=sigma, setting=self.setting)

    def gaussian_round(self, eps_tilde: float, *, sigma: float) -> RoundGuarantee:
        """The paper-style per-round ``(eps, delta)`` from the base ``eps_tilde``.

        Args:
            eps_tilde: the base eps > 0.
            sigma: per-coordinate noise std of each client's decoded update (> 0).

        Returns:
            ``RoundGuarantee(epsilon, delta, eps_tilde)``.

        Raises:
            InvalidArgumentError: eps_tilde or sigma out of range.
        """
        return self.functions.gaussian_round(eps_tilde, sigma=sigma, setting=self.setting)

    def describe(self) -> str:
        """See :meth:`Analysis.describe`."""
        return (f"record-level (the paper's loop), {self.relation}, threat model "
                f"{self.threat_model!r}, {self.name} bound")


class PaperBound(RecordLevel):
    """The paper's Theorem (:mod:`.paper`): record level, replace-one.

    Args:
        setting: the FL setting.

    Raises:
        InvalidTypeError: ``setting`` is not an :class:`~cepam.accounting.FLSetting`.
    """

    name: ClassVar[str] = "paper"
    summary: ClassVar[str] = (
        "paper: Theorem CEPAM-Gaussian (sensitivity 2 tau gamma / K, amplification by "
        "sampling with replacement + group privacy), noise per the threat model")
    delta_at_most_sampling: ClassVar[bool] = False


class TightBound(RecordLevel):
    """The tight record-level bound (:mod:`.tight`): replace-one, whole-update
    clipping, amplified by the chance that a sample is drawn.

    Args:
        setting: the FL setting.

    Raises:
        InvalidTypeError: ``setting`` is not an :class:`~cepam.accounting.FLSetting`.
    """

    name: ClassVar[str] = "tight"
    summary: ClassVar[str] = (
        "tight: delta(eps) = p * analytic-Gaussian delta(eps_t; mu = 1/z), "
        "eps = log(1 + p (e^eps_t - 1)), whole-update clipping (docs/privacy.md)")
    delta_at_most_sampling: ClassVar[bool] = True


class ClientLevel(Analysis):
    """Client-level DP (:mod:`.client_level`): one client's whole data, any
    local training loop, with client sampling and either relation;
    ``cepam.Gaussian`` rounds only.

    Args:
        clip: l2 clip of each client's whole update (> 0).
        threat_model: ``"client"`` (default), ``"aggregate"`` or ``"server"``.
        sample_rate: the default ``q`` in (0, 1] of :meth:`round_event`.
        relation: ``"replace-one"`` (default) or ``"add-remove"``.
        sampling: ``"poisson"`` (default) or ``"fixed"``.
        count_sigma: per-client noise std on the clipped-or-not bit of
            adaptive clipping (> 0), or None (no count released).
        cohort_tail: add/remove: the chance per round allowed of a cohort
            above the cap T (:class:`~cepam.accounting.ClientLevelRound`).

    Raises:
        InvalidArgumentError: values out of range, unknown names, or a
            combination without a bound (add/remove with the ``"server"``
            threat model or a fixed cohort).
        InvalidTypeError: values of the wrong type.
    """

    name: ClassVar[str] = "client"
    level: ClassVar[str] = "client"
    mechanisms: ClassVar[tuple[type, ...]] = (Gaussian,)

    def __init__(self, *, clip: float, threat_model: ThreatModel = "client",
                 sample_rate: float = 1.0, relation: Relation = "replace-one",
                 sampling: Sampling = "poisson", count_sigma: float | None = None,
                 cohort_tail: float = COHORT_TAIL) -> None:
        self.clip = _v.positive("clip", clip)
        self.cohort_tail = check_cohort_tail(cohort_tail)
        # The names and their combinations, as every round will check them.
        check_sampling(clients=1, sample_rate=1.0, relation=relation, sampling=sampling,
                       threat_model=threat_model)
        self.sample_rate = _v.positive("sample_rate", sample_rate)
        if self.sample_rate > 1.0:
            raise InvalidArgumentError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
        self.threat_model, self.relation, self.sampling = threat_model, relation, sampling
        self.count_sigma = (None if count_sigma is None else
                            _v.positive("count_sigma", count_sigma))

    def round_event(self, mechanism: Any, *, clients: float,
                    sample_rate: float | None = None) -> ClientLevelRound:
        """One client-level round.

        Args:
            mechanism: the round's ``cepam.Gaussian``.
            clients: K with every client in every round, else the expected
                cohort ``q N`` (> 0).
            sample_rate: the round's ``q`` (default: the analysis').

        Returns:
            A :class:`~cepam.accounting.ClientLevelRound`.

        Raises:
            InvalidArgumentError, InvalidTypeError: as :meth:`Analysis.round_event`
                (``cepam.Laplace`` is refused: the record-level analyses
                cover it).
        """
        self._check_mechanism(mechanism)
        return ClientLevelRound(
            sigma=mechanism.sigma, clip=self.clip, clients=clients,
            threat_model=self.threat_model,
            sample_rate=self.sample_rate if sample_rate is None else sample_rate,
            relation=self.relation, sampling=self.sampling, count_sigma=self.count_sigma,
            cohort_tail=self.cohort_tail)

    def describe(self) -> str:
        """See :meth:`Analysis.describe`; the count's noise and the cohort's
        tail too, where they are not the defaults."""
        return (f"client-level, {self.relation}, threat model {self.threat_model!r}"
                + ("" if self.count_sigma is None else
                   f", clipped-or-not bits noised with sd {self.count_sigma:g}")
                + ("" if self.cohort_tail == COHORT_TAIL or self.relation != "add-remove" else
                   f", cohort tail {self.cohort_tail:g}"))


#: The level of each analysis (its ``level``) as the events' LEVELS name it.
_EVENT_LEVELS = {"record": LEVELS["cepam_gaussian_round"],
                 "client": LEVELS["client_level_round"]}

#: The analyses by name: the one table :func:`create_analysis` reads.
ANALYSES: dict[str, type[Analysis]] = {
    "paper": PaperBound,
    "tight": TightBound,
    "client": ClientLevel,
}


def create_analysis(name: str, **options: Any) -> Analysis:
    """The analysis ``name`` of :data:`ANALYSES`, built with ``options``.

    Args:
        name: ``"paper"``, ``"tight"`` or ``"client"``.
        **options: its arguments: ``setting=`` for ``"paper"`` and
            ``"tight"``; ``clip=`` and the optional ``threat_model=``,
            ``sample_rate=``, ``relation=``, ``sampling=``, ``count_sigma=``
            for ``"client"``.

    Returns:
        The :class:`Analysis`.

    Raises:
        InvalidArgumentError: an unknown name (the message lists the known
            ones), or options the analysis refuses.
        InvalidTypeError: a name that is not a string, options the analysis
            does not take (or misses), or values of the wrong type.
    """
    if not isinstance(name, str):
        raise InvalidTypeError(f"analysis name must be a str, got {type(name).__name__}")
    cls = ANALYSES.get(name)
    if cls is None:
        raise InvalidArgumentError(f"unknown analysis {name!r}; known: "
                                   f"{', '.join(map(repr, ANALYSES))}")
    signature = inspect.signature(cls)
    try:
        signature.bind(**options)
    except TypeError as exc:
        raise InvalidTypeError(f"analysis {name!r} takes {', '.join(signature.parameters)} "
                               f"({exc})") from None
    return cls(**options)


def _record_analysis(bound: object, setting: FLSetting) -> RecordLevel:
    """The record-level analysis of ``bound`` (``"tight"`` or ``"paper"``).

    Raises:
        InvalidArgumentError: another bound (named as the events name it).
        InvalidTypeError: ``setting`` is not an FLSetting.
    """
    bound_functions(bound)
    return ANALYSES[bound](setting=setting)  # type: ignore[index, call-arg, return-value]
