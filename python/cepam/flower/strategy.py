"""The server side: :class:`CepamStrategy`, a wrapper around any Flower strategy.

It wraps a strategy the way Flower's own DP wrappers
(``DifferentialPrivacyServerSideFixedClipping`` and its family) do, and runs
Flower's own loop (:meth:`flwr.serverapp.strategy.Strategy.start`): the same
log lines (the per-round aggregated metrics, the initial and per-round
evaluation, the final summary), the same :class:`Result`, plus cepam's
metrics (``cepam-epsilon``, ``cepam-updates``, ``cepam-dropped``).  Each
round the wrapper

1. checks, before any train message leaves, that the round the inner
   strategy sampled fits the privacy budget against everything the ledger
   holds (earlier runs included); if not, the round sends nothing, and
   every later round of the run is empty too (``stopped_by_budget``);
2. adds to every train message of the inner strategy (its metadata, ttl
   included, kept) its own copy of the RecordDict with the cepam
   configuration (:mod:`.protocol`: mechanism, scale, clip, padding, round,
   a fresh random message number, keys);
3. screens every reply before parsing anything: one reply per node sampled
   this round (a copy is dropped), one payload Array of the cepam stype, at
   most ``max_reply_bytes``, a bare payload, few records and metric values;
4. opens what passes: reads the payload's public header and checks
   (:class:`cepam.expected.Expected`, as :func:`cepam.decode` does) that its
   mechanism, scale, clip, round, client (the sender's node id), message
   number and size are those configured for that node (a client that sends
   less noise is refused),
   then authenticates and decodes it against the arrays sent (``like=``)
   into the node's noisy model, global + clipped update + noise; integer
   and bool arrays (counters such as ``num_batches_tracked``) are the
   server's own, unchanged;
5. drops, with a logged reason, every reply that fails any of this: it
   never reaches aggregation and never raises;
6. accounts the round with K = the number of updates actually averaged
   (:mod:`.budget`), and releases it only if the privacy budget allows;
7. hands the noisy models to the inner strategy, each with weight 1 (the
   accountant's average is the plain mean of K updates, so a client cannot
   weigh in more by claiming more examples), in node-id order (so the
   global model does not depend on the order the replies arrived in), and
   each dropped reply as an error reply, so that the inner strategy's own
   log line ("Received K results and D failures") counts the drops;
8. gives the aggregate back in the dtypes the round sent (flwr 1.42's
   FedAdam returns a float32 model as float64, and every strategy of the
   FedAvg family turns integer counters into float64; a PyTorch client's
   model stays float32, so its next reply would change dtype and be
   refused), the server's own integer counters
   and, with ``buffers="local"``, its own running statistics put back, and
   every running variance (an array named ``*running_var``) clamped to at
   least ``running_var_floor`` (noise can make it negative, and BatchNorm
   then evaluates to NaN): post-processing of the released aggregate, at
   no privacy cost.

Flower's log says what cepam changes: the strategy summary adds that every
reply has weight 1 (whatever the inner strategy's ``weighted_by_key``), and
a round that sends nothing (budget spent, empty cohort) has no "Sampled N
nodes" line; with client sampling that line gives the cohort sent.  Flower's
DP wrappers (``DifferentialPrivacyServerSideFixedClipping`` and its family)
can wrap neither way: as the inner strategy the constructor refuses them,
and a CepamStrategy inside one raises InvalidArgumentError at the first
call the wrapper makes (its summary, at ``start``).

**Running statistics** (``buffers=``, as :func:`cepam.encode`'s): with
``"separate"`` (the default) or ``"joint"`` the clients code the running
statistics of their normalisation layers in the update and the server
aggregates them as any float array; with ``"local"`` (FedBN) they are left
out of every payload: the server aggregates the weights only and keeps its
own statistics (those of the model it started with), each client keeps its
own (:func:`.mod.cepam_mod` puts them into its train and evaluate
messages).  The server's model then evaluates on its initial statistics.

Released metrics hold no per-client payload size: the mean size goes into
``cepam-payload-bytes`` only with fixed-size padding (``pad="max"`` or a
number of bytes), where the size is public anyway; not with ``"levels"``
(the default), whose lengths differ from client to client.

**Client sampling, relations, adaptive clipping.**  With ``sample_rate=q <
1`` the wrapper samples the cohort itself: the inner strategy addresses
every connected node (``fraction_train=1.0``), the N nodes it addressed are
the population, and each keeps its train message with probability q
(Poisson sampling, a numpy Generator of the server's, its seed logged), or,
with ``sampling="fixed"``, ``clients`` of them are drawn uniformly without
replacement; the cohort's size is logged each round.  Under
``relation="replace-one"`` (the default) the released update is the plain
mean of the k decoded updates; under ``"add-remove"`` the server adds
"top-up" noise ``N(0, (T - k) sigma^2)`` per coordinate to their sum (``T =
cepam.accounting.cohort_cap(clients=n, sample_rate=q)``, ``n = q N``) and
divides by the fixed ``n`` (DP-FedAvg's fixed-denominator estimator), so the
noise is always T clients' worth and k is not released: each accepted
reply's decoded update ``d_i`` is handed to the inner strategy as ``(k/n) d_i
+ t/n`` (one top-up vector t), whose plain mean is ``(sum d_i + t) / n``.
With ``clip_count_sigma`` each sampled client also reports its
clipped-or-not bit (1 if its update's norm is within the round's clip)
noised by itself, ``b_i + N(0, clip_count_sigma^2)``; the server sums the
bits (adding ``N(0, (T - k) clip_count_sigma^2)`` under add-remove), divides
by n (add-remove) or k (replace-one), and publishes one minus that noised
unclipped fraction as ``cepam-clipped-fraction``; with ``clip_quantile``
the clip follows that quantile of the update norms
(:class:`cepam.clipping.AdaptiveClip`, Andrew et al. 2021), the noise
follows the clip (``sigma_t = (sigma / clip) C_t``), and each round's clip
and sigma travel in its configuration.  Any of these makes the accounting
client-level (:class:`.budget.ClientBudget`: one
:class:`cepam.accounting.ClientLevelRound` per round the server ran, k = 0
included), reported as ``cepam-client-epsilon`` with a log line naming the
relation, the level and the threat model.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import secrets as _secrets
import sys
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np
from flwr.app import (
    Array, ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

import cepam
from cepam._checks import check_clip
from cepam.accounting import FLSetting, Ledger
from cepam.accounting.setting import RECORD_LEVEL_LOOP
from cepam.errors import FormatError, InvalidArgumentError, InvalidTypeError, PrivacyBudgetError
from cepam.expected import Expected
from cepam.padding import check_pad, uses_bound
from cepam.payload import is_bare, parse_header
from cepam.structure import check_buffers, is_buffer

from cepam.accounting.cohort import RELATIONS, SAMPLINGS
from cepam.accounting.setting import THREAT_MODELS
from cepam.clipping import AdaptiveClip, noised_unclipped_fraction

from .budget import CLIENT_LEVEL, RECORD_LEVEL, Budget, ClientBudget
from .identity import auth_fingerprint, node_identity, verify_key_binding
from .keys import KeyPair, KeyPins, SecretSource, agreed_secret, preshared_lookup
from .protocol import (
    ACCOUNTED, CLIENT_KEY, CLIENT_KEY_SIGNATURE, CONFIG_RECORD, KEYS_AGREED, KEYS_PRESHARED,
    PAYLOAD_ARRAY, PAYLOAD_RECORD, PAYLOAD_STYPE, UNCLIPPED_METRIC, RoundConfig, flat_name,
)

__all__ = ["CepamStrategy", "METRIC_UPDATES", "METRIC_DROPPED", "METRIC_PAYLOAD_BYTES",
           "METRIC_CLIPPED_FRACTION", "METRIC_CLIP"]

log = logging.getLogger("flwr.cepam")

METRIC_UPDATES = "cepam-updates"
METRIC_DROPPED = "cepam-dropped"
METRIC_PAYLOAD_BYTES = "cepam-payload-bytes"
METRIC_CLIPPED_FRACTION = "cepam-clipped-fraction"
METRIC_CLIP = "cepam-clip"
_FLOWER_DP = (
    "DifferentialPrivacyServerSideFixedClipping",
    "DifferentialPrivacyClientSideFixedClipping",
    "DifferentialPrivacyServerSideAdaptiveClipping",
    "DifferentialPrivacyClientSideAdaptiveClipping",
)
_U64 = 1 << 64
_MAX_METRIC_VALUES = 4096  # values in a reply's MetricRecord (lists count their items)
_REPLY_SLACK = 1 << 16  # bytes above the float32 model in the default reply limit
#: The error code of a dropped reply as the inner strategy sees it.
DROPPED_CODE = 0xCE9B
#: The default floor of an aggregated running variance: a hundred times
#: BatchNorm's eps (1e-5), so that no noised variance divides by ~0.
RUNNING_VAR_FLOOR = 1e-3
_RUNNING_VAR = "running_var"
_SAMPLED = "configure_train: Sampled"  # the start of Flower's sampling log line


class _Dropped(Exception):
    """Why a reply is left out of the round."""


def _is_flower_dp(strategy: object) -> bool:
    """Is ``strategy`` (a subclass of) one of Flower's DP wrappers?"""
    return any(c.__name__ in _FLOWER_DP for c in type(strategy).__mro__)


