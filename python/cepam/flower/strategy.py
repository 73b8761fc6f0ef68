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
   less noise is refused) and that its length is one that the round's
   padding gives (:func:`cepam.padding.is_padded_as`: a length not hidden
   as configured is refused),
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

Each concern has its module: :mod:`.settings` (the constructor's checked
settings), :mod:`.configure` (what a round sends), :mod:`.node_keys` (the
nodes' keys), :mod:`.replies` (screening and opening the replies),
:mod:`.aggregation` (the noisy models, their aggregate, running statistics
and the metrics released), :mod:`.cohort` (client sampling, relations, top-up
noise and adaptive clipping) and :mod:`.accountant` (the privacy budget).
"""

from __future__ import annotations

import logging
import os
import secrets as _secrets
import sys
from collections.abc import Iterable
from typing import Any, Callable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

import cepam
from cepam.accounting import FLSetting
from cepam.clipping import AdaptiveClip
from cepam.errors import InvalidArgumentError, InvalidTypeError

from .accountant import Accounting
from .aggregation import (  # noqa: F401 (RUNNING_VAR_FLOOR: re-exported)
    METRIC_CLIP, METRIC_CLIPPED_FRACTION, METRIC_DROPPED, METRIC_PAYLOAD_BYTES, METRIC_UPDATES,
    RUNNING_VAR_FLOOR, Aggregation,
)
from .budget import Budget, ClientBudget
from .cohort import Plan, Cohort
from .configure import SAMPLED, HeldLines, TrainMessages
from .node_keys import NodeKeys
from .keys import SecretSource
from .replies import DROPPED_CODE, Sent, Replies  # noqa: F401 (DROPPED_CODE: re-exported)
from .settings import Settings, is_flower_dp

__all__ = ["CepamStrategy", "METRIC_UPDATES", "METRIC_DROPPED", "METRIC_PAYLOAD_BYTES",
           "METRIC_CLIPPED_FRACTION", "METRIC_CLIP"]

log = logging.getLogger("flwr.cepam")


def _refuse_flower_dp_caller(strategy: "CepamStrategy") -> None:
    """Raises InvalidArgumentError when the caller of the CepamStrategy method
    that calls this is one of Flower's DP wrappers around ``strategy``
    (``DifferentialPrivacyServerSideFixedClipping(CepamStrategy(...))``:
    the wrapper would clip the clients' payloads as float updates)."""
    try:
        caller = sys._getframe(2).f_locals.get("self")
    except ValueError:  # no such frame
        return
    if caller is not None and is_flower_dp(caller) and \
            getattr(caller, "strategy", None) is strategy:
        raise InvalidArgumentError(
            f"{type(caller).__name__} wraps a CepamStrategy: Flower's DP wrappers clip and "
            "noise float updates, while cepam's clients send encoded payloads that cepam "
            "already clips and noises; use CepamStrategy alone (its mechanism and clip are "
            "the DP), not inside a Flower DP wrapper")


def _not_a_strategy(strategy: object) -> str:
    """The error for a ``strategy`` that is not a
    :class:`flwr.serverapp.strategy.Strategy`, saying so when it is one of
    Flower's legacy strategies (``flwr.server.strategy``: FedAvg there is
    another class than the Message API's)."""
    import flwr.serverapp.strategy as message_api

    kind = type(strategy)
    text = "strategy must be a flwr.serverapp.strategy.Strategy (Flower's Message API), got "
    if not any(c.__module__.startswith("flwr.server.strategy") for c in kind.__mro__):
        return text + kind.__name__
    same = (f"flwr.serverapp.strategy.{kind.__name__}" if hasattr(message_api, kind.__name__)
            else "one of flwr.serverapp.strategy's")
    return (text + f"{kind.__module__}.{kind.__qualname__}: Flower's legacy strategies "
            f"(flwr.server.strategy) are not supported; use {same}")


class CepamStrategy(Settings, NodeKeys, Replies, TrainMessages, Cohort, Aggregation,
                    Accounting, Strategy):
    """Wraps a Flower strategy so that clients send cepam payloads.

    Args:
        strategy: the strategy that samples nodes and aggregates (FedAvg and
            its family): a :class:`flwr.serverapp.strategy.Strategy` (Flower's
            Message API; the legacy ``flwr.server.strategy`` ones are not
            supported); not one of Flower's DP wrappers.
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
        prefer: ``lattice="auto"``'s preference, sent to the clients (see
            :func:`cepam.encode`): ``"balanced"`` (E8 only where it saves at
            least 3 % of the bits), ``"bits"`` (the shorter payload: where
            E8 may be shorter, the update, or a sample of a large one, is
            encoded with both Z and E8) or ``"speed"`` (always Z, the
            fastest).
        pad: the clients' padding (``cepam.encode``'s ``pad``): ``"levels"``
            (the default: every payload has one of 8 lengths fixed by
            public settings, so its length tells at most 3 bits about the
            update, at most 26 % more bytes down to a fifth of the
            bound; unpadded, the length predicts an update's norm to
            6-7 %, and Flower's SuperLink, which relays every payload,
            sees it), ``"max"`` (one length: reveals nothing; 1.6 to 2.8
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
        population: N, the number of clients the cohort is sampled from,
            declared (public; Poisson sampling), for and required by
            ``relation="add-remove"``: the expected cohort n = q N, the
            fixed denominator, and the noise's cap T come from it, not from
            the nodes addressed, whose number one client's presence changes
            (the released noise's scale would show it). A round that
            addresses more than N + 1 nodes (the accounting's larger
            neighbour) is not run: the guarantee is for federations of at
            most N + 1 clients. Fewer is fine (an absent client is sampled
            with probability 0). Refused under replace-one, whose noise is
            that of the cohort drawn from the nodes addressed, which are its
            N.
        cohort_tail: add/remove: the chance per round allowed of a cohort
            above the noise's cap T, paid in delta as ``tail (1 + e^eps)``
            a round; None: the accountant's 1e-12
            (:data:`cepam.accounting.cohort.COHORT_TAIL`). A smaller one
            (1e-30, say) for large eps, many rounds or a small delta: a
            larger T, the same noise on the released sum (each client's
            sigma smaller, its payload a little longer).
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
        averages: None (the default): whether the inner strategy averages
            the noisy models is known from its ``aggregate_train``
            (:mod:`cepam.flower.inner`: FedAvg's, FedAvgM's, FedProx's and
            FedOpt's family's do); one that does not is accounted as one
            client's decoded update (threat model ``"server"``) and refused
            under add/remove.  True: you declare that your strategy's
            aggregate is the mean of the noisy models it gets, each of
            weight 1, or a server optimizer's step from that mean (an
            override that logs, then calls FedAvg's, say): it is accounted
            as a mean of K.  False: accounted as not averaging.

    Raises:
        InvalidTypeError, InvalidArgumentError: bad settings, or a Flower DP
            wrapper as ``strategy``, or an inner strategy that samples
            nodes itself while the wrapper samples.  InvalidTypeError for a
            ``strategy`` that is not a ``flwr.serverapp.strategy.Strategy``
            (a legacy ``flwr.server.strategy`` one is named as such).
    """

    def __init__(self, strategy: Strategy, *, mechanism: cepam.Gaussian | cepam.Laplace,
                 clip: float, setting: FLSetting | None = None, delta: float = 1e-5,
                 max_epsilon: float | None = None, secrets: SecretSource | None = None,
                 lattice: str = "auto", dim: int | None = None, coder: str = "ans",
                 prefer: str = "balanced", pad: str | int | None = "levels",
                 bound: str = "tight", ledger: Any = None,
                 ledger_name: str | None = None, max_reply_bytes: int | None = None,
                 pinned_keys: str | os.PathLike[str] | None = None,
                 authenticated_transport: bool = False, sample_rate: float = 1.0,
                 relation: str = "replace-one", sampling: str = "poisson",
                 clients: int | None = None, population: int | None = None,
                 cohort_tail: float | None = None, sampling_seed: int | None = None,
                 threat_model: str | None = None, clip_quantile: float | None = None,
                 clip_learning_rate: float = 0.2,
                 clip_count_sigma: float | None = None, buffers: str = "separate",
                 running_var_floor: float = RUNNING_VAR_FLOOR, signed_keys: bool = False,
                 averages: bool | None = None) -> None:
        if not isinstance(strategy, Strategy):
            raise InvalidTypeError(_not_a_strategy(strategy))
        if isinstance(strategy, CepamStrategy):
            raise InvalidArgumentError("the strategy is already a CepamStrategy")
        self._init_settings(
            strategy, mechanism=mechanism, clip=clip, setting=setting, delta=delta,
            max_epsilon=max_epsilon, secrets=secrets, lattice=lattice, dim=dim, coder=coder,
            prefer=prefer, pad=pad, bound=bound, ledger=ledger, ledger_name=ledger_name,
            max_reply_bytes=max_reply_bytes, pinned_keys=pinned_keys,
            authenticated_transport=authenticated_transport, sample_rate=sample_rate,
            relation=relation, sampling=sampling, clients=clients, population=population,
            cohort_tail=cohort_tail, sampling_seed=sampling_seed,
            threat_model=threat_model, clip_quantile=clip_quantile,
            clip_learning_rate=clip_learning_rate, clip_count_sigma=clip_count_sigma,
            buffers=buffers, running_var_floor=running_var_floor, signed_keys=signed_keys,
            averages=averages)
        self._init_keys(secrets, pinned_keys)
        self.budget: Budget | ClientBudget | None = None
        self.stopped_by_budget = False
        #: The node ids of the last round's cohort (the server's own view).
        self.last_cohort: list[int] = []
        self._arrays: ArrayRecord | None = None
        self._plan: Plan | None = None
        self._adaptive: AdaptiveClip | None = None
        self._cohort_rng = self._noise_rng = np.random.default_rng(0)  # set by _begin_run
        #: Payload sizes (bytes) of the last round's accepted replies, in
        #: node-id order: the server's own view, not released in metrics.
        self.last_payload_bytes: list[int] = []
        self._started = False
        self._sent: dict[int, Sent] = {}
        self._round = 0
        self._cast_logged = False

    def _begin_run(self, grid: Grid) -> None:
        """Starts a run: fresh keys, budget, adaptive clip and generators."""
        self._started = True
        self._begin_keys()
        self.stopped_by_budget = False
        self._cast_logged = False
        self._begin_budget(grid)
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

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The inner strategy's train messages (those of the cohort, when the
        wrapper samples), each with its own cepam configuration; none if the
        round does not fit the privacy budget.  The inner strategy's
        "Sampled N nodes" log line is logged only for a round that sends
        something, with N the nodes sent."""
        _refuse_flower_dp_caller(self)
        with HeldLines(SAMPLED) as held:
            messages = self._configure_train(server_round, arrays, config, grid)
        if messages:
            held.release(len(messages))
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Screens and decodes the payloads, drops what fails (and any second
        reply of a node), accounts, then lets the inner strategy aggregate the
        noisy models."""
        _refuse_flower_dp_caller(self)
        opened, failures = self._accept(server_round, replies)
        if self._client_level:
            return self._aggregate_client_level(server_round, opened, failures)
        return self._aggregate_record_level(server_round, opened, failures)

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
        log.info("\t└── cepam: %r, clip %g, lattice %s%s, coder %s, pad %s, keys %s, "
                 "delta %g, max_epsilon %s", self.mechanism, self.clip, self.lattice,
                 f" (prefer {self.prefer})" if self.lattice == "auto" else "", self.coder,
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
