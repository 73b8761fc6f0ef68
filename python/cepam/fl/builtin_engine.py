"""The built-in engine (``engine="builtin"``): all clients of a round trained
together in one process.

Each round: every client starts from the global weights and trains
``sgd_steps`` momentum-SGD steps (all clients together, :mod:`.training`);
its update (local minus global weights) goes through the method's transport
(:mod:`.methods`): real payload bytes with encode at the client and decode
at the server for the compressing methods.  The server adds the average of
the received updates to the global weights, then evaluates the global model
on the validation and test sets.  The learning rate is halved when the
validation accuracy has not improved on its best for ``lr_patience``
consecutive rounds (the counter restarts after each halving).

Client sampling (``population``, ``sample_rate``, ``sampling``): the data is
split over N clients; each round the server draws the cohort with its own
seeded Generator (:func:`sample_cohort`, logged in ``rounds.json``'s
``cohorts``) and only the cohort trains and sends.  The released update is
:func:`aggregate`'s, as ``docs/privacy.md`` and the accountant require: the
plain mean of the k decoded updates (replace-one), or the sum topped up to T
clients' worth of noise divided by the expected cohort n (add-remove).  With
adaptive clipping (``clip_quantile``, :class:`cepam.clipping.AdaptiveClip`)
the clip and the noise std (``sigma / clip`` fixed) change every round, and
the noised clipped fraction is published (``count_sigma`` per client,
:func:`.privacy.count_sigma`; with a fixed clip when
``clipped_fraction_release``), accounted in ``client_epsilon``.

Columns: ``train_loss`` is the clients' mean local loss; ``update_norm`` the
mean l2 norm of the clients' updates before clipping and
``clipped_fraction`` the share of clients whose update was clipped (exact,
not released) and ``noised_clipped_fraction`` the published noised one;
``cohort_size`` the clients of the round and ``clip`` its clip;
``epsilon`` the privacy spent so far and ``client_epsilon`` the
client-level eps (:mod:`.privacy`); ``seconds`` the wall
time of the round's training, transport and evaluation (split in the
``*_seconds`` columns; the checkpoint and the accountant are not counted).

Bits: ``bits_per_client`` is the mean over clients of ``8 * len(payload)``
(header and tag included); methods without a payload (``fl``,
``fl-gaussian``, ``fl-laplace``) are charged 32 bits per float32 coordinate
and have ``bits_measured`` false.
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..clipping import AdaptiveClip, noised_unclipped_fraction, noisy_bit
from .config import FLConfig
from .methods import make_method
from .models import build_model
from .privacy import client_epsilon_function, cohort_cap, config_epsilon_function, count_sigma
from .run import PlateauSchedule, RunResult, TensorMNIST, initial_params, prepare
from .rundir import matching_state, save_state, write_config, write_outputs
from .seeds import client_secret, numpy_rng, torch_generator
from .training import ClientData, LocalTrainer, evaluate

__all__ = ["run_builtin_experiment", "sample_cohort", "aggregate"]

_log = logging.getLogger(__name__)


def _method(config: FLConfig, clip: float, sigma: float):
    """The run's transport at this clip and noise std (central DP: the float32
    updates clipped)."""
    return make_method(config.method, sigma=sigma, b=config.b, dim=config.dim,
                       lattice=config.lattice, clip=clip,
                       clip_all=config.clip_all or config.central_dp is not None,
                       sdq_step=config.sdq_step)


def sample_cohort(config: FLConfig, round: int) -> list[int]:
    """The clients (indices into the population, ascending) of round
    ``round``, drawn with the server's own Generator seeded from
    (seed, "cohort", round): every client independently with probability
    ``sample_rate`` (Poisson), or ``clients`` of them uniformly without
    replacement (fixed).  Without sampling: every client."""
    population = config.population_size
    if not config.samples_clients:
        return list(range(population))
    rng = numpy_rng(config.seed, "cohort", round)
    if config.sampling == "fixed":
        return sorted(int(c) for c in rng.choice(population, config.clients, replace=False))
    return [int(c) for c in np.flatnonzero(rng.random(population) < config.rate)]


def aggregate(config: FLConfig, total: dict[str, torch.Tensor], *, k: int, t: int, clip: float,
              cap: int | None, sigma: float) -> dict[str, torch.Tensor]:
    """The released update of round ``t`` from the sum ``total`` of the
    ``k`` decoded updates (``k >= 1``, or ``k = 0`` with a fixed
    denominator: the noise alone is released):

    * replace-one: ``total / k``, the plain mean;
    * add-remove (client noise): ``(total + top-up) / clients`` with top-up
      ``N(0, (T - k) sigma^2)`` per coordinate from the server's Generator
      (nothing when ``k > T``, with a warning: the accountant covers it);
    * ``central_dp="dp-fedavg"``: ``(total + N(0, (z clip)^2)) / clients``;
    * ``central_dp="flower"``: ``total / k + N(0, (z clip / clients)^2)``
      (flwr's DifferentialPrivacyServerSideFixedClipping with
      ``num_sampled_clients = clients``: the mean over the actual cohort).
    """
    def gaussian(std: float) -> dict[str, torch.Tensor]:
        g = torch_generator(config.seed, "server-noise", t)
        return {n: std * torch.randn(v.shape, generator=g, dtype=torch.float32)
                for n, v in total.items()}

    if config.central_dp == "dp-fedavg":
        noise = gaussian(float(config.noise_multiplier) * clip)
        return {n: (v + noise[n]) / config.clients for n, v in total.items()}
    if config.central_dp == "flower":
        noise = gaussian(float(config.noise_multiplier) * clip / config.clients)
        return {n: v / k + noise[n] for n, v in total.items()}
    if config.relation == "replace-one":
        return {n: v / k for n, v in total.items()}
    from ..accounting import topup_noise_std

    if k > cap:
        _log.warning("round %d: %d clients sampled, above the cap T = %d: no top-up noise "
                     "(an event the accountant covers)", t, k, cap)
    std = topup_noise_std(sigma=sigma, cohort=k, cap=cap)
    if std > 0:
        noise = gaussian(std)
        return {n: (v + noise[n]) / config.clients for n, v in total.items()}
    return {n: v / config.clients for n, v in total.items()}


def run_builtin_experiment(
    config: FLConfig,
    data: TensorMNIST,
    directory: str | os.PathLike[str] | None = None,
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int | None = None,
    eval_batch: int = 500,
    data_dir: str | None = None,
) -> RunResult:
    """Runs (or resumes) one run of ``config`` on the built-in engine; the
    arguments and errors are :func:`.experiment.run_experiment`'s
    (``data_dir`` is not used: this engine trains on ``data``)."""
    method = _method(config, config.clip, config.sigma)
    prepared = prepare(data, config)
    clients: ClientData = prepared["clients"]
    model = build_model(config.model, 0)
    trainer = LocalTrainer(model, momentum=config.momentum)
    population = config.population_size
    secrets = [client_secret(config.seed, k) for k in range(population)]
    client_eps_of = client_epsilon_function(config)
    if config.paper_setting:
        eps_of = config_epsilon_function(config, delta=config.delta,
                                         dataset_size=min(clients.sizes),
                                         coordinates=sum(p.numel() for p in model.parameters()))
    else:  # the record-level accountant covers the paper's setting only
        eps_of = client_eps_of
    schedule = PlateauSchedule(config.lr, config.lr_patience, config.lr_factor)
    adaptive = (None if config.clip_quantile is None else
                AdaptiveClip(initial_clip=config.clip, target_quantile=config.clip_quantile,
                             learning_rate=config.clip_learning_rate))
    cs = count_sigma(config)
    cap = cohort_cap(config) if (cs is not None or config.relation == "add-remove") else None

    out = None if directory is None else Path(directory)
    state = matching_state(out, config)
    if state is not None:
        start = int(state["round"])
        params = {k: v.clone() for k, v in state["params"].items()}
        schedule.load_state_dict(state["schedule"])
        rows = list(state["rows"])
        if adaptive is not None:
            adaptive.load_state_dict(state["clip"])
    else:
        start = 0
        params = initial_params(config)
        t0 = time.perf_counter()
        val_loss, val_acc = evaluate(model, params, prepared["val_x"], prepared["val_y"],
                                     batch_size=eval_batch)
        test_loss, test_acc = evaluate(model, params, prepared["test_x"], prepared["test_y"],
                                       batch_size=eval_batch)
        rows = [{
            "round": 0, "lr": config.lr, "train_loss": math.nan, "val_loss": val_loss,
            "val_acc": val_acc, "test_loss": test_loss, "test_acc": test_acc,
            "bits_per_client": 0.0, "bits_per_coordinate": 0.0,
            "bits_measured": method.compressed, "update_norm": math.nan,
            "clipped_fraction": math.nan, "epsilon": 0.0, "seconds": 0.0,
            "train_seconds": 0.0, "transport_seconds": 0.0,
            "eval_seconds": time.perf_counter() - t0,
            "cohort_size": 0, "clip": config.clip if method.clip is not None else math.nan,
            "noised_clipped_fraction": math.nan,
            "client_epsilon": 0.0,
        }]
        if out is not None:
            save_state(out, config, 0, params, schedule=schedule.state_dict(), rows=rows,
                       clip=None if adaptive is None else adaptive.state_dict())
    if out is not None:
        write_config(out, config)

    m = sum(int(p.numel()) for p in params.values())
    names = list(params)
    last = config.rounds if stop_after is None else min(config.rounds, stop_after)
    workers = min(torch.get_num_threads(), config.clients)
    pool = ThreadPoolExecutor(workers) if workers > 1 and method.compressed else None
    try:
        for t in range(start + 1, last + 1):
            t_start = time.perf_counter()
            lr = schedule.lr
            clip = config.clip if adaptive is None else adaptive.clip
            if adaptive is not None:  # the noise follows the clip: a fixed noise multiplier
                method = _method(config, clip, adaptive.noise_std(config.sigma))
            cohort = sample_cohort(config, t)
            k = len(cohort)
            if k:
                idx = clients.sample(config.seed, t, config.sgd_steps, config.batch_size,
                                     None if k == population else cohort)
                local, losses = trainer.train(params, data.train_x[idx], data.train_y[idx], lr)
            t_train = time.perf_counter()

            bits: list[int] = []
            norms = torch.zeros(0, dtype=torch.float64)
            noised_clipped = math.nan
            total = {n: torch.zeros_like(p) for n, p in params.items()}
            if k:
                updates = {n: local[n] - params[n].unsqueeze(0) for n in names}
                sq = sum(u.double().pow(2).flatten(1).sum(1) for u in updates.values())
                norms = torch.sqrt(sq)

                def transport(i: int, t: int = t, updates: dict = updates, method=method):
                    c = cohort[i]
                    upd = {n: updates[n][i] for n in names}
                    noise = (torch_generator(config.seed, "noise", t, c)
                             if method.uses_noise_generator else None)
                    msg = method.send(upd, round=t, client=c, secret=secrets[c], noise=noise)
                    return method.receive(msg, client=c, secret=secrets[c]), msg.bits

                # Clients are independent; the codec releases the GIL, so with several
                # torch threads they are encoded and decoded in parallel.  The sum is
                # taken in cohort order whatever the thread count.
                if pool is not None:
                    delivered = list(pool.map(transport, range(k)))
                else:
                    delivered = [transport(i) for i in range(k)]
                for received, _ in delivered:
                    for n in names:
                        total[n] += received[n]
                bits = [b for _, b in delivered]
            # An empty cohort releases nothing under replace-one (participation is
            # public there) and Flower's wrapper has no reply to average; under
            # add-remove (and central DP-FedAvg) the noise alone is released, so
            # that the round does not show that it was empty.
            fixed_denominator = config.relation == "add-remove"
            if k or fixed_denominator:
                released = aggregate(config, total, k=k, t=t, clip=clip, cap=cap,
                                     sigma=config.sigma if adaptive is None
                                     else adaptive.noise_std(config.sigma))
                for n in names:
                    params[n] = params[n] + (released[n] if config.server_lr == 1.0
                                             else config.server_lr * released[n])
            if cs is not None and (k or fixed_denominator):
                reports = [noisy_bit(float(norms[i]), clip=clip, count_sigma=cs,
                                     rng=numpy_rng(config.seed, "count", t, cohort[i]))
                           for i in range(k)]
                bbar = noised_unclipped_fraction(
                    reports, relation=config.relation, clients=config.clients, cap=cap,
                    count_sigma=cs, rng=numpy_rng(config.seed, "count-topup", t))
                noised_clipped = 1.0 - bbar
                if adaptive is not None:
                    adaptive.update(bbar)
            t_transport = time.perf_counter()

            val_loss, val_acc = evaluate(model, params, prepared["val_x"], prepared["val_y"],
                                         batch_size=eval_batch)
            test_loss, test_acc = evaluate(model, params, prepared["test_x"], prepared["test_y"],
                                           batch_size=eval_batch)
            schedule.step(val_acc)
            t_end = time.perf_counter()
            mean_bits = float(np.mean(bits)) if bits else 0.0
            clip_applies = method.clip is not None
            row = {
                "round": t, "lr": lr, "train_loss": float(losses.mean()) if k else math.nan,
                "val_loss": val_loss, "val_acc": val_acc,
                "test_loss": test_loss, "test_acc": test_acc,
                "bits_per_client": mean_bits, "bits_per_coordinate": mean_bits / m,
                "bits_measured": method.compressed,
                "update_norm": float(norms.mean()) if k else math.nan,
                "clipped_fraction": (float((norms > method.clip).double().mean())
                                     if clip_applies and k else (0.0 if k else math.nan)),
                "epsilon": eps_of(t),
                "seconds": t_end - t_start, "train_seconds": t_train - t_start,
                "transport_seconds": t_transport - t_train, "eval_seconds": t_end - t_transport,
                "cohort_size": k, "clip": clip if clip_applies else math.nan,
                "noised_clipped_fraction": noised_clipped, "client_epsilon": client_eps_of(t),
            }
            if config.samples_clients:
                row["cohort"] = [int(c) for c in cohort]
            rows.append(row)
            if out is not None:
                save_state(out, config, t, params, schedule=schedule.state_dict(), rows=rows,
                           clip=None if adaptive is None else adaptive.state_dict())
                write_outputs(out, config, rows, complete=(t == config.rounds))
            if progress is not None:
                progress(row)
    finally:
        if pool is not None:
            pool.shutdown()
    complete = len(rows) - 1 >= config.rounds
    if out is not None:
        write_outputs(out, config, rows, complete=complete)
    return RunResult(config=config, rows=rows, params=params, directory=out,
                     complete=complete, resumed_from=start)