def _is_float(array: np.ndarray) -> bool:
    return bool(np.issubdtype(array.dtype, np.floating))


def _refuse_flower_dp_caller(strategy: "CepamStrategy") -> None:
    """Raises InvalidArgumentError when the caller of the CepamStrategy method
    that calls this is one of Flower's DP wrappers around ``strategy``
    (``DifferentialPrivacyServerSideFixedClipping(CepamStrategy(...))``:
    the wrapper would clip the clients' payloads as float updates)."""
    try:
        caller = sys._getframe(2).f_locals.get("self")
    except ValueError:  # no such frame
        return
    if caller is not None and _is_flower_dp(caller) and \
            getattr(caller, "strategy", None) is strategy:
        raise InvalidArgumentError(
            f"{type(caller).__name__} wraps a CepamStrategy: Flower's DP wrappers clip and "
            "noise float updates, while cepam's clients send encoded payloads that cepam "
            "already clips and noises; use CepamStrategy alone (its mechanism and clip are "
            "the DP), not inside a Flower DP wrapper")


def _as_failure(reply: Message, reason: str) -> Message:
    """A dropped reply as the inner strategy sees it: an error reply (the
    reply's metadata kept), which Flower's strategies count as a failure."""
    if reply.has_error():
        return reply
    return Message(metadata=copy.copy(reply.metadata),
                   error=Error(DROPPED_CODE, f"dropped by cepam: {reason}"))


class _HeldLines(logging.Filter):
    """While active, holds back the records of Flower's logger whose message
    starts with ``prefix``; :meth:`release` logs them (Flower's "Sampled N
    nodes" line with the number of nodes actually sent)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix, self.held = prefix, []

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.prefix):
            self.held.append(record)
            return False
        return True

    def __enter__(self) -> "_HeldLines":
        logging.getLogger("flwr").addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("flwr").removeFilter(self)

    def release(self, sent: int) -> None:
        for record in self.held:
            if isinstance(record.args, tuple) and len(record.args) == 2:
                record.args = (sent, record.args[1])  # "Sampled %s nodes (out of %s)"
            logging.getLogger("flwr").handle(record)
        self.held = []


class _Sent:
    """What one node was sent in a round: its configuration and its model."""

    def __init__(self, config: RoundConfig, records: dict[str, dict[str, np.ndarray]]) -> None:
        self.config, self.records = config, records
        self.template = {flat_name(k, n): a for k, r in records.items() for n, a in r.items()
                         if _is_float(a)}
        if len(self.template) != sum(_is_float(a) for r in records.values() for a in r.values()):
            raise InvalidArgumentError("two float arrays have the same record/array name; "
                                       "rename an ArrayRecord or an array")
        local = config.buffers == "local"  # the running statistics are not coded
        self.coordinates = sum(int(a.size) for n, a in self.template.items()
                               if not (local and is_buffer(n)))
        self.float32_bytes = 4 * self.coordinates


class _Opened:
    """An accepted reply: its decoded update, what was sent, the payload's
    size and the noised clipped-or-not bit (None if not asked for)."""

    def __init__(self, reply: Message, sent: _Sent, update: dict[str, np.ndarray],
                 metrics: str, size: int, bit: float | None) -> None:
        self.reply, self.sent, self.update = reply, sent, update
        self.metrics, self.size, self.bit = metrics, size, bit


class _Plan:
    """A round of the client-level mode: the nodes addressed (N), the cohort
    drawn, the expected cohort n = q N, the rate q and the round's event."""

    def __init__(self, population: int, cohort: list[int], clients: float, sample_rate: float,
                 event: Any) -> None:
        self.population, self.cohort, self.clients = population, cohort, clients
        self.sample_rate, self.event = sample_rate, event


