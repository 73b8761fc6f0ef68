"""The "eps so far" column: privacy spent after each round, from :mod:`cepam.accounting`.

* Gaussian methods (``cepam-gaussian``, ``fl-gaussian``, ``fl-gaussian-sdq``):
  :func:`cepam.accounting.epsilon_after_rounds` -- the accountant's tight
  per-round bound (whole-update clipping to gamma, amplification by the
  chance that a sample is drawn at all in the round's tau * B draws with
  replacement from the client's |D| samples), composed over the rounds run so
  far with privacy loss distributions, at the run's ``delta``, against an
  honest-but-curious client (the accountant's default threat model, the
  paper's adversary).  For a non-IID split |D| is the smallest client's.
* Laplace methods (``cepam-laplace``, ``fl-laplace``, ``fl-laplace-sdq``):
  pure DP, ``rounds * eps_round`` with ``eps_round`` from
  :func:`cepam.accounting.tight_laplace_round` (l1 sensitivity
  ``2 gamma sqrt(m)`` of an l2-clipped update of ``m`` coordinates,
  amplified likewise).  ``delta`` is 0.
* ``fl`` and ``fl-sdq`` add no noise: eps is infinite.

The client-level column (:func:`client_epsilon_function`, the ``client_epsilon``
column of the built-in engine) holds for any local training loop: for the
Gaussian methods :func:`cepam.accounting.client_epsilon` with the run's
sample rate, sampling, relation and the count noise of the published noised
clipped fraction (:func:`count_sigma`), against an honest-but-curious client
(:data:`CLIENT_THREAT_MODEL`); for ``central_dp="dp-fedavg"``
:func:`central_epsilon` (dp-accounting's PLD for the Poisson-subsampled
Gaussian, add-remove).  Outside the paper's setting (client sampling,
add-remove, adaptive clipping, central DP: :attr:`FLConfig.paper_setting`)
the record-level accountant does not apply and the ``epsilon`` column holds
the client-level eps, a valid bound for every record of a client.

The noise of ``fl-gaussian-sdq`` and ``fl-laplace-sdq`` is added before the
quantizer, so SDQ is post-processing and the same guarantees hold.  The
column is NaN when the installed cepam has no :mod:`cepam.accounting`.
The accountant is not cheap (up to about half a second per value), so values
are cached per process: a grid pays once per (setting, noise, rounds).

:func:`epsilon_at` recomputes the column for a finished run's configuration
at another delta (the sweep of the paper's section VI-C reports eps at two
deltas; accuracy depends on sigma only, so one set of runs serves both).

:func:`epsilon_scope` says what a value of either column is for (its
:class:`EpsilonScope`: level, neighbouring relation and delta): every eps
that ``cepam fl`` prints, tabulates or plots is stated with it, and values
of different scopes are never compared as one.
"""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InvalidArgumentError
from .config import MODEL_PARAMETERS

if TYPE_CHECKING:
    from .config import FLConfig

__all__ = ["epsilon_function", "config_epsilon_function", "epsilon_at", "client_dataset_size",
           "client_level_epsilon", "GAUSSIAN_METHODS", "LAPLACE_METHODS", "ACCOUNTING_VIEW",
           "CLIENT_THREAT_MODEL", "count_sigma", "cohort_cap", "client_epsilon_function",
           "client_privacy_statement", "central_epsilon", "calibrate_central_noise_multiplier",
           "EpsilonScope", "epsilon_scope", "LEVELS", "RELEASED_MODEL_THREAT_MODEL"]

GAUSSIAN_METHODS = ("cepam-gaussian", "fl-gaussian", "fl-gaussian-sdq")
LAPLACE_METHODS = ("cepam-laplace", "fl-laplace", "fl-laplace-sdq")
_NOT_PRIVATE = ("fl", "fl-sdq")

#: What the eps column certifies, for figure and table captions: the
#: accountant's tight per-round bound against its default threat model (an
#: honest-but-curious client, ``FLSetting(threat_model="client")``).
ACCOUNTING_VIEW = "tight bound, curious-client view"

