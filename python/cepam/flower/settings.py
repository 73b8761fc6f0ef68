"""The settings of a :class:`.strategy.CepamStrategy`, checked once when it
is built: its constructor's arguments (InvalidTypeError /
InvalidArgumentError), the client-sampling, relation and clipping settings,
and each round's clip and mechanism (fixed, or following the adaptive clip).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from typing import Any

from flwr.serverapp.strategy import Strategy

import cepam
from cepam._checks import check_choice, check_clip, check_int
from cepam._checks import check_real as _check_real  # (this module's check_real adds a range)
from cepam.accounting import FLSetting, Ledger
from cepam.accounting.cohort import MAX_POPULATION, RELATIONS, SAMPLINGS, check_cohort_tail
from cepam.accounting.events import BOUNDS  # (the per-round bounds: bound=)
from cepam.accounting.setting import THREAT_MODELS
from cepam.clipping import AdaptiveClip
from cepam.errors import InvalidArgumentError, InvalidTypeError
from cepam.padding import check_pad, uses_bound
from cepam.structure import check_buffers

from .inner import check_inner
from .keys import SecretSource
from .protocol import ACCOUNTED

__all__ = ["FLOWER_DP", "Settings", "check_real", "is_flower_dp"]

log = logging.getLogger("flwr.cepam")

FLOWER_DP = (
    "DifferentialPrivacyServerSideFixedClipping",
    "DifferentialPrivacyClientSideFixedClipping",
    "DifferentialPrivacyServerSideAdaptiveClipping",
    "DifferentialPrivacyClientSideAdaptiveClipping",
)



def is_flower_dp(strategy: object) -> bool:
    """Is ``strategy`` (a subclass of) one of Flower's DP wrappers?"""
    return any(c.__name__ in FLOWER_DP for c in type(strategy).__mro__)


def check_real(name: str, value: object, *, low: float, high: float | None = None,
               open_high: bool = True) -> float:
    """``value`` as a float in (low, high) (or (low, high] with
    ``open_high=False``).

    Raises:
        InvalidTypeError: it is not a real number (numpy scalars count;
            bools, numpy's too, do not).
        InvalidArgumentError: it is outside the interval, NaN, or an int
            beyond float64's range.
    """
    value = _check_real(name, value)
    above = math.isfinite(value) and value > low
    below = high is None or (value < high if open_high else value <= high)
    if not (above and below):
        span = f"({low:g}, {'inf' if high is None else format(high, 'g')}" + \
               (")" if open_high or high is None else "]")
        raise InvalidArgumentError(f"{name} must be in {span}, got {value!r}")
    return value


