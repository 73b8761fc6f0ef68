"""The configuration of one federated-learning run, and the names it accepts.

:class:`FLConfig` fixes a run (its defaults are the paper's setup, see
``docs/design.md``, "The paper's experiment") and refuses settings that
contradict each other or that the run would not use;
:func:`grid_configs` makes the runs of a grid that shares its options
(``cepam fl run``); :data:`METHODS` and :data:`MODEL_NAMES` are the
transports and networks a configuration may name, and :func:`method_label`
gives a method's name in the paper.  This module needs no torch, so
finished runs can be read and tabulated without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._checks import check_choice, check_flag, check_int, check_positive
from ..accounting.cohort import MAX_POPULATION
from ..auto import _check_lattice
from ..errors import InvalidArgumentError, InvalidTypeError
from ..lattices import LATTICE_DIMS
from ..mechanisms import Gaussian, Laplace
from .engines import ENGINES as _ENGINE_TABLE
from .seeds import MAX_SEED
from .split import check_split

__all__ = ["FLConfig", "SAMPLINGS", "RELATIONS", "CENTRAL_DP", "METHODS", "MODEL_NAMES",
           "MODEL_PARAMETERS", "method_label", "json_value", "codec_dim", "grid_configs", "uses"]

#: The networks of :mod:`.models`, by name.
MODEL_NAMES = ("mlp", "cnn")
#: Their parameter counts (the coordinates of an update), known without torch.
MODEL_PARAMETERS = {"mlp": 25818, "cnn": 6422}

METHODS = (
    "fl",
    "fl-sdq",
    "fl-gaussian",
    "fl-gaussian-sdq",
    "fl-laplace",
    "fl-laplace-sdq",
    "cepam-gaussian",
    "cepam-laplace",
)

_LABELS = {
    "fl": "FL",
    "fl-sdq": "FL+SDQ",
    "fl-gaussian": "FL+Gaussian",
    "fl-gaussian-sdq": "FL+Gaussian+SDQ",
    "fl-laplace": "FL+Laplace",
    "fl-laplace-sdq": "FL+Laplace+SDQ",
    "cepam-gaussian": "CEPAM-Gaussian",
    "cepam-laplace": "CEPAM-Laplace",
}


def method_label(method: str, dim: int = 1, lattice: str = "Z") -> str:
    """The paper's name, e.g. ``CEPAM-Gaussian (n=2)``."""
    label = _LABELS[method]
    if method.startswith("cepam"):
        # A2, D4 and E8 have a fixed dimension: the lattice names it.
        label += f" (n={dim})" if lattice == "Z" else f" ({lattice})"
    return label


#: The lattices a CEPAM method may name: Z (in any dimension ``dim``), "auto"
#: and those of a fixed dimension.
LATTICES = ("Z", "auto", *LATTICE_DIMS)

# The names of the engines (:mod:`.engines` holds what each one is).
ENGINES = tuple(_ENGINE_TABLE)

#: How a round's cohort is drawn (:attr:`FLConfig.sampling`).
SAMPLINGS = ("poisson", "fixed")
#: The neighbouring relations (:attr:`FLConfig.relation`).
RELATIONS = ("replace-one", "add-remove")
#: Central DP on float32 updates (:attr:`FLConfig.central_dp`).
CENTRAL_DP = ("dp-fedavg", "flower")
# The methods whose clients add Gaussian noise of std sigma to the clipped update;
# those whose clients add Laplace noise of scale b; those that quantize with SDQ;
# the no-privacy baselines (no noise, clipped with clip_all or central_dp only).
_GAUSSIAN_CLIENT_NOISE = ("cepam-gaussian", "fl-gaussian", "fl-gaussian-sdq")
_LAPLACE_CLIENT_NOISE = ("cepam-laplace", "fl-laplace", "fl-laplace-sdq")
_SDQ_METHODS = ("fl-sdq", "fl-gaussian-sdq", "fl-laplace-sdq")
_BASELINES = ("fl", "fl-sdq")