#: The levels of an eps: "record" (one training example of one client
#: replaced; for the paper's local loop only) and "client" (one client's whole
#: data; any local loop).
LEVELS = ("record", "client")


#: The threat model of the client-level column: an honest-but-curious
#: client (the accountant's default).
CLIENT_THREAT_MODEL = "client"


#: The threat model of central DP-FedAvg's eps (``central_dp="dp-fedavg"``):
#: an adversary who sees the released model only.
RELEASED_MODEL_THREAT_MODEL = "released model"


@dataclass(frozen=True)
class EpsilonScope:
    """What an eps is for: the ``level`` of :data:`LEVELS`, the neighbouring
    ``relation`` (:data:`cepam.fl.config.RELATIONS`), the ``delta`` of the
    (eps, delta)-DP guarantee (0.0: pure eps-DP, the Laplace methods') and
    the ``threat_model``: :data:`CLIENT_THREAT_MODEL` (an honest-but-curious
    client, :data:`ACCOUNTING_VIEW`) or :data:`RELEASED_MODEL_THREAT_MODEL`
    (central DP-FedAvg).

    Values of different scopes are not comparable: a table gives each scope
    its own column and a figure its own line.
    """

    level: str
    relation: str
    delta: float
    threat_model: str = CLIENT_THREAT_MODEL

    @property
    def pure(self) -> bool:
        """Whether the eps is pure DP (delta 0)."""
        return self.delta == 0.0

    def at(self, delta: float | None) -> "EpsilonScope":
        """The scope of this eps recomputed at ``delta`` (None: as it is); a
        pure-DP eps is the same at every delta and keeps its scope."""
        if delta is None or self.pure:
            return self
        return EpsilonScope(self.level, self.relation, float(delta), self.threat_model)

    def parts(self) -> tuple[str, str, str, str]:
        """The level, relation, delta and threat model as text:
        ``record-level``, ``replace-one``, ``delta = 1e-05`` (``pure DP,
        delta = 0``), and ``threat model: released model``, or ``""`` for
        the curious client's (which :data:`ACCOUNTING_VIEW` names where the
        eps is shown)."""
        return (f"{self.level}-level", self.relation,
                "pure DP, delta = 0" if self.pure else f"delta = {self.delta:g}",
                "" if self.threat_model == CLIENT_THREAT_MODEL
                else f"threat model: {self.threat_model}")

    def describe(self) -> str:
        """``record-level, replace-one, delta = 1e-05`` (and the threat
        model where it is not the curious client's)."""
        return ", ".join(part for part in self.parts() if part)

    def as_dict(self, prefix: str = "epsilon") -> dict[str, Any]:
        """``{prefix}_level``, ``{prefix}_relation`` and ``{prefix}_delta``
        (as the JSON outputs of ``cepam fl`` hold them), and
        ``{prefix}_threat_model`` where it is not the curious client's."""
        out = {f"{prefix}_level": self.level, f"{prefix}_relation": self.relation,
               f"{prefix}_delta": self.delta}
        if self.threat_model != CLIENT_THREAT_MODEL:
            out[f"{prefix}_threat_model"] = self.threat_model
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], prefix: str = "epsilon") -> "EpsilonScope":
        """The scope :meth:`as_dict` wrote into ``d``.

        Raises:
            InvalidArgumentError: ``d`` lacks one of the keys (statistics
                written before eps was stated with its scope), or holds a
                level that is not one of :data:`LEVELS`.
        """
        keys = [f"{prefix}_{k}" for k in ("level", "relation", "delta")]
        missing = [k for k in keys if k not in d]
        if missing:
            raise InvalidArgumentError(
                f"{', '.join(missing)} missing: without them the eps cannot be stated with its "
                "level, relation and delta (statistics written by an older cepam fl table "
                "--json; write them again)")
        if d[keys[0]] not in LEVELS:
            raise InvalidArgumentError(f"{keys[0]} must be one of {LEVELS}, got {d[keys[0]]!r}")
        return cls(level=str(d[keys[0]]), relation=str(d[keys[1]]), delta=float(d[keys[2]]),
                   threat_model=str(d.get(f"{prefix}_threat_model", CLIENT_THREAT_MODEL)))