class Settings:
    """The checked settings of :class:`.strategy.CepamStrategy` (a mixin of
    it): its public attributes ``clip``, ``mechanism``, ``pad``, ``buffers``,
    ``sample_rate``, ``relation`` and the others its constructor names."""

    def _init_settings(self, strategy: Strategy, *, mechanism: Any, clip: float,
                       setting: FLSetting | None, delta: float, max_epsilon: float | None,
                       secrets: SecretSource | None, lattice: str, dim: int | None, coder: str,
                       prefer: str,
                       pad: str | int | None, bound: str, ledger: Any, ledger_name: str | None,
                       max_reply_bytes: int | None,
                       pinned_keys: str | os.PathLike[str] | None,
                       authenticated_transport: bool, sample_rate: float, relation: str,
                       sampling: str, clients: int | None, population: int | None,
                       cohort_tail: float | None, sampling_seed: int | None,
                       threat_model: str | None, clip_quantile: float | None,
                       clip_learning_rate: float, clip_count_sigma: float | None, buffers: str,
                       running_var_floor: float, signed_keys: bool,
                       averages: bool | None = None) -> None:
        """Checks and keeps the constructor's settings (those of
        :class:`.strategy.CepamStrategy`, its Args); raises InvalidTypeError /
        InvalidArgumentError as it documents."""
        if is_flower_dp(strategy):
            raise InvalidArgumentError(
                f"{type(strategy).__name__} adds Flower's own clipping and noise; cepam clips "
                "and adds noise itself (and its clients send no float32 update to clip): use "
                "one or the other")
        if not isinstance(mechanism, ACCOUNTED):
            names = " or ".join(f"cepam.{cls.__name__}" for cls in ACCOUNTED)
            raise InvalidTypeError(f"mechanism must be {names}, got {type(mechanism).__name__}")
        self.clip = check_clip(clip)
        if math.isinf(self.clip):
            raise InvalidArgumentError("clip is required: the privacy guarantee needs it")
        if not isinstance(lattice, str):  # (Codec's None, the default, would not travel)
            raise InvalidTypeError(f"lattice must be a str (a lattice's name or 'auto'), got "
                                   f"{type(lattice).__name__}")
        # Validates lattice, dim, prefer and coder against the mechanism.
        cepam.Codec(mechanism, secret=bytes(32), dim=dim, lattice=lattice, prefer=prefer,
                    clip=self.clip, coder=coder)
        delta = check_real("delta", delta, low=0.0, high=1.0)
        if setting is not None:
            if not isinstance(setting, FLSetting):
                raise InvalidTypeError(f"setting must be a cepam.accounting.FLSetting, got "
                                       f"{type(setting).__name__}")
            if setting.clip != self.clip:
                raise InvalidArgumentError(f"setting.clip ({setting.clip}) must equal clip "
                                           f"({self.clip})")
        self._init_sampling(strategy, mechanism, setting, sample_rate=sample_rate,
                            relation=relation, sampling=sampling, clients=clients,
                            population=population, cohort_tail=cohort_tail,
                            sampling_seed=sampling_seed,
                            threat_model=threat_model,
                            clip_quantile=clip_quantile, clip_learning_rate=clip_learning_rate,
                            clip_count_sigma=clip_count_sigma)
        #: Whether the inner strategy averages the noisy models (.inner):
        #: a round of one that does not is accounted as one client's update.
        if averages is not None and not isinstance(averages, bool):
            raise InvalidTypeError(f"averages must be True, False or None, got "
                                   f"{type(averages).__name__}")
        self.averages = check_inner(strategy, relation=relation, declared=averages)
        if not self.averages:
            if self.threat_model != "server":
                log.warning("cepam: %s is not known to average the noisy models: each round is "
                            "accounted as one client's decoded update (threat model 'server', "
                            "m = 1), not as the mean of K against threat model %r, whose eps "
                            "would be too small", type(strategy).__name__, self.threat_model)
            self.threat_model = "server"
            if setting is not None:
                setting = dataclasses.replace(setting, threat_model="server")
        if max_epsilon is not None:
            if setting is None and not self._client_level:
                raise InvalidArgumentError("max_epsilon needs a setting to account eps in")
            max_epsilon = check_real("max_epsilon", max_epsilon, low=0.0)
        check_choice("bound", bound, BOUNDS)
        if ledger is not None and setting is None and not self._client_level:
            raise InvalidArgumentError("a ledger needs a setting to account eps in")
        if ledger is not None and not isinstance(ledger, (str, os.PathLike, Ledger)):
            raise InvalidTypeError(f"ledger must be a cepam.accounting.Ledger or a path, got "
                                   f"{type(ledger).__name__}")
        self.pad = check_pad(pad)
        if uses_bound(self.pad) and math.isinf(self.clip):  # (clip is required anyway)
            raise InvalidArgumentError(f"pad={self.pad!r} needs a clip")
        if max_reply_bytes is not None and (isinstance(max_reply_bytes, bool) or not isinstance(
                max_reply_bytes, int) or max_reply_bytes <= 0):
            raise InvalidArgumentError(f"max_reply_bytes must be a positive int, got "
                                       f"{max_reply_bytes!r}")
        if pinned_keys is not None and not isinstance(pinned_keys, (str, os.PathLike)):
            raise InvalidTypeError(f"pinned_keys must be a path, got {type(pinned_keys).__name__}")
        if ledger_name is not None and not (isinstance(ledger_name, str) and ledger_name):
            raise InvalidArgumentError(f"ledger_name must be a non-empty str or None, got "
                                       f"{ledger_name!r}")
        if pinned_keys is not None and secrets is not None:
            raise InvalidArgumentError("pinned_keys pins X25519 keys: it needs secrets=None")
        if not isinstance(authenticated_transport, bool):
            raise InvalidTypeError("authenticated_transport must be a bool")
        if not isinstance(signed_keys, bool):
            raise InvalidTypeError(f"signed_keys must be a bool, got {type(signed_keys).__name__}")
        if signed_keys and secrets is not None:
            raise InvalidArgumentError("signed_keys binds X25519 keys to the nodes' Flower "
                                       "identity: it needs secrets=None (key agreement)")
        self.buffers = check_buffers(buffers)
        self.running_var_floor = check_real("running_var_floor", running_var_floor, low=0.0)
        self._ledger_source, self._ledger_name = ledger, ledger_name
        self.ledger: Ledger | None = None
        self.strategy, self.mechanism, self.setting = strategy, mechanism, setting
        self.delta, self.max_epsilon, self.bound = float(delta), max_epsilon, bound
        self.lattice, self.dim, self.coder, self.prefer = lattice, dim, coder, prefer
        self.max_reply_bytes = max_reply_bytes
        self.authenticated_transport = authenticated_transport
        self.signed_keys = signed_keys

    def _init_sampling(self, strategy: Strategy, mechanism: Any, setting: FLSetting | None, *,
                       sample_rate: float, relation: str, sampling: str, clients: int | None,
                       population: int | None, cohort_tail: float | None,
                       sampling_seed: int | None, threat_model: str | None,
                       clip_quantile: float | None, clip_learning_rate: float,
                       clip_count_sigma: float | None) -> None:
        """Checks and keeps the client-sampling, relation and clipping settings."""
        self.sample_rate = check_real("sample_rate", sample_rate, low=0.0, high=1.0,
                                      open_high=False)
        check_choice("relation", relation, RELATIONS)
        check_choice("sampling", sampling, SAMPLINGS)
        if sampling == "fixed":
            if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
                raise InvalidArgumentError(f"sampling='fixed' needs clients, a positive int, "
                                           f"got {clients!r}")
            if self.sample_rate != 1.0:
                raise InvalidArgumentError("sampling='fixed' draws `clients` nodes; its rate is "
                                           "clients / N each round: leave sample_rate at 1.0")
            if relation != "replace-one":
                raise InvalidArgumentError("a fixed cohort is accounted under relation "
                                           "'replace-one' only")
        elif clients is not None:
            raise InvalidArgumentError("clients is the size of a fixed cohort: it needs "
                                       "sampling='fixed'")
        if population is not None:
            population = check_int("population", population, minimum=1,
                                   maximum=int(MAX_POPULATION))
            if relation != "add-remove":
                raise InvalidArgumentError(
                    "population declares N for relation 'add-remove', whose top-up makes the "
                    "noise T clients' worth whatever the nodes addressed; under replace-one "
                    "the noise is the cohort's drawn from the nodes addressed, which N is")
        elif relation == "add-remove":
            raise InvalidArgumentError(
                "relation 'add-remove' needs population=N, the number of clients sampled "
                "from, declared: the fixed denominator n = q N and the noise's cap T must not "
                "depend on which clients are connected, whose number one client's presence "
                "changes (and the released noise's scale would show it)")
        if sampling_seed is not None and (isinstance(sampling_seed, bool) or not isinstance(
                sampling_seed, int) or sampling_seed < 0):
            raise InvalidArgumentError(f"sampling_seed must be a non-negative int, got "
                                       f"{sampling_seed!r}")
        if threat_model is not None:
            check_choice("threat_model", threat_model, THREAT_MODELS)
        if threat_model is not None and setting is not None and \
                setting.threat_model != threat_model:
            raise InvalidArgumentError(f"threat_model {threat_model!r} differs from the "
                                       f"setting's ({setting.threat_model!r})")
        self.threat_model = threat_model or (setting.threat_model if setting is not None
                                             else "client")
        if relation == "add-remove" and self.threat_model == "server":
            raise InvalidArgumentError(
                "relation 'add-remove' against threat model 'server' is unbounded: a client's "
                "own decoded update reveals its presence")
        self.clip_count_sigma = None if clip_count_sigma is None else check_real(
            "clip_count_sigma", clip_count_sigma, low=0.0)
        self.clip_quantile = None if clip_quantile is None else check_real(
            "clip_quantile", clip_quantile, low=0.0, high=1.0)
        self.clip_learning_rate = check_real("clip_learning_rate", clip_learning_rate, low=0.0)
        if clip_quantile is not None:
            AdaptiveClip(initial_clip=self.clip, target_quantile=clip_quantile,
                         learning_rate=clip_learning_rate)  # checks them
            if self.clip_count_sigma is None:
                raise InvalidArgumentError("adaptive clipping (clip_quantile) needs "
                                           "clip_count_sigma: the noise on each client's "
                                           "clipped-or-not bit")
        self.relation, self.sampling, self.cohort_size = relation, sampling, clients
        self.population = population
        if cohort_tail is not None:
            if relation != "add-remove":
                raise InvalidArgumentError("cohort_tail bounds the cohort under relation "
                                           "'add-remove' only")
            cohort_tail = check_cohort_tail(cohort_tail)
        self.cohort_tail = cohort_tail
        self.sampling_seed = sampling_seed
        self._samples = self.sample_rate < 1.0 or sampling == "fixed"
        self._client_level = self._samples or relation != "replace-one" or \
            self.clip_count_sigma is not None
        if self._client_level and not isinstance(mechanism, cepam.Gaussian):
            raise InvalidArgumentError(
                "client sampling, relation 'add-remove' and the clipped-or-not count are "
                "accounted for cepam.Gaussian only")
        if self._samples and getattr(strategy, "fraction_train", 1.0) != 1.0:
            raise InvalidArgumentError(
                f"the inner strategy samples nodes itself (fraction_train="
                f"{getattr(strategy, 'fraction_train')}); with sample_rate or sampling='fixed' "
                "the wrapper samples the cohort: give the inner strategy fraction_train=1.0 so "
                "that it addresses every connected node")

    def _sampling_text(self) -> str:
        if self.sampling == "fixed":
            how = f"a fixed cohort of {self.cohort_size} nodes drawn uniformly each round"
        elif self.sample_rate < 1.0:
            how = f"Poisson sampling of the nodes at rate {self.sample_rate:g}"
        else:
            how = "every node each round"
        declared = "" if self.population is None else f" of a population of {self.population}"
        return f"{how}{declared}, relation {self.relation}"

    def _round_settings(self) -> tuple[float, cepam.Gaussian | cepam.Laplace]:
        """The clip and the mechanism of the next round: the adaptive clip and
        the noise that keeps the run's sigma / clip, or the fixed ones."""
        if self._adaptive is None:
            return self.clip, self.mechanism
        return self._adaptive.clip, cepam.Gaussian(
            sigma=self._adaptive.noise_std(self.mechanism.sigma))