#: The settings that only some runs use: for each, what it applies to (the
#: words of the error) and whether a run of these settings (FLConfig's fields
#: by name) uses it.  Every run uses every other setting.
_APPLIES_TO: dict[str, tuple[str, Callable[[Mapping[str, Any]], bool]]] = {
    "dim": ("the CEPAM methods", lambda s: str(s["method"]).startswith("cepam")),
    "lattice": ("the CEPAM methods", lambda s: str(s["method"]).startswith("cepam")),
    "sigma": (f"the Gaussian methods ({', '.join(_GAUSSIAN_CLIENT_NOISE)}) and fl-sdq's "
              "default SDQ step (no sdq_step)",
              lambda s: s["method"] in _GAUSSIAN_CLIENT_NOISE
              or (s["method"] == "fl-sdq" and s["sdq_step"] is None)),
    "b": (f"the Laplace methods ({', '.join(_LAPLACE_CLIENT_NOISE)})",
          lambda s: s["method"] in _LAPLACE_CLIENT_NOISE),
    "sdq_step": (f"the SDQ methods ({', '.join(_SDQ_METHODS)})",
                 lambda s: s["method"] in _SDQ_METHODS),
    "clip": ("the private methods, and fl and fl-sdq with clip_all or central_dp",
             lambda s: s["method"] not in _BASELINES or s["clip_all"] is True
             or s["central_dp"] is not None),
    "clip_all": ("fl and fl-sdq (the private methods always clip)",
                 lambda s: s["method"] in _BASELINES),
    "clip_learning_rate": ("adaptive clipping (clip_quantile)",
                           lambda s: s["clip_quantile"] is not None),
    "clip_count_sigma": ("a released clipped fraction (clip_quantile, or "
                         "clipped_fraction_release with a Gaussian method)",
                         lambda s: s["clip_quantile"] is not None
                         or (s["clipped_fraction_release"] is True
                             and s["method"] in _GAUSSIAN_CLIENT_NOISE)),
    "clipped_fraction_release": (f"the Gaussian methods ({', '.join(_GAUSSIAN_CLIENT_NOISE)}), "
                                 "whose clients' clipped-or-not bits are counted",
                                 lambda s: s["method"] in _GAUSSIAN_CLIENT_NOISE),
    "noise_multiplier": ("central_dp", lambda s: s["central_dp"] is not None),
}
#: Of those, the settings that the no-privacy baselines fl and fl-sdq take
#: unused: a grid gives its noise scales and clip to every row, the baselines
#: included (``cepam fl run --method all --sigma ...``, bench/dp_fedavg.py's
#: no-DP row).  Every other unused setting is refused.
_BASELINES_TAKE = ("sigma", "b", "clip")


#: FLConfig's integer fields and their least values; its positive finite
#: numbers; its flags; and those of them that may be None.
_INTEGERS = {"dim": 1, "clients": 1, "samples_per_client": 1, "sgd_steps": 1, "batch_size": 1,
             "lr_patience": 1, "rounds": 0, "train_size": 1, "val_size": 0, "test_size": 0,
             "seed": 0, "population": 1}
_POSITIVE = ("sigma", "b", "sdq_step", "clip", "alpha", "lr", "lr_factor", "delta",
             "sample_rate", "clip_quantile", "clip_learning_rate", "clip_count_sigma",
             "server_lr", "noise_multiplier")
_FLAGS = ("clip_all", "clipped_fraction_release")
_OPTIONAL = ("samples_per_client", "test_size", "population", "sdq_step", "alpha",
             "clip_quantile", "clip_count_sigma", "noise_multiplier")
#: The largest values of those integer fields that have one: the clients of a
#: round and the federation at most the accountant's population (the checks
#: that relate them compute in floats).
_MAXIMA = {"clients": int(MAX_POPULATION), "population": int(MAX_POPULATION)}