def epsilon_scope(config: "FLConfig", *, column: str = "epsilon",
                  delta: float | None = None) -> EpsilonScope:
    """What a run of ``config``'s eps ``column`` is for.

    * ``"epsilon"`` (and :func:`epsilon_at`): record-level, replace-one in the
      paper's setting (:attr:`FLConfig.paper_setting`); outside it
      client-level under ``config.relation`` (the column then holds the
      client-level eps).
    * ``"client_epsilon"``: client-level under ``config.relation``.

    ``delta`` is ``config.delta``, or ``delta`` when given (:func:`epsilon_at`);
    0.0 for the Laplace methods (pure DP at every delta).  The threat model
    is the curious client's, or the released model's for central DP-FedAvg.

    Raises:
        InvalidArgumentError: ``column`` is neither of the two.
    """
    if column not in ("epsilon", "client_epsilon"):
        raise InvalidArgumentError(f"column must be 'epsilon' or 'client_epsilon', got {column!r}")
    record = column == "epsilon" and config.paper_setting
    pure = config.method in LAPLACE_METHODS
    threat_model = (RELEASED_MODEL_THREAT_MODEL if config.central_dp == "dp-fedavg"
                    else CLIENT_THREAT_MODEL)
    return EpsilonScope(level="record" if record else "client", relation=config.relation,
                        delta=0.0 if pure else float(config.delta),
                        threat_model=threat_model).at(delta)


# eps depends on the setting, the noise and the round count only (not on the
# seed or which Gaussian method): computed once per process.
_CACHE: dict[tuple, float] = {}


def _nan(rounds: int) -> float:
    return math.nan


def _cached(key: tuple, compute: Callable[[int], float]) -> Callable[[int], float]:
    """``rounds -> eps`` from ``compute``, 0 for no round, each value computed
    once per process under ``key`` (the setting it depends on)."""
    def eps(rounds: int) -> float:
        if rounds <= 0:
            return 0.0
        if (key, rounds) not in _CACHE:
            _CACHE[(key, rounds)] = compute(rounds)
        return _CACHE[(key, rounds)]

    return eps


def epsilon_function(*, method: str, sigma: float, b: float = math.nan, delta: float,
                     clip: float, clients: int, samples_per_round: int, dataset_size: int,
                     coordinates: int = 1) -> Callable[[int], float]:
    """A function ``rounds -> eps`` for this setting (NaN where unknown).

    Args:
        method: the method's name.
        sigma, b: Gaussian std and Laplace scale per coordinate.
        delta: the total delta of the Gaussian methods.
        clip, clients: gamma and K.
        samples_per_round: tau * B, the draws with replacement per round.
        dataset_size: |D| of the (smallest) client.
        coordinates: m, the number of coordinates of an update (Laplace).
    """
    if method in _NOT_PRIVATE:
        return lambda rounds: math.inf
    try:
        acc = importlib.import_module("cepam.accounting")
    except ImportError:
        return _nan
    setting = acc.FLSetting(clip=clip, clients=clients, samples_per_round=samples_per_round,
                            dataset_size=dataset_size)
    if method in GAUSSIAN_METHODS:
        key = ("gaussian", sigma, delta, clip, clients, samples_per_round, dataset_size)

        def compute(rounds: int) -> float:
            return float(acc.epsilon_after_rounds(sigma=sigma, delta=delta, rounds=rounds,
                                                  setting=setting))
    elif method in LAPLACE_METHODS:
        key = ("laplace", b, clip, clients, samples_per_round, dataset_size, coordinates)
        per_round = acc.tight_laplace_round(scale=b, setting=setting,
                                            dimension=coordinates).epsilon

        def compute(rounds: int) -> float:
            return rounds * float(per_round)
    else:
        return _nan

    return _cached(key, compute)