def _check_real(name: str, value: object, *, low: float, high: float | None = None,
                open_high: bool = True) -> float:
    """``value`` as a float in (low, high) (or (low, high] with
    ``open_high=False``); raises InvalidTypeError / InvalidArgumentError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    above = math.isfinite(value) and value > low
    below = high is None or (value < high if open_high else value <= high)
    if not (above and below):
        span = f"({low:g}, {'inf' if high is None else format(high, 'g')}" + \
               (")" if open_high or high is None else "]")
        raise InvalidArgumentError(f"{name} must be in {span}, got {value!r}")
    return value


class CepamStrategy(Strategy):
    """Wraps a Flower strategy so that clients send cepam payloads.

    Args:
        strategy: the strategy that samples nodes and aggregates (FedAvg and
            its family); not one of Flower's DP wrappers.
        mechanism: ``cepam.Gaussian(sigma=...)`` or ``cepam.Laplace(b=...)``,
            the noise on each decoded update, in the units of the weights.
        clip: l2 bound of each client's whole update (every float array of
            the model, float buffers included).
        setting: the :class:`cepam.accounting.FLSetting` the privacy is
            accounted in (its clip must be ``clip``; its ``clients`` is
            replaced by each round's K).  None: no eps is computed.
        delta: the total delta of the reported eps (Gaussian).
        max_epsilon: no round is started (no train message sent) that would
            take eps above it (needs ``setting``).
        secrets: None for X25519 key agreement (no setup), or a mapping or
            callable from node id to the node's 32-byte pre-shared secret,
            or the path of a secrets file (:func:`.keys.secrets_from_file`,
            mode 0600).
        lattice, dim, coder: codec settings sent to the clients (see
            :func:`cepam.encode`).
        pad: the clients' padding (``cepam.encode``'s ``pad``): ``"levels"``
            (the default: every payload has one of 8 lengths fixed by
            public settings, so its length tells at most 3 bits about the
            update, at most 26 % more bytes down to a fifth of the
            bound; unpadded, the length predicts an update's norm to
            6-7 %, and Flower's SuperLink, which relays every payload,
            sees it), ``"max"`` (one length: reveals nothing; 1.6 to 2.7
            times the unpadded size on the quickstart CNNs,
            docs/privacy.md section 9), ``"bucket"``, a number of bytes,
            or None (no padding).
        bound: ``"tight"`` (default) or ``"paper"``: the per-round bound.
        ledger: a :class:`cepam.accounting.Ledger`, or the path of one
            (opened, or created, at the strategy's ``delta``): each released
            round is recorded there before its result is used, and eps and
            ``max_epsilon`` count everything it holds (earlier runs and
            restarts included).  Needs ``setting``.
        ledger_name: the dataset or federation a ledger path accounts for
            (default: the file's stem).
        max_reply_bytes: replies whose payload is longer are dropped unread;
            default: the float32 size of the model's float arrays plus 64
            KiB (a cepam payload is a fraction of it), or ``pad`` if larger.
        pinned_keys: with key agreement, a file in which the nodes' public
            keys are pinned on first use, across runs (:class:`.keys.KeyPins`;
            nodes keep their key with ``cepam-key-file``), under the node's
            identity: its authentication key's fingerprint when its key is
            signed (which a restart keeps), else its Flower node id (which
            a SuperNode restarted without node authentication does not
            keep); a reply under another key is dropped.  None: pinned for
            the run only.
        authenticated_transport: with key agreement, True states that the
            SuperLink and SuperNodes talk over TLS with node authentication:
            otherwise, unless ``signed_keys`` or a pins file holding keys,
            :meth:`start` logs a loud warning, since an active man in the
            middle could run the agreement with both sides and read every
            update.
        sample_rate: q in (0, 1]: each node the inner strategy addresses
            (it must address every connected node: ``fraction_train=1.0``)
            gets its train message with probability q (Poisson sampling,
            the server's randomness); 1.0 (the default): every node, as
            today.  Below 1 the accounting is client-level, with
            amplification by sampling.
        relation: ``"replace-one"`` (the default: the plain mean of the k
            decoded updates) or ``"add-remove"`` (top-up noise to T clients'
            worth and the fixed denominator n = q N; neighbouring
            federations differ by one client's presence); anything but the
            default makes the accounting client-level.
        sampling: ``"poisson"`` (the default) or ``"fixed"``: ``clients``
            nodes drawn uniformly without replacement each round (accounted
            with rate ``clients / N``; replace-one only).
        clients: the fixed cohort's size (``sampling="fixed"`` only).
        sampling_seed: seeds the server's cohort draws and its top-up noise
            (for reproducible experiments: anyone who knows it knows the
            cohorts and the top-up noise); None (the default): a fresh
            seed for the cohorts each run, logged, and top-up noise from
            unlogged OS entropy.
        threat_model: the client-level accounting's adversary:
            ``"aggregate"``, ``"client"`` or ``"server"``; None: the
            setting's, or ``"client"`` without one (``"server"`` with
            ``"add-remove"`` is refused: unbounded).
        clip_quantile: gamma in (0, 1): adaptive clipping, the clip follows
            this quantile of the update norms (needs ``clip_count_sigma``
            and a Gaussian mechanism; ``clip`` is the first round's clip
            and the noise keeps the ratio ``sigma / clip``).  None (the
            default): a fixed clip.
        clip_learning_rate: eta > 0 of the geometric clip update (0.2).
        clip_count_sigma: std (> 0) of the Gaussian noise each client adds
            to its clipped-or-not bit: the round's noised clipped fraction
            is published (``cepam-clipped-fraction``) and accounted, for a
            fixed clip too.  None (the default): no bit is collected.
        buffers: the running statistics of normalisation layers (float
            arrays named ``*.running_mean`` / ``*.running_var``), as
            :func:`cepam.encode`'s ``buffers``: ``"separate"`` (the default:
            coded, clipped apart from the weights within the one clip),
            ``"joint"`` (coded as weights), or ``"local"`` (FedBN: never
            sent; the server aggregates the weights and keeps its own
            statistics, each client keeps its own).
        running_var_floor: every aggregated array whose name ends in
            ``running_var`` is clamped to at least this (> 0; default
            ``1e-3``): noise can make a variance negative,
            and BatchNorm then evaluates to NaN.  Post-processing of the
            released aggregate: no privacy cost.
        signed_keys: with key agreement, True drops every reply whose X25519
            key is not signed by the authentication key the SuperLink
            registered for its node (Flower's node authentication:
            ``flower-superlink --enable-supernode-auth``, ``flwr supernode
            register``; the node names the same private key file as
            ``cepam-auth-key-file``): the keys are then authenticated
            without trust on first use.  False (the default): a signed key
            is still checked (a wrong signature is dropped), an unsigned one
            accepted.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings, or a Flower DP
            wrapper as ``strategy``, or an inner strategy that samples
            nodes itself while the wrapper samples.
    """

    def __init__(self, strategy: Strategy, *, mechanism: cepam.Gaussian | cepam.Laplace,
                 clip: float, setting: FLSetting | None = None, delta: float = 1e-5,
                 max_epsilon: float | None = None, secrets: SecretSource | None = None,
                 lattice: str = "auto", dim: int | None = None, coder: str = "ans",
                 pad: str | int | None = "levels", bound: str = "tight", ledger: Any = None,
                 ledger_name: str | None = None, max_reply_bytes: int | None = None,
                 pinned_keys: str | os.PathLike[str] | None = None,
                 authenticated_transport: bool = False, sample_rate: float = 1.0,
                 relation: str = "replace-one", sampling: str = "poisson",
                 clients: int | None = None, sampling_seed: int | None = None,
                 threat_model: str | None = None, clip_quantile: float | None = None,
                 clip_learning_rate: float = 0.2,
                 clip_count_sigma: float | None = None, buffers: str = "separate",
                 running_var_floor: float = RUNNING_VAR_FLOOR, signed_keys: bool = False
                 ) -> None:
        if not isinstance(strategy, Strategy):
            raise InvalidTypeError(f"strategy must be a Flower Strategy, got "
                                   f"{type(strategy).__name__}")
        if isinstance(strategy, CepamStrategy):
            raise InvalidArgumentError("the strategy is already a CepamStrategy")
        if _is_flower_dp(strategy):
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
        # Validates lattice, dim and coder against the mechanism.
        cepam.Codec(mechanism, secret=bytes(32), dim=dim, lattice=lattice, clip=self.clip,
                    coder=coder)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
            raise InvalidArgumentError(f"delta must be in (0, 1), got {delta!r}")
        if setting is not None:
            if not isinstance(setting, FLSetting):
                raise InvalidTypeError(f"setting must be a cepam.accounting.FLSetting, got "
                                       f"{type(setting).__name__}")
            if setting.clip != self.clip:
                raise InvalidArgumentError(f"setting.clip ({setting.clip}) must equal clip "
                                           f"({self.clip})")
        self._init_sampling(strategy, mechanism, setting, sample_rate=sample_rate,
                            relation=relation, sampling=sampling, clients=clients,
                            sampling_seed=sampling_seed, threat_model=threat_model,
                            clip_quantile=clip_quantile, clip_learning_rate=clip_learning_rate,
                            clip_count_sigma=clip_count_sigma)
        if max_epsilon is not None:
            if setting is None and not self._client_level:
                raise InvalidArgumentError("max_epsilon needs a setting to account eps in")
            if not (isinstance(max_epsilon, (int, float)) and max_epsilon > 0
                    and math.isfinite(max_epsilon)):
                raise InvalidArgumentError(f"max_epsilon must be positive and finite, got "
                                           f"{max_epsilon!r}")
        if bound not in ("tight", "paper"):
            raise InvalidArgumentError(f"bound must be 'tight' or 'paper', got {bound!r}")
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
        self.running_var_floor = _check_real("running_var_floor", running_var_floor, low=0.0)
        self._ledger_source, self._ledger_name = ledger, ledger_name
        self.ledger: Ledger | None = None
        self.strategy, self.mechanism, self.setting = strategy, mechanism, setting
        self.delta, self.max_epsilon, self.bound = float(delta), max_epsilon, bound
        self.lattice, self.dim, self.coder = lattice, dim, coder
        self.max_reply_bytes = max_reply_bytes
        self.authenticated_transport = authenticated_transport
        self.signed_keys = signed_keys
        self._lookup = None if secrets is None else preshared_lookup(secrets)
        self._pins = None if pinned_keys is None else KeyPins(pinned_keys)
        self.budget: Budget | ClientBudget | None = None
        self.stopped_by_budget = False
        #: The node ids of the last round's cohort (the server's own view).
        self.last_cohort: list[int] = []
        self._arrays: ArrayRecord | None = None
        self._plan: _Plan | None = None
        self._adaptive: AdaptiveClip | None = None
        self._cohort_rng = self._noise_rng = np.random.default_rng(0)  # set by _begin_run
        #: Payload sizes (bytes) of the last round's accepted replies, in
        #: node-id order: the server's own view, not released in metrics.
        self.last_payload_bytes: list[int] = []
        self._started = False
        self._server_pair: KeyPair | None = None
        self._pinned: dict[str, bytes] = {}  # this run's, by node identity
        self._accepted: dict[str, int] = {}  # identity -> its last accepted round
        #: Node id -> the authentication public key the SuperLink registered
        #: for it (PEM), as of the round's train messages.
        self._registered: dict[int, bytes] = {}
        self._sent: dict[int, _Sent] = {}
        self._round = 0
        self._cast_logged = False

    def _init_sampling(self, strategy: Strategy, mechanism: Any, setting: FLSetting | None, *,
                       sample_rate: float, relation: str, sampling: str, clients: int | None,
                       sampling_seed: int | None, threat_model: str | None,
                       clip_quantile: float | None, clip_learning_rate: float,
                       clip_count_sigma: float | None) -> None:
        """Checks and keeps the client-sampling, relation and clipping settings."""
        self.sample_rate = _check_real("sample_rate", sample_rate, low=0.0, high=1.0,
                                       open_high=False)
        if relation not in RELATIONS:
            raise InvalidArgumentError(f"relation must be one of {RELATIONS}, got {relation!r}")
        if sampling not in SAMPLINGS:
            raise InvalidArgumentError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
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
        if sampling_seed is not None and (isinstance(sampling_seed, bool) or not isinstance(
                sampling_seed, int) or sampling_seed < 0):
            raise InvalidArgumentError(f"sampling_seed must be a non-negative int, got "
                                       f"{sampling_seed!r}")
        if threat_model is not None and threat_model not in THREAT_MODELS:
            raise InvalidArgumentError(f"threat_model must be one of {THREAT_MODELS}, got "
                                       f"{threat_model!r}")
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
        self.clip_count_sigma = None if clip_count_sigma is None else _check_real(
            "clip_count_sigma", clip_count_sigma, low=0.0)
        self.clip_quantile, self.clip_learning_rate = clip_quantile, clip_learning_rate
        if clip_quantile is not None:
            AdaptiveClip(initial_clip=self.clip, target_quantile=clip_quantile,
                         learning_rate=clip_learning_rate)  # checks them
            if self.clip_count_sigma is None:
                raise InvalidArgumentError("adaptive clipping (clip_quantile) needs "
                                           "clip_count_sigma: the noise on each client's "
                                           "clipped-or-not bit")
        self.relation, self.sampling, self.cohort_size = relation, sampling, clients
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

    # ------------------------------------------------------------------ helpers

    def _begin_run(self, grid: Grid) -> None:
        self._started = True
        self._server_pair = KeyPair() if self._lookup is None else None
        self._pinned, self._accepted = {}, {}
        self.stopped_by_budget = False
        self._cast_logged = False
        if self._lookup is None and not (self.authenticated_transport or self.signed_keys
                                         or (self._pins is not None and len(self._pins))):
            log.warning(
                "cepam: X25519 KEY AGREEMENT OVER AN UNAUTHENTICATED LINK: the public keys "
                "are not authenticated%s, so an active man in the middle between the SuperLink "
                "and a SuperNode could agree a secret with each side and read every update. "
                "Run Flower with TLS and node authentication and bind the nodes' keys to it "
                "(signed_keys=True, nodes with cepam-auth-key-file), or pass "
                "authenticated_transport=True, or pin the nodes' keys (pinned_keys=, nodes "
                "with cepam-key-file), or use pre-shared secrets.",
                "" if self._pins is None else
                f" (the pins file {self._pins.path!r} holds no key yet: every first key is "
                "trusted on first use)")
        if self._ledger_source is not None and self.ledger is None:
            self.ledger = (self._ledger_source if isinstance(self._ledger_source, Ledger) else
                           Ledger(self._ledger_source, name=self._ledger_name, delta=self.delta))
        run_id = f"flower-run-{getattr(getattr(grid, 'run', None), 'run_id', 0)}-" \
                 f"{_secrets.token_hex(8)}"
        if self._client_level:
            self.budget = ClientBudget(
                sigma=self.mechanism.sigma, clip=self.clip, delta=self.delta,
                threat_model=self.threat_model, relation=self.relation, sampling=self.sampling,
                count_sigma=self.clip_count_sigma, ledger=self.ledger, run_id=run_id)
        else:
            self.budget = None if self.setting is None else Budget(
                self.mechanism, self.setting, delta=self.delta, bound=self.bound,
                ledger=self.ledger, run_id=run_id)
        self._adaptive = None if self.clip_quantile is None else AdaptiveClip(
            initial_clip=self.clip, target_quantile=self.clip_quantile,
            learning_rate=self.clip_learning_rate)
        self._plan, self.last_cohort = None, []
        if self.sampling_seed is not None:  # reproducible: cohorts and top-up noise
            cohort_seq, noise_seq = np.random.SeedSequence(self.sampling_seed).spawn(2)
            self._cohort_rng = np.random.default_rng(cohort_seq)
            self._noise_rng = np.random.default_rng(noise_seq)
            seed = self.sampling_seed
        else:
            seed = _secrets.randbits(64)
            self._cohort_rng = np.random.default_rng(seed)
            self._noise_rng = np.random.default_rng(_secrets.randbits(128))  # never logged
        if self._client_level:
            log.info("cepam: %s%s%s", self._sampling_text(),
                     f"; cohorts drawn with seed {seed} (the server's own randomness)"
                     if self._samples else "",
                     "" if self._adaptive is None else
                     f"; adaptive clip from {self.clip:g} to the {self.clip_quantile:g}-quantile "
                     f"of the update norms (learning rate {self.clip_learning_rate:g})")

    def _sampling_text(self) -> str:
        if self.sampling == "fixed":
            how = f"a fixed cohort of {self.cohort_size} nodes drawn uniformly each round"
        elif self.sample_rate < 1.0:
            how = f"Poisson sampling of the nodes at rate {self.sample_rate:g}"
        else:
            how = "every node each round"
        return f"{how}, relation {self.relation}"

    def _round_settings(self) -> tuple[float, cepam.Gaussian | cepam.Laplace]:
        """The clip and the mechanism of the next round: the adaptive clip and
        the noise that keeps the run's sigma / clip, or the fixed ones."""
        if self._adaptive is None:
            return self.clip, self.mechanism
        return self._adaptive.clip, cepam.Gaussian(
            sigma=self._adaptive.noise_std(self.mechanism.sigma))

    def _reply_limit(self, sent: _Sent) -> int:
        if self.max_reply_bytes is not None:
            return self.max_reply_bytes
        limit = sent.float32_bytes + _REPLY_SLACK
        return max(limit, self.pad) if isinstance(self.pad, int) else limit

    def _pinned_key(self, identity: str) -> bytes | None:
        if identity in self._pinned:
            return self._pinned[identity]
        return None if self._pins is None else self._pins.get(identity)

    def _pin(self, node: int, identity: str, public: bytes) -> None:
        """Pins ``public`` for ``identity`` (an accepted reply's): for the run,
        and in the pins file if any; logs a signed key's identity the first
        time in the run and whenever the node had no accepted reply in the
        round before (a node back from a restart)."""
        last = self._accepted.get(identity)
        self._accepted[identity] = self._round
        if identity.startswith("SHA256:") and (last is None or last < self._round - 1):
            log.info("cepam: round %d: node %d's X25519 key is signed by its registered "
                     "authentication key %s: authenticated%s", self._round, node, identity,
                     "" if last is None else f" (its last accepted reply: round {last})")
        if identity in self._pinned:
            return
        self._pinned[identity] = public
        if self._pins is not None and self._pins.get(identity) is None:
            if not identity.startswith("SHA256:") and not self.authenticated_transport:
                log.warning("cepam: node %d's X25519 key pinned on first use, not "
                            "authenticated (its key is not signed: cepam-auth-key-file)", node)
            self._pins.pin(identity, public)

    def _registered_keys(self, grid: Grid) -> dict[int, bytes]:
        """Node id -> the authentication public key the SuperLink registered
        for it (``grid.get_nodes()``), for the nodes that have one."""
        try:
            return {int(info.node_id): bytes(info.public_key) for info in grid.get_nodes()
                    if info.public_key}
        except Exception as exc:  # a grid without Flower's registry
            if self.signed_keys:
                log.warning("cepam: the grid gives no node registry (%s: %s): no key can be "
                            "checked against a registered authentication key",
                            type(exc).__name__, exc)
            return {}

    def _identity_of(self, node: int, record: Any, public: bytes, run_id: int) -> str:
        """The identity the client's key ``public`` is pinned under: the
        fingerprint of the node's registered authentication key when the key
        is signed by it, else the node id.  Raises _Dropped."""
        signature = record.get(CLIENT_KEY_SIGNATURE)
        if signature is None:
            if self.signed_keys:
                raise _Dropped("the node's X25519 key is not signed by its authentication key "
                               "(signed_keys=True; the node needs cepam-auth-key-file, the "
                               "file of flower-supernode --auth-supernode-private-key)")
            return node_identity(node)
        registered = self._registered.get(node)
        if registered is None:
            raise _Dropped("the node signs its X25519 key, but the SuperLink has no "
                           "authentication key registered for it (flower-superlink "
                           "--enable-supernode-auth, flwr supernode register)")
        assert self._server_pair is not None
        try:
            valid = isinstance(signature, bytes) and verify_key_binding(
                registered, signature, run_id=run_id, server_public=self._server_pair.public,
                client_public=public)
            identity = auth_fingerprint(registered)
        except (InvalidArgumentError, InvalidTypeError) as exc:
            raise _Dropped(f"the node's registered authentication key is unusable: {exc}"
                           ) from None
        if not valid:
            raise _Dropped(f"the signature on the node's X25519 key does not verify against "
                           f"the authentication key registered for it ({identity})")
        return identity

    def _secret_of(self, node: int, content: RecordDict, run_id: int
                   ) -> tuple[bytes, tuple[str, bytes] | None]:
        """(secret, the identity and client public key to pin on success);
        ``run_id``: the run id of the message the client answered (its secret
        and the key's signature are bound to it; the server's key pair is
        fresh for every run in any case)."""
        if self._lookup is not None:
            try:
                return self._lookup(node), None
            except Exception as exc:
                raise _Dropped(f"no pre-shared secret: {exc}") from None
        if CONFIG_RECORD not in content.config_records:
            raise _Dropped("no client public key in the reply")
        public = content[CONFIG_RECORD].get(CLIENT_KEY)
        if not isinstance(public, bytes) or len(public) != 32:
            raise _Dropped("malformed client public key")
        identity = self._identity_of(node, content[CONFIG_RECORD], public, run_id)
        pinned = self._pinned_key(identity)
        if pinned is not None and pinned != public:
            raise _Dropped(f"the node's public key changed (it differs from the key pinned "
                           f"for it, {identity})")
        assert self._server_pair is not None
        try:
            secret = agreed_secret(self._server_pair, public, run_id=run_id,
                                   server_public=self._server_pair.public, client_public=public)
        except InvalidArgumentError as exc:
            raise _Dropped(str(exc)) from None
        return secret, (identity, public)

    @staticmethod
    def _enforce(payload: bytes, sent: RoundConfig, node: int, coordinates: int) -> None:
        """The payload's public header against what was configured for the
        node, as :func:`cepam.decode` enforces its expectations
        (:class:`cepam.expected.Expected`).  Raises _Dropped."""
        expected = Expected.checked(mechanism=sent.mechanism, clip=sent.clip,
                                    client=node % _U64, round=sent.round,
                                    message=sent.message, coordinates=coordinates)
        try:
            header, _ = parse_header(payload)
        except FormatError as exc:
            raise _Dropped(f"payload header: {exc}") from None
        wrong = expected.differences(header)
        if wrong:
            raise _Dropped("payload header differs from the configuration in " + ", ".join(
                f"{field} ({actual!r}, expected {wanted!r})" for field, wanted, actual in wrong))

    def _screen(self, reply: Message) -> tuple[_Sent, bytes, str]:
        """Cheap checks before anything is parsed: the sender was sent this
        round's message, the reply's records and sizes are those of a cepam
        reply.  Returns (what was sent, the payload, the metrics record's
        name).  Raises _Dropped."""
        if reply.has_error():
            raise _Dropped(f"error reply: {reply.error.reason}")
        node = int(reply.metadata.src_node_id)
        sent = self._sent.get(node)
        if sent is None:
            raise _Dropped("no train message was sent to this node this round")
        content = reply.content
        if len(content) > 3:
            raise _Dropped(f"{len(content)} records in the reply (a cepam reply has at most 3)")
        if list(content.array_records) != [PAYLOAD_RECORD]:
            raise _Dropped("the reply is not one cepam payload record (is cepam_mod installed "
                           "on the client?)")
        record = content[PAYLOAD_RECORD]
        if len(record) != 1 or PAYLOAD_ARRAY not in record:
            raise _Dropped("the payload record does not hold one cepam payload")
        array = record[PAYLOAD_ARRAY]
        if array.stype != PAYLOAD_STYPE:
            raise _Dropped(f"payload stype {array.stype!r}, expected {PAYLOAD_STYPE!r}")
        limit = self._reply_limit(sent)
        if len(array.data) > limit:
            raise _Dropped(f"payload of {len(array.data)} bytes, above the limit of {limit} "
                           "(max_reply_bytes)")
        payload = bytes(array.data)
        if not is_bare(payload):
            raise _Dropped("not a bare cepam payload")
        configs = list(content.config_records)
        if configs not in ([], [CONFIG_RECORD]) or (configs and not set(
                content[CONFIG_RECORD]) <= {CLIENT_KEY, CLIENT_KEY_SIGNATURE}):
            raise _Dropped("unexpected configuration records in the reply")
        metrics = list(content.metric_records)
        if len(metrics) != 1:
            raise _Dropped(f"expected one MetricRecord, got {len(metrics)}")
        if sum(len(v) if isinstance(v, list) else 1
                           for v in content[metrics[0]].values()) > _MAX_METRIC_VALUES:
            raise _Dropped(f"more than {_MAX_METRIC_VALUES} metric values")
        return sent, payload, metrics[0]

    def _bit_of(self, reply: Message, metrics: str) -> float | None:
        """The reply's noised clipped-or-not bit, if the round asked for it.
        Raises _Dropped."""
        if self.clip_count_sigma is None:
            return None
        bit = reply.content[metrics].get(UNCLIPPED_METRIC)
        if isinstance(bit, bool) or not isinstance(bit, (int, float)) or \
                not math.isfinite(bit):
            raise _Dropped(f"no noised clipped-or-not bit ({UNCLIPPED_METRIC!r}, a finite "
                           "number) in the reply's metrics")
        return float(bit)

    def _open(self, reply: Message) -> _Opened:
        """The reply's payload decoded (its node's noisy update) and its
        clipped-or-not bit.  Raises _Dropped."""
        sent, payload, metrics = self._screen(reply)
        bit = self._bit_of(reply, metrics)
        node = int(reply.metadata.src_node_id)
        self._enforce(payload, sent.config, node, sent.coordinates)
        secret, pin = self._secret_of(node, reply.content, int(reply.metadata.run_id))
        update = cepam.decode(payload, secret=secret, like=sent.template, output="numpy",
                              max_coordinates=sent.coordinates, buffers=sent.config.buffers)
        if pin is not None:
            self._pin(node, *pin)
        return _Opened(reply, sent, update, metrics, len(payload), bit)

    @staticmethod
    def _noisy_model(opened: _Opened, scale: float = 1.0,
                     shift: dict[str, np.ndarray] | None = None) -> RecordDict:
        """The node's noisy model, global + ``scale`` * decoded update +
        ``shift`` (the coded float arrays; integer and bool arrays, and the
        running statistics under ``buffers="local"``, are the server's),
        with the reply's metrics less the clipped-or-not bit."""
        content = RecordDict()
        for key, arrays in opened.sent.records.items():
            records = {}
            for name, value in arrays.items():
                flat = flat_name(key, name)
                if flat in opened.update:  # a coded float array (not a local statistic)
                    moved = opened.update[flat] if scale == 1.0 else \
                        scale * np.asarray(opened.update[flat], dtype=np.float64)
                    if shift is not None:
                        moved = moved + shift[flat]
                    value = np.asarray(value + moved, dtype=value.dtype)
                records[name] = Array(value)
            content[key] = ArrayRecord(records)
        metrics = opened.reply.content[opened.metrics]
        if UNCLIPPED_METRIC in metrics:
            del metrics[UNCLIPPED_METRIC]
        content[opened.metrics] = metrics
        return content

    def _equal_weights(self, contents: list[RecordDict]) -> None:
        """Gives every accepted reply weight 1 and the metric keys all share."""
        records = [next(iter(c.metric_records.values())) for c in contents]
        common = set(records[0].keys()).intersection(*(r.keys() for r in records[1:]))
        key = getattr(self.strategy, "weighted_by_key", None)
        for r in records:
            for extra in set(r.keys()) - common:
                del r[extra]
            if key is not None:
                r[key] = 1

    # ------------------------------------------------------------------ Strategy

    def _check_budget(self, server_round: int, k: int) -> bool:
        """Does a round of k updates (the nodes sampled, at most the last
        round's K) fit max_epsilon, against everything the ledger holds?"""
        if self.budget is None or self.max_epsilon is None or k == 0:
            return True
        if self.budget.rounds:
            k = min(k, self.budget.rounds[-1])
        k = max(k, self.budget.minimum_clients())
        eps = self.budget.epsilon(self.budget.rounds + [k])
        if eps > self.max_epsilon:
            log.warning("cepam: round %d: a round of %d updates would bring eps to %.4g > "
                        "max_epsilon %.4g (%s): no train message is sent, and the run's "
                        "remaining rounds are empty", server_round, k, eps, self.max_epsilon,
                        "everything the ledger holds" if self.ledger is not None else
                        f"{len(self.budget.rounds)} rounds so far")
            return False
        return True

    def _records_of(self, content: RecordDict, cache: dict[int, dict[str, np.ndarray]]
                    ) -> dict[str, dict[str, np.ndarray]]:
        records = {}
        for key, record in content.array_records.items():
            if id(record) not in cache:
                cache[id(record)] = {name: array.numpy() for name, array in record.items()}
            records[key] = cache[id(record)]
        return records

    def _sample(self, server_round: int, messages: list[Message], grid: Grid
                ) -> tuple[list[Message], _Plan]:
        """The cohort (client-level mode): the N nodes addressed are the
        population; Poisson sampling at rate q, or a fixed cohort drawn
        uniformly, with the server's generator; the round's event."""
        assert isinstance(self.budget, ClientBudget)
        messages = sorted(messages, key=lambda m: int(m.metadata.dst_node_id))
        population = len(messages)
        if self._samples:
            connected = len(list(grid.get_node_ids()))
            if population < connected:
                log.warning("cepam: round %d: the inner strategy addressed %d of the %d "
                            "connected nodes; the population sampled from is the %d it "
                            "addressed (give it fraction_train=1.0 and min_train_nodes at "
                            "most the nodes connected)", server_round, population, connected,
                            population)
        if self.sampling == "fixed":
            assert self.cohort_size is not None
            size = min(self.cohort_size, population)
            chosen = np.sort(self._cohort_rng.choice(population, size=size, replace=False))
            clients, rate = size, size / population
        else:
            chosen = np.flatnonzero(self._cohort_rng.random(population) < self.sample_rate)
            rate = self.sample_rate
            clients = population if rate == 1.0 else rate * population
        cohort = [messages[int(i)] for i in chosen]
        nodes = [int(m.metadata.dst_node_id) for m in cohort]
        log.info("cepam: round %d: a cohort of %d of %d nodes (%s)", server_round, len(cohort),
                 population, self._sampling_text())
        log.debug("cepam: round %d: cohort %s", server_round, nodes)
        event = self.budget.event(clients=clients, sample_rate=rate)
        return cohort, _Plan(population, nodes, clients, rate, event)

    def _plan_fits(self, server_round: int, plan: _Plan) -> bool:
        """Does the round fit max_epsilon, against everything the ledger holds?"""
        if self.max_epsilon is None:
            return True
        assert isinstance(self.budget, ClientBudget)
        eps = self.budget.epsilon([plan.event])
        if eps > self.max_epsilon:
            log.warning("cepam: round %d: the round would bring the client-level eps to %.4g "
                        "> max_epsilon %.4g (%s): no train message is sent, and the run's "
                        "remaining rounds are empty", server_round, eps, self.max_epsilon,
                        self.budget.label())
            return False
        return True

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The inner strategy's train messages (those of the cohort, when the
        wrapper samples), each with its own cepam configuration; none if the
        round does not fit the privacy budget.  The inner strategy's
        "Sampled N nodes" log line is logged only for a round that sends
        something, with N the nodes sent."""
        _refuse_flower_dp_caller(self)
        with _HeldLines(_SAMPLED) as held:
            messages = self._configure_train(server_round, arrays, config, grid)
        if messages:
            held.release(len(messages))
        return messages

    def _configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                         grid: Grid) -> list[Message]:
        if not self._started:  # called outside start()
            self._begin_run(grid)
        self._round = int(server_round)
        self._arrays = arrays  # the round's model (an empty add/remove round adds noise to it)
        self._sent, self._plan = {}, None
        if self.stopped_by_budget:
            log.warning("cepam: round %d: the privacy budget is spent: no train message is "
                        "sent", server_round)
            return []
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        if self._lookup is None and messages:  # key agreement: the nodes' registered keys
            self._registered = self._registered_keys(grid)
        plan = None
        if self._client_level and messages:
            messages, plan = self._sample(server_round, messages, grid)
        clip, mechanism = self._round_settings()
        cache: dict[int, dict[str, np.ndarray]] = {}
        sent: dict[int, _Sent] = {}
        for msg in messages:
            for record in msg.content.config_records.values():
                if "clipping_norm" in record:
                    raise InvalidArgumentError(
                        "the inner strategy sends Flower's DP clipping configuration; cepam "
                        "clips and adds noise itself: use one or the other")
            node = int(msg.metadata.dst_node_id)
            if node in sent:
                raise InvalidArgumentError(f"the inner strategy sent node {node} two train "
                                           "messages in one round")
            records = self._records_of(msg.content, cache)
            config_ = RoundConfig(
                mechanism=mechanism, clip=clip, lattice=self.lattice, dim=self.dim,
                coder=self.coder, round=self._round, message=_secrets.randbits(63),
                keys=KEYS_PRESHARED if self._lookup is not None else KEYS_AGREED,
                server_key=b"" if self._server_pair is None else self._server_pair.public,
                pad=self.pad, count_sigma=self.clip_count_sigma, buffers=self.buffers)
            sent[node] = _Sent(config_, records)
            if sent[node].coordinates == 0:
                raise InvalidArgumentError("the model has no float arrays to train")
        if isinstance(self.budget, Budget) and sent:
            self.budget.coordinates = max(s.coordinates for s in sent.values())
        fits = self._plan_fits(server_round, plan) if plan is not None else \
            self._check_budget(server_round, len(messages))
        if not fits:  # before anything is sent
            self.stopped_by_budget = True
            return []
        for msg in messages:
            content = RecordDict(dict(msg.content.items()))  # its own, shallow
            content[CONFIG_RECORD] = ConfigRecord(sent[int(msg.metadata.dst_node_id)]
                                                  .config.to_record())
            msg.content = content  # the message itself: its metadata (ttl, ...) kept
        self._sent, self._plan = sent, plan
        self.last_cohort = sorted(sent)
        return messages

    def _accept(self, server_round: int, replies: Iterable[Message]
                ) -> tuple[list[_Opened], list[Message]]:
        """The replies that pass every check, in node-id order, and those
        dropped (each with a logged reason), as error replies."""
        accepted, dropped, seen = [], [], set()
        for reply in replies:
            node = int(reply.metadata.src_node_id)
            try:
                if node in seen:
                    raise _Dropped("a second reply from this node this round")
                seen.add(node)
                accepted.append(self._open(reply))
            except Exception as exc:  # any reply: hostile input never stops the server
                reason = str(exc) if isinstance(exc, (_Dropped, cepam.CepamError)) else \
                    f"{type(exc).__name__}: {exc}"
                dropped.append(_as_failure(reply, reason))
                log.warning("cepam: round %d: dropped the reply of node %s: %s", server_round,
                            node, reason)
        # Replies arrive in whatever order the nodes finish and the inner strategy sums
        # them in list order: fix the order so the global model does not depend on timing.
        accepted.sort(key=lambda o: int(o.reply.metadata.src_node_id))
        self.last_payload_bytes = [o.size for o in accepted]
        return accepted, dropped

    def _inner_aggregate(self, server_round: int, accepted: list[Message],
                         dropped: list[Message]) -> tuple[ArrayRecord | None,
                                                          MetricRecord | None, bool]:
        """The inner strategy's aggregate of the noisy models, each with
        weight 1 (the dropped replies handed over as failures), finished by
        :meth:`_finish`; the bool says whether it failed (nothing is released
        then)."""
        self._equal_weights([r.content for r in accepted])
        try:
            arrays, metrics = self.strategy.aggregate_train(server_round, accepted + dropped)
        except Exception as exc:
            log.warning("cepam: round %d: the inner strategy failed to aggregate (%s: %s); "
                        "nothing is released", server_round, type(exc).__name__, exc)
            return None, None, True
        if arrays is not None:
            sent = self._sent[int(accepted[0].metadata.src_node_id)].records
            self._finish(server_round, arrays, {n: a for r in sent.values() for n, a in r.items()})
        return arrays, metrics, False

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Screens and decodes the payloads, drops what fails (and any second
        reply of a node), accounts, then lets the inner strategy aggregate the
        noisy models."""
        _refuse_flower_dp_caller(self)
        opened, failures = self._accept(server_round, replies)
        if self._client_level:
            return self._aggregate_client_level(server_round, opened, failures)
        dropped = len(failures)
        accepted = []
        for o in opened:
            o.reply.content = self._noisy_model(o)
            accepted.append(o.reply)
        sizes = self.last_payload_bytes
        k = len(accepted)
        if k == 0 and dropped == 0:  # no round (budget spent, or nothing sampled)
            return None, None
        minimum = 1 if self.budget is None else self.budget.minimum_clients()
        if k < minimum:
            log.warning("cepam: round %d: %d update(s) accepted, fewer than %d: nothing is "
                        "released this round", server_round, k, minimum)
            return None, None
        if self.budget is not None and self.max_epsilon is not None:
            assert isinstance(self.budget, Budget)
            eps = self.budget.epsilon(self.budget.rounds + [k])
            if eps > self.max_epsilon:
                log.warning("cepam: round %d: with %d updates it would bring eps to %.4g > "
                            "max_epsilon %.4g: not released; the run's remaining rounds are "
                            "empty", server_round, k, eps, self.max_epsilon)
                self.stopped_by_budget = True
                return None, None
        arrays, metrics, failed = self._inner_aggregate(server_round, accepted, failures)
        if failed:
            return None, None
        if arrays is None:
            return None, metrics
        metrics = MetricRecord() if metrics is None else metrics
        metrics[METRIC_UPDATES] = k
        metrics[METRIC_DROPPED] = dropped
        if self.pad == "max" or isinstance(self.pad, int):  # one public size
            metrics[METRIC_PAYLOAD_BYTES] = float(np.mean(sizes))
        if self.budget is not None:
            assert isinstance(self.budget, Budget)
            eps = self._release(k, server_round)
            if eps is None:
                return None, None
            metrics[RECORD_LEVEL] = eps
            client_level = self.budget.client_level_epsilon()
            if client_level is not None:
                metrics[CLIENT_LEVEL] = client_level
            log.info("cepam: round %d: %d updates averaged (%d dropped); client level "
                     "(replace-one client, threat model %s, any local training loop): %s; "
                     "record level (replace-one record, threat model %s, %s bound): eps %.4g "
                     "at delta %g, if the clients train as the paper does (%s)",
                     server_round, k, dropped, self.setting.threat_model,
                     "not computed" if client_level is None else
                     f"eps {client_level:.4g} at delta {self.delta:g}",
                     self.setting.threat_model, self.bound, metrics[RECORD_LEVEL], self.delta,
                     RECORD_LEVEL_LOOP)
        return arrays, metrics

    def _release(self, round_: Any, server_round: int) -> float | None:
        """Records the round in the budget (and its ledger, if any) before its
        result is used; eps so far, or None when another server spent the
        budget meanwhile (the run's remaining rounds are then empty)."""
        assert self.budget is not None
        try:
            return self.budget.release(round_, round=server_round, max_epsilon=self.max_epsilon)
        except PrivacyBudgetError as exc:
            log.warning("cepam: round %d: not released: %s; the run's remaining rounds are "
                        "empty", server_round, exc)
            self.stopped_by_budget = True
            return None

    def _topup(self, std: float, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Top-up noise N(0, std^2) per coordinate, shaped like ``like``."""
        return {name: self._noise_rng.normal(0.0, std, size=np.shape(a))
                for name, a in like.items()}

    def _aggregate_client_level(self, server_round: int, opened: list[_Opened],
                                failures: list[Message]
                                ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The client-level mode (see the module): account the round (k = 0
        included), then release the mean (replace-one) or the sum with top-up
        noise over the fixed n (add-remove), the noised clipped fraction, and
        move the adaptive clip."""
        plan = self._plan
        if plan is None:  # no round: budget spent, or no node addressed
            return None, None
        assert isinstance(self.budget, ClientBudget)
        k, n, add_remove = len(opened), plan.clients, self.relation == "add-remove"
        dropped = len(failures)
        eps = self._release(plan.event, server_round)
        if eps is None:
            return None, None
        metrics = MetricRecord({CLIENT_LEVEL: eps})
        log.info("cepam: round %d: %d updates accepted (%d dropped) of a cohort of %d; "
                 "client-level eps %.4g at delta %g (%s; %s)", server_round, k, dropped,
                 len(plan.cohort), eps, self.delta, self.budget.label(), self._sampling_text())
        if k == 0 and not add_remove:
            log.warning("cepam: round %d: no update accepted: nothing is released (the round "
                        "is accounted)", server_round)
            return None, metrics
        # The noise on the sum is topped up to `cap` clients' worth: T under
        # add-remove; under replace-one the cohort drawn (replies dropped are
        # made up for, so the round is the one accounted); divided by n (add-
        # remove: reply d_i -> (k/n) d_i + t/n) or k (replace-one: d_i + t/k).
        if add_remove:
            from cepam.accounting import cohort_cap

            cap, denominator = int(cohort_cap(clients=n, sample_rate=plan.sample_rate)), n
            if k > cap:
                log.warning("cepam: round %d: %d updates, more than the cap T = %d the noise "
                            "is topped up to: no top-up noise (a rare event the accounting "
                            "covers)", server_round, k, cap)
        else:
            cap, denominator = len(plan.cohort), float(k)
            if k < cap:
                log.info("cepam: round %d: %d of the cohort's %d replies missing: their noise "
                         "is made up for by the server", server_round, cap - k, cap)
        clip, mechanism = self._round_settings()
        if self.clip_count_sigma is not None:
            bbar = self._noised_unclipped(opened, cap=cap, denominator=denominator)
            metrics[METRIC_CLIPPED_FRACTION] = 1.0 - bbar
            metrics[METRIC_CLIP] = clip
            if self._adaptive is not None:
                new = self._adaptive.update(bbar)
                log.info("cepam: round %d: noised clipped fraction %.4g: the clip goes from "
                         "%.6g to %.6g", server_round, 1.0 - bbar, clip, new)
        std = self._topup_std(mechanism.sigma, k=k, cap=cap)
        if k == 0:  # add-remove: the top-up noise alone, so an empty cohort does not show
            log.warning("cepam: round %d: no update accepted: the model moves by the top-up "
                        "noise alone (T = %d clients' worth over n = %g)", server_round, cap, n)
            return self._noise_only(server_round, std / denominator), metrics
        top = None if std == 0.0 else {name: t / denominator for name, t in self._topup(
            std, opened[0].update).items()}
        scale = k / denominator
        accepted = []
        for o in opened:
            o.reply.content = self._noisy_model(o, scale=scale, shift=top)
            accepted.append(o.reply)
        arrays, inner, failed = self._inner_aggregate(server_round, accepted, failures)
        if failed or arrays is None:
            return None, metrics
        if inner is not None:
            for key, value in inner.items():
                metrics[key] = value
        if not add_remove:  # under add-remove the cohort's size is not released
            metrics[METRIC_UPDATES] = k
            metrics[METRIC_DROPPED] = dropped
        if self.pad == "max" or isinstance(self.pad, int):  # one public size
            metrics[METRIC_PAYLOAD_BYTES] = float(np.mean(self.last_payload_bytes))
        return arrays, metrics

    def _noise_only(self, server_round: int, std: float) -> ArrayRecord:
        """The round's model with N(0, std^2) added to every float array (an
        empty add/remove round; not the running statistics under
        ``buffers="local"``), finished by :meth:`_finish`; integer and bool
        arrays unchanged."""
        assert self._arrays is not None
        model = {name: array.numpy() for name, array in self._arrays.items()}
        out = ArrayRecord()
        for name, value in model.items():
            if _is_float(value):
                value = np.asarray(value + self._noise_rng.normal(0.0, std, size=value.shape),
                                   dtype=value.dtype)
            out[name] = Array(value)
        self._finish(server_round, out, model)
        return out

    @staticmethod
    def _topup_std(sigma: float, *, k: int, cap: int) -> float:
        """The std of the top-up noise: ``sigma sqrt(max(cap - k, 0))``."""
        from cepam.accounting import topup_noise_std

        return float(topup_noise_std(sigma=sigma, cohort=k, cap=cap))

    def _noised_unclipped(self, opened: list[_Opened], *, cap: int, denominator: float
                          ) -> float:
        """bbar: the sum of the clients' noised bits, topped up with N(0,
        (cap - k) count_sigma^2), over the denominator: add-remove's form
        (cap T, denominator n), which under replace-one (cap the cohort
        drawn, denominator k) is the plain sum / k unless replies are
        missing, whose noise it makes up for."""
        return noised_unclipped_fraction(
            [o.bit for o in opened], relation="add-remove", clients=denominator, cap=cap,
            count_sigma=self.clip_count_sigma, rng=self._noise_rng)

    def _finish(self, server_round: int, arrays: ArrayRecord, sent: dict[str, np.ndarray]
                ) -> None:
        """The aggregate, in place, as the round sent it (``sent``: the
        round's arrays by name), the one place that handles what an inner
        strategy changes: every float array cast back to the dtype sent
        (flwr 1.42's FedAdam returns float64); the server's own integer
        and bool arrays (counters: an average would turn them into floats
        and, for a counter the clients moved, tell how far) and, under
        ``buffers="local"``, its own running statistics put back; every
        running variance clamped to at least ``running_var_floor``.  Only
        post-processing of what was released."""
        local = self.buffers == "local"
        cast, clamped = set(), 0
        for name in list(arrays.keys()):
            value = arrays[name].numpy()
            before = sent.get(name)
            new = value
            if before is not None:
                if not _is_float(before) or (local and is_buffer(name)):
                    new = before  # the server's own
                elif value.dtype != before.dtype:
                    cast.add(f"{value.dtype} -> {before.dtype}")
                    new = value.astype(before.dtype)
            if name.endswith(_RUNNING_VAR) and _is_float(new):
                low = new < self.running_var_floor
                if np.any(low):
                    clamped += int(np.count_nonzero(low))
                    new = np.where(low, new.dtype.type(self.running_var_floor), new)
            if new is not value:
                arrays[name] = Array(np.ascontiguousarray(new))
        if cast and not self._cast_logged:
            self._cast_logged = True
            log.info("cepam: round %d: %s aggregated in other dtypes than the round sent "
                     "(%s): cast back to the dtypes sent, this round and every later one",
                     server_round, type(self.strategy).__name__, ", ".join(sorted(cast)))
        if clamped:
            log.info("cepam: round %d: %d running-variance value(s) below %g (noise) clamped "
                     "to it (post-processing, no privacy cost)", server_round, clamped,
                     self.running_var_floor)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """The inner strategy's evaluate messages, unchanged (none once the
        privacy budget is spent: the model no longer changes)."""
        if self.stopped_by_budget:
            return []
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        """The inner strategy's evaluation aggregate, unchanged."""
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        """Logs the inner strategy's summary and cepam's settings (what cepam
        changes in the inner strategy's: the weights)."""
        _refuse_flower_dp_caller(self)
        self.strategy.summary()
        key = getattr(self.strategy, "weighted_by_key", None)
        log.info("\t└── cepam: every accepted reply has weight 1%s: cepam's accountant "
                 "averages K updates with weight 1/K each, so that a client cannot weigh in "
                 "more by claiming more examples; dropped replies count as failures",
                 "" if key is None else f" (not weighted by {key!r})")
        log.info("\t└── cepam: running statistics (buffers) %s; aggregated running "
                 "variances kept at least %g", self.buffers, self.running_var_floor)
        log.info("\t└── cepam: %r, clip %g, lattice %s, coder %s, pad %s, keys %s, delta %g, "
                 "max_epsilon %s", self.mechanism, self.clip, self.lattice, self.coder,
                 self.pad, "pre-shared" if self._lookup is not None else "X25519 agreement",
                 self.delta, self.max_epsilon)
        if self._client_level:
            log.info("\t└── cepam: %s; client-level accounting, threat model %r%s%s",
                     self._sampling_text(), self.threat_model,
                     "" if self.clip_count_sigma is None else
                     f"; clipped-or-not bits noised with sd {self.clip_count_sigma:g}",
                     "" if self._adaptive is None else
                     f"; adaptive clip (target quantile {self.clip_quantile:g}, now "
                     f"{self._adaptive.clip:.6g})")

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
              ) -> Result:
        """Flower's own strategy loop (:meth:`Strategy.start`: same arguments,
        logs and Result), for a fresh run of cepam (new server key pair, run
        id and budget).  Once the privacy budget is spent the remaining
        rounds send nothing (``stopped_by_budget``) and the loop ends
        normally."""
        self._begin_run(grid)
        try:
            return Strategy.start(self, grid, initial_arrays, num_rounds=num_rounds,
                                  timeout=timeout, train_config=train_config,
                                  evaluate_config=evaluate_config, evaluate_fn=evaluate_fn)
        finally:
            self._started = False