@dataclass(frozen=True)
class FLConfig:
    """The settings of one run; the defaults are the paper's (docs/design.md,
    "The paper's experiment").

    Attributes:
        model: "mlp" or "cnn".
        method: one of :data:`cepam.fl.methods.METHODS`.
        dim, lattice: LRSUQ sub-vector dimension and lattice (CEPAM methods).
        sigma: Gaussian noise standard deviation per coordinate.
        b: Laplace scale per coordinate.
        sdq_step: SDQ step (None: sqrt(12) times the noise std).
        clip: whole-update l2 clip gamma of the private methods.
        clip_all: also clip ``fl`` and ``fl-sdq``.
        clients: K (at most 10^12, the accountant's largest population,
            :data:`cepam.accounting.cohort.MAX_POPULATION`; as ``population``).
        samples_per_client: IID share size (None: train_size // K).
        alpha: Dirichlet concentration of a non-IID split (None: IID).
        sgd_steps: local optimizer (momentum-SGD) steps per client and
            round (the paper's tau: 15).  Each draws ``batch_size`` samples
            with replacement, so a round draws ``sgd_steps * batch_size``
            samples: the accountant's
            :attr:`cepam.accounting.FLSetting.samples_per_round`.
        batch_size: samples per local step (the paper: 1).
        lr, momentum: SGD settings.
        lr_patience, lr_factor: plateau schedule on validation accuracy.
        rounds: communication rounds.
        train_size, val_size: split of the 60,000 official training images.
        test_size: number of official test images used (None: all 10,000).
        delta: delta of the "eps so far" column.
        seed: the run's seed, 0 to 2^63 - 1 (:data:`.seeds.MAX_SEED`); every random
            draw derives from it.
        engine: "builtin" (all clients trained together in one process) or
            "flower" (Flower's simulation engine, one ClientApp call per
            client: :mod:`.flower_engine`).
        population: N, the clients the training data is split over (None:
            ``clients``, every client takes part in every round).
        sample_rate: q, the chance that a client takes part in a round
            (Poisson sampling); ``clients`` must be the expected cohort
            ``q * N`` (rounded).  1.0: no sampling.
        sampling: "poisson" (each client independently with probability q,
            from the server's own seeded Generator) or "fixed" (a uniform
            cohort of ``clients`` out of N; its rate is ``clients / N``, so
            ``sample_rate`` must be 1.0 or that value; replace-one only).
        relation: the neighbouring relation of the client-level guarantee and
            of the aggregation: "replace-one" (the plain mean of the k
            decoded updates) or "add-remove" (top-up noise to T clients'
            worth on the sum, divided by the fixed ``clients``; Gaussian
            methods only): see docs/privacy.md and :mod:`cepam.clipping`.
        clip_quantile: gamma, the target quantile of adaptive clipping
            (Andrew et al. 2021; None: a fixed clip).  The noise follows
            the clip, sigma_t = (sigma / clip) C_t (Gaussian methods only).
        clip_learning_rate: eta of the adaptive clip's geometric update.
        clip_count_sigma: per-client noise std on the clipped-or-not bit
            (None: Andrew et al.'s n / 20 on the sum, i.e. (n / 20) / sqrt(T)
            per client, :func:`cepam.clipping.default_count_sigma`).
        clipped_fraction_release: publish the per-round noised clipped
            fraction with a fixed clip too (Gaussian methods; accounted with
            ``clip_count_sigma``).  Adaptive clipping always publishes it (its
            clip follows it); with a fixed clip it costs privacy for a metric
            only, so it is off unless asked for.
        server_lr: the server's learning rate: the global weights move by
            ``server_lr`` times the released (averaged) update.
        central_dp: None, or central DP on float32 updates (method "fl",
            whose updates are then clipped to ``clip``): "dp-fedavg" (the
            server adds N(0, (z clip)^2) once to the sum and divides by the
            fixed ``clients``; relation "add-remove") or "flower" (what
            flwr's DifferentialPrivacyServerSideFixedClipping does: the mean
            of the k updates plus N(0, (z clip / clients)^2)).
        noise_multiplier: z of ``central_dp``.

    Raises:
        InvalidTypeError: a value of the wrong type.
        InvalidArgumentError: a value out of range; settings that contradict
            each other (sampling, relation, central DP and adaptive clipping
            with the method; a CEPAM lattice in a dimension or with a noise
            the codec does not take; a client split that does not fit in
            ``train_size``, or ``samples_per_client`` with ``alpha``); or a
            setting changed from its default that the run would not use
            (:meth:`uses`: ``b`` of a Gaussian method, ``sigma`` of a Laplace
            one, ``sdq_step`` without SDQ, ``clip_all`` of a private method,
            ``dim`` and ``lattice`` without CEPAM, ``clip_learning_rate``
            without ``clip_quantile``, ``clip_count_sigma`` and
            ``clipped_fraction_release`` without a released clipped fraction,
            ``noise_multiplier`` without ``central_dp``).  The no-privacy
            baselines ``fl`` and ``fl-sdq`` take ``sigma``, ``b`` and
            ``clip`` unused (:meth:`ignored_settings`): a grid passes them
            to every row.
    """

    model: str = "cnn"
    method: str = "fl"
    dim: int = 1
    lattice: str = "Z"
    sigma: float = 1e-3
    b: float = 1e-3
    sdq_step: float | None = None
    clip: float = 1.0
    clip_all: bool = False
    clients: int = 30
    samples_per_client: int | None = None
    alpha: float | None = None
    sgd_steps: int = 15
    batch_size: int = 1
    lr: float = 0.01
    momentum: float = 0.9
    lr_patience: int = 10
    lr_factor: float = 0.5
    rounds: int = 80
    train_size: int = 50000
    val_size: int = 10000
    test_size: int | None = None
    delta: float = 1e-5
    seed: int = 0
    engine: str = "builtin"
    population: int | None = None
    sample_rate: float = 1.0
    sampling: str = "poisson"
    relation: str = "replace-one"
    clip_quantile: float | None = None
    clip_learning_rate: float = 0.2
    clip_count_sigma: float | None = None
    clipped_fraction_release: bool = False
    server_lr: float = 1.0
    central_dp: str | None = None
    noise_multiplier: float | None = None

    def __post_init__(self) -> None:
        self._check_types()
        if self.train_size + self.val_size > 60000:
            raise InvalidArgumentError("train_size + val_size must be at most 60000")
        if self.test_size is not None and not 0 <= self.test_size <= 10000:
            raise InvalidArgumentError("test_size must be between 0 and 10000")
        if not (self.lr > 0 and 0 <= self.momentum < 1 and 0 < self.lr_factor <= 1):
            raise InvalidArgumentError("need lr > 0, 0 <= momentum < 1, 0 < lr_factor <= 1")
        if not 0 < self.delta < 1:
            raise InvalidArgumentError(f"delta must be in (0, 1), got {self.delta}")
        self._check_sampling()
        self._check_unused()
        self._check_codec()
        check_split(self.train_size, self.population_size, alpha=self.alpha,
                    per_client=self.samples_per_client)

    def _check_types(self) -> None:
        """Every number and flag of the config of the right type and sign
        (:data:`_INTEGERS`, :data:`_POSITIVE`, :data:`_FLAGS`), every name one
        of its choices, and a dimension of at most 8 (Z^n's; the root
        lattices take their own)."""
        for name, minimum in _INTEGERS.items():
            value = getattr(self, name)
            if value is not None or name not in _OPTIONAL:
                check_int(name, value, minimum=minimum, maximum=_MAXIMA.get(name))
        for name in _POSITIVE:
            value = getattr(self, name)
            if value is not None or name not in _OPTIONAL:
                check_positive(name, value)
        if isinstance(self.momentum, bool) or not isinstance(self.momentum, numbers.Real):
            raise InvalidTypeError(f"momentum must be a real number, got "
                                   f"{type(self.momentum).__name__}")
        for name in _FLAGS:
            check_flag(name, getattr(self, name))
        for name, choices in (("model", MODEL_NAMES), ("method", METHODS), ("engine", ENGINES),
                              ("lattice", LATTICES)):
            check_choice(name, getattr(self, name), choices)
        if self.central_dp is not None:
            check_choice("central_dp", self.central_dp, CENTRAL_DP)
        if self.dim > 8:
            raise InvalidArgumentError(f"dim must be at most 8, got {self.dim}")
        if self.seed > MAX_SEED:
            raise InvalidArgumentError(f"seed must be at most 2^63 - 1 = {MAX_SEED} (it is "
                                       f"hashed as a signed 64-bit integer), got {self.seed}")

    def _check_unused(self) -> None:
        """Refuses a setting changed from its default that the run would not
        use (:data:`_APPLIES_TO`; the baselines take a noise scale and a clip,
        :data:`_BASELINES_TAKE`)."""
        refused = _refused(self.to_dict())
        if refused:
            raise InvalidArgumentError(_unused_message(self.to_dict(), refused,
                                                       f"this run (method {self.method!r})"))

    def _check_codec(self) -> None:
        """A CEPAM method's lattice, dimension and noise are a combination the
        codec encodes (:func:`cepam.auto._check_lattice`: A2, D4 and E8 their
        own dimension, Gaussian only; Laplace n <= 4; "auto" no n), checked
        here so that a run is refused before it starts."""
        if self.method.startswith("cepam"):
            mechanism = (Gaussian(sigma=self.sigma) if self.method == "cepam-gaussian"
                         else Laplace(b=self.b))
            _check_lattice(self.lattice, codec_dim(self.dim, self.lattice), mechanism)

    def _check_sampling(self) -> None:
        """The checks of the client-sampling, relation, adaptive-clipping and
        central-DP settings."""
        n, big_n, q = self.clients, self.population_size, float(self.sample_rate)
        if big_n < n:
            raise InvalidArgumentError(f"population must be at least clients ({n}), got {big_n}")
        if not 0.0 < q <= 1.0:
            raise InvalidArgumentError(f"sample_rate must be in (0, 1], got {self.sample_rate}")
        check_choice("sampling", self.sampling, SAMPLINGS)
        check_choice("relation", self.relation, RELATIONS)
        if self.sampling == "poisson" and abs(q * big_n - n) > 0.5:
            raise InvalidArgumentError(
                f"clients must be the expected cohort sample_rate * population = {q * big_n:g} "
                f"(rounded), got {n}")
        if self.sampling == "fixed":
            if q != 1.0 and not math.isclose(q, n / big_n, rel_tol=1e-9):
                raise InvalidArgumentError(
                    f"a fixed cohort of {n} out of {big_n} has rate {n / big_n:g}; leave "
                    f"sample_rate at 1.0 or give that value, not {q}")
            if self.relation != "replace-one":
                raise InvalidArgumentError("sampling 'fixed' is accounted under relation "
                                           "'replace-one' only")
        gaussian = self.method in _GAUSSIAN_CLIENT_NOISE
        if self.central_dp is not None:
            if self.method != "fl":
                raise InvalidArgumentError("central_dp takes method 'fl' (float32 updates, "
                                           f"clipped, noised by the server), not {self.method!r}")
            if self.noise_multiplier is None or not (math.isfinite(self.noise_multiplier)
                                                     and self.noise_multiplier > 0):
                raise InvalidArgumentError("central_dp needs a positive finite noise_multiplier")
            wanted = "add-remove" if self.central_dp == "dp-fedavg" else "replace-one"
            if self.relation != wanted:
                raise InvalidArgumentError(f"central_dp {self.central_dp!r} goes with relation "
                                           f"{wanted!r}")
        if self.relation == "add-remove" and self.central_dp is None and not gaussian:
            raise InvalidArgumentError(
                "relation 'add-remove' needs a Gaussian method "
                f"({', '.join(_GAUSSIAN_CLIENT_NOISE)}), not {self.method!r}")
        if self.clip_quantile is not None:
            if not gaussian:
                raise InvalidArgumentError("adaptive clipping (clip_quantile) needs a Gaussian "
                                           f"method, not {self.method!r}")
            if not 0.0 < self.clip_quantile < 1.0:
                raise InvalidArgumentError(
                    f"clip_quantile must be in (0, 1), got {self.clip_quantile}")
        for name in ("clip_learning_rate", "server_lr"):
            v = float(getattr(self, name))
            if not (math.isfinite(v) and v > 0):
                raise InvalidArgumentError(f"{name} must be positive and finite, got {v}")
        if self.clip_count_sigma is not None and not (math.isfinite(self.clip_count_sigma)
                                                      and self.clip_count_sigma > 0):
            raise InvalidArgumentError(
                f"clip_count_sigma must be positive and finite, got {self.clip_count_sigma}")

    @property
    def population_size(self) -> int:
        """N: ``population``, or ``clients`` when it is not set."""
        return self.clients if self.population is None else int(self.population)

    @property
    def rate(self) -> float:
        """The accountant's sample rate: ``sample_rate`` (Poisson), or
        ``clients / population`` (a fixed cohort)."""
        if self.sampling == "fixed":
            return self.clients / self.population_size
        return float(self.sample_rate)

    @property
    def samples_clients(self) -> bool:
        """Whether a round's cohort is drawn (not every client every round)."""
        return self.population_size != self.clients or self.rate < 1.0

    @property
    def paper_setting(self) -> bool:
        """Whether the run is the paper's setting (every client every round,
        replace-one, a fixed clip, no released clipped fraction, no central
        noise): the record-level accountant of :mod:`.privacy` covers it."""
        return (not self.samples_clients and self.relation == "replace-one"
                and self.clip_quantile is None and self.central_dp is None
                and not self.clipped_fraction_release)

    @property
    def samples_per_round(self) -> int:
        """Samples each client draws with replacement in a round,
        ``sgd_steps * batch_size`` (the accountant's ``samples_per_round``)."""
        return self.sgd_steps * self.batch_size

    def to_dict(self) -> dict[str, Any]:
        """The settings by name (every field, the seed included)."""
        return dataclasses.asdict(self)

    def uses(self, name: str) -> bool:
        """Whether this run uses the setting ``name`` (a field): every run
        uses every setting but those that apply to some runs only (a noise
        scale, the SDQ step, the clipping options, the lattice...), which
        :class:`FLConfig` refuses changed where unused, except a noise scale
        or the clip of the baselines fl and fl-sdq (a grid's shared
        settings).

        Raises:
            InvalidArgumentError: ``name`` is not a setting.
        """
        return uses(name, **self.to_dict())

    def ignored_settings(self) -> tuple[str, ...]:
        """The settings changed from their defaults that this run does not
        use (:meth:`uses`): only a noise scale or the clip of the baselines
        fl and fl-sdq, since every other one is refused."""
        return tuple(_unused(self.to_dict()))

    def group_settings(self) -> dict[str, Any]:
        """The settings that make this run's configuration: :meth:`to_dict`
        without the seed, each setting the run does not use
        (:meth:`ignored_settings`) at its default, and the ``dim`` of a
        lattice of fixed dimension (A2, D4, E8) at 1, which means its own
        (:func:`codec_dim`).  Runs with the same group settings differ in
        their seed only (or in settings none of them uses, or in how they
        name one dimension): ``cepam fl table`` and ``fl plot`` average them
        as seeds of one configuration (:meth:`group_key`)."""
        d = self.to_dict()
        d.pop("seed")
        d.update({name: _DEFAULTS[name] for name in self.ignored_settings()})
        if LATTICE_DIMS.get(self.lattice) == self.dim:
            d["dim"] = 1
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FLConfig":
        """The configuration ``d`` (:meth:`to_dict`) holds; a run saved
        before ``local_steps`` was renamed ``sgd_steps`` reads the same, and
        a setting that the run did not use and that :class:`FLConfig` now
        refuses (older versions took it: ``cepam fl run --method all
        --sdq-step 0.1`` gave every method the step) reads as its default.

        Raises:
            InvalidArgumentError: unknown keys, both names, or the checks of
                :class:`FLConfig`.
            InvalidTypeError: a value of the wrong type.
        """
        d = dict(d)
        if "local_steps" in d:  # config.json, rounds.json and state.pt of older runs
            if "sgd_steps" in d:
                raise InvalidArgumentError("a configuration holds both local_steps (the old "
                                           "name) and sgd_steps")
            d["sgd_steps"] = d.pop("local_steps")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise InvalidArgumentError(f"unknown configuration keys: {sorted(unknown)}")
        d.update({name: _DEFAULTS[name] for name in _refused({**_DEFAULTS, **d})})
        return cls(**d)

    def replace(self, **changes: Any) -> "FLConfig":
        return dataclasses.replace(self, **changes)

    @property
    def label(self) -> str:
        """The paper's method name, e.g. ``CEPAM-Gaussian (n=2)`` (``, Flower``
        appended for the Flower engine)."""
        label = method_label(self.method, self.dim, self.lattice)
        return label if self.engine == "builtin" else f"{label}, Flower"

    def group_key(self) -> str:
        """Identifies the configuration without its seed: its
        :meth:`group_settings` as text (runs of one group differ in seed
        only, or in settings none of them uses)."""
        return json.dumps(self.group_settings(), sort_keys=True)

    @classmethod
    def from_run_name(cls, name: str, *, seed: int = 0, rounds: int = 80) -> "FLConfig":
        """The configuration :meth:`run_name` spells ``name``, every setting it
        does not spell out at its default.

        Raises:
            InvalidArgumentError: ``name`` is not a run name, or holds a hash
                of further settings (only the run's ``config.json`` has them).
        """
        model, _, rest = str(name).partition("-")
        method = max((m for m in METHODS if rest == m or rest.startswith(m + "-")), key=len,
                     default=None)
        if model not in MODEL_NAMES or method is None:
            raise InvalidArgumentError(f"{name!r} is not a run name (model-method[-settings])")
        tokens: list[str] = []
        for token in rest[len(method) + 1:].split("-") if rest != method else []:
            if tokens and re.fullmatch(r".*\de", tokens[-1]) and token[:1].isdigit():
                tokens[-1] += "-" + token  # the exponent of 1e-05
            else:
                tokens.append(token)
        changes: dict[str, Any] = {}
        patterns = (("dim", r"n(\d+)", int), ("lattice", f"({'|'.join([*LATTICE_DIMS, 'auto'])})", str),
                    ("sigma", r"sigma(.+)", float), ("b", r"b(.+)", float),
                    ("alpha", r"alpha(.+)", float))
        for token in tokens:
            for key, pattern, kind in patterns:
                found = re.fullmatch(pattern, token)
                if found and key not in changes:
                    try:
                        changes[key] = kind(found.group(1))
                    except ValueError:
                        continue
                    break
            else:
                raise InvalidArgumentError(
                    f"run name {name!r}: {token!r} is not a setting a run name spells out "
                    "(a hashed name keeps its settings in the run's config.json)")
        config = cls(model=model, method=method, seed=seed, rounds=rounds, **changes)
        if config.run_name() != name:
            raise InvalidArgumentError(f"{name!r} is not a run name (it reads back as "
                                       f"{config.run_name()!r})")
        return config

    def run_name(self) -> str:
        """A directory name for this configuration without its seed, such as
        ``cnn-cepam-gaussian-n2``.  Non-default noise scales and splits are
        spelled out; any other non-default setting (except ``rounds``) adds a
        short hash."""
        default = FLConfig()
        parts = [self.model, self.method]
        if self.method.startswith("cepam"):
            parts.append(f"n{self.dim}")
            if self.lattice != "Z":
                parts.append(self.lattice)
        if "gaussian" in self.method and self.sigma != default.sigma:
            parts.append(f"sigma{self.sigma:g}")
        if "laplace" in self.method and self.b != default.b:
            parts.append(f"b{self.b:g}")
        if self.alpha is not None:
            parts.append(f"alpha{self.alpha:g}")
        if self.engine != default.engine:
            parts.append(self.engine)
        # rounds is left out: a run may be resumed with more rounds in its directory.
        named = {"model", "method", "dim", "lattice", "sigma", "b", "alpha", "seed", "rounds",
                 "engine"}
        other = {_HASHED_AS.get(k, k): v for k, v in self.to_dict().items()
                 if k not in named and v != getattr(default, k)}
        if other:
            parts.append(hashlib.sha256(json.dumps(other, sort_keys=True).encode())
                         .hexdigest()[:8])
        return "-".join(parts)