def config_epsilon_function(config: "FLConfig", *, delta: float, dataset_size: int,
                            coordinates: int = 1) -> Callable[[int], float]:
    """:func:`epsilon_function` for the setting of ``config`` (method, noise,
    clip, K, tau * B) at ``delta``, with the client dataset size |D| and the
    update's number of coordinates given (they are not in the configuration
    of a non-IID run, nor is the model's size)."""
    return epsilon_function(method=config.method, sigma=config.sigma, b=config.b, delta=delta,
                            clip=config.clip, clients=config.clients,
                            samples_per_round=config.samples_per_round,
                            dataset_size=dataset_size, coordinates=coordinates)


def client_dataset_size(config: "FLConfig") -> int:
    """|D| of the accountant for a run of ``config``: the IID share of each
    client (``samples_per_client``, default ``train_size // clients``).

    Raises:
        InvalidArgumentError: a non-IID (Dirichlet) run, whose smallest
            client depends on the split drawn and is not in its configuration.
    """
    if config.alpha is not None:
        raise InvalidArgumentError(
            "eps cannot be recomputed for a non-IID run (alpha set): its smallest client's "
            "dataset size depends on the split drawn and is not recorded")
    if config.samples_per_client is not None:
        return config.samples_per_client
    return config.train_size // config.population_size


def client_level_epsilon(config: "FLConfig", *, rounds: int) -> float:
    """Client-level eps after ``rounds`` rounds of a run of ``config`` (at
    ``config.delta`` for the Gaussian methods; pure DP for Laplace): one
    client's whole data replaced, against an honest-but-curious client (the
    view of the eps column), valid for any local training loop since each
    client's whole update is clipped.  No amplification by sampling.
    Outside the paper's setting (client sampling, add-remove, adaptive
    clipping, a released clipped fraction, central DP) the value of
    :func:`client_epsilon_function` instead.

    * Gaussian methods: :func:`cepam.accounting.client_epsilon`.
    * Laplace methods: ``rounds`` times the per-round eps of
      :func:`cepam.accounting.tight_laplace_round` before amplification
      (``2 gamma sqrt(m) / b``, whatever was sampled).
    * ``inf`` for ``fl`` and ``fl-sdq``, 0 for no round, NaN without
      :mod:`cepam.accounting`.

    Raises:
        InvalidArgumentError: ``rounds`` negative.
    """
    if rounds < 0:
        raise InvalidArgumentError(f"rounds must be non-negative, got {rounds}")
    if not config.paper_setting:
        return client_epsilon_function(config)(rounds)
    if config.method in _NOT_PRIVATE:
        return math.inf
    if rounds == 0:
        return 0.0
    try:
        acc = importlib.import_module("cepam.accounting")
        if config.method in GAUSSIAN_METHODS:
            return float(acc.client_epsilon(sigma=config.sigma, clip=config.clip, rounds=rounds,
                                            clients=config.clients, delta=config.delta))
        # eps_tilde, the per-round eps before amplification, does not depend on |D|.
        setting = acc.FLSetting(clip=config.clip, clients=config.clients,
                                samples_per_round=config.samples_per_round, dataset_size=1)
        return rounds * float(acc.tight_laplace_round(
            scale=config.b, setting=setting, dimension=MODEL_PARAMETERS[config.model]).eps_tilde)
    except ImportError:  # cepam.accounting needs scipy
        return math.nan


def epsilon_at(config: "FLConfig", *, delta: float, rounds: int) -> float:
    """eps after ``rounds`` rounds of a run of ``config``, at ``delta``
    instead of ``config.delta`` (the run's own eps column otherwise).

    The same accountant as the column (:func:`epsilon_function`; outside the
    paper's setting :func:`client_epsilon_function`): for the
    Gaussian methods the tight bound composed over ``rounds`` at ``delta``;
    the Laplace methods are pure DP (eps does not depend on delta); ``inf``
    for ``fl`` and ``fl-sdq``; NaN without :mod:`cepam.accounting`.

    Raises:
        InvalidArgumentError: ``delta`` not in (0, 1), ``rounds`` negative,
            or a non-IID run (see :func:`client_dataset_size`).
    """
    if not 0.0 < delta < 1.0:
        raise InvalidArgumentError(f"delta must be in (0, 1), got {delta}")
    if rounds < 0:
        raise InvalidArgumentError(f"rounds must be non-negative, got {rounds}")
    if not config.paper_setting:  # the run's eps column is the client-level one
        return client_epsilon_function(config.replace(delta=delta))(rounds)
    coordinates = MODEL_PARAMETERS[config.model] if config.method in LAPLACE_METHODS else 1
    return config_epsilon_function(config, delta=delta, dataset_size=client_dataset_size(config),
                                   coordinates=coordinates)(rounds)


def cohort_cap(config: "FLConfig") -> int:
    """T of the run: :func:`cepam.accounting.cohort_cap` for its expected
    cohort and sample rate (the clients' worth of noise on the sum under
    add-remove, and the count noise's reference)."""
    acc = importlib.import_module("cepam.accounting")
    return int(acc.cohort_cap(clients=config.clients, sample_rate=config.rate))


def count_sigma(config: "FLConfig") -> float | None:
    """The per-client noise std on the clipped-or-not bit of a run, or None
    when it publishes no noised clipped fraction (methods other than the
    Gaussian ones with client noise; a fixed clip without
    ``clipped_fraction_release``):
    ``clip_count_sigma``, else Andrew et al.'s ``(n / 20) / sqrt(T)``
    (:func:`cepam.clipping.default_count_sigma`)."""
    if config.method not in GAUSSIAN_METHODS or not (config.clipped_fraction_release
                                                     or config.clip_quantile is not None):
        return None
    if config.clip_count_sigma is not None:
        return float(config.clip_count_sigma)
    from ..clipping import default_count_sigma

    return default_count_sigma(clients=config.clients, cap=cohort_cap(config))


def central_epsilon(*, noise_multiplier: float, sample_rate: float, rounds: int,
                    delta: float, discretization: float = 1e-4) -> float:
    """eps of ``rounds`` rounds of the Poisson-subsampled Gaussian mechanism
    with noise multiplier ``z`` (std ``z clip`` on a sum of updates clipped to
    ``clip``), add-remove-one-client, by dp-accounting's PLD accountant:
    central DP-FedAvg's guarantee (McMahan et al. 2018).  ``discretization``
    is the accountant's value discretization interval (its default 1e-4; a
    coarser one is faster and still an upper bound, only looser).

    Raises:
        InvalidArgumentError: a value out of range.
        ImportError: dp-accounting is not installed.
    """
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise InvalidArgumentError(f"noise_multiplier must be positive, got {noise_multiplier}")
    if not 0.0 < sample_rate <= 1.0:
        raise InvalidArgumentError(f"sample_rate must be in (0, 1], got {sample_rate}")
    if not 0.0 < delta < 1.0:
        raise InvalidArgumentError(f"delta must be in (0, 1), got {delta}")
    if rounds < 0:
        raise InvalidArgumentError(f"rounds must be non-negative, got {rounds}")
    if rounds == 0:
        return 0.0
    one_round = _subsampled_gaussian_pld(float(noise_multiplier), float(sample_rate),
                                         float(discretization))
    return float(one_round.self_compose(int(rounds)).get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=32)