# Settings hashed into run names under the name they had when the hash was
# introduced, so that a renamed setting keeps its runs' directories.
_HASHED_AS = {"sgd_steps": "local_steps"}

#: Every setting's default.
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(FLConfig)}


def uses(name: str, **settings: Any) -> bool:
    """Whether a run of ``settings`` (:class:`FLConfig`'s fields by name,
    the others at their defaults, unchecked) uses the setting ``name``
    (:meth:`FLConfig.uses`): ``cepam fl run`` sweeps an option's values
    over the methods that use it.

    Raises:
        InvalidArgumentError: ``name`` is not a setting.
    """
    if name not in _DEFAULTS:
        raise InvalidArgumentError(f"{name!r} is not a setting of FLConfig")
    return name not in _APPLIES_TO or _APPLIES_TO[name][1]({**_DEFAULTS, **settings})


def codec_dim(dim: int, lattice: str) -> int | None:
    """The ``dim`` a CEPAM run's payloads are encoded with: ``dim``, or None
    (the lattice's own dimension; "auto": its choice) for a lattice other
    than Z at the default n = 1."""
    return None if lattice != "Z" and dim == 1 else dim


def _unused(settings: Mapping[str, Any]) -> list[str]:
    """The settings of a run (all of FLConfig's fields, by name) changed from
    their defaults that it does not use (:data:`_APPLIES_TO`)."""
    return [name for name, (_, uses) in _APPLIES_TO.items()
            if settings[name] != _DEFAULTS[name] and not uses(settings)]


def _refused(settings: Mapping[str, Any]) -> list[str]:
    """Those of :func:`_unused` that FLConfig refuses: all but a noise scale
    or the clip of a baseline (:data:`_BASELINES_TAKE`)."""
    baseline = settings["method"] in _BASELINES
    return [name for name in _unused(settings)
            if not (baseline and name in _BASELINES_TAKE)]


def _unused_message(settings: Mapping[str, Any], names: Sequence[str], where: str) -> str:
    """The error for the settings ``names``, unused in ``where``."""
    return "; ".join(f"{name} = {settings[name]!r} is unused in {where}: it applies only to "
                     f"{_APPLIES_TO[name][0]}; leave it at its default ({_DEFAULTS[name]!r})"
                     for name in names)


def grid_configs(runs: Sequence[Mapping[str, Any]]) -> list[FLConfig]:
    """The configurations of a grid whose runs share their options (``cepam
    fl run``: one ``--sdq-step`` or ``--clip-all`` for several methods):
    each run's settings (FLConfig's keywords), those it does not use and
    :class:`FLConfig` would refuse left at their defaults, so that a shared
    setting reaches the runs it applies to (``clip_all`` fl and fl-sdq,
    ``sdq_step`` the SDQ methods).

    Raises:
        InvalidArgumentError: a setting changed from its default that no run
            of the grid uses (:class:`FLConfig`'s error, naming the grid's
            methods; a noise scale or a clip given to the baselines alone
            too: ``--method fl --clip 0.5`` clips nothing without
            ``--clip-all``), or another check of :class:`FLConfig`.
        InvalidTypeError: a value of the wrong type.
    """
    full = [{**_DEFAULTS, **run} for run in runs]
    refused = [_refused(settings) for settings in full]
    unused = [_unused(settings) for settings in full]  # (the baselines' included)
    everywhere = [name for name in unused[0] if all(name in u for u in unused)] if full else []
    if everywhere:
        methods = list(dict.fromkeys(repr(s["method"]) for s in full))
        where = (f"every run (methods {', '.join(methods)})" if len(methods) > 1
                 else f"every run (method {methods[0]})")
        raise InvalidArgumentError(_unused_message(full[0], everywhere, where))
    return [FLConfig(**{**settings, **{name: _DEFAULTS[name] for name in names}})
            for settings, names in zip(full, refused)]


def json_value(v: Any) -> Any:
    """``v`` for JSON: NaN as null, infinities as the strings ``"inf"`` / ``"-inf"``."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v