def _subsampled_gaussian_pld(noise_multiplier: float, sample_rate: float,
                             discretization: float) -> Any:
    """One round's PLD, built as dp-accounting's PLDAccountant builds it for
    a PoissonSampledDpEvent of a GaussianDpEvent (add-remove), once per
    setting: building it is the slow part, composing it is fast."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_gaussian_mechanism(standard_deviation=noise_multiplier,
                                       value_discretization_interval=discretization,
                                       sampling_prob=sample_rate)


def calibrate_central_noise_multiplier(*, target_epsilon: float, target_delta: float,
                                       sample_rate: float, rounds: int,
                                       tolerance: float = 1e-4,
                                       discretization: float = 1e-4) -> float:
    """The smallest noise multiplier z (to ``tolerance`` relative; bisection,
    the value returned on the safe side) with :func:`central_epsilon` (at
    ``discretization``) at most ``target_epsilon``: the central DP-FedAvg
    anchor's z.

    Raises:
        InvalidArgumentError: a value out of range.
        ImportError: dp-accounting is not installed.
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise InvalidArgumentError(f"target_epsilon must be positive, got {target_epsilon}")

    def eps(z: float) -> float:
        return central_epsilon(noise_multiplier=z, sample_rate=sample_rate, rounds=rounds,
                               delta=target_delta, discretization=discretization)

    lo, hi = 1e-2, 1.0
    while eps(hi) > target_epsilon:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            raise InvalidArgumentError("no noise multiplier below 1e6 reaches the target")
    if not 0.0 < tolerance < 1.0:
        raise InvalidArgumentError(f"tolerance must be in (0, 1), got {tolerance}")
    while hi - lo > tolerance * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if eps(mid) > target_epsilon else (lo, mid)
    return hi


def client_epsilon_function(config: "FLConfig") -> Callable[[int], float]:
    """A function ``rounds -> client-level eps`` of a run of ``config`` at
    ``config.delta`` (see the module docstring): ``inf`` without noise, NaN
    where no client-level analysis applies (Laplace methods, Flower's
    wrapper, whose mean over the actual cohort the add-remove analysis does
    not cover) or the accountant refuses the setting (for example a single
    client against the curious-client view)."""
    if config.central_dp == "dp-fedavg":
        key = ("central", config.noise_multiplier, config.rate, config.delta)

        def compute(rounds: int) -> float:
            return central_epsilon(noise_multiplier=float(config.noise_multiplier),
                                   sample_rate=config.rate, rounds=rounds, delta=config.delta)
    elif config.central_dp is not None:
        return _nan
    elif config.method in _NOT_PRIVATE:
        return lambda rounds: math.inf
    elif config.paper_setting:
        return lambda rounds: client_level_epsilon(config, rounds=rounds)
    elif config.method in LAPLACE_METHODS:
        return _nan
    else:
        try:
            acc = importlib.import_module("cepam.accounting")
        except ImportError:
            return _nan
        cs = count_sigma(config)
        kw = dict(sigma=config.sigma, clip=config.clip, clients=config.clients,
                  delta=config.delta, threat_model=CLIENT_THREAT_MODEL,
                  sample_rate=config.rate, relation=config.relation,
                  sampling=config.sampling, count_sigma=cs)
        key = ("client", tuple(sorted(kw.items())))

        def compute(rounds: int) -> float:
            try:
                return float(acc.client_epsilon(rounds=rounds, **kw))
            except InvalidArgumentError:
                return math.nan

    return _cached(key, compute)


def client_privacy_statement(config: "FLConfig") -> str:
    """What the client-level eps of ``config`` is: its relation, threat model
    and the sampling it is amplified by."""
    if config.central_dp == "dp-fedavg":
        who = "threat model: the released model only (central DP-FedAvg, dp-accounting PLD)"
    else:
        who = "threat model: an honest-but-curious client"
    what = ("one client added or removed" if config.relation == "add-remove"
            else "one client's whole data replaced")
    sampling = (f"{config.sampling} sampling q = {config.rate:g} of N = "
                f"{config.population_size}" if config.samples_clients else "no client sampling")
    count = ("" if count_sigma(config) is None
             else f"; noised clipped fraction released, count_sigma = {count_sigma(config):.3g}")
    return f"{config.relation} client: {what}; {who}; {sampling}{count}"
